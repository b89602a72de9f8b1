package orchestration

import (
	"slices"
	"strings"
	"testing"
)

// evalEngine has a step whose sequence is critique, debate, reflect, as in
// AgentDock's Cognitive Reasoner, a step that think moves to, and a default
// step.
func evalEngine(t *testing.T) *Engine {
	t.Helper()
	e, ds := New(&Spec{Steps: []Step{
		{Name: "ThinkMode", Conditions: []Condition{{Type: CondToolUsed, Value: "think"}}},
		{Name: "EvaluationMode", Conditions: []Condition{{Type: CondMessageContains, Value: "critique"}},
			Sequence:       []Group{{"critique"}, {"debate"}, {"reflect"}},
			AvailableTools: &ToolFilter{Allowed: []string{"critique", "debate", "reflect", "think"}}},
		{Name: "Chat", IsDefault: true},
	}}, Config{Tools: []string{"critique", "debate", "reflect", "think", "search"}})
	if e == nil {
		t.Fatal(ds.Err())
	}
	return e
}

// answer applies the calls of one model answer, each against the offer of
// the model call that made them, in the answer's order, and returns the
// state and the decisions.
func answer(e *Engine, s State, tools ...string) (State, []Decision) {
	offer := e.Offer(s)
	var ds []Decision
	for _, tool := range tools {
		var d Decision
		s, d = e.Apply(s, ToolUsedIn(tool, offer))
		ds = append(ds, d)
	}
	return s, ds
}

// TestAnswerCheckedAgainstItsOffer: every call of one model answer is
// checked against what that model call was offered, not against the state
// the answer's earlier calls moved; calls that were offered run, and a
// sequence advances once per matching call, in the answer's order.
func TestAnswerCheckedAgainstItsOffer(t *testing.T) {
	e := evalEngine(t)
	atStart, _ := e.Apply(State{}, UserMessage("critique this plan"))
	done, _ := answer(e, atStart, "critique")
	done, _ = answer(e, done, "debate")
	done, _ = answer(e, done, "reflect")
	tests := []struct {
		name    string
		from    State
		calls   []string
		refused []string
		seq     int
		used    []string
		step    string
	}{
		{"a sequence is not passed side by side", atStart, []string{"critique", "debate", "reflect"}, []string{"debate", "reflect"}, 1, []string{"critique"}, "EvaluationMode"},
		{"the same tool twice advances once", atStart, []string{"critique", "critique"}, nil, 1, []string{"critique", "critique"}, "EvaluationMode"},
		{"a later position first is refused", atStart, []string{"debate", "critique"}, []string{"debate"}, 1, []string{"critique"}, "EvaluationMode"},
		{"calls that were all offered run", done, []string{"critique", "think", "reflect"}, nil, 0, []string{"critique", "debate", "reflect", "critique", "think", "reflect"}, "ThinkMode"},
		{"a step change does not narrow the answer's offer", done, []string{"think", "critique"}, nil, 0, []string{"critique", "debate", "reflect", "think", "critique"}, "ThinkMode"},
		{"a step change does not widen it either", done, []string{"think", "search"}, []string{"search"}, 0, []string{"critique", "debate", "reflect", "think"}, "ThinkMode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ds := answer(e, tt.from, tt.calls...)
			var refused []string
			for i, d := range ds {
				if d.Refused {
					refused = append(refused, tt.calls[i])
				}
			}
			if !slices.Equal(refused, tt.refused) {
				t.Errorf("refused %v, want %v", refused, tt.refused)
			}
			if s.SequenceIndex != tt.seq || !s.RecentlyUsedTools.Equal(tt.used...) || s.ActiveStep != tt.step {
				t.Errorf("state %s seq=%d used=%v, want %s seq=%d used=%v", s.ActiveStep, s.SequenceIndex, s.RecentlyUsedTools, tt.step, tt.seq, tt.used)
			}
		})
	}
}

// TestParallelRefusalNamesTheModelCall: the refusal of a call that its
// model call was not offered names the step, the position that model call
// was made at and the tools it was offered, though an earlier call of the
// same answer moved the sequence on.
func TestParallelRefusalNamesTheModelCall(t *testing.T) {
	e := evalEngine(t)
	s, _ := e.Apply(State{}, UserMessage("critique this plan"))
	_, ds := answer(e, s, "critique", "debate", "reflect")
	want := `tool "debate" is not available in step "EvaluationMode", which requires the sequence critique -> debate -> reflect and is at position 1; tools you may use now: critique`
	if ds[1].Reason != want {
		t.Fatalf("refusal\n  %s\nwant\n  %s", ds[1].Reason, want)
	}
	if !strings.HasPrefix(ds[2].Reason, `tool "reflect" is not available in step "EvaluationMode"`) || !strings.HasSuffix(ds[2].Reason, "position 1; tools you may use now: critique") {
		t.Fatalf("refusal of reflect: %s", ds[2].Reason)
	}
}

// TestToolUsedWithoutOffer: an input without an offer is checked against
// the state's own offer, as one call per model call is.
func TestToolUsedWithoutOffer(t *testing.T) {
	e := evalEngine(t)
	s, _ := e.Apply(State{}, UserMessage("critique this plan"))
	for _, tool := range []string{"critique", "debate", "reflect"} {
		var d Decision
		if s, d = e.Apply(s, ToolUsed(tool)); d.Refused {
			t.Fatalf("%s refused: %s", tool, d.Reason)
		}
	}
	if s.SequenceIndex != 3 {
		t.Fatalf("sequence index %d, want 3", s.SequenceIndex)
	}
}
