package orchestration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// ideasEngine has the two sequences: a step the user's wording
// enters whose sequence starts with the group [think|reflect], and a step
// that brainstorm enters whose sequence is compare, think; the default
// step offers every tool.
func ideasEngine(t *testing.T) *Engine {
	t.Helper()
	e, ds := New(&Spec{Steps: []Step{
		{Name: "Ideas", Conditions: []Condition{{Type: CondToolUsed, Value: "brainstorm"}},
			Sequence: []Group{{"compare"}, {"think"}}},
		{Name: "Reasoning", Conditions: []Condition{{Type: CondMessageContains, Value: "reason"}},
			Sequence: []Group{{"think", "reflect"}, {"reflect"}, {"compare"}}},
		{Name: "Default", IsDefault: true},
	}}, Config{Tools: []string{"think", "reflect", "compare", "brainstorm"}})
	if e == nil {
		t.Fatal(ds.Err())
	}
	return e
}

// TestAnswerPassesOnePosition: the calls of one answer advance a sequence
// by one position at most, and a step entered in the middle of an answer
// starts its sequence with the next model call.
func TestAnswerPassesOnePosition(t *testing.T) {
	e := ideasEngine(t)
	s, _ := e.Apply(State{}, UserMessage("reason about it"))
	s, ds := answer(e, s, "think", "reflect")
	if ds[0].Refused || ds[1].Refused || !ds[0].Advanced || ds[1].Advanced {
		t.Fatalf("think and reflect offered [think|reflect]: %+v", ds)
	}
	if s.ActiveStep != "Reasoning" || s.SequenceIndex != 1 || !slices.Equal(e.Offer(s).Tools, []string{"reflect"}) {
		t.Fatalf("after the answer: %s at %d offering %v, want Reasoning at 1 (position 2 of 3) offering reflect", s.ActiveStep, s.SequenceIndex, e.Offer(s).Tools)
	}

	s, _ = e.Apply(State{}, UserMessage("hello"))
	s, ds = answer(e, s, "brainstorm", "compare", "think")
	for i, d := range ds {
		if d.Refused || d.Advanced {
			t.Fatalf("call %d of the default step's answer: %+v", i, d)
		}
	}
	if s.ActiveStep != "Ideas" || s.SequenceIndex != 0 || !slices.Equal(e.Offer(s).Tools, []string{"compare"}) {
		t.Fatalf("after the answer: %s at %d offering %v, want Ideas at 0 (position 1) offering compare", s.ActiveStep, s.SequenceIndex, e.Offer(s).Tools)
	}
	if !s.RecentlyUsedTools.Equal("brainstorm", "compare", "think") {
		t.Fatalf("history %v: every call was offered and ran", s.RecentlyUsedTools)
	}
}

// TestAnswerApproval: a call waits for approval when the step of its
// model call or the step it would run in requires it, whichever an
// earlier call of the same answer left or entered.
func TestAnswerApproval(t *testing.T) {
	e, ds := New(&Spec{Steps: []Step{
		{Name: "Thinking", Conditions: []Condition{{Type: CondToolUsed, Value: "think"}, {Type: CondMessageContains, Value: "calm"}},
			RequireApproval: []string{"debate"}},
		{Name: "Thought", Conditions: []Condition{{Type: CondToolUsed, Value: "think"}}},
		{Name: "Debating", Conditions: []Condition{{Type: CondMessageContains, Value: "debate"}}, RequireApproval: []string{"deb*"}},
		{Name: "Calm", Conditions: []Condition{{Type: CondMessageContains, Value: "calm"}}},
	}}, Config{Tools: []string{"think", "debate", "search"}, RequireApproval: []string{"search"}})
	if e == nil {
		t.Fatal(ds.Err())
	}
	tests := []struct {
		name, message, after string
		calls                []string
		held                 []bool
	}{
		{"think leaves the step that requires approval", "debate this", "Thought", []string{"think", "debate"}, []bool{false, true}},
		{"think enters a step that requires approval", "stay calm", "Thinking", []string{"think", "debate"}, []bool{false, true}},
		{"neither step requires it", "hello", "Thought", []string{"think", "debate"}, []bool{false, false}},
		{"options.requireApproval holds everywhere", "hello", "Thought", []string{"think", "search"}, []bool{false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := e.Apply(State{}, UserMessage(tt.message))
			offer := e.Offer(s)
			for i, tool := range tt.calls {
				c := e.Judge(offer, s, tool)
				if c.Refused || c.Approval != tt.held[i] {
					t.Fatalf("%s in %s (offered in %s): %+v, want held %v", tool, s.ActiveStep, offer.Step, c, tt.held[i])
				}
				if !c.Approval {
					s, _ = e.Apply(s, ToolUsedIn(tool, offer))
				}
			}
			if s.ActiveStep != tt.after {
				t.Fatalf("step %q, want %q", s.ActiveStep, tt.after)
			}
		})
	}
}

