package agent_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// transitionTemplate: using think moves the session from Start (all tools)
// to After, which offers only reflect.
const transitionTemplate = `{
  "agentId": "transit", "name": "Transit", "nodes": ["llm.%s", "think", "reflect", "critique"],
  "orchestration": {"steps": [
    {"name": "After", "description": "after thinking", "conditions": [{"type": "tool_used", "value": "think"}],
     "availableTools": {"allowed": ["reflect"]}},
    {"name": "Start", "description": "default", "isDefault": true}
  ]}
}`

// TestProviderTurnTransition runs a turn through the real providers (over
// HTTP, against the mock server in both wire formats): the first model
// call's tool moves the session to another step, and the second call of the
// same turn is offered that step's tools, as the request body the mock
// received shows. Usage is recorded per call and per session.
func TestProviderTurnTransition(t *testing.T) {
	for _, wire := range []string{provider.OpenAI, provider.Anthropic} {
		t.Run(wire, func(t *testing.T) {
			mock := mockllm.New()
			defer mock.Close()
			usage := &mockllm.Usage{Input: 100, Output: 20}
			mock.Enqueue(
				mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: "call_1", Name: "think", Arguments: `{"topic":"trains","reasoning":"they run on rails"}`}}, Usage: usage},
				mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: "call_2", Name: "reflect", Arguments: `{"topic":"trains","reflection":"fine"}`}}, Usage: usage},
				mockllm.Script{Text: []string{"Trains ", "are ", "good."}, Usage: usage},
			)
			src := []byte(fmtTemplate(wire))
			a, ds := template.Load("transit.json", src, template.Config{Provided: tools.BuiltinNames()})
			if a == nil {
				t.Fatal(ds.Err())
			}
			store := session.NewMemory(session.Config{})
			defer store.Close()
			models := func(*template.Template) (llmorch.Model, error) {
				return provider.New(provider.Config{Provider: wire, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "test-key"})
			}
			agents := newAgents(t, store, models, []*template.Loaded{a})
			n, _ := agents.Get("transit")
			id := session.NewID()
			evs := turn(t, n, id, "Think about trains")

			reqs := mock.Requests()
			if len(reqs) != 3 {
				t.Fatalf("the mock got %d requests, want 3", len(reqs))
			}
			if got := reqs[0].ToolNames(); !slices.Equal(got, []string{"think", "reflect", "critique"}) {
				t.Fatalf("first call offered %v", got)
			}
			if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"reflect"}) {
				t.Fatalf("second call offered %v, want the new step's [reflect]", got)
			}
			if got := toolCalls(evs); !slices.Equal(got, []string{"think", "reflect"}) {
				t.Fatalf("tool calls %v", got)
			}
			if text(evs) != "Trains are good." {
				t.Fatalf("answer %q", text(evs))
			}
			var perStep []chat.Usage
			for _, ev := range evs {
				if ev.Kind == chat.KindUsage && !ev.Final {
					perStep = append(perStep, *ev.Usage)
				}
			}
			if len(perStep) != 3 || perStep[0] != (chat.Usage{Prompt: 100, Completion: 20, Total: 120}) {
				t.Fatalf("per-call usage %+v", perStep)
			}
			sess, err := store.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if want := (chat.Usage{Prompt: 300, Completion: 60, Total: 360}); sess.State.TokenUsage != want {
				t.Fatalf("session usage %+v, want %+v", sess.State.TokenUsage, want)
			}
			if sess.State.ActiveStep != "After" {
				t.Fatalf("active step %q", sess.State.ActiveStep)
			}
		})
	}
}

func fmtTemplate(wire string) string { return fmt.Sprintf(transitionTemplate, wire) }
