package agenttool_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
)

// A lead agent asks a probe agent, as a tool of its sequence, in one
// process: Direct runs the probe's turns, agenttool.New makes the lead's
// agent tools, and tools.Join puts them beside its other tools.
func ExampleDirect() {
	lead, _ := template.Load("lead.json", []byte(`{"agentId": "lead", "name": "Lead",
	  "nodes": ["llm.openai", "ask_probe", "critique"],
	  "agents": {"ask_probe": {"agent": "probe"}},
	  "orchestration": {"steps": [{"name": "Default", "isDefault": true, "sequence": ["ask_probe", "critique"]}]}}`), template.Config{Provided: tools.BuiltinNames()})
	probe, _ := template.Load("probe.json", []byte(`{"agentId": "probe", "name": "Probe", "description": "Thinks it over.", "nodes": ["llm.openai", "think"]}`),
		template.Config{Provided: tools.BuiltinNames()})
	builtin, _ := tools.Builtin(tools.BuiltinConfig{})
	runner := &agenttool.Direct{}
	agents, err := agent.NewSet(agent.Config{
		Store:  session.NewMemory(session.Config{}),
		Tools:  builtin,
		Models: agent.Model(offline.New(offline.Config{})),
		Logger: slog.New(slog.DiscardHandler),
		ToolsFor: func(l *template.Loaded) tools.Toolbox {
			tb, err := agenttool.New(agenttool.Config{Runner: runner}, l.Template)
			if err != nil {
				panic(err)
			}
			return tools.Join(builtin, tb)
		},
	}, []*template.Loaded{lead, probe})
	if err != nil {
		panic(err)
	}
	runner.Agents = agents
	node, _ := agents.Get("lead")
	heard := map[string]bool{}
	for ev, err := range node.Run(context.Background(), "lead-session-1", agent.Text("Think about why tea cools in a wide cup")) {
		if err != nil {
			panic(err)
		}
		switch ev.Kind {
		case chat.KindToolProgress:
			heard[ev.Progress.Agent] = true
		case chat.KindToolResult:
			fmt.Printf("%s answered (error: %v)\n", ev.ToolResult.Name, ev.ToolResult.IsError)
		}
	}
	sess, _ := agents.Store().Get(context.Background(), "lead-session-1")
	fmt.Println("heard from the probe:", heard["probe"])
	fmt.Println("recorded:", sess.State.RecentlyUsedTools.Slice())
	// Output:
	// ask_probe answered (error: false)
	// critique answered (error: false)
	// heard from the probe: true
	// recorded: [ask_probe critique]
}
