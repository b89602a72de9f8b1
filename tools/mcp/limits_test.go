package mcp

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// hostile is the stdio configuration of the hostile MCP server of the
// tests in the given mode.
func hostile(t *testing.T, args ...string) mcpconfig.Server {
	node, argv := testenv.HostileMCPServer(t, args...)
	return mcpconfig.Server{Command: node, Args: argv}
}

// TestToolListLimits: a server whose tools/list pages without end, loops on
// a cursor or lists too many tools keeps the tools read within the limits,
// stays ready, and is reported with the limit it is over.
func TestToolListLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		server    mcpconfig.Server
		tune      func(*Config)
		wantTools int
		wantLimit string
	}{
		{"endless cursor, tool limit", hostile(t, "endless-list"), nil, DefaultMaxTools, "it lists more than 1000 tools (MCP_MAX_TOOLS): the first 1000 were read"},
		{"endless cursor, page limit", hostile(t, "endless-list"), func(c *Config) { c.MaxToolPages = 5 }, 250, "its tool list goes on past 5 pages (MCP_MAX_TOOL_PAGES): the 250 tools of those pages were read"},
		{"looping cursor", hostile(t, "loop-list"), nil, 1, "its tool list pages in a loop (a cursor came back after 2 pages)"},
		{"too many on one page", hostile(t, "many-tools", "1500"), func(c *Config) { c.MaxTools = 100 }, 100, "it lists more than 100 tools (MCP_MAX_TOOLS)"},
		{"within the limits", hostile(t, "many-tools", "1000"), nil, 1000, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tune := []func(*Config){}
			if tc.tune != nil {
				tune = append(tune, tc.tune)
			}
			m, logs := newManager(t, mcpconfig.Servers{"h": tc.server}, tune...)
			st := statusOf(m, "h")
			if st.State != StateReady || len(st.Tools) != tc.wantTools {
				t.Fatalf("state %s (%s), %d tools; want ready with %d", st.State, st.Error, len(st.Tools), tc.wantTools)
			}
			if tc.wantLimit == "" {
				if len(st.Limits) > 0 {
					t.Errorf("limits %q for a server within them", st.Limits)
				}
				return
			}
			if len(st.Limits) != 1 || !strings.HasPrefix(st.Limits[0], tc.wantLimit) {
				t.Errorf("limits %q, want one starting %q", st.Limits, tc.wantLimit)
			}
			if !strings.Contains(logs.String(), `"msg":"MCP server over a limit"`) {
				t.Error("the log does not report the limit")
			}
		})
	}
}

