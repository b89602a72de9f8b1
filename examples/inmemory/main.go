// Command inmemory runs one agent in memory with a typed tool and the
// offline model, and prints its turn: the shortest complete program that
// embeds agentdock (README, "Embedding").
package main

import (
	"context"
	"embed"
	"fmt"
	"log"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
)

//go:embed forecaster.json
var templates embed.FS

type Weather struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

func main() {
	ctx := context.Background()
	weather := tools.MustNew("weather", "Reports the weather in a city.", func(ctx context.Context, in Weather) (string, error) {
		return "sunny in " + in.City, nil
	})
	agents, warnings, err := agent.LoadFS(ctx, templates, "forecaster.json", agent.Options{Tools: []tools.Tool{weather}})
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range warnings {
		log.Print(w)
	}
	forecaster, _ := agents.Get("forecaster")
	for ev, err := range forecaster.Run(ctx, "session-1", agent.Text("What is the weather in Paris?")) {
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
