package mcpserver_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An agent served as an MCP tool at /mcp beside the API, called with the
// official Go SDK's client.
func ExampleEdge() {
	ctx := context.Background()
	agents, _, err := agent.LoadFS(context.Background(), fstest.MapFS{"echo.json": {Data: []byte(`{"agentId": "echo", "name": "Echo", "description": "Says it back.", "nodes": ["llm.openai"]}`)}}, "echo.json", agent.Options{})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := turns.New(turns.Config{Agents: agents})
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Runtime: rt, Logger: slog.New(slog.DiscardHandler), Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
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
