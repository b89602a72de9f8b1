package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// TestEverythingStdio runs the reference server over stdio: its tools are
// offered under "<server>__<tool>" with the server's description and
// inputSchema unchanged, arguments are validated against that schema before
// the call, and each kind of result content is rendered.
func TestEverythingStdio(t *testing.T) {
	m, _ := newManager(t, mcpconfig.Servers{"everything": everythingServer(t)})
	st := statusOf(m, "everything")
	if st.State != StateReady {
		t.Fatalf("state %q: %s", st.State, st.Error)
	}
	// The npm server speaks up to 2025-11-25; the SDK tried 2026-07-28 first.
	if st.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol %q, want 2025-11-25", st.ProtocolVersion)
	}
	for _, want := range []string{"everything__echo", "everything__get-sum", "everything__trigger-long-running-operation"} {
		if !slices.Contains(st.Tools, want) {
			t.Errorf("tools %v lack %s", st.Tools, want)
		}
	}
	ts := m.Toolbox(builtin(t), "agent", nil)

	specs := ts.Specs([]string{"everything__echo", "think", "everything__nope"})
	if len(specs) != 2 || specs[0].Name != "everything__echo" || specs[1].Name != "think" {
		t.Fatalf("specs %+v", specs)
	}
	if specs[0].Description != "Echoes back the input string" {
		t.Errorf("description %q", specs[0].Description)
	}
	var schema map[string]any
	if err := json.Unmarshal(specs[0].Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"$schema":    "http://json-schema.org/draft-07/schema#",
		"type":       "object",
		"properties": map[string]any{"message": map[string]any{"type": "string", "description": "Message to echo"}},
		"required":   []any{"message"},
	}
	if !reflect.DeepEqual(schema, want) {
		t.Errorf("schema %s, want the server's inputSchema unchanged", specs[0].Parameters)
	}

	if res := call(ts, "everything__echo", `{"message":"hello"}`); res.IsError || res.Content != "Echo: hello" {
		t.Errorf("echo: %+v", res)
	}
	// The registry validates against the MCP schema: the server never sees these.
	for args, msg := range map[string]string{
		`{"message": 3}`:            `field "message" must be string, got number`,
		`{}`:                        `missing required field "message"`,
		`{"message":"x","extra":1}`: ``, // the schema allows extra fields
	} {
		res := call(ts, "everything__echo", args)
		if msg == "" {
			if res.IsError {
				t.Errorf("%s: %+v", args, res)
			}
			continue
		}
		if !res.IsError || !res.NotRun || !strings.Contains(res.Content, msg) {
			t.Errorf("%s: %+v, want a not-run error containing %q", args, res, msg)
		}
	}
	if res := call(ts, "everything__get-sum", `{"a": 2, "b": 40}`); res.IsError || !strings.Contains(res.Content, "42") {
		t.Errorf("get-sum: %+v", res)
	}
	// structuredContent stays JSON (the text block is the same JSON).
	res := call(ts, "everything__get-structured-content", `{"location": "Chicago"}`)
	var weather map[string]any
	if res.IsError || res.Type != "json" || json.Unmarshal([]byte(res.Content), &weather) != nil || weather["temperature"] == nil {
		t.Errorf("structured: %+v", res)
	}
	if res := call(ts, "everything__get-tiny-image", `{}`); res.IsError || !strings.Contains(res.Content, "[image: image/png, ") {
		t.Errorf("image: %+v", res)
	}
	if res := call(ts, "everything__get-resource-links", `{"count": 2}`); res.IsError || strings.Count(res.Content, "[resource link: ") != 2 {
		t.Errorf("resource links: %+v", res)
	}
	if res := call(ts, "everything__get-resource-reference", `{"resourceType": "Text", "resourceId": 1}`); res.IsError || !strings.Contains(res.Content, "[resource: <demo://resource/") {
		t.Errorf("embedded resource: %+v", res)
	}
	// isError from the server is an error result, and the tool did run.
	res = call(ts, "everything__simulate-research-query", `{"topic": "x"}`)
	if !res.IsError || res.NotRun || !strings.Contains(res.Content, "task augmentation") {
		t.Errorf("isError: %+v", res)
	}
	if why, no := ts.Unavailable("everything__echo"); no {
		t.Errorf("echo unavailable: %s", why)
	}
	if _, no := ts.Unavailable("think"); no {
		t.Error("a built-in tool is unavailable")
	}
}

// TestListChangedFromServer: the everything server registers more tools
// right after the handshake and announces them with
// notifications/tools/list_changed; the tool set follows.
func TestListChangedFromServer(t *testing.T) {
	m, _ := newManager(t, mcpconfig.Servers{"everything": everythingServer(t)})
	ts := m.Toolbox(builtin(t), "a", nil)
	s := ts.servers["everything"]
	waitFor(t, "the list_changed refresh", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lists >= 2
	})
	if _, no := ts.Unavailable("everything__simulate-research-query"); no {
		t.Errorf("the tool registered after the handshake is not available: %v", statusOf(m, "everything").Tools)
	}
}

