package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// mcpAgent uses the tools of three MCP servers: "local" (the npm
// everything server over stdio, started by agentdock), "web" (the same
// server over streamable HTTP, started by the test) and "gone" (a command
// that cannot start). Compute's sequence runs an echo on one transport,
// then a sum on the other; get-env is denied everywhere.
const mcpAgentTemplate = `{
  "agentId": "mcp",
  "name": "MCP",
  "description": "The MCP tests' agent.",
  "nodes": ["llm.openai", "think", "local__echo", "local__get-env", "local__trigger-long-running-operation",
            "web__echo", "web__get-sum", "gone__echo"],
  "nodeConfigurations": {"llm.openai": {"model": "mock-model"}},
  "options": {"maxSteps": 4},
  "orchestration": {"steps": [
    {"name": "Compute", "conditions": [{"type": "message_contains", "value": "compute"}],
     "sequence": ["local__echo", "web__get-sum"],
     "availableTools": {"allowed": ["local__*", "web__*", "gone__*"], "denied": ["local__get-env"]}},
    {"name": "Slow", "conditions": [{"type": "message_contains", "value": "slow"}],
     "availableTools": {"allowed": ["local__trigger-long-running-operation"]}},
    {"name": "Chat", "isDefault": true, "availableTools": {"denied": ["*get-env"]}}
  ]}
}`

// mcpServer is one server as GET /api/agents/:id reports it.
type mcpServer struct {
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Error    string   `json:"error"`
	Restarts int      `json:"restarts"`
	Tools    []string `json:"tools"`
	Protocol string   `json:"protocolVersion"`
	Skipped  []string `json:"skipped"`
	Limits   []string `json:"limits"`
}

func agentServers(t *testing.T, base string) map[string]mcpServer {
	t.Helper()
	return agentServersOf(t, base, "mcp")
}

// agentServersOf is agentServers of another agent.
func agentServersOf(t *testing.T, base, agent string) map[string]mcpServer {
	t.Helper()
	res, err := http.Get(base + "/api/agents/" + agent)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v struct {
		MCPServers []mcpServer `json:"mcpServers"`
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	out := map[string]mcpServer{}
	for _, s := range v.MCPServers {
		out[s.Name] = s
	}
	return out
}

func waitServers(t *testing.T, base, what string, cond func(map[string]mcpServer) bool) map[string]mcpServer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := agentServers(t, base)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startEverythingHTTP runs the npm everything server over streamable HTTP.
func startEverythingHTTP(t *testing.T, node, modules string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, filepath.Join(modules, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		}
		if time.Now().After(deadline) {
			t.Fatal("the everything server did not listen over HTTP")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listSchemas asks the server directly (the same SDK, no agentdock) for its
// tools' input schemas.
func listSchemas(t *testing.T, url string) map[string]any {
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool.InputSchema
	}
	return out
}

// childrenOf lists the live processes whose parent is pid, by their
// command lines.
func childrenOf(t *testing.T, pid int) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, p := range testenv.Processes(t) {
		if p.PPID == pid {
			out[p.PID] = p.Cmdline
		}
	}
	return out
}

// stdioServerPID is the pid of agentdock's child running the local server.
func stdioServerPID(t *testing.T, p *serverProc) int {
	t.Helper()
	for pid, cmd := range childrenOf(t, p.cmd.Process.Pid) {
		if strings.Contains(cmd, "server-everything") && strings.Contains(cmd, " stdio") {
			return pid
		}
	}
	t.Fatal("no stdio MCP server among agentdock's children")
	return 0
}

func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) == 0 || fields[0] == "Z"
}

func toolFrames(frames []frame, typ string) []frame {
	var out []frame
	for _, f := range frames {
		if f.Type() == typ {
			out = append(out, f)
		}
	}
	return out
}

