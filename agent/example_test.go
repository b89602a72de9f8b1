package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/tools"
)

// diligent is a Model of its own. It calls the first tool it is offered
// until it has called two in the turn, then answers with what they said. A
// real Model calls a provider (llmorch/provider does, with langchaingo);
// this one shows the contract: events in, one model call per Stream, and
// the tools offered to each call chosen by the orchestration, not by it.
type diligent struct{}

func (diligent) Info() llmorch.Info { return llmorch.Info{Provider: "example", Model: "diligent"} }

func (diligent) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		var offered, results []string
		for _, t := range req.Tools {
			offered = append(offered, t.Name)
		}
		for _, m := range req.Messages {
			switch m.Role {
			case chat.RoleUser:
				results = nil // a new turn
			case chat.RoleTool:
				results = append(results, m.Content)
			}
		}
		fmt.Printf("model call: offered %v\n", offered)
		if len(results) < 2 && len(offered) > 0 {
			call := &chat.ToolCall{ID: fmt.Sprintf("call-%d", len(results)+1), Name: offered[0], Arguments: json.RawMessage(`{"topic": "tides"}`)}
			yield(chat.Event{Kind: chat.KindToolCall, ToolCall: call}, nil)
			return
		}
		yield(chat.Event{Kind: chat.KindTextDelta, Text: "In short: " + strings.Join(results, " ")}, nil)
	}
}

// An agent on a Model of one's own, with an orchestration that enforces a
// sequence: lookup, then summarize. Whatever the model would prefer, each
// of its calls is offered only the tool the sequence allows next.
func Example_customModel() {
	type Topic struct {
		Topic string `json:"topic"`
	}
	lookup := tools.MustNew("lookup", "Looks a topic up.", func(ctx context.Context, in Topic) (string, error) {
		return "The Moon raises " + in.Topic + ".", nil
	})
	summarize := tools.MustNew("summarize", "Summarizes what was found.", func(ctx context.Context, in Topic) (string, error) {
		return "Two a day, mostly.", nil
	})
	researcher := fstest.MapFS{"researcher.json": {Data: []byte(`{
		"agentId": "researcher", "name": "Researcher", "nodes": ["llm.openai", "lookup", "summarize"],
		"orchestration": {"steps": [{"name": "Research", "isDefault": true,
			"availableTools": {"allowed": ["lookup", "summarize"]}, "sequence": ["lookup", "summarize"]}]}}`)}}
	agents, _, err := agent.LoadFS(context.Background(), researcher, "researcher.json", agent.Options{Tools: []tools.Tool{lookup, summarize}, Models: agent.Model(diligent{})})
	if err != nil {
		panic(err)
	}
	a, _ := agents.Get("researcher")
	for ev, err := range a.Run(context.Background(), "session-1", agent.Text("Why are there tides?")) {
		if err != nil {
			panic(err)
		}
		switch ev.Kind {
		case chat.KindToolResult:
			fmt.Printf("%s said: %s\n", ev.ToolResult.Name, ev.ToolResult.Content)
		case chat.KindTextDelta:
			fmt.Println("answer:", ev.Text)
		}
	}
	// Output:
	// model call: offered [lookup]
	// lookup said: The Moon raises tides.
	// model call: offered [summarize]
	// summarize said: Two a day, mostly.
	// model call: offered [lookup summarize]
	// answer: In short: The Moon raises tides. Two a day, mostly.
}
