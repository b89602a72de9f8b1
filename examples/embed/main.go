// Command embed runs the agent of travel.json, a template with two typed
// tools and an MCP server, on the offline model and in memory, and prints
// one turn: the embedding example of the README. The template is compiled
// into the program, so that it runs from any directory of the module:
//
//	go run ./examples/embed
package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp"
)

type City struct {
	City string `json:"city" jsonschema:"the city"`
}

type Weather struct {
	Sky string `json:"sky" jsonschema:"the sky: sunny, cloudy or rainy"`
}

func main() {
	ctx := context.Background()
	weather := tools.MustNew("weather", "Reports the weather in a city.", func(ctx context.Context, in City) (string, error) {
		return "sunny in " + in.City, nil
	})
	packing := tools.MustNew("packing", "Says what to pack for the weather.", func(ctx context.Context, in Weather) (string, error) {
		return "sunglasses and a light jacket", nil
	})
	agents, warnings, err := agent.LoadFS(ctx, templates, file, agent.Options{Tools: []tools.Tool{weather, packing}, MCP: mcp.NewManager(mcp.Config{})})
	if err != nil {
		log.Fatal(err)
	}
	defer agents.Close(ctx)
	for _, w := range warnings {
		log.Print(w)
	}
	travel, _ := agents.Get("travel")
	for ev, err := range travel.Run(ctx, "session-1", agent.Text("Plan a day in Paris")) {
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

//go:embed travel.json
var embedded embed.FS

// templates and file are the template the program runs; variables, so
// that the test can run a misspelt copy.
var (
	templates fs.FS = embedded
	file            = "travel.json"
)
