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
	Type      string  `json:"type"`
	Status    string  `json:"status"`
	CallID    string  `json:"call_id"`
	Name      string  `json:"name"`
	Arguments string  `json:"arguments"`
	Output    *string `json:"output"`
	NotRun    bool    `json:"not_run"`
	Answer    int     `json:"answer"`
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
