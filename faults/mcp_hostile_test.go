package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// The hostile MCP server tests (issue 41): what an MCP server sends must
// not fill the runtime's memory, a session or a model request, and no
// process it starts may outlive the runtime. Each runs the real binary
// with the hostile server of tools/mcp/testdata/hostile.

// mcpSetup writes an MCP servers file of the hostile server in each
// given mode, and a template "hostile" whose nodes are tools; it returns
// the environment that serves them.
func mcpSetup(t *testing.T, servers map[string][]string, tools ...string) []string {
	t.Helper()
	node, script := testenv.HostileMCPServer(t)
	dir := t.TempDir()
	conf := map[string]any{}
	for name, args := range servers {
		conf[name] = map[string]any{"command": node, "args": append(script, args...)}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": conf})
	file := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, _ := json.Marshal(append([]string{"llm.openai"}, tools...))
	tmpl := `{"agentId": "hostile", "name": "Hostile", "description": "Uses hostile MCP servers.",
  "nodes": ` + string(nodes) + `, "nodeConfigurations": {"llm.openai": {"model": "mock-model"}}, "options": {"maxSteps": 4}}`
	tdir := filepath.Join(dir, "templates")
	if err := os.MkdirAll(filepath.Join(tdir, "hostile"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tdir, "hostile", "template.json"), []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"MCP_SERVERS_FILE=" + file, "TEMPLATES_DIR=" + tdir}
}

// memory reads a process's resident set and its peak (VmRSS, VmHWM) in
// bytes.
func memory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		testenv.Missing(t, "the memory of a process is read from /proc: "+err.Error())
	}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}

const mib = 1 << 20

// TestMCPBigResults: six 15 MB MCP results in one answer. The runtime's
// resident memory stays under 200 MB over what it was before the turn,
// each result reaches the client and the model cut to MAX_TOOL_RESULT_BYTES
// with the note, the session stays under 1 MiB, and so do the model
// requests that follow, in the turn and in the next one.
func TestMCPBigResults(t *testing.T) {
	m := newModel(t)
	env := append(modelEnv(m), mcpSetup(t, map[string][]string{"big": {"big-result", "15000000"}}, "big__big")...)
	srv := startServer(t, env...)
	const sid = "mcp-big-results-1"
	// A first turn, so that the baseline is a runtime that has served one.
	m.Enqueue(mockllm.TextScript("Ready."))
	if r := chat(t, srv.URL(), "hostile", sid, "hello").All(30 * time.Second); requireEnd(t, r) != "stop" {
		t.Fatalf("the first turn: %s", dataOf(r))
	}
	baseline, _ := memory(t, srv.cmd.Process.Pid)

	calls := make([]mockllm.ToolCall, 6)
	for i := range calls {
		calls[i] = mockllm.ToolCall{ID: fmt.Sprintf("big_%d", i), Name: "big__big", Arguments: `{}`}
	}
	before := len(m.Requests())
	m.Enqueue(mockllm.Script{ToolCalls: calls}, mockllm.TextScript("That was a lot."))
	frames := chat(t, srv.URL(), "hostile", sid, "fetch it six times").All(2 * time.Minute)
	if reason := requireEnd(t, frames); reason != "stop" {
		t.Fatalf("finish %q: %s", reason, errorTexts(frames))
	}
	_, peak := memory(t, srv.cmd.Process.Pid)
	t.Logf("resident memory: %d MiB before the turn, peak %d MiB", baseline/mib, peak/mib)
	if peak-baseline > 200*mib {
		t.Errorf("resident memory peaked at %d MiB, %d MiB over the %d MiB before the turn; want under 200 MiB over", peak/mib, (peak-baseline)/mib, baseline/mib)
	}
	outputs := toolFrames(frames, "tool-output-available")
	if len(outputs) != 6 {
		t.Fatalf("%d tool outputs, want 6", len(outputs))
	}
	for _, f := range outputs {
		if len(f.Data) > 70<<10 || !strings.Contains(f.Data, "14.3 MiB cut to 64 KiB") {
			t.Errorf("a tool output frame of %d bytes ending %q", len(f.Data), f.Data[max(0, len(f.Data)-200):])
		}
	}
	_, _, raw := getSession(t, srv.URL(), sid)
	t.Logf("the session is %d KiB", len(raw)>>10)
	if len(raw) > mib {
		t.Errorf("the session is %d bytes, want under 1 MiB", len(raw))
	}

	m.Enqueue(mockllm.TextScript("Next."))
	if r := chat(t, srv.URL(), "hostile", sid, "and now?").All(30 * time.Second); requireEnd(t, r) != "stop" {
		t.Fatalf("the next turn: %s", errorTexts(r))
	}
	// The calls, the answer, the next turn (and whatever else the runtime
	// asks a model, a summary of the history, say).
	reqs := m.Requests()[before:]
	if len(reqs) < 3 {
		t.Fatalf("%d model requests, want at least 3 (the calls, the answer, the next turn)", len(reqs))
	}
	for i, req := range reqs[1:] {
		t.Logf("model request %d: %d KiB", i+1, len(req.Body)>>10)
		if len(req.Body) > mib {
			t.Errorf("model request %d after the results is %d bytes, want under 1 MiB", i+1, len(req.Body))
		}
	}
}

