package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/internal/testenv"
)

// mcpFixture writes an MCP servers file with the npm everything server and
// a server that cannot start, and a template whose own filesystem server
// serves a temp dir; it returns the file and the templates directory.
func mcpFixture(t *testing.T) (file, templates string) {
	node, modules := testenv.MCPServers(t)
	dir := t.TempDir()
	js := func(pkg string) string {
		return filepath.Join(modules, "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": node, "args": []string{js("server-everything"), "stdio"}},
		"broken":     map[string]any{"command": filepath.Join(dir, "no-such-server")},
	}})
	file = filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(file, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	templates = filepath.Join(dir, "templates")
	tpl, _ := json.Marshal(map[string]any{
		"agentId": "files", "name": "Files",
		"nodes":      []string{"llm.openai", "fs__read_text_file", "fs__no_such_tool", "everything__echo"},
		"mcpServers": map[string]any{"fs": map[string]any{"command": node, "args": []string{js("server-filesystem"), dir}}},
	})
	if err := os.MkdirAll(filepath.Join(templates, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(templates, "files", "template.json"), tpl, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, templates
}

// TestMCPList: `agentdock mcp list` prints each server, its state and its
// tools under their final names; exit 1 when one is not ready.
func TestMCPList(t *testing.T) {
	file, templates := mcpFixture(t)
	code, out := run("mcp", "list", "--config", file, "--templates", templates, "--timeout", "20s")
	if code != 1 {
		t.Errorf("exit %d, want 1 (a server is not ready)", code)
	}
	for _, want := range []string{
		"broken (stdio, server-wide): restarting: connecting: ",
		"everything (stdio, server-wide): ready, protocol 2025-11-25, ",
		"\n  everything__echo\n",
		"\n  everything__trigger-long-running-operation\n",
		"fs (stdio, template files): ready, protocol 2025-11-25, ",
		"\n  fs__read_text_file\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestValidateMCP: validate starts the servers and reports, as warnings, a
// server that does not start and a node naming a tool its server does not
// list; a bad servers file is an error naming the server and the field.
func TestValidateMCP(t *testing.T) {
	file, templates := mcpFixture(t)
	code, out := run("validate", "--mcp-config", file, templates)
	if code != 0 {
		t.Errorf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		`warning: MCP_SERVERS_FILE: mcpServers.broken: the MCP server is not running (restarting), so its tools are not offered: connecting: `,
		`warning: ` + filepath.Join(templates, "files", "template.json") + `: nodes: "fs__no_such_tool": MCP server "fs" does not list this tool; it lists fs__create_directory, `,
		"1 templates: 0 errors, 2 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "everything__echo") {
		t.Errorf("a node of a server-wide server counted as missing:\n%s", out)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"mcpServers": {"x": {"comand": "node"}, "y": {"url": "ftp://h"}}}`), 0o644)
	code, out = run("validate", "--mcp-config", bad, "--no-mcp", templates)
	if code != 1 || !strings.Contains(out, "mcpServers.x.comand: unknown field") || !strings.Contains(out, `mcpServers.y.url: "ftp://h": want an http:// or https:// URL`) {
		t.Errorf("bad file: exit %d:\n%s", code, out)
	}
}

// TestMCPDocsExample: the first example of docs/mcp.md, as written
// (npx, and a relative "./workspace" beside the template), with its
// commands: mcp list starts the server, serve --templates-dir serves the
// agent, and asked to read todo.txt it reads the file through the
// server, whatever the runtime's working directory. npx runs from the test
// servers' directory, which has the package installed, so that it needs
// no network.
func TestMCPDocsExample(t *testing.T) {
	_, modules := testenv.MCPServers(t)
	if _, err := exec.LookPath("npx"); err != nil {
		testenv.Missing(t, "npx is not installed (docs/mcp.md's example runs the filesystem server with it)")
	}
	raw, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(), "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, rest, ok := strings.Cut(doc, "## A first example: notes in a folder\n")
	_, rest, ok2 := strings.Cut(rest, "```json\n")
	example, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 || !strings.Contains(example, `"./workspace"`) {
		t.Fatalf("docs/mcp.md has no first example with ./workspace:\n%s", example)
	}
	for _, cmd := range []string{
		`mkdir -p agents/notes/workspace && echo "Buy milk. Call the plumber." > agents/notes/workspace/todo.txt`,
		"bin/agentdock mcp list --templates agents ", "bin/agentdock serve --templates-dir agents ",
		`curl -sN localhost:8080/api/chat/notes -H 'content-type: application/json' -d '{"message":"Read the file todo.txt"}'`,
	} {
		if !strings.Contains(doc, cmd) {
			t.Fatalf("docs/mcp.md's example no longer runs %q", cmd)
		}
	}
	agents := t.TempDir()
	dir := filepath.Join(agents, "notes")
	if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "template.json"), []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "workspace", "todo.txt"), []byte("Buy milk. Call the plumber.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(modules))
	code, out := run("mcp", "list", "--templates", agents, "--timeout", "20s")
	if code != 0 || !strings.Contains(out, "files (stdio, template notes): ready") || !strings.Contains(out, "\n  files__read_text_file\n") {
		t.Fatalf("mcp list of the docs' example exited %d:\n%s", code, out)
	}

	clearConfigEnv(t)
	t.Setenv("TEMPLATES_DIR", agents)
	base, logs := serveForTest(t)
	msgs := chatTurn(t, base, "notes", "Read the file todo.txt")
	read := false
	for _, m := range msgs {
		read = read || m.Role == "tool" && !m.IsError && strings.Contains(m.Content, "Buy milk. Call the plumber.")
	}
	if !read {
		t.Fatalf("the agent did not read todo.txt through the server: %+v\n%s", msgs, logs)
	}
}