// TestEverythingStreamableHTTP runs the same server over streamable HTTP,
// with a header expanded from the environment.
func TestEverythingStreamableHTTP(t *testing.T) {
	url, _ := startEverythingHTTP(t)
	m, _ := newManager(t, mcpconfig.Servers{"web": {URL: "${EVERYTHING_URL}", Headers: map[string]string{"X-Token": "${TOKEN:-dev}"}}}, func(c *Config) {
		c.LookupEnv = func(k string) (string, bool) {
			if k == "EVERYTHING_URL" {
				return url, true
			}
			return "", false
		}
	})
	st := statusOf(m, "web")
	if st.State != StateReady || st.Transport != mcpconfig.TransportHTTP {
		t.Fatalf("status %+v", st)
	}
	ts := m.Toolbox(builtin(t), "a", nil)
	if res := call(ts, "web__echo", `{"message":"over http"}`); res.IsError || res.Content != "Echo: over http" {
		t.Errorf("echo: %+v", res)
	}
}

// TestFilesystemStdio: the filesystem server, in a temp dir.
func TestFilesystemStdio(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("first line\nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := newManager(t, mcpconfig.Servers{"fs": filesystemServer(t, dir)})
	ts := m.Toolbox(builtin(t), "a", nil)
	if st := statusOf(m, "fs"); st.State != StateReady || !slices.Contains(st.Tools, "fs__read_text_file") {
		t.Fatalf("status %+v", st)
	}
	res := call(ts, "fs__read_text_file", `{"path": "`+filepath.Join(dir, "notes.txt")+`"}`)
	if res.IsError || !strings.Contains(res.Content, "second line") {
		t.Errorf("read: %+v", res)
	}
	// Its structuredContent ({"content": the text}) adds nothing: the
	// model reads the file once.
	if n := strings.Count(res.Content, "second line"); n != 1 {
		t.Errorf("the file's text reaches the model %d times: %q", n, res.Content)
	}
	res = call(ts, "fs__write_file", `{"path": "`+filepath.Join(dir, "out.txt")+`", "content": "written by a tool"}`)
	if res.IsError {
		t.Fatalf("write: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "written by a tool" {
		t.Errorf("out.txt = %q", b)
	}
	// Outside the allowed directory: the server's own error, as an error result.
	res = call(ts, "fs__read_text_file", `{"path": "/etc/hostname"}`)
	if !res.IsError || res.NotRun || !strings.Contains(strings.ToLower(res.Content), "access denied") {
		t.Errorf("outside: %+v", res)
	}
}

// TestKilledMidCall: the server dies during a call; the call gets an error
// result, its tools are unavailable until the restart, and it comes back.
func TestKilledMidCall(t *testing.T) {
	m, _ := newManager(t, mcpconfig.Servers{"everything": everythingServer(t)})
	ts := m.Toolbox(builtin(t), "a", nil)
	s := ts.servers["everything"]
	s.mu.Lock()
	pgid := s.pgid
	s.mu.Unlock()
	results := make(chan chat.ToolResult, 1)
	go func() {
		results <- call(ts, "everything__trigger-long-running-operation", `{"duration": 10, "steps": 10}`)
	}()
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-results:
		if !res.IsError || res.NotRun || !strings.Contains(res.Content, `the MCP server "everything" failed during the call`) {
			t.Errorf("result of the interrupted call: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end when its server died")
	}
	if why, no := ts.Unavailable("everything__echo"); no && !strings.Contains(why, `MCP server "everything" is not running (`) {
		t.Errorf("reason: %s", why)
	}
	waitFor(t, "the restart", func() bool {
		st := statusOf(m, "everything")
		return st.State == StateReady && st.Restarts == 1
	})
	s.mu.Lock()
	newPgid := s.pgid
	s.mu.Unlock()
	if newPgid == pgid || alive(pgid) {
		t.Errorf("process group %d after the restart (before: %d, still alive: %v)", newPgid, pgid, alive(pgid))
	}
	if res := call(ts, "everything__echo", `{"message":"back"}`); res.IsError {
		t.Errorf("after the restart: %+v", res)
	}
}

// TestToolTimeout: a hung call is cancelled at the tool timeout; the server
// stays up.
func TestToolTimeout(t *testing.T) {
	m, _ := newManager(t, mcpconfig.Servers{"everything": everythingServer(t)}, func(c *Config) { c.Timeout = 300 * time.Millisecond })
	ts := m.Toolbox(builtin(t), "a", nil)
	res := call(ts, "everything__trigger-long-running-operation", `{"duration": 30, "steps": 3}`)
	if !res.IsError || !strings.Contains(res.Content, "timed out after 300ms") {
		t.Errorf("result %+v", res)
	}
	if st := statusOf(m, "everything"); st.State != StateReady || st.Restarts != 0 {
		t.Errorf("status after a timeout: %+v", st)
	}
	if res := call(ts, "everything__echo", `{"message":"still here"}`); res.IsError {
		t.Errorf("after the timeout: %+v", res)
	}
}

// TestTurnCancelled: a call carries the turn's context; cancelling the turn
// ends the call at once.
func TestTurnCancelled(t *testing.T) {
	m, _ := newManager(t, mcpconfig.Servers{"everything": everythingServer(t)})
	ts := m.Toolbox(builtin(t), "a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res := ts.Execute(ctx, chat.ToolCall{ID: "c", Name: "everything__trigger-long-running-operation", Arguments: json.RawMessage(`{"duration": 30}`)})
	if !res.IsError || !strings.Contains(res.Content, "was cancelled") {
		t.Errorf("result %+v", res)
	}
}

// TestCloseEndsEveryProcess: a server started through a shell (as npx
// does) has its whole process group ended by Close.
func TestCloseEndsEveryProcess(t *testing.T) {
	srv := everythingServer(t)
	wrapped := mcpconfig.Server{Command: "/bin/sh", Args: []string{"-c", `"$0" "$@"; exit $?`, srv.Command, srv.Args[0], srv.Args[1]}}
	m := NewManager(Config{MinBackoff: 50 * time.Millisecond})
	if err := m.Add("", mcpconfig.Servers{"wrapped": wrapped}); err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(m, "wrapped"); st.State != StateReady {
		t.Fatalf("status %+v", st)
	}
	s := m.servers[0]
	s.mu.Lock()
	pgid := s.pgid
	s.mu.Unlock()
	pids := groupPIDs(t, pgid)
	if len(pids) < 2 {
		t.Fatalf("the shell and node should both run in group %d, found %v", pgid, pids)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d outlived Close", pid)
		}
	}
	if st := statusOf(m, "wrapped"); st.State != StateStopped {
		t.Errorf("state after Close: %q", st.State)
	}
}

// TestFailures: a server whose ${VAR} is not set is never started; one
// whose command does not exist is retried; both say why.
func TestFailures(t *testing.T) {
	m, _ := newManager(t, mcpconfig.Servers{
		"secret":  {Command: "true", Env: map[string]string{"TOKEN": "${AGENTDOCK_TEST_UNSET_VAR}"}},
		"missing": {Command: "/nonexistent/mcp-server"},
	}, func(c *Config) { c.LookupEnv = func(string) (string, bool) { return "", false } })
	st := statusOf(m, "secret")
	if st.State != StateFailed || !strings.Contains(st.Error, "mcpServers.secret.env.TOKEN: ${AGENTDOCK_TEST_UNSET_VAR} is not set") {
		t.Errorf("secret: %+v", st)
	}
	waitFor(t, "a retry", func() bool { return statusOf(m, "missing").Restarts >= 2 })
	st = statusOf(m, "missing")
	if st.State == StateReady || !strings.Contains(st.Error, "/nonexistent/mcp-server") {
		t.Errorf("missing: %+v", st)
	}
	ts := m.Toolbox(builtin(t), "a", nil)
	why, no := ts.Unavailable("missing__anything")
	if !no || !strings.Contains(why, `tool "missing__anything" is not available now: MCP server "missing" is not running (`) {
		t.Errorf("reason %q", why)
	}
	res := call(ts, "secret__x", `{}`)
	if !res.IsError || !res.NotRun || !strings.Contains(res.Content, `MCP server "secret" is not running (failed: configuration: mcpServers.secret.env.TOKEN`) {
		t.Errorf("call: %+v", res)
	}
	if specs := ts.Specs([]string{"missing__anything", "think"}); len(specs) != 1 {
		t.Errorf("specs %+v", specs)
	}
}

// sdkServer serves an MCP server made with the official Go SDK over
// streamable HTTP: tools can be added and removed while it runs, which the
// npm servers cannot do.
func sdkServer(t *testing.T, stateless bool) (*sdk.Server, string) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "go-sdk-server", Version: "1"}, nil)
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: stateless})
	hs := httptest.NewServer(handler)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func greet(_ context.Context, _ *sdk.CallToolRequest, a greetArgs) (*sdk.CallToolResult, any, error) {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello " + a.Name}}}, nil, nil
}

