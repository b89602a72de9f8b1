package filestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/examples/filestore"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

type Weather struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

// An agent keeps its sessions in a directory: a turn run on one store is
// read back by the next store opened on that directory, as after a restart.
func Example() {
	dir, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := filestore.Open(dir, session.Config{})
	if err != nil {
		log.Fatal(err)
	}
	weather := tools.MustNew("weather", "Reports the weather in a city.", func(ctx context.Context, in Weather) (string, error) {
		return "sunny in " + in.City, nil
	})
	tmpl, diags := template.Load("forecaster.json", []byte(`{"agentId": "forecaster", "name": "Forecaster",
		"personality": "You report the weather.", "nodes": ["llm.openai", "weather"]}`), template.Config{Provided: []string{"weather"}})
	if tmpl == nil {
		log.Fatal(diags.Err())
	}
	agents, err := agent.NewSet(agent.Options{Store: store, Tools: []tools.Tool{weather}}, []*template.Loaded{tmpl})
	if err != nil {
		log.Fatal(err)
	}
	forecaster, _ := agents.Get("forecaster")
	for _, err := range forecaster.Run(context.Background(), "session-1", agent.Text("What is the weather in Paris?")) {
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	// The restart: a new store on the same directory.
	store, err = filestore.Open(dir, session.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	// A session without an owner is stored under its ID (session.Key).
	history, err := store.Messages(context.Background(), session.Key("", "session-1"), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(history), "messages")
	for _, m := range history {
		line, _, _ := strings.Cut(m.Content, "\n")
		for _, c := range m.ToolCalls {
			line += c.Name + " " + string(c.Arguments)
		}
		fmt.Printf("%s: %s\n", m.Role, line)
	}
	// Output:
	// 4 messages
	// user: What is the weather in Paris?
	// assistant: weather {"city":"Paris"}
	// tool: sunny in Paris
	// assistant: ## Weather in Paris
}
