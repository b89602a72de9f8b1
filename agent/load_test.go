package agent_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/templates"
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

// searchTool stands in for the built-in search.
var searchTool = tools.MustNew("search", "Searches my own index.", func(ctx context.Context, in struct {
	Query string `json:"query"`
}) (string, error) {
	return "my index says: " + in.Query, nil
})

// TestLoad: what Load makes of a template and the Options, the rules that
// agentdock serve loads its agents by too: a slip is an error naming
// the path, the field and what was meant; what runs nonetheless is a
// warning.
func TestLoad(t *testing.T) {
	for _, tt := range []struct {
		name string
		// files are the templates, by path (a/template.json when one).
		template string
		files    map[string]string
		opts     agent.Options
		// wantErr is part of Load's error ("" for none); wantWarnings
		// are parts of its warnings, one each and in order; wantLog is
		// part of what it logged; wantAgents the agents it made.
		wantErr      string
		wantWarnings []string
		wantLog      string
		wantAgents   []string
		// ask, when set, is a message to agent a whose turn must run
		// the named tool, with this result.
		ask, tool, result string
	}{
		{name: "zero options", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"]}`},
		{name: "built-in tools without options", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "think", "search"]}`},
		{name: "a tool", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "weather"]}`,
			opts: agent.Options{Tools: []tools.Tool{weatherTool}},
			ask:  "What is the weather in Oslo?", tool: "weather", result: "sunny in Oslo"},
		{name: "a tool replaces the built-in of its name", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "search"]}`,
			opts: agent.Options{Tools: []tools.Tool{searchTool}},
			ask:  "Search for the tides", tool: "search", result: "my index says: "},
		{name: "misspelt tool", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "wether"]}`,
			opts:    agent.Options{Tools: []tools.Tool{weatherTool}},
			wantErr: `a/template.json: nodes[1]: tool "wether" is not provided; did you mean "weather"? (provided: brainstorm, compare, critique, debate, reflect, search, think, weather)`},
		{name: "misspelt built-in", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "thnik"]}`,
			wantErr: `a/template.json: nodes[1]: tool "thnik" is not provided; did you mean "think"?`},
		{name: "a tool nobody provides", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "weather"]}`,
			wantWarnings: []string{`a/template.json: nodes[1]: tool "weather" is not provided by this runtime; it will not be offered to the model`}},
		{name: "a tool no template names", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"]}`,
			opts:    agent.Options{Tools: []tools.Tool{weatherTool}},
			wantLog: `msg="a tool given to the agents is named by no template's nodes, so no agent is offered it" tool=weather`},
		{name: "tool twice", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"]}`,
			opts:    agent.Options{Tools: []tools.Tool{weatherTool, weatherTool}},
			wantErr: "agent: Options.Tools: "},
		{name: "invalid template", template: `{"agentId": "a", "nodes": ["llm.openai"]}`,
			wantErr: "a/template.json: name: required"},
		{name: "unknown key", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai"], "chatSetings": {}}`,
			wantWarnings: []string{`a/template.json: chatSetings: unknown key`}},
		{name: "mcpServers without MCP", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "files__read"], "mcpServers": {"files": {"command": "true"}}}`,
			wantErr: "a/template.json: mcpServers: no Options.MCP to run them"},
		{name: "MCP server that does not start", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "files__read"], "mcpServers": {"files": {"command": "/nonexistent/mcp-server"}}}`,
			opts:         agent.Options{MCP: mcp.NewManager(mcp.Config{MinBackoff: time.Hour})},
			wantWarnings: []string{"a/template.json: mcpServers.files: the MCP server is"}},
		{name: "agent tools run in this process", files: map[string]string{
			"a/template.json": `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "ask_b"], "agents": {"ask_b": {"agent": "b"}}}`,
			"b/template.json": `{"agentId": "b", "name": "B", "nodes": ["llm.openai"]}`},
			wantAgents: []string{"a", "b"},
			ask:        "Ask b, please", tool: "ask_b", result: "offline"},
		{name: "agent tool asking an agent not loaded", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "ask_b"], "agents": {"ask_b": {"agent": "b"}}}`,
			wantErr: `a/template.json: agents.ask_b.agent: no agent "b" is loaded`},
		{name: "two templates with one agentId", files: map[string]string{
			"a/template.json": `{"agentId": "a", "name": "A", "nodes": ["llm.openai"]}`,
			"b/template.json": `{"agentId": "a", "name": "B", "nodes": ["llm.openai"]}`},
			wantErr: `b/template.json: agentId: "a" is already used by a/template.json`},
		{name: "SkipInvalid leaves out the templates at fault", files: map[string]string{
			"a/template.json": `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "thnik"]}`,
			"b/template.json": `{"agentId": "b", "name": "B", "nodes": ["llm.openai", "ask_a"], "agents": {"ask_a": {"agent": "a"}}}`,
			"c/template.json": `{"agentId": "c", "name": "C", "nodes": ["llm.openai", "think"], "chatSetings": {}}`},
			opts: agent.Options{SkipInvalid: true},
			wantWarnings: []string{
				`a/template.json: nodes[1]: tool "thnik" is not provided; did you mean "think"?`,
				`c/template.json: chatSetings: unknown key`,
				`b/template.json: agents.ask_a.agent: no agent "a" is loaded (the agents: b, c)`},
			wantAgents: []string{"c"}},
		{name: "SkipInvalid with nothing left", template: `{"agentId": "a", "name": "A", "nodes": ["llm.openai", "thnik"]}`,
			opts: agent.Options{SkipInvalid: true}, wantErr: "agent: no template loaded"},
		{name: "a template replaces a shipped one", template: `{"agentId": "planner", "name": "My planner", "nodes": ["llm.openai"]}`,
			opts:       agent.Options{Shipped: templates.FS()},
			wantLog:    `msg="template replaces a shipped one" agent=planner file=a/template.json replaced=planner/template.json`,
			wantAgents: []string{"cognitive-reasoner", "planner", "research-assistant", "research-lead"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			if tt.template != "" {
				fsys["a/template.json"] = &fstest.MapFile{Data: []byte(tt.template)}
			}
			for p, src := range tt.files {
				fsys[p] = &fstest.MapFile{Data: []byte(src)}
			}
			var logs strings.Builder
			tt.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			agents, diags, err := agent.LoadFS(ctx, fsys, ".", tt.opts)
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
			if len(diags) != len(tt.wantWarnings) {
				t.Errorf("diagnostics = %v, want %d", diags, len(tt.wantWarnings))
			}
			for i, want := range tt.wantWarnings {
				if i < len(diags) && !strings.Contains(diags[i].String(), want) {
					t.Errorf("diagnostics[%d] = %s, want one saying %q", i, diags[i], want)
				}
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("the log lacks %q:\n%s", tt.wantLog, logs.String())
			}
			var ids []string
			for _, a := range agents.List() {
				ids = append(ids, a.ID())
			}
			slices.Sort(ids)
			want := tt.wantAgents
			if want == nil {
				want = []string{"a"}
			}
			if !slices.Equal(ids, want) {
				t.Errorf("agents %v, want %v", ids, want)
			}
			a, ok := agents.Get(ids[0])
			if !ok {
				t.Fatal("no agent")
			}
			msg := cmp.Or(tt.ask, "[offline:echo] hi")
			var results []chat.ToolResult
			for ev, err := range a.Run(ctx, "session-1", agent.Text(msg)) {
				if err != nil {
					t.Fatal(err)
				}
				if ev.Kind == chat.KindToolResult {
					results = append(results, *ev.ToolResult)
				}
			}
			if tt.tool != "" && (len(results) == 0 || results[0].Name != tt.tool || results[0].IsError || !strings.Contains(results[0].Content, tt.result)) {
				t.Errorf("results %+v, want %s saying %q", results, tt.tool, tt.result)
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
// given and the built-in ones (a misspelt node stops the start), the
// warnings for the caller to show, the template's MCP servers run when
// Options.MCP is given.
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

// The templates that ship with agentdock (templates/) load with the zero
// Options: the built-in tools (search answers that it has no backend
// until Options.Builtin gives one), the offline model, a memory store,
// and the Research Lead's agent tool asking the Research Assistant in
// this process.
func ExampleLoad_shipped() {
	ctx := context.Background()
	agents, warnings, err := agent.Load(ctx, "../templates", agent.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer agents.Close(ctx)
	fmt.Println("warnings:", len(warnings))
	for _, a := range agents.List() {
		fmt.Printf("%s (%s): %v\n", a.ID(), a.ModelInfo().Provider, a.Template().Tools())
	}
	// Output:
	// warnings: 0
	// cognitive-reasoner (offline): [search think reflect compare critique brainstorm debate]
	// research-assistant (offline): [search think reflect compare critique]
	// research-lead (offline): [ask_researcher critique reflect]
	// planner (offline): [think brainstorm compare critique reflect search]
}
