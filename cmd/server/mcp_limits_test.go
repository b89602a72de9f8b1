package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/internal/testenv"
)

// TestMCPListLimits: `agentdock mcp list` reports a server over a limit
// (an endless tool list) and a tool skipped for its schema (10 MB), and
// reads the limits from the environment.
func TestMCPListLimits(t *testing.T) {
	node, script := testenv.HostileMCPServer(t)
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"endless": map[string]any{"command": node, "args": append(script, "endless-list")},
		"schema":  map[string]any{"command": node, "args": append(script, "big-schema")},
	}})
	file := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(file, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_MAX_TOOLS", "120")
	code, out := run("mcp", "list", "--config", file, "--timeout", "20s")
	if code != 0 {
		t.Errorf("exit %d, want 0 (both servers are ready):\n%.2000s", code, out)
	}
	for _, want := range []string{
		"endless (stdio, server-wide): ready, protocol 2025-11-25, 120 tools\n",
		"  over a limit: it lists more than 120 tools (MCP_MAX_TOOLS): the first 120 were read, the rest are skipped\n",
		"  skipped huge: its inputSchema and description are 10.4 MiB, over the limit of 64 KiB per tool (MCP_MAX_SCHEMA_BYTES)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%.3000s", want, out)
		}
	}
}
