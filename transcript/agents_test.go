package transcript

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAgentTools plays an agent whose default step's sequence is [ask_probe,
// critique] with the probe scripted too: the probe's search waits for
// approval, which holds the lead's call; the lead's next turns answer it
// (approved, then denied), the probe goes on, its answer is the lead's
// tool result, and critique follows.
func TestAgentTools(t *testing.T) {
	rep := runFile(t, "testdata/agents/approval.json")
	if rep.Failed() {
		var b strings.Builder
		rep.Print(&b)
		t.Fatalf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
	}
	second := rep.Turns[1]
	k := slices.IndexFunc(second.Results, func(o ToolOutcome) bool { return o.Result.Name == "ask_probe" })
	if k < 0 || second.Results[k].Result.Content != "Green tea has caffeine (one source)." {
		t.Errorf("the lead's ask_probe result: %+v, want the probe's answer", second.Results)
	}
	if len(second.Agents) != 1 || second.Agents[0].Agent != "probe" || second.Agents[0].Text != "Green tea has caffeine (one source)." {
		t.Errorf("the probe's report: %+v", second.Agents)
	}
}

// TestAgentToolsMismatch: an expectation of an asked agent that does not
// hold, and a call of an asked agent the turn does not script, are the
// turn's mismatches, naming the agent.
func TestAgentToolsMismatch(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"lead.json", "probe.json"} {
		data, err := os.ReadFile(filepath.Join("testdata/agents", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "t.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"template": "lead.json", "agents": ["probe.json"], "turns": [
	  {"user": "Look into tea",
	   "model": [{"toolCalls": [{"name": "ask_probe", "arguments": {"message": "tea"}}]}, {"toolCalls": [{"name": "critique", "arguments": {"subject": "s", "analysis": "a"}}]}, {"text": "done"}],
	   "agents": {"probe": {"model": [{"text": "Tea."}], "expect": {"offered": [["think"]], "finishReason": "approval"}}}}]}`)
	got := runFile(t, file).Mismatches()
	want := []string{
		`turn 1 ("Look into tea"), agent probe, model call 1 of 1: offered: expected [think], got [search, think]`,
		`turn 1 ("Look into tea"), agent probe, after model call 1 of 1: finishReason: expected approval, got stop`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("mismatches:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	write(`{"template": "lead.json", "agents": ["probe.json"], "turns": [
	  {"user": "Look into tea",
	   "model": [{"toolCalls": [{"name": "ask_probe", "arguments": {"message": "tea"}}]}, {"toolCalls": [{"name": "critique", "arguments": {"subject": "s", "analysis": "a"}}]}, {"text": "done"}]}]}`)
	got = runFile(t, file).Mismatches()
	if len(got) == 0 || !strings.Contains(got[0], "agent probe, model call 1 of 1: model: expected no model call 1 (the transcript scripts 0 answers)") {
		t.Errorf("an unscripted asked agent: %q", got)
	}

	// Agents that ask one another in a circle do not play.
	if err := os.WriteFile(filepath.Join(dir, "probe.json"), []byte(`{"agentId": "probe", "name": "Probe", "nodes": ["ask_lead"], "agents": {"ask_lead": {"agent": "lead"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), tr); err == nil || !strings.Contains(err.Error(), "the cycle lead -> probe -> lead") {
		t.Errorf("a circle of agents: %v", err)
	}
}
