package llmorch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/template"
)

// TestSystemPromptFromRealTemplate renders AgentDock's Cognitive Reasoner:
// every mode with its description, activation rule and sequence in the
// system prompt, the active step and the offered tools in the call's note,
// and never "undefined".
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
	in := llmorch.PromptInput{
		Personality: tpl.Personality,
		Guide:       tpl.Orchestration.Description,
		Steps:       tpl.Steps(),
		Snapshot: chat.Snapshot{ActiveStep: "EvaluationMode", SequenceIndex: 1,
			Sequence: []string{"critique", "debate", "reflect"}, OfferedTools: []string{"debate"}},
	}
	prompt, note := llmorch.SystemPrompt(in), llmorch.Note(in)
	for _, want := range []string{
		tpl.Personality[0],
		"Orchestration Guide:",
		"- ResearchMode: Research-based cognitive flow",
		"Activates when: the most recent tools used were search, think, reflect, in that order",
		"Sequence: critique -> debate -> reflect",
		"- DefaultMode (default): Default mode with all tools",
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
	for _, want := range []string{
		"Active step: EvaluationMode (sequence position 2 of 3: next debate)",
		"Tools you may use now: debate",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("the note lacks %q", want)
		}
		if strings.Contains(prompt, want) {
			t.Errorf("the system prompt has the call's %q", want)
		}
	}
	if strings.Contains(prompt+note, "undefined") {
		t.Errorf("the prompt says undefined:\n%s\n%s", prompt, note)
	}
}

// TestSystemPromptIsStable: the system prompt is the same whatever the
// call's step, sequence position, offer or budget, so that it stays in the
// provider's prompt cache; the note says what differs.
func TestSystemPromptIsStable(t *testing.T) {
	base := llmorch.PromptInput{Personality: []string{"You reason."}, Guide: []string{"Pick a mode."},
		Steps: []orchestration.Step{{Name: "A", Sequence: []orchestration.Group{{"x"}, {"y"}}}, {Name: "B", IsDefault: true}}}
	want := llmorch.SystemPrompt(base)
	notes := map[string]bool{}
	for _, in := range noteStates() {
		in.Personality, in.Guide, in.Steps = base.Personality, base.Guide, base.Steps
		if got := llmorch.SystemPrompt(in.PromptInput); got != want {
			t.Errorf("%s: the system prompt changed:\n%s\nwant\n%s", in.name, got, want)
		}
		notes[llmorch.Note(in.PromptInput)] = true
	}
	if len(notes) != len(noteStates()) {
		t.Errorf("%d distinct notes for %d states", len(notes), len(noteStates()))
	}
}

type noteState struct {
	name string
	llmorch.PromptInput
	want string
}

func noteStates() []noteState {
	return []noteState{
		{"no tools", llmorch.PromptInput{}, "No tools may be used now."},
		{"final answer", llmorch.PromptInput{FinalAnswer: true, Snapshot: chat.Snapshot{OfferedTools: []string{"x"}}}, "answer now, without tools"},
		{"sequence complete", llmorch.PromptInput{Snapshot: chat.Snapshot{ActiveStep: "S", SequenceIndex: 2, Sequence: []string{"a", "b|c"}}}, "Active step: S (sequence complete)"},
		{"group", llmorch.PromptInput{Snapshot: chat.Snapshot{ActiveStep: "S", SequenceIndex: 1, Sequence: []string{"a", "b|c"}}}, "next b or c"},
		{"offered", llmorch.PromptInput{Snapshot: chat.Snapshot{ActiveStep: "S", OfferedTools: []string{"a", "b"}}}, "Tools you may use now: a, b"},
	}
}

func TestNoteStates(t *testing.T) {
	for _, tt := range noteStates() {
		if got := llmorch.Note(tt.PromptInput); !strings.Contains(got, tt.want) {
			t.Errorf("%s: note lacks %q:\n%s", tt.name, tt.want, got)
		}
	}
}
