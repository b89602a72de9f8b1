package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// scriptedEnv is a server whose agents (testdata/templates) run on a
// scripted model over real HTTP that counts its calls.
func scriptedEnv(t *testing.T, o envOptions) (*env, *mockllm.Server) {
	t.Helper()
	mock := mockllm.New(mockllm.WithDefault(mockllm.TextScript("a second model call")))
	t.Cleanup(mock.Close)
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "scripted", BaseURL: mock.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	o.model = model
	return newEnv(t, o), mock
}

func streamText(t *testing.T, evs []sseEvent) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range evs {
		var c struct{ Type, Delta string }
		if ev.Data != "[DONE]" {
			if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
				t.Fatalf("frame %q: %v", ev.Data, err)
			}
		}
		if c.Type == "text-delta" {
			b.WriteString(c.Delta)
		}
	}
	return b.String()
}

func userMessages(t *testing.T, store session.Store, key string) int {
	t.Helper()
	msgs, err := store.Messages(t.Context(), key, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if m.Role == chat.RoleUser {
			n++
		}
	}
	return n
}

// TestChatIdempotent: the same AI SDK body posted again, while its turn
// streams, after it ended, and once the server no longer keeps its
// stream, gives that turn (its stream, then its stored answer) and never
// a second turn: one model call, one user message. An Idempotency-Key
// does the same for bodies without message IDs.
func TestChatIdempotent(t *testing.T) {
	e, mock := scriptedEnv(t, envOptions{})
	mock.Enqueue(mockllm.Script{Text: []string{"Hello ", "there, ", "friend."}, InterTokenDelay: 100 * time.Millisecond})
	chatID := "idem-" + session.NewID()
	body := uiBody(chatID, "submit-message", "", "hi")

	// The first attempt's client goes away as the turn starts; the retry
	// arrives while it runs.
	first := e.do(http.MethodPost, "/api/chat/plain", body)
	turnID := first.Header.Get("X-Turn-Id")
	first.Body.Close()
	res, evs := e.streamChat("plain", body)
	if got := res.Header.Get("X-Turn-Id"); got != turnID || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry while running: turn %q (replayed %q), want %q", got, res.Header.Get("Idempotent-Replayed"), turnID)
	}
	checkTurnStream(t, turnID, evs, 1)
	if got := streamText(t, evs); got != "Hello there, friend." {
		t.Fatalf("retry while running streamed %q", got)
	}
	// After the turn: its kept stream.
	res, evs = e.streamChat("plain", body)
	if got := streamText(t, evs); res.Header.Get("X-Turn-Id") != turnID || got != "Hello there, friend." {
		t.Fatalf("retry after the turn: turn %q, text %q", res.Header.Get("X-Turn-Id"), got)
	}
	// Once the stream is no longer kept: the stored answer.
	_ = e.srv.rt.Forget(t.Context(), session.Key("", chatID))
	res, evs = e.streamChat("plain", body)
	checkTurnStream(t, turnID, evs, 1)
	if got := streamText(t, evs); res.Header.Get("X-Turn-Id") != turnID || got != "Hello there, friend." {
		t.Fatalf("retry after the stream was dropped: turn %q, text %q", res.Header.Get("X-Turn-Id"), got)
	}
	if n := len(mock.Requests()); n != 1 {
		t.Fatalf("the model was called %d times for one request sent 4 times", n)
	}
	if n := userMessages(t, e.store, chatID); n != 1 {
		t.Fatalf("%d user messages stored, want 1", n)
	}

	// A new message (a new ID) is a new turn; a regenerate of it, which
	// resends its ID, is answered again.
	next := uiBody(chatID, "submit-message", "", "hi", "Hello there, friend.", "again")
	e.streamChat("plain", next)
	e.streamChat("plain", uiBody(chatID, "regenerate-message", "", "hi", "Hello there, friend.", "again"))
	if n := len(mock.Requests()); n != 3 {
		t.Fatalf("a new message and a regenerate made %d model calls in all, want 3", n)
	}

	// The plain shape with an Idempotency-Key.
	plain := `{"sessionId":"` + chatID + `","message":"and once more"}`
	r1, _ := e.streamChat("plain", plain, "Idempotency-Key", "order-42")
	r2, _ := e.streamChat("plain", plain, "Idempotency-Key", "order-42")
	if r1.Header.Get("X-Turn-Id") != r2.Header.Get("X-Turn-Id") || len(mock.Requests()) != 4 {
		t.Fatalf("Idempotency-Key: turns %q and %q, %d model calls", r1.Header.Get("X-Turn-Id"), r2.Header.Get("X-Turn-Id"), len(mock.Requests()))
	}
	if n := userMessages(t, e.store, chatID); n != 3 {
		t.Fatalf("%d user messages stored, want 3", n)
	}

	// The key with another request is refused, and stores nothing.
	var eb errBodyT
	other := `{"sessionId":"` + chatID + `","message":"something else"}`
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", other, "Idempotency-Key", "order-42"), http.StatusConflict, &eb)
	if eb.Error.Code != "idempotency_key_reused" || len(mock.Requests()) != 4 || userMessages(t, e.store, chatID) != 3 {
		t.Fatalf("the key with another message: %+v", eb.Error)
	}

	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", plain, "Idempotency-Key", strings.Repeat("k", 300)), http.StatusBadRequest, &eb)
	if eb.Error.Code != "invalid_idempotency_key" {
		t.Fatalf("a key too long: %+v", eb.Error)
	}
}

