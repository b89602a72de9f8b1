package agenttool_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
)

// A lead agent asks a probe agent, as a tool of its sequence, in one
// process: agent.Load makes the lead's agent tools (its "agents" entry)
// with this package, and, with no agenttool.Config.Runner in
// agent.Options.AgentTools, runs the probe's turns itself (agent.Direct).
// A server gives its turn runtime as the Runner instead.
func Example() {
	templates := fstest.MapFS{
		"lead/template.json": {Data: []byte(`{"agentId": "lead", "name": "Lead",
		  "nodes": ["llm.openai", "ask_probe", "critique"],
		  "agents": {"ask_probe": {"agent": "probe"}},
		  "orchestration": {"steps": [{"name": "Default", "isDefault": true, "sequence": ["ask_probe", "critique"]}]}}`)},
		"probe/template.json": {Data: []byte(`{"agentId": "probe", "name": "Probe", "description": "Thinks it over.", "nodes": ["llm.openai", "think"]}`)},
	}
	ctx := context.Background()
	agents, _, err := agent.LoadFS(ctx, templates, ".", agent.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	lead, _ := agents.Get("lead")
	heard := map[string]bool{}
	for ev, err := range lead.Run(ctx, "lead-session-1", agent.Text("Think about why tea cools in a wide cup")) {
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
	sess, _ := agents.Store().Get(ctx, "lead-session-1")
	fmt.Println("heard from the probe:", heard["probe"])
	fmt.Println("recorded:", sess.State.RecentlyUsedTools.Slice())
	// Output:
	// ask_probe answered (error: false)
	// critique answered (error: false)
	// heard from the probe: true
	// recorded: [ask_probe critique]
}