// TestSchemaLimits: a 10 MB inputSchema is skipped with the reason; of
// ten 40 KB ones, an agent is offered those that fit in its schema budget,
// and the rest are skipped for that agent, reported, refused and never
// offered.
func TestSchemaLimits(t *testing.T) {
	t.Parallel()
	m, logs := newManager(t, mcpconfig.Servers{"h": hostile(t, "big-schema")})
	st := statusOf(m, "h")
	if st.State != StateReady {
		t.Fatalf("state %s: %s", st.State, st.Error)
	}
	if len(st.Skipped) != 1 || st.Skipped[0].Name != "huge" || !strings.Contains(st.Skipped[0].Reason, "over the limit of 64 KiB per tool (MCP_MAX_SCHEMA_BYTES)") {
		t.Errorf("skipped %+v, want huge over MCP_MAX_SCHEMA_BYTES", st.Skipped)
	}
	if len(st.Tools) != 11 {
		t.Errorf("the server offers %v, want the ten medium tools and small", st.Tools)
	}

	nodes := []string{"h__huge"}
	for i := range 10 {
		nodes = append(nodes, "h__medium"+string(rune('0'+i)))
	}
	nodes = append(nodes, "h__small")
	ts := m.Toolbox(builtin(t), "agent-1", nodes)
	names := ts.Names()
	var offered []string
	size := 0
	for _, spec := range ts.Specs(names) {
		if strings.HasPrefix(spec.Name, "h__") {
			offered = append(offered, spec.Name)
			size += len(spec.Parameters) + len(spec.Description)
		}
	}
	want := []string{"h__medium0", "h__medium1", "h__medium2", "h__medium3", "h__medium4", "h__medium5", "h__small"}
	if !slices.Equal(offered, want) {
		t.Errorf("offered %v, want %v", offered, want)
	}
	if size > DefaultMaxAgentSchemaBytes {
		t.Errorf("the offered schemas weigh %d bytes, over the agent's budget", size)
	}
	why, unavailable := ts.Unavailable("h__medium9")
	if !unavailable || !strings.Contains(why, "MCP_MAX_AGENT_SCHEMA_BYTES") {
		t.Errorf("Unavailable(h__medium9) = %q, %v", why, unavailable)
	}
	res := ts.Execute(context.Background(), chat.ToolCall{ID: "c", Name: "h__medium9", Arguments: []byte(`{}`)})
	if !res.IsError || !res.NotRun {
		t.Errorf("a tool over the budget ran: %+v", res)
	}
	var agentSkipped []string
	for _, st := range ts.Status() {
		for _, sk := range st.Skipped {
			agentSkipped = append(agentSkipped, sk.Name)
		}
		if slices.Contains(st.Tools, "h__medium9") {
			t.Error("the agent's status lists a tool over its budget among its tools")
		}
	}
	if !slices.Equal(agentSkipped, []string{"huge", "medium6", "medium7", "medium8", "medium9"}) {
		t.Errorf("the agent's skipped tools: %v", agentSkipped)
	}
	if !strings.Contains(logs.String(), `"msg":"MCP tool skipped for this agent"`) {
		t.Error("the log does not report the tools over the agent's budget")
	}
	// Another agent naming fewer tools has room for them all.
	if got := m.Toolbox(builtin(t), "agent-2", []string{"h__medium9", "h__small"}).Names(); !slices.Contains(got, "h__medium9") {
		t.Errorf("agent-2 is not offered h__medium9: %v", got)
	}
}

// TestResultLimits: a 15 MB text result and a 15 MB image reach the model
// cut to the call's limit with the note giving their size, and a failing
// tool's error names no absolute path of the server.
func TestResultLimits(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, mcpconfig.Servers{"h": hostile(t, "big-result")})
	ts := m.Toolbox(builtin(t), "agent-1", []string{"h__big", "h__image", "h__fail"})
	for _, tc := range []struct {
		tool, note string
		limit      int
	}{
		{"h__big", "[… 14.3 MiB cut to 64 KiB:", 0},
		{"h__big", "[… 14.3 MiB cut to 8 KiB:", 8 << 10},
		{"h__image", "[… 10.7 MiB cut to 64 KiB:", 0},
	} {
		ctx := tools.WithCall(context.Background(), tools.Call{ResultLimit: tc.limit})
		res := ts.Execute(ctx, chat.ToolCall{ID: "c", Name: tc.tool, Arguments: []byte(`{}`)})
		limit := tc.limit
		if limit == 0 {
			limit = tools.DefaultMaxResultBytes
		}
		if res.IsError || len(res.Content) > limit || !strings.Contains(res.Content, tc.note) {
			t.Errorf("%s: %d bytes (error %v) ending %q; want at most %d with %q", tc.tool, len(res.Content), res.IsError, res.Content[max(0, len(res.Content)-120):], limit, tc.note)
		}
	}
	res := call(ts, "h__fail", `{}`)
	if !res.IsError || strings.Contains(res.Content, testenv.ModuleRoot()) || !strings.Contains(res.Content, "…/data.json") {
		t.Errorf("error result %q: want the server's path hidden", res.Content)
	}
}