// TestMCPHostileToolLists: a server whose tools/list pages without end and
// one with a 10 MB input schema. Both are reported with what was skipped
// (/api/agents, the log); the agent is offered what fits, in model
// requests under 1 MiB; and the runtime's peak memory stays under 100 MB
// over that of the same runtime with a tame server.
func TestMCPHostileToolLists(t *testing.T) {
	m := newModel(t)
	tame := startServer(t, append(modelEnv(m), mcpSetup(t, map[string][]string{"tame": {"many-tools", "5"}}, "tame__t0")...)...)
	env := append(modelEnv(m), mcpSetup(t, map[string][]string{
		"endless": {"endless-list"},
		"schema":  {"big-schema"},
	}, "endless__t1_0", "schema__huge", "schema__small", "schema__medium0")...)
	srv := startServer(t, env...)

	var servers map[string]mcpServer
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		servers = agentServersOf(t, srv.URL(), "hostile")
		if servers["endless"].State == "ready" && servers["schema"].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the servers did not get ready: %+v", servers)
		}
	}
	if e := servers["endless"]; len(e.Limits) != 1 || !strings.Contains(e.Limits[0], "MCP_MAX_TOOLS") || !slices.Contains(e.Tools, "endless__t1_0") {
		t.Errorf("endless: limits %q, tools %v", e.Limits, e.Tools)
	}
	if s := servers["schema"]; !slices.ContainsFunc(s.Skipped, func(sk string) bool {
		return strings.HasPrefix(sk, "huge: ") && strings.Contains(sk, "MCP_MAX_SCHEMA_BYTES")
	}) || slices.Contains(s.Tools, "schema__huge") || !slices.Contains(s.Tools, "schema__medium0") {
		t.Errorf("schema: skipped %q, tools %v", s.Skipped, s.Tools)
	}
	log := srv.Log()
	for _, want := range []string{`"msg":"MCP server over a limit","mcp_server":"endless"`, `"msg":"MCP tool skipped","mcp_server":"schema","tool":"huge"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s", want)
		}
	}

	before := len(m.Requests())
	m.Enqueue(mockllm.TextScript("Fine."))
	if r := chat(t, srv.URL(), "hostile", "mcp-lists-1", "hi").All(30 * time.Second); requireEnd(t, r) != "stop" {
		t.Fatalf("turn: %s", errorTexts(r))
	}
	req := m.Requests()[before]
	if names := req.ToolNames(); !slices.Equal(names, []string{"endless__t1_0", "schema__small", "schema__medium0"}) || len(req.Body) > mib {
		t.Errorf("the model was offered %v in a request of %d bytes", names, len(req.Body))
	}

	_, tamePeak := memory(t, tame.cmd.Process.Pid)
	_, peak := memory(t, srv.cmd.Process.Pid)
	t.Logf("peak resident memory: %d MiB, %d MiB with a tame server", peak/mib, tamePeak/mib)
	if peak-tamePeak > 100*mib {
		t.Errorf("peak resident memory %d MiB, %d MiB over the %d MiB of the runtime with a tame server; want under 100 MiB over", peak/mib, (peak-tamePeak)/mib, tamePeak/mib)
	}
}

// TestMCPServerTreeEndsWithTheRuntime: the runtime is SIGKILLed while a
// stdio server it started through `sh -c` (the npx pattern) runs, with a
// daemon the server started in a session of its own (setsid). Within 2 s
// no process of the server remains: not the shell, not the server, not
// the daemon (a walk of /proc).
func TestMCPServerTreeEndsWithTheRuntime(t *testing.T) {
	marker := "agentdock-faults-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	node, script := testenv.HostileMCPServer(t, "setsid", marker)
	dir := t.TempDir()
	conf, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"daemonizing": map[string]any{"command": "/bin/sh", "args": append([]string{"-c", `"$0" "$@"; exit $?`, node}, script...)},
	}})
	file := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(file, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "MCP_SERVERS_FILE="+file)
	marked := func() []testenv.Process {
		var out []testenv.Process
		for _, p := range testenv.Processes(t) {
			if strings.Contains(p.Cmdline, marker) {
				out = append(out, p)
			}
		}
		return out
	}
	var tree []testenv.Process
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tree = marked()
		if slices.ContainsFunc(tree, func(p testenv.Process) bool { return strings.Contains(p.Cmdline, "hostile-daemon") }) &&
			slices.ContainsFunc(tree, func(p testenv.Process) bool { return strings.HasPrefix(p.Cmdline, "/bin/sh -c") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server and its daemon did not start: %+v", tree)
		}
	}
	t.Logf("the server's processes: %+v", tree)

	srv.Kill()
	deadline := time.Now().Add(2 * time.Second)
	for left := marked(); len(left) > 0; left = marked() {
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the runtime was SIGKILLed these processes remain: %+v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
