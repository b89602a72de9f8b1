package orchestration

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func intp(i int) *int { return &i }

// play applies events in order; each event is "u:text" (user message),
// "t:name" (tool) or anything else (ignored).
func play(e *Engine, events ...string) (State, Decision) {
	var s State
	var d Decision
	for _, ev := range events {
		switch {
		case strings.HasPrefix(ev, "u:"):
			s, d = e.Apply(s, UserMessage(ev[2:]))
		case strings.HasPrefix(ev, "t:"):
			s, d = e.Apply(s, ToolUsed(ev[2:]))
		}
	}
	return s, d
}

// TestConditions checks each condition type on its own: a step "S" guarded
// by the condition, and a default step "D".
func TestConditions(t *testing.T) {
	tools := []string{"a", "b", "c"}
	tests := []struct {
		name   string
		cond   Condition
		seq    []Group
		events []string
		want   string // the active step after the events
	}{
		{"tool_used passes once used", Condition{Type: CondToolUsed, Value: "b"}, nil, []string{"u:x", "t:a", "t:b", "t:a"}, "S"},
		{"tool_used fails when never used", Condition{Type: CondToolUsed, Value: "c"}, nil, []string{"u:x", "t:a", "t:b"}, "D"},
		{"sequence_match on the tail", Condition{Type: CondSequenceMatch}, []Group{{"a"}, {"b", "c"}}, []string{"u:x", "t:c", "t:a", "t:c"}, "S"},
		{"sequence_match needs the whole sequence", Condition{Type: CondSequenceMatch}, []Group{{"a"}, {"b"}}, []string{"u:x", "t:b"}, "D"},
		{"sequence_match is position by position", Condition{Type: CondSequenceMatch}, []Group{{"a"}, {"b"}}, []string{"u:x", "t:b", "t:a"}, "D"},
		{"message_contains ignores case", Condition{Type: CondMessageContains, Value: "Plan"}, nil, []string{"u:let's PLAN it"}, "S"},
		{"message_contains fails without the word", Condition{Type: CondMessageContains, Value: "plan"}, nil, []string{"u:let's go"}, "D"},
		{"message_contains before any message", Condition{Type: CondMessageContains, Value: "plan"}, nil, []string{"t:a"}, "D"},
		{"message_starts_with trims and ignores case", Condition{Type: CondMessageStartsWith, Value: "hey"}, nil, []string{"u:  HEY you"}, "S"},
		{"message_starts_with only at the start", Condition{Type: CondMessageStartsWith, Value: "hey"}, nil, []string{"u:oh hey"}, "D"},
		{"message_regex is case-insensitive RE2", Condition{Type: CondMessageRegex, Value: `^\d+ apples?$`}, nil, []string{"u:3 APPLES"}, "S"},
		{"message_regex fails on no match", Condition{Type: CondMessageRegex, Value: `^\d+ apples?$`}, nil, []string{"u:apples"}, "D"},
		{"message_regex matching empty fails before any message", Condition{Type: CondMessageRegex, Value: `.*`}, nil, []string{"t:a"}, "D"},
		{"not_recently_used passes outside the window", Condition{Type: CondNotRecentlyUsed, Value: "a", Window: intp(2)}, nil, []string{"u:x", "t:a", "t:b", "t:c"}, "S"},
		{"not_recently_used fails inside the window", Condition{Type: CondNotRecentlyUsed, Value: "a", Window: intp(2)}, nil, []string{"t:a", "t:b"}, "D"},
		{"not_recently_used passes on empty history", Condition{Type: CondNotRecentlyUsed, Value: "a", Window: intp(1)}, nil, []string{"u:x"}, "S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &Spec{Steps: []Step{
				{Name: "S", Conditions: []Condition{tt.cond}, Sequence: tt.seq},
				{Name: "D", IsDefault: true},
			}}
			e, ds := New(spec, Config{Tools: tools})
			if e == nil {
				t.Fatalf("New: %v", ds.Err())
			}
			s, _ := play(e, tt.events...)
			if s.ActiveStep != tt.want {
				t.Errorf("active step = %q, want %q (history %v)", s.ActiveStep, tt.want, s.RecentlyUsedTools)
			}
		})
	}
}

func TestApplyDoesNotModifyItsInput(t *testing.T) {
	e := MustNew(&Spec{}, Config{Tools: []string{"a", "b"}, HistoryLimit: 3})
	s0, _ := play(e, "u:x", "t:a", "t:b")
	before := s0.RecentlyUsedTools.Slice()
	s1, _ := e.Apply(s0, ToolUsed("a"))
	s1, _ = e.Apply(s1, ToolUsed("b"))
	if !s0.RecentlyUsedTools.Equal(before...) {
		t.Fatalf("input state changed: %v, want %v", s0.RecentlyUsedTools, before)
	}
	if want := []string{"b", "a", "b"}; !s1.RecentlyUsedTools.Equal(want...) {
		t.Fatalf("history = %v, want %v (bounded to 3, oldest dropped)", s1.RecentlyUsedTools, want)
	}
}

