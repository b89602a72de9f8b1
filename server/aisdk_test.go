package server

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

func uiBody(chatID, trigger, messageID string, texts ...string) string {
	var msgs []any
	for i, t := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"id": "m" + string(rune('a'+i)), "role": role, "parts": []any{map[string]any{"type": "text", "text": t}}})
	}
	b := map[string]any{"id": chatID, "messages": msgs, "trigger": trigger}
	if messageID != "" {
		b["messageId"] = messageID
	}
	return jsonBody(b)
}

// TestChatRegenerate: the AI SDK's regenerate (trigger regenerate-message,
// the conversation up to the user message whose answer it replaces) gives
// a new answer in place of the last one, without storing the user message
// twice; a regenerate of an earlier message is refused.
func TestChatRegenerate(t *testing.T) {
	e := newEnv(t, envOptions{})
	chatID := "regen-" + session.NewID()
	first, second := "hello there", "Please explore options for a team offsite"
	e.streamChat("explorer", uiBody(chatID, "submit-message", "", first))
	res, _ := e.streamChat("explorer", uiBody(chatID, "submit-message", "", first, "hi", second))
	oldTurn := res.Header.Get("X-Turn-Id")
	before, _ := e.store.Messages(t.Context(), chatID, 0)

	res, evs := e.streamChat("explorer", uiBody(chatID, "regenerate-message", oldTurn, first, "hi", second))
	newTurn := res.Header.Get("X-Turn-Id")
	_, _, text := checkTurnStream(t, newTurn, evs, 1)
	after, _ := e.store.Messages(t.Context(), chatID, 0)
	var users []string
	for _, m := range after {
		if m.Role == chat.RoleUser {
			users = append(users, m.Content)
		}
	}
	if len(users) != 2 || users[1] != second || len(after) != len(before) || after[len(after)-1].Content != text || newTurn == oldTurn {
		t.Fatalf("after regenerate: users %q, %d messages (were %d)", users, len(after), len(before))
	}

	var eb errBodyT
	getJSON(t, e.do(http.MethodPost, "/api/chat/explorer", uiBody(chatID, "regenerate-message", "", first)), http.StatusConflict, &eb)
	if eb.Error.Code != "regenerate_conflict" {
		t.Fatalf("regenerating an earlier answer: %+v", eb.Error)
	}
}

// TestChatEdit: an edit of the last user message, in the AI SDK's shape
// (submit-message whose messageId is the edited message) or the plain one
// ("edit": true), replaces that message and its answer.
func TestChatEdit(t *testing.T) {
	e := newEnv(t, envOptions{})
	chatID := "edit-" + session.NewID()
	e.streamChat("plain", uiBody(chatID, "submit-message", "", "[offline:echo] one"))
	e.streamChat("plain", uiBody(chatID, "submit-message", "", "[offline:echo] one", "one", "[offline:echo] two"))
	// The AI SDK's edit names the last message (mc, the third) as the one replaced.
	e.streamChat("plain", uiBody(chatID, "submit-message", "mc", "[offline:echo] one", "one", "[offline:echo] two, edited"))
	e.streamChat("plain", `{"sessionId":"`+chatID+`","message":"[offline:echo] two, edited again","edit":true}`)
	msgs, _ := e.store.Messages(t.Context(), chatID, 0)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	if want := []string{"[offline:echo] one", "one", "[offline:echo] two, edited again", "two, edited again"}; !slices.Equal(got, want) {
		t.Fatalf("history after two edits %q, want %q", got, want)
	}
}

// TestChatResumeURL: GET /api/chat/:agentId/:id/stream, the AI SDK's
// default resume URL, resumes the agent's running turn like
// /api/sessions/:id/stream, and answers 204 when nothing runs.
func TestChatResumeURL(t *testing.T) {
	e := newEnv(t, envOptions{delay: 3 * time.Millisecond})
	chatID := "resume-" + session.NewID()
	res := e.do(http.MethodGet, "/api/chat/explorer/"+chatID+"/stream", "")
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("resume with nothing running: %d", res.StatusCode)
	}
	var eb errBodyT
	getJSON(t, e.do(http.MethodGet, "/api/chat/nobody/"+chatID+"/stream", ""), http.StatusNotFound, &eb)
	getJSON(t, e.do(http.MethodGet, "/api/chat/explorer/bad!/stream", ""), http.StatusBadRequest, &eb)

	post := e.do(http.MethodPost, "/api/chat/explorer", uiBody(chatID, "submit-message", "", "Please explore options for a team offsite"))
	turnID := post.Header.Get("X-Turn-Id")
	post.Body.Close() // the client goes away; the turn runs on

	// Another agent's URL does not see the turn.
	other := e.do(http.MethodGet, "/api/chat/plain/"+chatID+"/stream", "")
	other.Body.Close()
	if other.StatusCode != http.StatusNoContent {
		t.Fatalf("resume through another agent: %d", other.StatusCode)
	}
	resumed := e.do(http.MethodGet, "/api/chat/explorer/"+chatID+"/stream", "")
	defer resumed.Body.Close()
	if resumed.StatusCode != http.StatusOK || resumed.Header.Get("X-Turn-Id") != turnID || resumed.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" {
		t.Fatalf("resume: %d turn %q", resumed.StatusCode, resumed.Header.Get("X-Turn-Id"))
	}
	_, _, text := checkTurnStream(t, turnID, newSSEReader(resumed.Body).all(), 1)
	e.waitIdle(chatID)
	if text == "" || text != e.lastAnswer(chatID) {
		t.Fatalf("the resumed stream's answer %q differs from the saved one", text)
	}
	res = e.do(http.MethodGet, "/api/chat/explorer/"+chatID+"/stream", "")
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("resume after the turn: %d", res.StatusCode)
	}
}