// TestToolRemoved: a tool the server removes (list_changed) is no longer
// offered, and a call to it is refused with a clear message; names that
// break the providers' rule are reported and skipped.
func TestToolRemoved(t *testing.T) {
	srv, url := sdkServer(t, false)
	sdk.AddTool(srv, &sdk.Tool{Name: "greet", Description: "Greets."}, greet)
	sdk.AddTool(srv, &sdk.Tool{Name: "bye", Description: "Says goodbye."}, greet)
	sdk.AddTool(srv, &sdk.Tool{Name: "bad.name", Description: "A dotted name."}, greet)
	m, _ := newManager(t, mcpconfig.Servers{"go": {URL: url}})
	st := statusOf(m, "go")
	if st.State != StateReady || !reflect.DeepEqual(st.Tools, []string{"go__bye", "go__greet"}) {
		t.Fatalf("status %+v", st)
	}
	if len(st.Skipped) != 1 || st.Skipped[0].Name != "bad.name" || !strings.Contains(st.Skipped[0].Reason, `"go__bad.name" breaks the providers' tool name rule`) {
		t.Errorf("skipped %+v", st.Skipped)
	}
	ts := m.Toolbox(builtin(t), "a", []string{"go__greet", "go__bye", "go__gone", "think"})
	if res := call(ts, "go__greet", `{"name":"Ada"}`); res.IsError || res.Content != "hello Ada" {
		t.Errorf("greet: %+v", res)
	}
	if ms := ts.Status()[0].MissingTools; !reflect.DeepEqual(ms, []string{"go__gone"}) {
		t.Errorf("missing tools %v", ms)
	}
	srv.RemoveTools("bye")
	waitFor(t, "the removal", func() bool { _, no := ts.Unavailable("go__bye"); return no })
	why, _ := ts.Unavailable("go__bye")
	if why != `tool "go__bye" is not available now: MCP server "go" no longer lists a tool "bye"` {
		t.Errorf("reason %q", why)
	}
	res := call(ts, "go__bye", `{"name":"Ada"}`)
	if !res.IsError || !res.NotRun || res.Content != why {
		t.Errorf("call to a removed tool: %+v", res)
	}
	if specs := ts.Specs([]string{"go__greet", "go__bye"}); len(specs) != 1 || specs[0].Name != "go__greet" {
		t.Errorf("specs %+v", specs)
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "bye", Description: "Says goodbye again."}, greet)
	waitFor(t, "the new tool", func() bool { _, no := ts.Unavailable("go__bye"); return !no })
}