// TestJudgeRules: over random templates and random multi-call answers,
// every call is decided as the contract's "Tool use" says, checked
// against a reference written from its text (and from the template as
// written, not from the engine's compiled form):
//
//  1. a call is refused when the model call that made it was not offered
//     its tool, and a refused call changes nothing;
//  2. it advances a sequence only when that model call was offered that
//     very position (same active step, same sequenceIndex, the step not
//     left in between) and the tool is in the position's group, so one
//     answer advances a step's sequence by at most one position, and a
//     step entered in the middle of an answer starts its sequence with the
//     next model call;
//  3. it waits for approval when options.requireApproval, the step of its
//     model call or the step active when it would run requires approval
//     for it.
func TestJudgeRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(54, 2026))
	tools := []string{"a", "b", "c", "d", "e"}
	engines, calls := 0, 0
	seen := map[string]int{}
	for engines < 300 {
		spec, global := randomSpec(rng, tools)
		e, _ := New(spec, Config{Tools: tools, RequireApproval: global})
		if e == nil {
			continue
		}
		engines++
		ref := reference{spec: spec, global: global}
		var s State
		for range 1 + rng.IntN(4) {
			s, _ = e.Apply(s, UserMessage([]string{"m0", "m1", "m2", "m0 m1"}[rng.IntN(4)]))
			for range 1 + rng.IntN(4) {
				offer := e.Offer(s)
				start := s
				// stayed: every call of the answer so far left the
				// model call's step active.
				stayed := true
				advanced := map[string]int{}
				n := 1 + rng.IntN(5)
				for range n {
					tool := tools[rng.IntN(len(tools))]
					if rng.IntN(3) == 0 && len(offer.Tools) > 0 {
						tool = offer.Tools[rng.IntN(len(offer.Tools))]
					}
					calls++
					c := e.Judge(offer, s, tool)
					next, d := e.Apply(s, ToolUsedIn(tool, offer))
					where := fmt.Sprintf("engine %d, %s called in %s at %d (offered %v in %s at %d)", engines, tool, s.ActiveStep, s.SequenceIndex, offer.Tools, offer.Step, offer.SequenceIndex)
					wantRefused := !slices.Contains(offer.Tools, tool)
					if c.Refused != wantRefused || d.Refused != wantRefused {
						t.Fatalf("%s: refused %v (Apply %v), want %v", where, c.Refused, d.Refused, wantRefused)
					}
					if wantRefused {
						seen["refused"]++
						if next.RecentlyUsedTools.Len() != s.RecentlyUsedTools.Len() || next.ActiveStep != s.ActiveStep || next.SequenceIndex != s.SequenceIndex {
							t.Fatalf("%s: a refused call changed the state", where)
						}
						continue
					}
					if want := ref.approval(offer.Step, s.ActiveStep, tool); c.Approval != want {
						t.Fatalf("%s: approval %v, want %v", where, c.Approval, want)
					}
					if c.Approval {
						seen["held"]++
					}
					want := ref.advances(offer, stayed, s, tool)
					if !stayed && ref.advances(offer, true, s, tool) {
						// Back in the model call's step, at its position,
						// after leaving it: entered anew in the answer.
						seen["re-entered"]++
					}
					if c.Advances != want || d.Advanced != want {
						t.Fatalf("%s: advances %v (Apply %v), want %v", where, c.Advances, d.Advanced, want)
					}
					if !slices.Equal(next.RecentlyUsedTools.Slice(), append(s.RecentlyUsedTools.Slice(), tool)) {
						t.Fatalf("%s: history %v after %v", where, next.RecentlyUsedTools, s.RecentlyUsedTools)
					}
					if d.Advanced {
						seen["advanced"]++
						advanced[s.ActiveStep]++
						if advanced[s.ActiveStep] > 1 {
							t.Fatalf("%s: the answer advanced %s twice", where, s.ActiveStep)
						}
					}
					if next.ActiveStep != s.ActiveStep {
						seen["moved"]++
						stayed = false
					}
					s = next
				}
				if !stayed && s.ActiveStep != start.ActiveStep && s.SequenceIndex != 0 {
					t.Fatalf("engine %d: a step entered in the middle of an answer is at position %d", engines, s.SequenceIndex+1)
				}
			}
		}
	}
	for _, k := range []string{"refused", "held", "advanced", "moved", "re-entered"} {
		if seen[k] == 0 {
			t.Errorf("no call %s in %d calls: the generator does not reach the rule", k, calls)
		}
	}
	t.Logf("%d engines, %d calls: %v", engines, calls, seen)
}