// TestCompletionsIdempotent: /v1/chat/completions with a session and an
// Idempotency-Key gives a retry the completion of the turn the key
// started, without a second model call.
func TestCompletionsIdempotent(t *testing.T) {
	e, mock := scriptedEnv(t, envOptions{})
	mock.Enqueue(mockllm.TextScript("Only once."))
	sid := "idem-" + session.NewID()
	body := `{"model":"plain","messages":[{"role":"user","content":"hi"}]}`
	var a, b struct {
		Choices []struct {
			Message struct{ Content string }
		}
	}
	getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", body, "X-Session-Id", sid, "Idempotency-Key", "k1"), http.StatusOK, &a)
	res := e.do(http.MethodPost, "/v1/chat/completions", body, "X-Session-Id", sid, "Idempotency-Key", "k1")
	replayed := res.Header.Get("Idempotent-Replayed")
	getJSON(t, res, http.StatusOK, &b)
	if a.Choices[0].Message.Content != "Only once." || b.Choices[0].Message.Content != "Only once." || replayed != "true" {
		t.Fatalf("completions %+v and %+v (replayed %q)", a, b, replayed)
	}
	if n := len(mock.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	// Once the turn is no longer kept, a retry gets the answer the
	// session stored, made into a completion again.
	_ = e.srv.rt.Forget(t.Context(), session.Key("", sid))
	res = e.do(http.MethodPost, "/v1/chat/completions", body, "X-Session-Id", sid, "Idempotency-Key", "k1")
	var c oaCompletion
	getJSON(t, res, http.StatusOK, &c)
	if res.Header.Get("Idempotent-Replayed") != "true" || *c.Choices[0].Message.Content != "Only once." || len(mock.Requests()) != 1 {
		t.Fatalf("a retry after the turn was dropped: %s %+v, %d model calls", res.Header.Get("Idempotent-Replayed"), c.Choices[0].Message, len(mock.Requests()))
	}
}

// TestChatReplayWithoutAnswer: a retry whose turn saved its user message
// but no answer (its server died before it answered, and the turn was
// recovered instead of taken over) is told so: its stream ends with
// turn_interrupted and finish error, never an empty finish stop.
func TestChatReplayWithoutAnswer(t *testing.T) {
	e, mock := scriptedEnv(t, envOptions{})
	sid := "idem-" + session.NewID()
	ctx := t.Context()
	_, lease, err := e.store.Claim(ctx, sid, session.WithAgent("plain"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.UpdateAppend(ctx, sid, func(s *orchestration.State) error { s.UserMessages++; return nil },
		[]chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 0, session.WithLease(lease), session.WithRelease(),
		session.WithTurn(""), session.WithRequest("key:lost-1", "turnlost1", "")); err != nil {
		t.Fatal(err)
	}
	res, evs := e.streamChat("plain", `{"sessionId":"`+sid+`","message":"hi"}`, "Idempotency-Key", "lost-1")
	if res.Header.Get("Idempotent-Replayed") != "true" || res.Header.Get("X-Turn-Id") != "turnlost1" {
		t.Fatalf("the retry: turn %q, replayed %q", res.Header.Get("X-Turn-Id"), res.Header.Get("Idempotent-Replayed"))
	}
	var types []string
	code, finish := "", ""
	for _, ev := range evs {
		var c struct{ Type, ErrorText, FinishReason string }
		if ev.Data == "[DONE]" || json.Unmarshal([]byte(ev.Data), &c) != nil {
			continue
		}
		types = append(types, c.Type)
		if c.Type == "error" {
			code = c.ErrorText
		}
		if c.Type == "finish" {
			finish = c.FinishReason
		}
	}
	if !strings.Contains(code, "ended before it answered") || finish != "error" {
		t.Fatalf("the retry's stream: %v, error %q, finish %q; want turn_interrupted and finish error", types, code, finish)
	}
	if n := len(mock.Requests()); n != 0 {
		t.Fatalf("the retry made %d model calls", n)
	}
}