func TestHistoryLimitDefault(t *testing.T) {
	e := MustNew(nil, Config{Tools: []string{"a"}})
	var s State
	for range 250 {
		s, _ = e.Apply(s, ToolUsed("a"))
	}
	if s.RecentlyUsedTools.Len() != DefaultHistoryLimit {
		t.Fatalf("history keeps %d entries, want %d", s.RecentlyUsedTools.Len(), DefaultHistoryLimit)
	}
}

func TestRefusalNamesStepAndTools(t *testing.T) {
	e := MustNew(&Spec{Steps: []Step{{
		Name: "Eval", Conditions: []Condition{{Type: CondMessageContains, Value: "x"}},
		Sequence: []Group{{"critique"}, {"debate"}},
	}}}, Config{Tools: []string{"critique", "debate", "search"}})
	s, _ := e.Apply(State{}, UserMessage("x"))
	s2, d := e.Apply(s, ToolUsed("search"))
	if !d.Refused {
		t.Fatal("search was not refused")
	}
	for _, want := range []string{`"search"`, `"Eval"`, "critique -> debate", "position 1", "tools you may use now: critique"} {
		if !strings.Contains(d.Reason, want) {
			t.Errorf("reason %q does not mention %s", d.Reason, want)
		}
	}
	if !s2.RecentlyUsedTools.Equal(s.RecentlyUsedTools.Slice()...) || s2.SequenceIndex != s.SequenceIndex {
		t.Error("a refused call changed the state")
	}
}

// TestRefusalForFewerTools: a caller that offered no tools for a model call
// (a turn's last) gets the same kind of message, and a long invented name is
// not echoed in full.
func TestRefusalForFewerTools(t *testing.T) {
	e := MustNew(&Spec{Steps: []Step{{
		Name: "Eval", Conditions: []Condition{{Type: CondMessageContains, Value: "x"}},
		Sequence: []Group{{"critique"}, {"debate", "search"}},
	}}}, Config{Tools: []string{"critique", "debate", "search"}})
	s, _ := e.Apply(State{}, UserMessage("x"))
	s, _ = e.Apply(s, ToolUsed("critique"))
	got := e.Refusal(s, "debate", nil)
	want := `tool "debate" is not available in step "Eval", which requires the sequence critique -> debate|search and is at position 2; no tools may be used now`
	if got != want {
		t.Errorf("Refusal =\n  %s\nwant\n  %s", got, want)
	}
	long := strings.Repeat("é", 100)
	if got := e.Refusal(s, long, []string{"debate"}); strings.Contains(got, long) || !strings.Contains(got, strings.Repeat("é", 32)+"…") {
		t.Errorf("long name echoed as %q", got)
	}
}

// TestUnavailableTools: a sequence position none of whose tools the
// runtime provides cannot be passed. Load warns, naming the step and the
// position; at run time the offer (and so the snapshot) says the sequence
// stops there and offers the step's tools, with no warning repeated at
// every model call, and a refusal says it too.
func TestUnavailableTools(t *testing.T) {
	spec := &Spec{Steps: []Step{{
		Name: "Med", Conditions: []Condition{{Type: CondMessageContains, Value: "x"}},
		Sequence: []Group{{"search"}, {"pubmed"}, {"fetch"}},
	}}}
	e, ds := New(spec, Config{Tools: []string{"search", "pubmed", "fetch"}, Unavailable: []string{"pubmed"}})
	if e == nil {
		t.Fatal(ds.Err())
	}
	if w := ds.Warnings(); len(w) != 1 || !strings.Contains(w[0].Path, `steps[0] "Med": sequence[1]`) || !strings.Contains(w[0].Message, "position 2 (pubmed)") {
		t.Fatalf("warnings %v: want one naming the step and position 2", w)
	}
	if got := e.Tools(); !slices.Equal(got, []string{"search", "fetch"}) {
		t.Fatalf("Tools() = %v; an unavailable tool must never be offered", got)
	}
	s, _ := play(e, "u:x", "t:search")
	o := e.Offer(s)
	if !slices.Equal(o.Tools, []string{"search", "fetch"}) || o.Warning != "" || !strings.Contains(o.Blocked, "position 2 (pubmed)") {
		t.Fatalf("offer at the unavailable position = %+v; want the step's tools, blocked naming position 2 (pubmed), no warning", o)
	}
	if snap := e.Snapshot(s); snap.Blocked != o.Blocked {
		t.Fatalf("snapshot blocked %q, want %q", snap.Blocked, o.Blocked)
	}
	_, d := e.Apply(s, ToolUsed("pubmed"))
	if !d.Refused || !strings.Contains(d.Reason, "at position 2, which no tool this runtime provides can fill, so the sequence stops there") {
		t.Fatalf("refusal of pubmed: %+v", d)
	}
}