// TestNewestProtocol: with a server that speaks 2026-07-28 (the Go SDK's,
// stateless), that revision is used; the npm servers get 2025-11-25 (see
// TestEverythingStdio).
func TestNewestProtocol(t *testing.T) {
	srv, url := sdkServer(t, true)
	sdk.AddTool(srv, &sdk.Tool{Name: "greet", Description: "Greets."}, greet)
	m, _ := newManager(t, mcpconfig.Servers{"go": {URL: url}})
	st := statusOf(m, "go")
	if st.State != StateReady || st.ProtocolVersion != "2026-07-28" {
		t.Fatalf("status %+v", st)
	}
	ts := m.Toolbox(builtin(t), "a", nil)
	if res := call(ts, "go__greet", `{"name":"Bo"}`); res.IsError || res.Content != "hello Bo" {
		t.Errorf("greet: %+v", res)
	}
}

// TestScopes: a template's own servers serve that agent only, and may not
// take a server-wide name.
func TestScopes(t *testing.T) {
	_, url := sdkServer(t, false)
	m, _ := newManager(t, mcpconfig.Servers{"shared": {URL: url}})
	if err := m.Add("agent-a", mcpconfig.Servers{"own": {URL: url}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("agent-b", mcpconfig.Servers{"shared": {URL: url}}); err == nil || !strings.Contains(err.Error(), "has the name of a server-wide MCP server") {
		t.Errorf("err %v", err)
	}
	a, b := m.Toolbox(builtin(t), "agent-a", nil), m.Toolbox(builtin(t), "agent-b", nil)
	if len(a.Status()) != 2 || len(b.Status()) != 1 {
		t.Errorf("a sees %d servers, b %d", len(a.Status()), len(b.Status()))
	}
	if _, no := b.Unavailable("own__greet"); !no {
		t.Error("agent-b may use agent-a's server")
	}
	// With its nodes, an agent gets the server-wide servers it names only.
	if sts := m.Toolbox(builtin(t), "agent-a", []string{"own__greet", "think"}).Status(); len(sts) != 1 || sts[0].Name != "own" {
		t.Errorf("agent-a naming only its own server's tool sees %+v", sts)
	}
	if sts := m.Toolbox(builtin(t), "agent-c", []string{"think"}).Status(); len(sts) != 0 {
		t.Errorf("an agent naming no MCP tool sees %+v", sts)
	}
}
