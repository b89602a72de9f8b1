package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/openai/openai-go/v3/packages/param"
	oar "github.com/openai/openai-go/v3/responses"
)

const thinkArgs = `{"topic": "t", "reasoning": "r"}`

// TestParallelToolCallsFalse: parallel_tool_calls false is answered on
// every OpenAI door, is passed to the provider, and a model answer with
// two calls runs only the first: the second gets a refusal the model
// reads in its next request. The model is a scripted OpenAI-compatible
// stream over loopback.
func TestParallelToolCallsFalse(t *testing.T) {
	cases := []struct {
		name, path string
		body       map[string]any
		headers    []string
	}{
		{"chat completion without a session", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}, nil},
		{"chat completion with a session", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}, []string{"X-Session-Id", "one-call-" + session.NewID()}},
		{"stored response", "/v1/responses", map[string]any{"input": "hello"}, nil},
		{"response with store false", "/v1/responses", map[string]any{"input": "hello", "store": false}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, mock := mockEnv(t, "", nil)
			mock.Enqueue(
				calls(mockllm.ToolCall{ID: "call_a", Name: "think", Arguments: thinkArgs}, mockllm.ToolCall{ID: "call_b", Name: "think", Arguments: thinkArgs}),
				answer("done"),
			)
			c.body["model"], c.body["parallel_tool_calls"] = "explorer", false
			var v map[string]any
			getJSON(t, e.do(http.MethodPost, c.path, jsonBody(c.body), c.headers...), http.StatusOK, &v)
			if c.path == "/v1/responses" && v["parallel_tool_calls"] != false {
				t.Errorf("the response reports parallel_tool_calls %v, want false", v["parallel_tool_calls"])
			}
			reqs := mock.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the model was called %d times, want 2", len(reqs))
			}
			var first map[string]json.RawMessage
			_ = json.Unmarshal(reqs[0].Body, &first)
			if string(first["parallel_tool_calls"]) != "false" {
				t.Errorf("the provider was sent parallel_tool_calls %s, want false", first["parallel_tool_calls"])
			}
			var read []mockllm.ToolResult
			for _, m := range reqs[1].Messages {
				read = append(read, m.ToolResults...)
			}
			if len(read) != 2 || read[0].CallID != "call_a" || strings.HasPrefix(read[0].Content, chat.RefusedPrefix) ||
				read[1].CallID != "call_b" || !strings.HasPrefix(read[1].Content, chat.RefusedPrefix+"this conversation runs one tool call per answer") {
				t.Fatalf("the model read %+v, want call_a's result and call_b refused", read)
			}
		})
	}
}

// TestParallelToolCallsMustBeABoolean: a parallel_tool_calls that is not a
// boolean is a 400 naming the parameter.
func TestParallelToolCallsMustBeABoolean(t *testing.T) {
	e, _ := mockEnv(t, "", nil)
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		body := map[string]any{"model": "explorer", "parallel_tool_calls": "no", "input": "hi", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		if path == "/v1/chat/completions" {
			delete(body, "input")
		} else {
			delete(body, "messages")
		}
		res := e.do(http.MethodPost, path, jsonBody(body))
		var v struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		getJSON(t, res, http.StatusBadRequest, &v)
		if !strings.Contains(v.Error.Message, "parallel_tool_calls") {
			t.Errorf("%s: error %q does not name parallel_tool_calls", path, v.Error.Message)
		}
	}
}

// fedBack is what a client that keeps the conversation sends back of a
// response's output: its messages as assistant messages, and every other
// item (the agent's agentdock:tool_call items, function calls) verbatim.
func fedBack(r *oar.Response) oar.ResponseInputParam {
	var items oar.ResponseInputParam
	for _, it := range r.Output {
		if it.Type == "message" {
			items = append(items, oar.ResponseInputItemParamOfMessage(it.Content[0].Text, oar.EasyInputMessageRoleAssistant))
			continue
		}
		items = append(items, param.Override[oar.ResponseInputItemUnionParam](json.RawMessage(it.RawJSON())))
	}
	return items
}

// toolItem is an agentdock:tool_call item as a client reads it.
type toolItem struct {
	Type       string  `json:"type"`
	Status     string  `json:"status"`
	CallID     string  `json:"call_id"`
	Name       string  `json:"name"`
	Arguments  string  `json:"arguments"`
	Output     *string `json:"output"`
	NotRun     bool    `json:"not_run"`
	ApprovalID string  `json:"approval_id"`
	Answer     int     `json:"answer"`
}