func TestUsageAccumulates(t *testing.T) {
	e := MustNew(nil, Config{})
	s, d := e.Apply(State{}, UsageReported(chat.Usage{Prompt: 10, Completion: 5}))
	s, _ = e.Apply(s, UsageReported(chat.Usage{Prompt: 1, Completion: 2, Total: 4}))
	if want := (chat.Usage{Prompt: 11, Completion: 7, Total: 19}); s.TokenUsage != want {
		t.Fatalf("usage = %+v, want %+v", s.TokenUsage, want)
	}
	if d.Transition || d.Refused {
		t.Fatalf("a usage event decided %+v", d)
	}
}

func TestTransitionDecision(t *testing.T) {
	e := MustNew(&Spec{Steps: []Step{
		{Name: "After", Conditions: []Condition{{Type: CondToolUsed, Value: "think"}}},
		{Name: "Start", IsDefault: true},
	}}, Config{Tools: []string{"think"}})
	s, d := e.Apply(State{}, UserMessage("hi"))
	if !d.Transition || d.PreviousStep != "" || s.ActiveStep != "Start" {
		t.Fatalf("first message: state %q decision %+v", s.ActiveStep, d)
	}
	s, d = e.Apply(s, ToolUsed("think"))
	if !d.Transition || d.PreviousStep != "Start" || s.ActiveStep != "After" {
		t.Fatalf("after think: state %q decision %+v", s.ActiveStep, d)
	}
	if _, d = e.Apply(s, ToolUsed("think")); d.Transition {
		t.Fatalf("staying in a step reported a transition: %+v", d)
	}
}

func TestPatterns(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true}, {"*", "anything", true}, {"read", "read", true}, {"read", "Read", false},
		{"read_*", "read_file", true}, {"read_*", "read_", true}, {"read_*", "xread_file", false},
		{"*_file", "read_file", true}, {"*_file", "read_files", false}, {"*cog*", "deep_cognitive_check", true},
		{"a*b*c", "abc", true}, {"a*b*c", "aXbYc", true}, {"a*b*c", "acb", false}, {"a*a", "a", false},
		{"**", "x", true}, {"a*b", "ab", true},
	}
	for _, tt := range tests {
		if got := matchPattern(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchPattern(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestMessageMemo: message results are memoised per message and engine; a
// state carried to another engine (a reloaded template) is re-evaluated, and
// states sharing a memo do not see each other's later results.
func TestMessageMemo(t *testing.T) {
	spec := func(word string) *Spec {
		return &Spec{Steps: []Step{
			{Name: "Gate", Conditions: []Condition{{Type: CondToolUsed, Value: "open"}, {Type: CondMessageContains, Value: word}}},
			{Name: "Word", Conditions: []Condition{{Type: CondMessageContains, Value: word}}},
			{Name: "D", IsDefault: true},
		}}
	}
	tools := Config{Tools: []string{"open", "x"}}
	a := MustNew(spec("alpha"), tools)
	// b numbers its message conditions like a, but tests another word and
	// names its steps differently, so a reused memo would choose T.
	b := MustNew(&Spec{Steps: []Step{
		{Name: "T", Conditions: []Condition{{Type: CondMessageContains, Value: "gamma"}}},
		{Name: "E", IsDefault: true},
	}}, tools)
	s, _ := a.Apply(State{}, UserMessage("alpha beta"))
	if s.ActiveStep != "Word" {
		t.Fatalf("engine a chose %q", s.ActiveStep)
	}
	// Gate's message condition was never evaluated (its tool condition
	// failed first); two branches from s evaluate it separately.
	viaOpen, _ := a.Apply(s, ToolUsed("open"))
	viaX, _ := a.Apply(s, ToolUsed("x"))
	if viaOpen.ActiveStep != "Gate" || viaX.ActiveStep != "Word" {
		t.Fatalf("branches chose %q and %q", viaOpen.ActiveStep, viaX.ActiveStep)
	}
	again, _ := a.Apply(s, ToolUsed("open"))
	if again.ActiveStep != "Gate" {
		t.Fatalf("the shared memo was changed by a branch: %q", again.ActiveStep)
	}
	// The same state under another template (a reloaded one): b evaluates
	// its own conditions instead of reusing a's results.
	s2, _ := b.Apply(viaOpen, ToolUsed("x"))
	if s2.ActiveStep != "E" {
		t.Fatalf("engine b chose %q; with a's memo it would wrongly choose T", s2.ActiveStep)
	}
	// A new message forgets the old results.
	s3, _ := a.Apply(viaOpen, UserMessage("nothing here"))
	if s3.ActiveStep != "Gate" {
		t.Fatalf("sticky step lost: %q", s3.ActiveStep)
	}
	s4, _ := a.Apply(s3, ToolUsed("x"))
	if s4.ActiveStep != "Gate" {
		t.Fatalf("after a new message without the word: %q (want the sticky Gate)", s4.ActiveStep)
	}
}
