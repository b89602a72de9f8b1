package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
)

// streamChat posts a chat message and reads the whole stream.
func (e *env) streamChat(agentID, body string, headers ...string) (*http.Response, []sseEvent) {
	e.t.Helper()
	res := e.do(http.MethodPost, "/api/chat/"+agentID, body, headers...)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("POST /api/chat/%s: status %d", agentID, res.StatusCode)
	}
	return res, newSSEReader(res.Body).all()
}

// checkTurnStream checks the framing rules every turn stream obeys and
// returns the chunks in order (decoded) and the answer text.
func checkTurnStream(t testing.TB, turnID string, evs []sseEvent, firstSeq int64) (types []string, chunks []map[string]any, text string) {
	t.Helper()
	if len(evs) < 3 {
		t.Fatalf("stream has %d frames", len(evs))
	}
	var b strings.Builder
	open := ""
	next := firstSeq // the seq of the next event's ID
	for i, ev := range evs {
		// An event's ID rides on its last chunk.
		if ev.HasID {
			if want := wire.EventID(turnID, next); ev.ID != want {
				t.Fatalf("frame %d: id %q, want %q (no gap, no duplicate)", i, ev.ID, want)
			}
			next++
		} else if i == len(evs)-1 {
			t.Fatalf("the last frame has no ID")
		}
		typ := chunkType(t, ev.Data)
		types = append(types, typ)
		if typ == "[DONE]" {
			if i != len(evs)-1 {
				t.Fatalf("[DONE] is frame %d of %d", i, len(evs))
			}
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
		switch typ {
		case "text-start":
			if open != "" {
				t.Fatalf("text-start while %s is open", open)
			}
			open = c["id"].(string)
		case "text-delta":
			if c["id"] != open {
				t.Fatalf("text-delta of %v outside its run %q", c["id"], open)
			}
			b.WriteString(c["delta"].(string))
		case "text-end":
			if c["id"] != open {
				t.Fatalf("text-end of %v, open %q", c["id"], open)
			}
			open = ""
		case "tool-input-start", "finish-step", "finish", "error":
			if open != "" {
				t.Fatalf("%s while text run %s is open", typ, open)
			}
		}
	}
	if types[len(types)-1] != "[DONE]" || types[len(types)-2] != "finish" {
		t.Fatalf("stream ends with %v, want finish then [DONE]", types[max(0, len(types)-3):])
	}
	return types, chunks, b.String()
}

func TestChatStreamAISDKBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := jsonBody(map[string]any{
		"id": "chat_abcdefgh12",
		"messages": []any{
			map[string]any{"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "hello"}}},
			map[string]any{"id": "m2", "role": "assistant", "parts": []any{map[string]any{"type": "text", "text": "hi"}}},
			map[string]any{"id": "m3", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "Please explore options for a team offsite"}}},
		},
		"trigger": "submit-message",
	})
	res, evs := e.streamChat("explorer", body)
	for h, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Vercel-Ai-Ui-Message-Stream": "v1",
		"X-Accel-Buffering": "no", "X-Session-Id": "chat_abcdefgh12",
	} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	turnID := res.Header.Get("X-Turn-Id")
	types, chunks, text := checkTurnStream(t, turnID, evs, 1)
	if types[0] != "start" || chunks[0]["messageId"] != turnID {
		t.Fatalf("first frame %v, want start with messageId %s", chunks[0], turnID)
	}
	// The Explore step's sequence runs brainstorm, then compare.
	var tools []string
	var sawTransition, sawFinalUsage bool
	for _, c := range chunks {
		switch c["type"] {
		case "tool-input-available":
			tools = append(tools, c["toolName"].(string))
			if _, ok := c["input"].(map[string]any); !ok {
				t.Errorf("tool input is not an object: %v", c["input"])
			}
		case "tool-output-available":
			out := c["output"].(map[string]any)
			if out["content"] == "" {
				t.Errorf("empty tool output: %v", c)
			}
		case "data-orchestration":
			d := c["data"].(map[string]any)
			// The user message selected Explore before the first model call.
			if d["activeStep"] == "Explore" && len(d["sequence"].([]any)) == 2 {
				sawTransition = true
			}
		case "data-usage":
			d := c["data"].(map[string]any)
			if d["final"] == true {
				sawFinalUsage = true
				if d["session"] == nil {
					t.Errorf("final usage without the session's total: %v", d)
				}
			}
		}
	}
	if strings.Join(tools, ",") != "brainstorm,compare" {
		t.Errorf("tools called %v, want brainstorm,compare", tools)
	}
	if !sawTransition || !sawFinalUsage {
		t.Errorf("Explore step seen %v, final usage seen %v; types %v", sawTransition, sawFinalUsage, types)
	}
	if text == "" {
		t.Fatal("no answer text")
	}

	// The session has the answer, the tool results and the usage.
	var sv sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/chat_abcdefgh12", ""), http.StatusOK, &sv)
	last := sv.Messages[len(sv.Messages)-1]
	if last.Role != chat.RoleAssistant || last.Content != text {
		t.Errorf("last history message %q %q, want the streamed answer %q", last.Role, last.Content, text)
	}
	if sv.Messages[0].Role != chat.RoleUser || sv.Messages[0].Content != "Please explore options for a team offsite" {
		t.Errorf("first history message %+v", sv.Messages[0])
	}
	if sv.Agent != "explorer" || sv.Usage.Total == 0 || sv.Orchestration == nil || sv.Turn == nil || sv.Turn.Running {
		t.Errorf("session view %+v", sv)
	}
	if got, want := sv.Turn.LastEventID, wire.EventID(turnID, int64(len(evs))); got != want {
		t.Errorf("turn.lastEventId %q, want %q", got, want)
	}
}