// toolItems returns a response's agentdock:tool_call items.
func toolItems(t *testing.T, r *oar.Response) []toolItem {
	t.Helper()
	var out []toolItem
	for _, it := range r.Output {
		if it.Type != "agentdock:tool_call" {
			continue
		}
		var ti toolItem
		if err := json.Unmarshal([]byte(it.RawJSON()), &ti); err != nil {
			t.Fatal(err)
		}
		out = append(out, ti)
	}
	return out
}

// TestHeldApprovalSaysSo: a turn that holds a call for approval does not
// answer an empty stop. A chat completion, streaming or not, with a
// session or without, ends with finish_reason tool_calls, and its
// agentdock extension has finishReason approval, the held call and its
// approval; without a session it also warns that nothing can approve it.
// A response is incomplete (approval), its call an agentdock:tool_call
// item ending incomplete with the approval's ID.
func TestHeldApprovalSaysSo(t *testing.T) {
	e := newEnv(t, envOptions{})
	msgs := []any{map[string]any{"role": "user", "content": "critique: remote work"}}
	for _, c := range []struct {
		name    string
		headers []string
	}{{"without a session", nil}, {"with a session", []string{"X-Session-Id", "held-" + session.NewID()}}} {
		t.Run("completion "+c.name, func(t *testing.T) {
			var v struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
				AgentDock oaExtended `json:"agentdock"`
			}
			getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", jsonBody(map[string]any{"model": "approver", "messages": msgs}), c.headers...), http.StatusOK, &v)
			ext := v.AgentDock
			if v.Choices[0].FinishReason != "tool_calls" || ext.FinishReason != chat.FinishApproval {
				t.Fatalf("finish_reason %q, agentdock.finishReason %q", v.Choices[0].FinishReason, ext.FinishReason)
			}
			if len(ext.Approvals) != 1 || ext.Approvals[0].ID == "" || len(ext.ToolCalls) != 1 || ext.ToolCalls[0].Name != "critique" || ext.Approvals[0].ToolCallID != ext.ToolCalls[0].ID {
				t.Fatalf("approvals %+v, calls %+v", ext.Approvals, ext.ToolCalls)
			}
			if warned := strings.Contains(ext.Warning, "without a session"); warned != (c.headers == nil) {
				t.Fatalf("warning %q", ext.Warning)
			}
		})
		t.Run("streaming completion "+c.name, func(t *testing.T) {
			res := e.do(http.MethodPost, "/v1/chat/completions", jsonBody(map[string]any{"model": "approver", "messages": msgs, "stream": true}), c.headers...)
			defer res.Body.Close()
			type chunk struct {
				Choices []struct {
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
				AgentDock *oaExtended `json:"agentdock"`
			}
			var finish chunk
			r := newSSEReader(res.Body)
			for ev, ok := r.next(); ok; ev, ok = r.next() {
				var ch chunk
				if ev.Data != "[DONE]" && json.Unmarshal([]byte(ev.Data), &ch) == nil && len(ch.Choices) > 0 && ch.Choices[0].FinishReason != nil {
					finish = ch
				}
			}
			if len(finish.Choices) == 0 || *finish.Choices[0].FinishReason != "tool_calls" || finish.AgentDock == nil ||
				finish.AgentDock.FinishReason != chat.FinishApproval || len(finish.AgentDock.Approvals) != 1 ||
				strings.Contains(finish.AgentDock.Warning, "without a session") != (c.headers == nil) {
				t.Fatalf("finish chunk %+v", finish)
			}
		})
	}
	t.Run("response with store false", func(t *testing.T) {
		var r struct {
			Status            string `json:"status"`
			IncompleteDetails struct {
				Reason string `json:"reason"`
			} `json:"incomplete_details"`
			Output []toolItem `json:"output"`
		}
		getJSON(t, e.do(http.MethodPost, "/v1/responses", jsonBody(map[string]any{"model": "approver", "input": "critique: remote work", "store": false})), http.StatusOK, &r)
		if r.Status != "incomplete" || r.IncompleteDetails.Reason != "approval" {
			t.Fatalf("status %q %+v", r.Status, r.IncompleteDetails)
		}
		var held []toolItem
		for _, it := range r.Output {
			if it.Type == "agentdock:tool_call" {
				held = append(held, it)
			}
		}
		if len(held) != 1 || held[0].Name != "critique" || held[0].Status != "incomplete" || held[0].ApprovalID == "" || held[0].Output != nil {
			t.Fatalf("items %+v", r.Output)
		}
	})
}
