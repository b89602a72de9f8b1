package faults

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The agents of the agent tools' fault test: the lead asks the probe
// (its default step's sequence), both on the mock model.
var agentToolTemplates = map[string]string{
	"lead": `{"agentId": "lead", "name": "Lead", "description": "Asks the probe.",
	  "nodes": ["llm.openai", "ask_probe"],
	  "nodeConfigurations": {"llm.openai": {"model": "mock-model"}},
	  "agents": {"ask_probe": {"agent": "probe", "description": "Ask the probe."}},
	  "orchestration": {"stepScope": "turn", "steps": [{"name": "Default", "isDefault": true, "sequence": ["ask_probe"]}]}}`,
	"probe": `{"agentId": "probe", "name": "Probe", "description": "Answers at length.",
	  "nodes": ["llm.openai", "think"], "nodeConfigurations": {"llm.openai": {"model": "mock-model"}}}`,
}

// TestAgentToolParentKilled: the replica running a lead's turn is
// SIGKILLed while the probe the lead asked streams its answer (the probe's
// turn runs on the same replica, and dies with it). The client resumes
// the lead's stream on the other replica, which takes the lead over; the
// lead's call runs again there and follows the probe's turn instead of
// starting another: that turn is taken over too (its model call made
// again), and its answer is the lead's result. The probe's session has one
// user message and one answer, and the lead's, one call of ask_probe.
func TestAgentToolParentKilled(t *testing.T) {
	m := newModel(t)
	dir := t.TempDir()
	for id, tmpl := range agentToolTemplates {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, "template.json"), []byte(tmpl), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms", "SESSION_LOCK_TTL=2s", "TEMPLATES_DIR="+dir)
	a, b := startServer(t, env...), startServer(t, env...)

	// The lead's call, the probe's long answer (cut by the kill), the
	// probe's answer made again after its takeover, the lead's answer.
	m.Enqueue(
		mockllm.ToolScript(mockllm.ToolCall{ID: "call_ask", Name: "ask_probe", Arguments: `{"message":"explain it at length"}`}),
		paced(300, 20*time.Millisecond),
		mockllm.TextScript("The probe's ", "answer, made again."),
		mockllm.TextScript("The lead's ", "answer."),
	)
	sid := session.NewID()
	s := chat(t, a.URL(), "lead", sid, "ask the probe")
	var seen []frame
	for {
		f, err := s.Next(15 * time.Second)
		if err != nil {
			t.Fatalf("before the kill: %v; frames %s", err, dataOf(seen))
		}
		seen = append(seen, f)
		if f.Type() == "data-agent" && strings.Contains(f.Data, `"type":"text-delta"`) && strings.Count(dataOf(seen), `"text-delta"`) >= 5 {
			break
		}
	}
	time.Sleep(300 * time.Millisecond) // A copies its frames to the shared log every 100 ms
	a.Kill()

	r := resume(t, b.URL(), sid, seen[len(seen)-1].ID)
	rest := r.All(60 * time.Second)
	all := append(slices.Clone(seen), rest...)
	if requireEnd(t, all) != "stop" || len(errorTexts(all)) > 0 {
		t.Fatalf("the lead's turn after the kill: %s", dataOf(rest))
	}
	if !slices.ContainsFunc(rest, func(f frame) bool { return f.Type() == "data-restart" }) {
		t.Fatalf("B did not take the lead's turn over: %s", dataOf(rest))
	}
	var result string
	for _, f := range rest {
		if f.Type() == "tool-output-available" {
			var c struct{ Output struct{ Content string } }
			_ = json.Unmarshal([]byte(f.Data), &c)
			result = c.Output.Content
		}
	}
	if result != "The probe's answer, made again." {
		t.Fatalf("the lead's ask_probe result after the takeover: %q; want the probe's answer made again on B\n%s", result, dataOf(rest))
	}
	if answerOf(all) != "The lead's answer." {
		t.Errorf("the client shows %q", answerOf(all))
	}

	lead := requireConsistent(t, b.URL(), sid)
	calls := 0
	for _, msg := range lead.Messages {
		for _, c := range msg.ToolCalls {
			if c.Name == "ask_probe" {
				calls++
			}
		}
	}
	if calls != 1 || !slices.Equal(lead.State.RecentlyUsedTools.Slice(), []string{"ask_probe"}) {
		t.Fatalf("the lead's history has %d ask_probe calls, recent %v; want the one call, recorded once", calls, lead.State.RecentlyUsedTools.Slice())
	}
	probe := requireConsistent(t, b.URL(), session.ChildID("", sid, "ask_probe", "probe"))
	var users, answers int
	for _, msg := range probe.Messages {
		switch msg.Role {
		case adchat.RoleUser:
			users++
		case adchat.RoleAssistant:
			answers++
		}
	}
	if users != 1 || answers != 1 || probe.Messages[len(probe.Messages)-1].Content != result || probe.Turn == nil || probe.Turn.Running {
		raw, _ := json.Marshal(probe)
		t.Fatalf("the probe's session after the takeover: %s\nwant one question, one answer (the one made again), its turn ended", raw)
	}
}
