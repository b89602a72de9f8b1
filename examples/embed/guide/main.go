// Command guide is the MCP server of the embed example's template: one
// tool, sights, over stdio, built on the official Go SDK. The template
// starts it as a child process (mcpServers.guide).
package main

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type sightsIn struct {
	City string `json:"city" jsonschema:"the city to visit"`
}

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "guide", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "sights", Description: "Lists the sights of a city."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sightsIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the old town, the river and the market of " + in.City}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
