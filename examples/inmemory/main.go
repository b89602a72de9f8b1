// Command inmemory runs one agent in memory with a typed tool and the
// offline model, and prints its turn: the shortest complete program that
// embeds agentdock (README, "Embedding").
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

type Weather struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

func main() {
	weather := tools.MustNew("weather", "Reports the weather in a city.", func(ctx context.Context, in Weather) (string, error) {
		return "sunny in " + in.City, nil
	})
	toolbox, err := tools.NewRegistry(weather)
	if err != nil {
		log.Fatal(err)
	}
	tmpl, diags := template.Load("forecaster.json", []byte(`{"agentId": "forecaster", "name": "Forecaster",
		"personality": "You report the weather.", "nodes": ["llm.openai", "weather"]}`), template.Config{Provided: toolbox.Names()})
	if tmpl == nil {
		log.Fatal(diags.Err())
	}
	agents, err := agent.NewSet(agent.Config{Store: session.NewMemory(session.Config{}), Tools: toolbox, Models: agent.Model(offline.New(offline.Config{}))}, []*template.Agent{tmpl})
	if err != nil {
		log.Fatal(err)
	}
	forecaster, _ := agents.Get("forecaster")
	for ev, err := range forecaster.Run(context.Background(), "session-1", "What is the weather in Paris?") {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind {
		case chat.KindTextDelta:
			fmt.Print(ev.Text)
		case chat.KindToolResult:
			fmt.Printf("[%s: %s]\n", ev.ToolResult.Name, ev.ToolResult.Content)
		}
	}
	fmt.Println()
}
