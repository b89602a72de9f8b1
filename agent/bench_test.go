package agent_test

import (
	"context"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// threeToolTurn is the script of one turn: three tool calls, one per model
// call, then a short answer.
func threeToolTurn() []mockllm.Script {
	u := &mockllm.Usage{Input: 200, Output: 30}
	return []mockllm.Script{
		{ToolCalls: []mockllm.ToolCall{{Name: "think", Arguments: `{"topic":"t","reasoning":"r"}`}}, Usage: u},
		{ToolCalls: []mockllm.ToolCall{{Name: "reflect", Arguments: `{"topic":"t","reflection":"r"}`}}, Usage: u},
		{ToolCalls: []mockllm.ToolCall{{Name: "critique", Arguments: `{"subject":"s","analysis":"a"}`}}, Usage: u},
		{Text: []string{"An ", "answer ", "in ", "a ", "few ", "words."}, Usage: u},
	}
}

// BenchmarkTurnOverhead measures a 3-tool turn against the in-process mock
// (no model delay) through the whole runtime, and the same four model calls
// through the provider alone; the difference is the runtime's overhead:
// orchestration, tool execution, store updates and history.
func BenchmarkTurnOverhead(b *testing.B) {
	mock := mockllm.New(mockllm.WithMaxRecorded(-1))
	defer mock.Close()
	newModel := func() (llmorch.Model, error) {
		return provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "k"})
	}

	b.Run("runtime", func(b *testing.B) {
		a, ds := template.Load("transit.json", []byte(fmtTemplate("openai")), template.Config{Provided: tools.BuiltinNames()})
		if a == nil {
			b.Fatal(ds.Err())
		}
		store := session.NewMemory(session.Config{})
		defer store.Close()
		agents := newAgents(b, store, func(*template.Template) (llmorch.Model, error) { return newModel() }, []*template.Loaded{a})
		n, _ := agents.Get("transit")
		b.ReportAllocs()
		for b.Loop() {
			mock.Enqueue(threeToolTurn()...)
			events, err := agent.Started(n.Run(context.Background(), session.NewID(), agent.Text("Think about it")))
			if err != nil {
				b.Fatal(err)
			}
			calls := 0
			for ev := range events {
				if ev.Kind == chat.KindToolResult {
					calls++
				}
			}
			if calls != 3 {
				b.Fatalf("%d tool results", calls)
			}
		}
	})

	b.Run("provider-only", func(b *testing.B) {
		m, err := newModel()
		if err != nil {
			b.Fatal(err)
		}
		reg, err := tools.Builtin(tools.BuiltinConfig{})
		if err != nil {
			b.Fatal(err)
		}
		specs := reg.Specs([]string{"think", "reflect", "critique"})
		b.ReportAllocs()
		for b.Loop() {
			mock.Enqueue(threeToolTurn()...)
			msgs := []chat.Message{{Role: chat.RoleUser, Content: "Think about it"}}
			for range 4 {
				for _, err := range m.Stream(context.Background(), llmorch.Request{System: "s", Messages: msgs, Tools: specs}) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}
