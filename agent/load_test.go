package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp"
)

// The MCP runtime of package tools/mcp is the one Load is given.
var _ agent.MCP = (*mcp.Manager)(nil)

type city struct {
	City string `json:"city"`
}

var weatherTool = tools.MustNew("weather", "Reports the weather in a city.", func(ctx context.Context, in city) (string, error) {
	return "sunny in " + in.City, nil
})

func TestLoad(t *testing.T) {
	for _, tt := range []struct {
		name     string
		template string
		opts     agent.Options
		// wantErr is part of Load's error ("" for none); wantWarning part
		// of its only warning ("" for none).
		wantErr, wantWarning string
	}{
		{name: "zero options", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"]}`},
		{name: "a tool", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "weather"]}`,
			opts: agent.Options{Tools: []tools.Tool{weatherTool}}},
		{name: "misspelt tool", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "wether"]}`,
			opts:    agent.Options{Tools: []tools.Tool{weatherTool}},
			wantErr: `a/template.json: nodes[1]: tool "wether" is not provided (provided: weather); check its spelling`},
		{name: "no tools given", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "weather"]}`,
			wantErr: `tool "weather" is not provided (provided: none); check its spelling`},
		{name: "tool twice", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"]}`,
			opts:    agent.Options{Tools: []tools.Tool{weatherTool, weatherTool}},
			wantErr: "agent: Options.Tools: "},
		{name: "invalid template", template: `{"agentId": "a", "nodes": ["llm.openai"]}`,
			wantErr: "name: required"},
		{name: "unknown key", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"], "chatSetings": {}}`,
			wantWarning: `a/template.json: chatSetings: unknown key`},
		{name: "mcpServers without MCP", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "files__read"], "mcpServers": {"files": {"command": "true"}}}`,
			wantErr: "a/template.json: mcpServers: no Options.MCP to run them"},
		{name: "MCP server that does not start", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "files__read"], "mcpServers": {"files": {"command": "/nonexistent/mcp-server"}}}`,
			opts:        agent.Options{MCP: mcp.NewManager(mcp.Config{MinBackoff: time.Hour})},
			wantWarning: "a/template.json: mcpServers.files: the MCP server is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{"a/template.json": {Data: []byte(tt.template)}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			agents, warnings, err := agent.LoadFS(ctx, fsys, ".", tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer agents.Close(context.Background())
			switch {
			case tt.wantWarning == "" && len(warnings) > 0:
				t.Errorf("warnings: %v", warnings)
			case tt.wantWarning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0].String(), tt.wantWarning)):
				t.Errorf("warnings = %v, want one saying %q", warnings, tt.wantWarning)
			}
			a, ok := agents.Get("a")
			if !ok {
				t.Fatal("no agent a")
			}
			for _, err := range a.Run(ctx, "session-1", agent.Text("[offline:echo] hi")) {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestLoadPathResolvesMCPServers loads a template from disk whose MCP
// server's command is a path relative to the template: Load runs it from
// there, whatever the working directory.
func TestLoadPathResolvesMCPServers(t *testing.T) {
	dir := t.TempDir()
	tmpl := `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "x__y"], "mcpServers": {"x": {"command": "/bin/sh", "args": ["./server.sh"]}}}`
	if err := os.WriteFile(filepath.Join(dir, "template.json"), []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not an MCP server: it says where it ran and exits, which the
	// manager reports in the server's error.
	if err := os.WriteFile(filepath.Join(dir, "server.sh"), []byte("echo ran-from-template-dir >&2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agents, warnings, err := agent.Load(context.Background(), filepath.Join(dir, "template.json"), agent.Options{MCP: mcp.NewManager(mcp.Config{MinBackoff: time.Hour})})
	if err != nil {
		t.Fatal(err)
	}
	defer agents.Close(context.Background())
	if len(warnings) != 1 || !strings.Contains(warnings[0].Message, "ran-from-template-dir") {
		t.Errorf("warnings = %v, want the server's own words", warnings)
	}
}

// Agents from a template in one call: its tools checked against those
// given (a misspelt node stops the start), the warnings for the caller to
// show, the template's MCP servers run when Options.MCP is given.
func ExampleLoad() {
	ctx := context.Background()
	fsys := fstest.MapFS{"forecaster/template.json": {Data: []byte(`{"agentId": "forecaster", "name": "Forecaster",
		"personality": "You report the weather.", "nodes": ["llm.openai", "weather"]}`)}}
	agents, warnings, err := agent.LoadFS(ctx, fsys, ".", agent.Options{Tools: []tools.Tool{weatherTool}})
	if err != nil {
		log.Fatal(err)
	}
	defer agents.Close(ctx)
	for _, w := range warnings {
		log.Print(w)
	}
	forecaster, _ := agents.Get("forecaster")
	for ev, err := range forecaster.Run(ctx, "session-1", agent.Text("What is the weather in Oslo?")) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Kind == chat.KindToolResult {
			fmt.Println(ev.ToolResult.Content)
		}
	}
	// Output:
	// sunny in Oslo
}