func TestChatStreamPlainBodyAndSessionChoice(t *testing.T) {
	e := newEnv(t, envOptions{})
	// Plain body with sessionId.
	res, evs := e.streamChat("plain", `{"message":"hello there","sessionId":"plain-session-1"}`)
	if res.Header.Get("X-Session-Id") != "plain-session-1" {
		t.Fatalf("x-session-id %q", res.Header.Get("X-Session-Id"))
	}
	checkTurnStream(t, res.Header.Get("X-Turn-Id"), evs, 1)
	// The header wins over the body.
	res, _ = e.streamChat("plain", `{"message":"again","sessionId":"plain-session-1"}`, "X-Session-Id", "plain-session-2")
	if res.Header.Get("X-Session-Id") != "plain-session-2" {
		t.Fatalf("x-session-id %q, want the header's", res.Header.Get("X-Session-Id"))
	}
	// An AI SDK id that is not a valid session ID gets a new session.
	res, _ = e.streamChat("plain", `{"id":"x","messages":[{"role":"user","content":"hi"}]}`)
	if sid := res.Header.Get("X-Session-Id"); len(sid) != 32 {
		t.Fatalf("new session id %q", sid)
	}
	// A second turn on the same session sees the history.
	e.streamChat("plain", `{"message":"second","sessionId":"plain-session-1"}`)
	var sv sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/plain-session-1", ""), http.StatusOK, &sv)
	var users []string
	for _, m := range sv.Messages {
		if m.Role == chat.RoleUser {
			users = append(users, m.Content)
		}
	}
	if strings.Join(users, "|") != "hello there|second" {
		t.Fatalf("user messages %v", users)
	}
}

func TestChatErrors(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.MaxBodyBytes = 2048 }})
	big := `{"message":"` + strings.Repeat("a", 4096) + `"}`
	tests := []struct {
		name, agent, body string
		headers           []string
		status            int
		code, msgHas      string
	}{
		{"bad json", "plain", "{\n  \"message\": \"hi\",\n  oops\n}", nil, 400, "invalid_json", "line 3, column 3"},
		{"wrong type", "plain", `{"message": 42}`, nil, 400, "invalid_json", "message must be a string, not a number"},
		{"truncated", "plain", `{"message": "hi"`, nil, 400, "invalid_json", "line 1"},
		{"empty body", "plain", " ", nil, 400, "invalid_json", "empty"},
		{"too large", "plain", big, nil, 413, "body_too_large", "2048"},
		{"unknown agent", "nobody", `{"message":"hi"}`, nil, 404, "agent_not_found", "nobody"},
		{"bad session header", "plain", `{"message":"hi"}`, []string{"X-Session-Id", "bad id!"}, 400, "invalid_session_id", "x-session-id"},
		{"bad session body", "plain", `{"message":"hi","sessionId":"short"}`, nil, 400, "invalid_session_id", "sessionId"},
		{"no message", "plain", `{"foo":1}`, nil, 400, "invalid_message", "message"},
		{"no user message", "plain", `{"messages":[{"role":"assistant","content":"x"}]}`, nil, 400, "invalid_message", "user"},
		{"bad content", "plain", `{"messages":[{"role":"user","content":{"a":1}}]}`, nil, 400, "invalid_message", "messages[0].content"},
		{"empty message", "plain", `{"message":"   "}`, nil, 400, "invalid_message", "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(http.MethodPost, "/api/chat/"+tc.agent, tc.body, tc.headers...)
			var eb errBodyT
			getJSON(t, res, tc.status, &eb)
			if eb.Error.Code != tc.code || !strings.Contains(eb.Error.Message, tc.msgHas) {
				t.Fatalf("error %+v, want code %s with %q", eb.Error, tc.code, tc.msgHas)
			}
		})
	}
}

