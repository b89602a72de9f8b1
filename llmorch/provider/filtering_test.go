package provider

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// stableReq is a request of stable tool filtering after a tool result:
// every test tool sent, offered the ones named, and the call's note.
func stableReq(offered []string) llmorch.Request {
	return llmorch.Request{System: "be brief", Tools: testTools, Offered: offered, Note: "## Now\nTools you may use now: search",
		Messages: []chat.Message{
			{Role: chat.RoleUser, Content: "look it up"},
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "think", Arguments: json.RawMessage(`{"topic":"x"}`)}}},
			{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "think", Content: "thought"},
		}}
}

// TestAllowedTools: a model at a server that takes allowed_tools sends
// every tool on every call and restricts the call with tool_choice naming
// exactly the offered tools ("none" for none); a request that names no
// offer (filter mode) or a server that does not take allowed_tools gets
// no tool_choice.
func TestAllowedTools(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	restricting, _ := testModel(t, srv, OpenAI, func(c *Config) { c.RestrictsTools = true })
	plain, _ := testModel(t, srv, OpenAI)
	if !restricting.Info().RestrictsTools || plain.Info().RestrictsTools {
		t.Fatalf("Info().RestrictsTools = %v, %v", restricting.Info().RestrictsTools, plain.Info().RestrictsTools)
	}
	all := []string{"think", "search", "critique"}
	tests := []struct {
		name     string
		m        *model
		offered  []string
		choice   string // tool_choice as sent, "" for absent
		callable []string
	}{
		{"one offered", restricting, []string{"search"}, `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"search"}}]}}`, []string{"search"}},
		{"in the tools' order", restricting, []string{"critique", "think"}, `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"think"}},{"type":"function","function":{"name":"critique"}}]}}`, []string{"think", "critique"}},
		{"none offered", restricting, []string{}, `"none"`, []string{}},
		{"filter mode", restricting, nil, "", all},
		{"a server without allowed_tools", plain, []string{"search"}, "", all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"ok"}})
			if _, err := collect(t, tt.m, t.Context(), stableReq(tt.offered)); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			r := reqs[len(reqs)-1]
			if !slices.Equal(r.ToolNames(), all) {
				t.Errorf("tools sent %v, want all of %v", r.ToolNames(), all)
			}
			if string(r.ToolChoice) != tt.choice {
				t.Errorf("tool_choice %s, want %s", r.ToolChoice, tt.choice)
			}
			if got := r.Callable(); !slices.Equal(got, tt.callable) {
				t.Errorf("callable %v, want %v", got, tt.callable)
			}
		})
	}
}

// TestNoteAfterHistory: the call's note follows the conversation on the
// user's side and nothing else changes: OpenAI gets it appended to a last
// user message or as a user message after tool results, Anthropic as the
// last text block of the last user message (after the tool results, which
// stay one message). The system prompt is the request's alone.
func TestNoteAfterHistory(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	const note = "## Now\nTools you may use now: search"
	for _, wire := range []string{OpenAI, Anthropic} {
		m, _ := testModel(t, srv, wire)
		t.Run(wire+"/after a user message", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"ok"}})
			req := userReq("hi")
			req.Note = note
			if _, err := collect(t, m, t.Context(), req); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			r := reqs[len(reqs)-1]
			if len(r.Messages) != 1 || r.Messages[0].Role != "user" || r.Messages[0].Text != "hi\n\n"+note && r.Messages[0].Text != "hi"+note {
				t.Errorf("messages %+v, want the user message followed by the note", r.Messages)
			}
			if r.System != "be brief" {
				t.Errorf("system %q", r.System)
			}
		})
		t.Run(wire+"/after tool results", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"ok"}})
			if _, err := collect(t, m, t.Context(), stableReq(nil)); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			r := reqs[len(reqs)-1]
			last := r.Messages[len(r.Messages)-1]
			switch wire {
			case OpenAI:
				if len(r.Messages) != 4 || last.Role != "user" || last.Text != note || r.Messages[2].Role != "tool" {
					t.Errorf("messages %+v, want the tool result, then the note as a user message", r.Messages)
				}
			case Anthropic:
				if len(r.Messages) != 3 || last.Role != "user" || len(last.ToolResults) != 1 || last.Text != note {
					t.Errorf("messages %+v, want the tool result and the note in one user message", r.Messages)
				}
			}
		})
	}
}

// TestAnthropicBreakpoints: with the stable tool set Anthropic's request
// carries cache_control on the last tool, the system prompt and the last
// block of the conversation before the note, and on nothing else (the
// note changes every call); in filter mode it carries none, since a tools
// array that changes would make every cache write a loss.
func TestAnthropicBreakpoints(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	m, _ := testModel(t, srv, Anthropic)
	type block struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		Name         string          `json:"name"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	for _, stable := range []bool{true, false} {
		srv.Enqueue(mockllm.Script{Text: []string{"ok"}})
		req := stableReq([]string{"search"})
		if !stable {
			req.Offered = nil
		}
		if _, err := collect(t, m, t.Context(), req); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		var body struct {
			System   json.RawMessage `json:"system"`
			Tools    []block         `json:"tools"`
			Messages []struct {
				Content []block `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &body); err != nil {
			t.Fatal(err)
		}
		var marked []string
		for _, tl := range body.Tools {
			if tl.CacheControl != nil {
				marked = append(marked, "tool "+tl.Name)
			}
		}
		var system []block
		if json.Unmarshal(body.System, &system) == nil {
			for _, b := range system {
				if b.CacheControl != nil {
					marked = append(marked, "system "+b.Text)
				}
			}
		}
		for i, msg := range body.Messages {
			for j, b := range msg.Content {
				if b.CacheControl != nil {
					marked = append(marked, strings.Join([]string{"message", string(rune('0' + i)), string(rune('0' + j)), b.Type}, " "))
				}
			}
		}
		want := []string{"tool critique", "system be brief", "message 2 0 tool_result"}
		if !stable {
			want = nil
		}
		if !slices.Equal(marked, want) {
			t.Errorf("stable %v: breakpoints %q, want %q", stable, marked, want)
		}
		if got := reqs[len(reqs)-1].System; got != "be brief" {
			t.Errorf("stable %v: system reads %q", stable, got)
		}
	}
}
