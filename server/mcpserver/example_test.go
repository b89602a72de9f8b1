package mcpserver_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An agent served as an MCP tool at /mcp beside the API, called with the
// official Go SDK's client.
func ExampleEdge() {
	ctx := context.Background()
	toolbox, _ := tools.NewRegistry()
	tmpl, diags := template.Load("echo.json", []byte(`{"agentId": "echo", "name": "Echo", "description": "Says it back.", "nodes": ["llm.openai"]}`), template.Config{Provided: toolbox.Names()})
	if tmpl == nil {
		log.Fatal(diags.Err())
	}
	agents, err := agent.NewSet(agent.Config{Store: session.NewMemory(session.Config{}), Tools: toolbox, Models: agent.Model(offline.New(offline.Config{}))}, []*template.Loaded{tmpl})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler), Edges: []server.Edge{mcpserver.New(mcpserver.Config{})}})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(ctx)

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "[offline:echo] hello over MCP"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output: hello over MCP
}
