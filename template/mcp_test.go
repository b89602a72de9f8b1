package template

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/orchestration"
)

// TestMCPServers: a template's own mcpServers are checked like
// MCP_SERVERS_FILE (by server and field); nodes naming their tools, or a
// server-wide server's, count as provided, so sequences and steps may use
// them.
func TestMCPServers(t *testing.T) {
	cfg := Config{Provided: []string{"think"}, MCPServers: []string{"github"}}
	good := `{"agentId": "t", "name": "T",
	  "nodes": ["llm.openai", "think", "files__read_file", "github__create_issue", "files__write_file"],
	  "mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]}},
	  "orchestration": {"steps": [
	    {"name": "Write", "conditions": [{"type": "message_contains", "value": "write"}],
	     "sequence": ["files__read_file", "files__write_file"], "availableTools": {"allowed": ["files__*"]}},
	    {"name": "Default", "isDefault": true, "availableTools": {"denied": ["files__write_file"]}}]}}`
	a, ds := Load("t.json", []byte(good), cfg)
	if a == nil || len(ds) > 0 {
		t.Fatalf("diagnostics: %v", ds)
	}
	if got := a.Engine.Tools(); !slices.Equal(got, []string{"think", "files__read_file", "github__create_issue", "files__write_file"}) {
		t.Errorf("agent tools %v", got)
	}
	var st orchestration.State
	st, _ = a.Engine.Apply(st, orchestration.UserMessage("please write it"))
	if got := a.Engine.Offer(st).Tools; !slices.Equal(got, []string{"files__read_file"}) {
		t.Errorf("offer %v", got)
	}
	// The field survives a round trip.
	out, err := json.Marshal(a.Template)
	if err != nil || !strings.Contains(string(out), `"mcpServers":{"files":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","."]}}`) {
		t.Errorf("round trip: %s %v", out, err)
	}

	tests := []struct {
		name string
		json string
		want []string // every diagnostic line
	}{
		{"unknown field and missing command", `{"agentId": "t", "name": "T", "nodes": ["a__x", "b__y"],
		  "mcpServers": {"a": {"command": "x", "enviroment": {}}, "b": {"args": ["y"]}}}`,
			[]string{
				"error: t.json: mcpServers.a.enviroment: unknown field (known: type, command, args, env, cwd, url, headers)",
				"error: t.json: mcpServers.b.command: required: the command that starts the server (stdio), or give a url (streamable HTTP) instead",
			}},
		{"bad url", `{"agentId": "t", "name": "T", "nodes": ["r__x"], "mcpServers": {"r": {"url": "localhost:3000/mcp"}}}`,
			[]string{`error: t.json: mcpServers.r.url: "localhost:3000/mcp": want an http:// or https:// URL`}},
		{"server-wide name taken", `{"agentId": "t", "name": "T", "nodes": ["github__x"], "mcpServers": {"github": {"command": "x"}}}`,
			[]string{"error: t.json: mcpServers.github: a server-wide MCP server (MCP_SERVERS_FILE) has this name; rename this one"}},
		{"server without nodes", `{"agentId": "t", "name": "T", "nodes": ["think"], "mcpServers": {"files": {"command": "x"}}}`,
			[]string{`warning: t.json: mcpServers.files: no node names a tool of this server (add "files__<tool>" to nodes); the agent cannot use it`}},
		{"pattern node", `{"agentId": "t", "name": "T", "nodes": ["github__*"]}`,
			[]string{`warning: t.json: nodes[0]: "github__*": nodes name MCP tools one by one, so that a tool a server adds later is not offered unnoticed; list them (agentdock mcp list prints them) and use patterns in a step's availableTools`}},
		{"unknown server", `{"agentId": "t", "name": "T", "nodes": ["gitlab__x"]}`,
			[]string{`warning: t.json: nodes[0]: tool "gitlab__x" is not provided by this runtime; it will not be offered to the model`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ds := Load("t.json", []byte(tt.json), cfg)
			var got []string
			for _, d := range ds {
				got = append(got, d.Severity.String()+": "+d.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("diagnostics:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}
