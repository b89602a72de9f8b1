package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// An agent served over A2A beside the API, sent a message over JSON-RPC.
func ExampleNew() {
	toolbox, _ := tools.NewRegistry()
	tmpl, diags := template.Load("echo.json", []byte(`{"agentId": "echo", "name": "Echo", "description": "Says it back.", "nodes": ["llm.openai"]}`), template.Config{Provided: toolbox.Names()})
	if tmpl == nil {
		log.Fatal(diags.Err())
	}
	agents, err := agent.NewSet(agent.Config{Store: session.NewMemory(session.Config{}), Tools: toolbox, Models: agent.Model(offline.New(offline.Config{}))}, []*template.Loaded{tmpl})
	if err != nil {
		log.Fatal(err)
	}
	edge, err := a2a.New(a2a.Config{})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler), Edges: []server.Edge{edge}})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	res, err := http.Post(hs.URL+"/a2a/echo", "application/json", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
		"params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "[offline:echo] hello over A2A"}]}}}`))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Result struct{ Task a2a.Task } `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Result.Task.Status.State)
	fmt.Println(*out.Result.Task.Artifacts[0].Parts[0].Text)
	// Output:
	// TASK_STATE_COMPLETED
	// hello over A2A
}
