package orchestration

import (
	"strings"
	"testing"
)

func TestNeedsApproval(t *testing.T) {
	spec := &Spec{Steps: []Step{
		{Name: "Write", Conditions: []Condition{{Type: CondMessageContains, Value: "write"}}, RequireApproval: []string{"save_*"}},
		{Name: "Chat", IsDefault: true},
	}}
	e, ds := New(spec, Config{Tools: []string{"search", "save_file", "save_note", "delete"}, RequireApproval: []string{"delete"}})
	if e == nil {
		t.Fatal(ds.Err())
	}
	chat, _ := play(e, "u:hello")
	write, _ := play(e, "u:please write it")
	for _, tt := range []struct {
		state State
		tool  string
		want  bool
	}{
		{chat, "delete", true},     // options.requireApproval: every step
		{write, "delete", true},    // and in a step with its own list
		{chat, "save_file", false}, // the step's patterns apply in that step only
		{write, "save_file", true}, // a * pattern
		{write, "save_note", true}, //
		{write, "search", false},   // not named
		{State{}, "delete", true},  // no active step
		{State{}, "save_file", false},
	} {
		if got := e.NeedsApproval(tt.state, tt.tool); got != tt.want {
			t.Errorf("NeedsApproval(step %q, %q) = %v, want %v", tt.state.ActiveStep, tt.tool, got, tt.want)
		}
	}
	if got := e.Steps()[0].RequireApproval; len(got) != 1 || got[0] != "save_*" {
		t.Errorf("Steps()[0].RequireApproval = %v", got)
	}
}

func TestRequireApprovalDiagnostics(t *testing.T) {
	spec := &Spec{Steps: []Step{
		{Name: "S", IsDefault: true, RequireApproval: []string{"sav*", "nothing_*", ""}},
	}}
	_, ds := New(spec, Config{Tools: []string{"save"}, RequireApproval: []string{"typo"}})
	var lines []string
	for _, d := range ds {
		lines = append(lines, d.String())
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		`options.requireApproval[0]: "typo" matches none of the agent's tools (save)`,
		`orchestration.steps[0] "S": requireApproval[1]: "nothing_*" matches none of the agent's tools (save)`,
		`orchestration.steps[0] "S": requireApproval[2]: an empty tool pattern`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, text)
		}
	}
	if !ds.HasErrors() {
		t.Error("an empty pattern is not an error")
	}
	if strings.Contains(text, `"sav*"`) {
		t.Errorf("a pattern that matches is reported:\n%s", text)
	}
}