// TestRender: how each kind of content is read, and weighed against the
// limit, a block's data included.
func TestRender(t *testing.T) {
	img := &sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 3000)}
	tests := []struct {
		name     string
		res      *sdk.CallToolResult
		want     string // the whole content, or its start when note is set
		note     string
		wantType string
	}{
		{"text blocks joined", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb", "", ""},
		{"an image within the limit", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "see"}, img}}, "see\n[image: image/png, 3000 bytes]", "", ""},
		{"an image over the limit is weighed, not read", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "see"}, &sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 5000)}}}, "see", "[… 4.9 KiB cut to 4 KiB:", ""},
		{"an embedded resource weighs its text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///r", Text: strings.Repeat("r", 6000)}}}}, "", "[… 5.9 KiB cut to 4 KiB:", ""},
		{"long text cut", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("t", 10000)}}}, "tttt", "[… 9.8 KiB cut to 4 KiB:", ""},
		{"structured content once", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"a": 1}`}}, StructuredContent: map[string]any{"a": 1}}, `{"a":1}`, "", "json"},
		{"structured content after other text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "sum"}}, StructuredContent: map[string]any{"a": 1}}, "sum\n\n{\"a\":1}", "", ""},
		{"structured content alone", &sdk.CallToolResult{StructuredContent: map[string]any{"a": 1}}, `{"a":1}`, "", "json"},
		{"structured content that wraps the text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "line one\nline two"}},
			StructuredContent: map[string]any{"content": "line one\nline two"}}, "line one\nline two", "", ""},
		{"structured content that copies the blocks", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: []byte("png")}},
			StructuredContent: map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": "cG5n"}}}}, "[image: image/png, 3 bytes]", "", ""},
		{"structured content with a value the text lacks", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Sunny in Paris"}},
			StructuredContent: map[string]any{"city": "Paris", "celsius": 22}}, "Sunny in Paris\n\n{\"celsius\":22,\"city\":\"Paris\"}", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, typ := render(tc.res, 4096)
			if typ != tc.wantType {
				t.Errorf("type %q, want %q", typ, tc.wantType)
			}
			if len(got) > 4096 {
				t.Errorf("%d bytes, over the limit", len(got))
			}
			if tc.note == "" {
				if got != tc.want {
					t.Errorf("got %q, want %q", got, tc.want)
				}
				return
			}
			if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, tc.note) {
				t.Errorf("got %.60q…%q; want it to start %q and note %q", got, got[max(0, len(got)-100):], tc.want, tc.note)
			}
		})
	}
}

// daemons lists the live daemons of the hostile server started with
// marker.
func daemons(t *testing.T, marker string) []testenv.Process {
	var out []testenv.Process
	for _, p := range testenv.Processes(t) {
		if strings.Contains(p.Cmdline, "hostile-daemon") && strings.Contains(p.Cmdline, marker) {
			out = append(out, p)
		}
	}
	return out
}

// TestSetsidDescendantsEnd: a server started through a shell (as npx is)
// that starts a daemon in a session of its own: the daemon goes when the
// server dies and is restarted, and when the manager closes.
func TestSetsidDescendantsEnd(t *testing.T) {
	t.Parallel()
	marker := "agentdock-test-daemon-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	srv := hostile(t, "setsid", marker)
	wrapped := mcpconfig.Server{Command: "/bin/sh", Args: append([]string{"-c", `"$0" "$@"; exit $?`, srv.Command}, srv.Args...)}
	m, _ := newManager(t, mcpconfig.Servers{"daemonizing": wrapped})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var daemon testenv.Process
	waitFor(t, "the daemon", func() bool {
		ps := daemons(t, marker)
		if len(ps) == 1 {
			daemon = ps[0]
		}
		return len(ps) == 1
	})
	s := m.servers[0]
	s.mu.Lock()
	pgid := s.pgid
	s.mu.Unlock()
	if daemon.PGID == pgid {
		t.Fatalf("the daemon %+v is in the server's process group: the test proves nothing", daemon)
	}

	// The server dies: its daemon goes with it, and the restarted server
	// starts a new one.
	var server testenv.Process
	for _, p := range testenv.Processes(t) {
		if strings.Contains(p.Cmdline, "hostile/server.js setsid "+marker) && !strings.HasPrefix(p.Cmdline, "/bin/sh") && !strings.HasPrefix(p.Cmdline, "agentdock-mcp-supervisor") {
			server = p
		}
	}
	if server.PID == 0 {
		t.Fatal("the server's node process is not running")
	}
	if err := syscall.Kill(server.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old daemon to end", func() bool { return !alive(daemon.PID) })
	waitFor(t, "the restart", func() bool {
		st := statusOf(m, "daemonizing")
		return st.State == StateReady && st.Restarts == 1 && len(daemons(t, marker)) == 1
	})

	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for left := daemons(t, marker); len(left) > 0; left = daemons(t, marker) {
		if time.Now().After(deadline) {
			t.Fatalf("processes left 2 s after Close: %+v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