// reference decides calls from the template as written, by the
// contract's text.
type reference struct {
	spec   *Spec
	global []string
}

func (r reference) step(name string) *Step {
	for i := range r.spec.Steps {
		if r.spec.Steps[i].Name == name {
			return &r.spec.Steps[i]
		}
	}
	return nil
}

// approval: "it waits for approval when the step of that model call
// requires approval for it or the step active when it would run does",
// and options.requireApproval always.
func (r reference) approval(offered, running, tool string) bool {
	names := func(step string) []string {
		if st := r.step(step); st != nil {
			return st.RequireApproval
		}
		return nil
	}
	return globAny(r.global, tool) || globAny(names(offered), tool) || globAny(names(running), tool)
}

// advances: "it advances a sequence only when that model call was
// offered that very position (same active step, same sequenceIndex)",
// s being the state the call runs in, and "a step entered in the middle
// of an answer starts its sequence with the next model call": stayed says
// whether the model call's step stayed active through the answer's
// earlier calls.
func (r reference) advances(offer Offer, stayed bool, s State, tool string) bool {
	st := r.step(s.ActiveStep)
	if st == nil || !stayed || offer.Step != s.ActiveStep || offer.SequenceIndex != s.SequenceIndex {
		return false
	}
	return s.SequenceIndex < len(st.Sequence) && slices.Contains(st.Sequence[s.SequenceIndex], tool)
}

// globAny matches tool against patterns where * is any run of
// characters, written apart from the engine's matcher.
func globAny(patterns []string, tool string) bool {
	for _, p := range patterns {
		if glob(p, tool) {
			return true
		}
	}
	return false
}

func glob(p, s string) bool {
	if p == "" {
		return s == ""
	}
	if p[0] == '*' {
		for i := 0; i <= len(s); i++ {
			if glob(p[1:], s[i:]) {
				return true
			}
		}
		return false
	}
	return s != "" && p[0] == s[0] && glob(p[1:], s[1:])
}

// randomSpec writes a template's orchestration: up to four steps whose
// conditions are tool_used, not_recently_used and message_contains, with
// sequences of groups, allowed lists and requireApproval patterns, and
// sometimes a default step; and options.requireApproval.
func randomSpec(rng *rand.Rand, tools []string) (*Spec, []string) {
	pick := func(n int) []string {
		var out []string
		for range n {
			t := tools[rng.IntN(len(tools))]
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		return out
	}
	approvals := func() []string {
		switch rng.IntN(4) {
		case 0:
			return pick(1)
		case 1:
			return []string{tools[rng.IntN(len(tools))][:1] + "*"}
		}
		return nil
	}
	spec := &Spec{}
	for i := range 1 + rng.IntN(4) {
		st := Step{Name: fmt.Sprintf("S%d", i), RequireApproval: approvals()}
		for range 1 + rng.IntN(2) {
			switch rng.IntN(3) {
			case 0:
				st.Conditions = append(st.Conditions, Condition{Type: CondToolUsed, Value: tools[rng.IntN(len(tools))]})
			case 1:
				w := 1 + rng.IntN(2)
				st.Conditions = append(st.Conditions, Condition{Type: CondNotRecentlyUsed, Value: tools[rng.IntN(len(tools))], Window: &w})
			default:
				st.Conditions = append(st.Conditions, Condition{Type: CondMessageContains, Value: fmt.Sprintf("m%d", rng.IntN(3))})
			}
		}
		if rng.IntN(3) > 0 {
			for range 1 + rng.IntN(3) {
				st.Sequence = append(st.Sequence, Group(pick(1+rng.IntN(2))))
			}
		}
		if rng.IntN(3) == 0 {
			allowed := pick(3)
			for _, g := range st.Sequence {
				for _, t := range g {
					if !slices.Contains(allowed, t) {
						allowed = append(allowed, t)
					}
				}
			}
			st.AvailableTools = &ToolFilter{Allowed: allowed}
		}
		spec.Steps = append(spec.Steps, st)
	}
	if rng.IntN(2) == 0 {
		spec.Steps = append(spec.Steps, Step{Name: "Default", IsDefault: true, RequireApproval: approvals(),
			Sequence: []Group{Group(pick(1))}})
	}
	var global []string
	if rng.IntN(4) == 0 {
		global = pick(1)
	}
	return spec, global
}
