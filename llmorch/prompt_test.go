package llmorch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/template"
)

// TestSystemPromptFromRealTemplate renders AgentDock's Cognitive Reasoner:
// every mode with its description, activation rule and sequence, the active
// step and the offered tools, and never "undefined".
func TestSystemPromptFromRealTemplate(t *testing.T) {
	file := filepath.Join(testenv.SharedDir(t), "fixtures", "agentdock-templates", "cognitive-reasoner", "template.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tpl, ds := template.Parse(file, data)
	if tpl == nil {
		t.Fatal(ds.Err())
	}
	prompt := llmorch.SystemPrompt(llmorch.PromptInput{
		Personality: tpl.Personality,
		Guide:       tpl.Orchestration.Description,
		Steps:       tpl.Steps(),
		Snapshot: chat.Snapshot{ActiveStep: "EvaluationMode", SequenceIndex: 1,
			Sequence: []string{"critique", "debate", "reflect"}, OfferedTools: []string{"debate"}},
	})
	for _, want := range []string{
		tpl.Personality[0],
		"Orchestration Guide:",
		"- ResearchMode: Research-based cognitive flow",
		"Activates when: the most recent tools used were search, think, reflect, in that order",
		"Sequence: critique -> debate -> reflect",
		"- DefaultMode (default): Default mode with all tools",
		"Active step: EvaluationMode (sequence position 2 of 3: next debate)",
		"Tools you may use now: debate",
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
	if strings.Contains(prompt, "undefined") {
		t.Errorf("the prompt says undefined:\n%s", prompt)
	}
}

func TestSystemPromptStates(t *testing.T) {
	tests := []struct {
		name string
		in   llmorch.PromptInput
		want string
	}{
		{"no tools", llmorch.PromptInput{}, "No tools may be used now."},
		{"final answer", llmorch.PromptInput{FinalAnswer: true, Snapshot: chat.Snapshot{OfferedTools: []string{"x"}}}, "answer now, without tools"},
		{"sequence complete", llmorch.PromptInput{Snapshot: chat.Snapshot{ActiveStep: "S", SequenceIndex: 2, Sequence: []string{"a", "b|c"}}}, "Active step: S (sequence complete)"},
		{"group", llmorch.PromptInput{Snapshot: chat.Snapshot{ActiveStep: "S", SequenceIndex: 1, Sequence: []string{"a", "b|c"}}}, "next b or c"},
	}
	for _, tt := range tests {
		if got := llmorch.SystemPrompt(tt.in); !strings.Contains(got, tt.want) {
			t.Errorf("%s: prompt lacks %q:\n%s", tt.name, tt.want, got)
		}
	}
}
