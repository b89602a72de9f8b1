package server

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
)

// TestStopOwnerScopedInProcess: with the memory store (no shared turn log)
// a stop reaches the turn in process; it is owner-scoped like every session
// route (another key's stop names another, absent session), a stopped
// stream ends with abort, finish and [DONE] and no error, and a second
// stop finds nothing running.
func TestStopOwnerScopedInProcess(t *testing.T) {
	auth, err := NewKeyAuth([]string{"key-alice", "key-bob"}, []byte("test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{delay: 10 * time.Millisecond, cfg: func(c *Config) { c.Owner = auth.Owner }})
	sid := session.NewID()
	words := strings.Repeat("word ", 500)
	res := e.do(http.MethodPost, "/api/chat/plain", jsonBody(map[string]string{"message": "[offline:echo] " + words, "sessionId": sid}), "Authorization", "Bearer key-alice")
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d", res.StatusCode)
	}
	r := newSSEReader(res.Body)
	for {
		ev, ok := r.next()
		if !ok {
			t.Fatal("the stream ended before its first text")
		}
		if chunkType(t, ev.Data) == "text-delta" {
			break
		}
	}

	var eb errBodyT
	getJSON(t, e.do(http.MethodPost, "/api/sessions/"+sid+"/stop", "", "Authorization", "Bearer key-bob"), http.StatusNotFound, &eb)
	if eb.Error.Code != "session_not_found" {
		t.Fatalf("another key's stop: %+v", eb)
	}
	getJSON(t, e.do(http.MethodPost, "/api/sessions/"+sid+"/stop", ""), http.StatusUnauthorized, nil)
	var accepted struct{ TurnID, Status string }
	getJSON(t, e.do(http.MethodPost, "/api/sessions/"+sid+"/stop", "", "Authorization", "Bearer key-alice"), http.StatusAccepted, &accepted)
	if accepted.Status != "stopping" || accepted.TurnID != res.Header.Get("X-Turn-Id") {
		t.Fatalf("202 body %+v, turn %s", accepted, res.Header.Get("X-Turn-Id"))
	}
	var types []string
	for _, ev := range r.all() {
		types = append(types, chunkType(t, ev.Data))
	}
	n := len(types)
	if n < 3 || strings.Join(types[n-3:], " ") != "abort finish [DONE]" || strings.Contains(strings.Join(types, " "), "error") {
		t.Fatalf("the stopped stream ended with %v", types[max(0, n-6):])
	}
	alice, err := auth.Owner(mustKeyRequest(t, "key-alice"))
	if err != nil {
		t.Fatal(err)
	}
	e.waitIdle(session.Key(alice, sid))
	res2 := e.do(http.MethodPost, "/api/sessions/"+sid+"/stop", "", "Authorization", "Bearer key-alice")
	res2.Body.Close()
	if res2.StatusCode != http.StatusNoContent {
		t.Fatalf("stop with nothing running: %d", res2.StatusCode)
	}
}

func mustKeyRequest(t *testing.T, key string) *http.Request {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}

// TestApprovalsContinueTheMessage: a turn that carries out approvals
// streams under the message that asked for them, in both body shapes and
// through a chain of approvals, so that a client appends to the answer it
// shows instead of opening another.
func TestApprovalsContinueTheMessage(t *testing.T) {
	for _, shape := range []string{"plain", "ai-sdk"} {
		t.Run(shape, func(t *testing.T) {
			e := newEnv(t, envOptions{model: critiquesTwice{}})
			sid := "approve-" + session.NewID()
			res, evs := e.streamChat("approver", `{"message":"critique: remote work","sessionId":"`+sid+`"}`)
			first := res.Header.Get("X-Turn-Id")
			for range 2 {
				_, chunks, _ := checkTurnStream(t, res.Header.Get("X-Turn-Id"), evs, 1)
				if chunks[0]["messageId"] != first {
					t.Fatalf("start chunk %v, want messageId %s", chunks[0], first)
				}
				var approvalID string
				for _, c := range chunks {
					if c["type"] == "tool-approval-request" {
						approvalID, _ = c["approvalId"].(string)
					}
				}
				if approvalID == "" {
					t.Fatalf("no approval request in %v", chunks)
				}
				body := `{"sessionId":"` + sid + `","approvals":[{"id":"` + approvalID + `","approved":true}]}`
				if shape == "ai-sdk" {
					body = jsonBody(map[string]any{"id": sid, "messages": []any{
						map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "critique: remote work"}}},
						map[string]any{"id": first, "role": "assistant", "parts": []any{map[string]any{"type": "tool-critique", "toolCallId": "x", "state": "approval-responded",
							"approval": map[string]any{"id": approvalID, "approved": true}}}},
					}})
				}
				res, evs = e.streamChat("approver", body)
			}
			_, chunks, _ := checkTurnStream(t, res.Header.Get("X-Turn-Id"), evs, 1)
			if chunks[0]["messageId"] != first {
				t.Fatalf("the last continuation's start chunk %v, want messageId %s", chunks[0], first)
			}
		})
	}
}

// critiquesTwice is a model that calls critique until the conversation has
// two of its results, then answers.
type critiquesTwice struct{}

func (critiquesTwice) Info() llmorch.Info {
	return llmorch.Info{Provider: "test", Model: "critiques-twice"}
}

func (critiquesTwice) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		n := 0
		for _, m := range req.Messages {
			if m.Role == chat.RoleTool && m.ToolName == "critique" {
				n++
			}
		}
		if n >= 2 {
			yield(chat.Event{Kind: chat.KindTextDelta, Text: "Both critiques are in."}, nil)
			return
		}
		args := json.RawMessage(`{"subject": "remote work", "analysis": "It depends on the team."}`)
		yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: fmt.Sprintf("call-%d", n+1), Name: "critique", Arguments: args}}, nil)
	}
}