// TestMCPToolsThroughServe: turns through `agentdock serve` with a model
// scripted over HTTP call MCP tools in a step's sequence over both
// transports; the offered tools carry the servers' input schemas; a denied
// MCP tool and a dead server's tools are never offered; a server killed in
// the middle of a call gives an error result and is restarted; SIGTERM ends
// every child process.
func TestMCPToolsThroughServe(t *testing.T) {
	node, modules := testenv.MCPServers(t)
	webURL := startEverythingHTTP(t, node, modules)
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"local": map[string]any{"command": node, "args": []string{filepath.Join(modules, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}},
		"web":   map[string]any{"url": "${MCP_WEB_URL}"},
		"gone":  map[string]any{"command": node, "args": []string{filepath.Join(dir, "no-such-server.js")}},
	}})
	cfgFile := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	tdir := filepath.Join(dir, "templates")
	if err := os.MkdirAll(filepath.Join(tdir, "mcp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tdir, "mcp", "template.json"), []byte(mcpAgentTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	m := newModel(t)
	p := startServer(t, append(modelEnv(m), "MCP_SERVERS_FILE="+cfgFile, "MCP_WEB_URL="+webURL, "TEMPLATES_DIR="+tdir)...)
	servers := waitServers(t, p.URL(), "local and web ready", func(s map[string]mcpServer) bool {
		return s["local"].State == "ready" && s["web"].State == "ready" && s["gone"].State == "restarting"
	})
	if servers["web"].Protocol != "2025-11-25" || !slices.Contains(servers["web"].Tools, "web__get-sum") {
		t.Errorf("web: %+v", servers["web"])
	}
	// The dead server is reported in the log and in the agents list too.
	if !strings.Contains(p.Log(), `"msg":"MCP server unavailable; its tools are not offered until it is back","mcp_server":"gone"`) {
		t.Error("the log does not report the server that cannot start")
	}
	res, err := http.Get(p.URL() + "/api/agents")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Agents []struct {
			ID         string      `json:"id"`
			MCPServers []mcpServer `json:"mcpServers"`
		} `json:"agents"`
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list.Agents {
		if a.ID == "mcp" && (len(a.MCPServers) != 3 || a.MCPServers[0].Name != "gone" || a.MCPServers[0].Error == "") {
			t.Errorf("/api/agents: %+v", a.MCPServers)
		}
		if a.ID != "mcp" && len(a.MCPServers) != 0 {
			t.Errorf("/api/agents: agent %s, which names no MCP tool, lists %+v", a.ID, a.MCPServers)
		}
	}

	// Turn 1: the sequence local__echo -> web__get-sum. The model also tries
	// the denied get-env, which is refused and never run.
	m.Enqueue(
		mockllm.ToolScript(mockllm.ToolCall{ID: "c1", Name: "local__get-env", Arguments: `{}`}, mockllm.ToolCall{ID: "c2", Name: "local__echo", Arguments: `{"message":"hi"}`}),
		mockllm.ToolScript(mockllm.ToolCall{ID: "c3", Name: "web__get-sum", Arguments: `{"a": 2, "b": 40}`}),
		mockllm.TextScript("The sum is 42."),
	)
	frames := chat(t, p.URL(), "mcp", "mcp-session-1", "please compute").All(30 * time.Second)
	if reason := requireEnd(t, frames); reason != "stop" {
		t.Errorf("finish %q: %s", reason, dataOf(frames))
	}
	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if got := reqs[0].ToolNames(); !slices.Equal(got, []string{"local__echo"}) {
		t.Errorf("first call offered %v, want the sequence's first tool", got)
	}
	if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"web__get-sum"}) {
		t.Errorf("second call offered %v, want the sequence's second tool", got)
	}
	// The offered tools carry the MCP input schemas, as the server lists them.
	direct := listSchemas(t, webURL)
	for i, name := range []string{"echo", "get-sum"} {
		var got any
		if err := json.Unmarshal(reqs[i].Tools[0].Parameters, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, direct[name]) {
			t.Errorf("%s: offered parameters %s, the server's inputSchema is %v", name, reqs[i].Tools[0].Parameters, direct[name])
		}
	}
	outputs := toolFrames(frames, "tool-output-available")
	if len(outputs) != 2 || !strings.Contains(outputs[0].Data, "Echo: hi") || !strings.Contains(outputs[1].Data, `"content":"The sum of 2 and 40 is 42."`) {
		t.Errorf("tool outputs: %s", dataOf(outputs))
	}
	refusals := toolFrames(frames, "tool-output-error")
	if len(refusals) != 1 || !strings.Contains(refusals[0].Data, `tool \"local__get-env\" is not available in step \"Compute\"`) {
		t.Errorf("refusal: %s", dataOf(refusals))
	}
	view, _, _ := getSession(t, p.URL(), "mcp-session-1")
	if !view.State.RecentlyUsedTools.Equal("local__echo", "web__get-sum") {
		t.Errorf("recently used %v", view.State.RecentlyUsedTools)
	}

	// Turn 2: the stdio server is killed in the middle of a call.
	m.Enqueue(
		mockllm.ToolScript(mockllm.ToolCall{ID: "s1", Name: "local__trigger-long-running-operation", Arguments: `{"duration": 30, "steps": 30}`}),
		mockllm.TextScript("It broke."),
	)
	pid := stdioServerPID(t, p)
	st := chat(t, p.URL(), "mcp", "mcp-session-2", "go slow")
	head := st.Until("tool-input-available", 30*time.Second)
	time.Sleep(300 * time.Millisecond) // the call reaches the server
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	frames = append(head, st.All(30*time.Second)...)
	requireEnd(t, frames)
	errs := toolFrames(frames, "tool-output-error")
	if len(errs) != 1 || !strings.Contains(errs[0].Data, `the MCP server \"local\" failed during the call`) {
		t.Errorf("the interrupted call: %s", dataOf(frames))
	}
	servers = waitServers(t, p.URL(), "local restarted", func(s map[string]mcpServer) bool {
		return s["local"].State == "ready" && s["local"].Restarts >= 1
	})
	if newPID := stdioServerPID(t, p); newPID == pid {
		t.Errorf("the restarted server has the old pid %d", pid)
	}

	// Turn 3: while local is down, none of its tools is offered; Compute's
	// first position (local__echo) falls back to the step's runnable tools.
	if err := syscall.Kill(stdioServerPID(t, p), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitServers(t, p.URL(), "local down", func(s map[string]mcpServer) bool { return s["local"].State != "ready" })
	before := len(m.Requests())
	m.Enqueue(mockllm.TextScript("Nothing to run."))
	frames = chat(t, p.URL(), "mcp", "mcp-session-3", "compute again").All(30 * time.Second)
	requireEnd(t, frames)
	offered := m.Requests()[before].ToolNames()
	if !slices.Equal(offered, []string{"web__echo", "web__get-sum"}) {
		t.Errorf("offered while local is down: %v, want web's tools only", offered)
	}
	var warned bool
	for _, f := range frames {
		warned = warned || strings.Contains(f.Data, "none of the tools at sequence position 1 (local__echo) can run now")
	}
	if !warned {
		t.Errorf("no warning about the sequence position: %s", dataOf(frames))
	}
	for i, req := range m.Requests() {
		for _, name := range req.ToolNames() {
			if strings.Contains(name, "get-env") || strings.HasPrefix(name, "gone__") {
				t.Errorf("request %d offered %s", i, name)
			}
		}
	}
	waitServers(t, p.URL(), "local back", func(s map[string]mcpServer) bool { return s["local"].State == "ready" })

	// SIGTERM: every child process ends with the server.
	children := childrenOf(t, p.cmd.Process.Pid)
	if len(children) == 0 {
		t.Fatal("agentdock has no child process")
	}
	p.Stop()
	for pid, cmd := range children {
		if !processGone(pid) {
			t.Errorf("child %d (%s) outlived agentdock serve", pid, cmd)
		}
	}
}