func TestChatConflicts(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.streamChat("plain", `{"message":"hi","sessionId":"owned-by-plain"}`)
	var eb errBodyT
	getJSON(t, e.do(http.MethodPost, "/api/chat/explorer", `{"message":"hi","sessionId":"owned-by-plain"}`), http.StatusConflict, &eb)
	if eb.Error.Code != "session_agent_mismatch" {
		t.Fatalf("error %+v", eb.Error)
	}

	// A session whose lease is held is busy (with busy reject).
	_, lease, err := session.Lock(t.Context(), e.store, "owned-by-plain")
	if err != nil {
		t.Fatal(err)
	}
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"message":"hi","sessionId":"owned-by-plain","busy":"reject"}`), http.StatusConflict, &eb)
	if eb.Error.Code != "session_busy" {
		t.Fatalf("error %+v", eb.Error)
	}
	lease.Release(t.Context())

	// The store down: 503, and readyz says so.
	e.store.Close()
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"message":"hi"}`), http.StatusServiceUnavailable, &eb)
	if eb.Error.Code != "store_unavailable" {
		t.Fatalf("error %+v", eb.Error)
	}
	getJSON(t, e.do(http.MethodGet, "/readyz", ""), http.StatusServiceUnavailable, &eb)
	getJSON(t, e.do(http.MethodGet, "/api/sessions/owned-by-plain", ""), http.StatusServiceUnavailable, &eb)
}

type denyLimiter struct{}

func (denyLimiter) Allow(r *http.Request, owner string) (bool, time.Duration) {
	return r.Header.Get("X-Over") == "", 1500 * time.Millisecond
}

func TestHooksLimitOwnerAndPanics(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) {
		c.Limiter = denyLimiter{}
		c.Owner = func(r *http.Request) (string, error) {
			switch k := r.Header.Get("X-Key"); k {
			case "boom":
				panic("owner hook exploded")
			case "bad":
				return "", fmt.Errorf("unknown API key")
			default:
				return k, nil
			}
		}
	}})
	var eb errBodyT
	res := e.do(http.MethodGet, "/api/agents", "", "X-Over", "1")
	if res.Header.Get("Retry-After") != "2" {
		t.Errorf("Retry-After %q, want 2", res.Header.Get("Retry-After"))
	}
	getJSON(t, res, http.StatusTooManyRequests, &eb)
	getJSON(t, e.do(http.MethodGet, "/api/agents", "", "X-Key", "bad"), http.StatusUnauthorized, &eb)
	if eb.Error.Code != "unauthorized" {
		t.Fatalf("error %+v", eb.Error)
	}
	getJSON(t, e.do(http.MethodGet, "/api/agents", "", "X-Key", "boom"), http.StatusInternalServerError, &eb)
	if eb.Error.Code != "internal_error" {
		t.Fatalf("error %+v", eb.Error)
	}
	// The server survived; another owner's session is not found, and the
	// same ID is another session under another owner.
	e.streamChat("plain", `{"message":"hi","sessionId":"alice-session"}`, "X-Key", "alice")
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", "X-Key", "alice"), http.StatusOK, nil)
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", "X-Key", "bob"), http.StatusNotFound, &eb)
	getJSON(t, e.do(http.MethodDelete, "/api/sessions/alice-session", "", "X-Key", "bob"), http.StatusNotFound, &eb)
	if res, _ := e.streamChat("plain", `{"message":"hi","sessionId":"alice-session"}`, "X-Key", "bob"); res.StatusCode != http.StatusOK {
		t.Fatalf("bob's turn on his own alice-session: %d", res.StatusCode)
	}
}

func TestMaxMessageBytes(t *testing.T) {
	e := newEnv(t, envOptions{rt: func(c *turns.Config) { c.MaxMessageBytes = 10 }})
	var eb errBodyT
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"message":"`+strings.Repeat("x", 11)+`"}`), http.StatusBadRequest, &eb)
	if eb.Error.Code != "invalid_message" || !strings.Contains(eb.Error.Message, strconv.Itoa(10)) {
		t.Fatalf("error %+v", eb.Error)
	}
}
