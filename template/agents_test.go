package template

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/orchestration"
)

// TestAgents: a template's agents entries are tools its nodes name, each
// asking an agent of the server or a remote A2A agent; every mistake is an
// error naming the entry, and an agent that names itself does not load.
func TestAgents(t *testing.T) {
	cfg := Config{Provided: []string{"critique", "think"}}
	good := `{"agentId": "lead", "name": "Lead",
	  "nodes": ["llm.openai", "critique", "ask_probe", "ask_remote"],
	  "agents": {
	    "ask_probe": {"agent": "probe", "description": "Ask the probe."},
	    "ask_remote": {"a2a": "https://agents.example.com/a2a/planner", "headers": {"Authorization": "Bearer ${PLANNER_KEY}"}}
	  },
	  "orchestration": {"steps": [{"name": "Default", "isDefault": true, "sequence": ["ask_probe", "critique"]}]}}`
	a, ds := Load("lead.json", []byte(good), cfg)
	if a == nil || len(ds) > 0 {
		t.Fatalf("diagnostics: %v", ds)
	}
	var st orchestration.State
	st, _ = a.Engine.Apply(st, orchestration.UserMessage("hello"))
	if got := a.Engine.Offer(st).Tools; !slices.Equal(got, []string{"ask_probe"}) {
		t.Errorf("first offer %v, want [ask_probe]", got)
	}
	st, _ = a.Engine.Apply(st, orchestration.ToolUsed("ask_probe"))
	if got := a.Engine.Offer(st).Tools; !slices.Equal(got, []string{"critique"}) {
		t.Errorf("second offer %v, want [critique]", got)
	}
	out, err := json.Marshal(a.Template)
	if err != nil || !strings.Contains(string(out), `"agents":{"ask_probe":{"agent":"probe","description":"Ask the probe."}`) {
		t.Errorf("round trip: %s %v", out, err)
	}

	tests := []struct {
		name, json string
		want       []string
	}{
		{"itself", `{"agentId": "lead", "name": "L", "nodes": ["ask_me"], "agents": {"ask_me": {"agent": "lead"}}}`,
			[]string{`error: t.json: agents.ask_me.agent: the cycle lead -> lead: "lead" is this agent, and an agent that asks itself never ends`}},
		{"none", `{"agentId": "lead", "name": "L", "nodes": ["ask"], "agents": {"ask": {"description": "x"}}}`,
			[]string{`error: t.json: agents.ask: names no agent: give "agent" (the ID of another agent of this server) or "a2a" (a remote agent's A2A URL)`}},
		{"both", `{"agentId": "lead", "name": "L", "nodes": ["ask"], "agents": {"ask": {"agent": "p", "a2a": "https://x.example/a2a/p"}}}`,
			[]string{`error: t.json: agents.ask: gives both "agent" and "a2a": an agent tool asks one agent`}},
		{"misspelt key", `{"agentId": "lead", "name": "L", "nodes": ["ask"], "agents": {"ask": {"a2a": "https://x.example/a2a/p", "header": {}}}}`,
			[]string{`error: t.json: agents.ask.header: unknown key; did you mean "headers"?`}},
		{"bad url", `{"agentId": "lead", "name": "L", "nodes": ["ask"], "agents": {"ask": {"a2a": "ftp://x.example/p"}}}`,
			[]string{`error: t.json: agents.ask.a2a: "ftp://x.example/p": want an http:// or https:// URL`}},
		{"credentials in url", `{"agentId": "lead", "name": "L", "nodes": ["ask"], "agents": {"ask": {"a2a": "https://me:pw@x.example/p"}}}`,
			[]string{`error: t.json: agents.ask.a2a: "https://me:pw@x.example/p" carries credentials; put them in headers`}},
		{"headers of a local agent", `{"agentId": "lead", "name": "L", "nodes": ["ask"], "agents": {"ask": {"agent": "p", "headers": {"X": "y"}}}}`,
			[]string{`error: t.json: agents.ask.headers: headers go to a remote agent (a2a); an agent of this server is asked directly`}},
		{"name of a tool", `{"agentId": "lead", "name": "L", "nodes": ["think"], "agents": {"think": {"agent": "p"}}}`,
			[]string{`error: t.json: agents.think: a tool of the runtime is called "think"; give the agent tool another name`}},
		{"bad name", `{"agentId": "lead", "name": "L", "agents": {"ask me": {"agent": "p"}}}`,
			[]string{`error: t.json: agents.ask me: "ask me" is not a valid tool name: want 1 to 64 letters, digits, '_' or '-'`,
				`warning: t.json: agents.ask me: no node names this tool (add "ask me" to nodes); the agent cannot use it`}},
		{"no node", `{"agentId": "lead", "name": "L", "nodes": ["think"], "agents": {"ask": {"agent": "p"}}}`,
			[]string{`warning: t.json: agents.ask: no node names this tool (add "ask" to nodes); the agent cannot use it`}},
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

// TestCheckAgents: across the templates a server runs, a local agent tool
// names a loaded agent, and agents that ask one another in a circle are
// errors that name the circle, at each entry of it; a diamond is no
// cycle, and remote agents are not followed.
func TestCheckAgents(t *testing.T) {
	tmpl := func(id string, agents map[string]string) *Loaded {
		tt := &Template{AgentID: id, Name: id, Agents: map[string]AgentTool{}}
		for tool, to := range agents {
			if strings.HasPrefix(to, "https://") {
				tt.Agents[tool] = AgentTool{A2A: to}
			} else {
				tt.Agents[tool] = AgentTool{Agent: to}
			}
			tt.Nodes = append(tt.Nodes, tool)
		}
		return &Loaded{File: id + ".json", Template: tt}
	}
	lines := func(ds orchestration.Diagnostics) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Severity.String()+": "+d.String())
		}
		return out
	}
	tests := []struct {
		name   string
		loaded []*Loaded
		want   []string
	}{
		{"diamond", []*Loaded{
			tmpl("a", map[string]string{"ask_b": "b", "ask_c": "c"}), tmpl("b", map[string]string{"ask_d": "d"}),
			tmpl("c", map[string]string{"ask_d": "d"}), tmpl("d", map[string]string{"ask_far": "https://far.example/a2a/a"}),
		}, nil},
		{"unknown", []*Loaded{tmpl("a", map[string]string{"ask_x": "x"})},
			[]string{`error: a.json: agents.ask_x.agent: no agent "x" is loaded (the agents: a)`}},
		{"two", []*Loaded{tmpl("a", map[string]string{"ask_b": "b"}), tmpl("b", map[string]string{"ask_a": "a"})},
			[]string{
				"error: a.json: agents.ask_b.agent: the cycle a -> b -> a: agents that ask one another in a circle never end",
				"error: b.json: agents.ask_a.agent: the cycle a -> b -> a: agents that ask one another in a circle never end",
			}},
		{"three and two", []*Loaded{
			tmpl("a", map[string]string{"ask_b": "b"}), tmpl("b", map[string]string{"ask_c": "c"}),
			tmpl("c", map[string]string{"ask_a": "a", "ask_b": "b"}),
		}, []string{
			"error: a.json: agents.ask_b.agent: the cycle a -> b -> c -> a: agents that ask one another in a circle never end",
			"error: b.json: agents.ask_c.agent: the cycle a -> b -> c -> a: agents that ask one another in a circle never end",
			"error: c.json: agents.ask_a.agent: the cycle a -> b -> c -> a: agents that ask one another in a circle never end",
			"error: b.json: agents.ask_c.agent: the cycle b -> c -> b: agents that ask one another in a circle never end",
			"error: c.json: agents.ask_b.agent: the cycle b -> c -> b: agents that ask one another in a circle never end",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lines(CheckAgents(tt.loaded)); !slices.Equal(got, tt.want) {
				t.Errorf("diagnostics:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}
