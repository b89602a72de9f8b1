package orchestration

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

// sameTurnState reports how a and b differ in what the orchestration
// decides from (token usage aside), "" when they do not.
func sameTurnState(a, b State) string {
	switch {
	case a.ActiveStep != b.ActiveStep:
		return fmt.Sprintf("active step %q, want %q", a.ActiveStep, b.ActiveStep)
	case a.SequenceIndex != b.SequenceIndex:
		return fmt.Sprintf("sequence index %d, want %d", a.SequenceIndex, b.SequenceIndex)
	case !a.RecentlyUsedTools.Equal(b.RecentlyUsedTools.Slice()...):
		return fmt.Sprintf("recently used %v, want %v", a.RecentlyUsedTools, b.RecentlyUsedTools)
	case a.LastUserMessage != b.LastUserMessage || a.UserMessages != b.UserMessages || a.TurnToolUses != b.TurnToolUses:
		return fmt.Sprintf("messages %q/%d/%d, want %q/%d/%d", a.LastUserMessage, a.UserMessages, a.TurnToolUses, b.LastUserMessage, b.UserMessages, b.TurnToolUses)
	case (a.TurnStart == nil) != (b.TurnStart == nil):
		return fmt.Sprintf("turn start %+v, want %+v", a.TurnStart, b.TurnStart)
	case a.TurnStart != nil:
		x, y := *a.TurnStart, *b.TurnStart
		x.TokenUsage, y.TokenUsage = chat.Usage{}, chat.Usage{}
		if fmt.Sprint(x) != fmt.Sprint(y) {
			return fmt.Sprintf("turn start %+v, want %+v", x, y)
		}
	}
	return ""
}

// TestRegenerateRestoresTheTurnStart: after an answer that ran critique
// and debate, regenerating it gives the state the answer started from,
// with the message applied once; the usage it spent is kept and reported
// as regenerated.
func TestRegenerateRestoresTheTurnStart(t *testing.T) {
	e := evalEngine(t)
	s, _ := e.Apply(State{}, UserMessage("hello"))
	s, _ = e.Apply(s, ToolUsed("search"))
	s, _ = e.Apply(s, UsageReported(chat.Usage{Prompt: 100, Completion: 10}))
	before := s
	s, _ = e.Apply(s, UserMessage("critique this plan"))
	started := s
	s, _ = answer(e, s, "critique")
	s, _ = answer(e, s, "debate")
	s, _ = e.Apply(s, UsageReported(chat.Usage{Prompt: 50, Completion: 5}))
	if s.SequenceIndex != 2 || !s.RecentlyUsedTools.Equal("search", "critique", "debate") {
		t.Fatalf("after the answer: %+v", s)
	}
	got, d := e.Apply(s, Regenerate("critique this plan"))
	if diff := sameTurnState(got, started); diff != "" {
		t.Fatalf("after regenerate: %s", diff)
	}
	if d.PreviousStep != before.ActiveStep || !d.Transition {
		t.Errorf("decision %+v: want the transition from the step the answer started from, %q", d, before.ActiveStep)
	}
	if want := (chat.Usage{Prompt: 150, Completion: 15, Total: 165}); got.TokenUsage != want {
		t.Errorf("token usage %+v, want %+v: what was spent stays spent", got.TokenUsage, want)
	}
	if want := (chat.Usage{Prompt: 50, Completion: 5, Total: 55}); got.RegeneratedUsage != want {
		t.Errorf("regenerated usage %+v, want %+v", got.RegeneratedUsage, want)
	}
	// The regenerated answer is offered what the first one was.
	if o := e.Offer(got); !slices.Equal(o.Tools, []string{"critique"}) {
		t.Errorf("offer after regenerate %v, want [critique]", o.Tools)
	}
	// Again: only the second answer's spend is added.
	again, _ := e.Apply(got, UsageReported(chat.Usage{Prompt: 7, Completion: 1}))
	again, _ = e.Apply(again, Regenerate("critique this plan"))
	if want := (chat.Usage{Prompt: 57, Completion: 6, Total: 63}); again.RegeneratedUsage != want {
		t.Errorf("regenerated twice: %+v, want %+v", again.RegeneratedUsage, want)
	}
	if diff := sameTurnState(again, started); diff != "" {
		t.Fatalf("after a second regenerate: %s", diff)
	}
}

// TestRegenerateWithoutTurnStart: a state saved before turn starts were
// kept applies the message as a new one, as regenerating did then.
func TestRegenerateWithoutTurnStart(t *testing.T) {
	e := evalEngine(t)
	s, _ := e.Apply(State{}, UserMessage("critique this"))
	s.TurnStart = nil
	got, _ := e.Apply(s, Regenerate("critique this"))
	want, _ := e.Apply(s, UserMessage("critique this"))
	if diff := sameTurnState(got, want); diff != "" {
		t.Fatal(diff)
	}
}

// TestRegenerateProperty: for random sessions (short tool histories, so
// that answers push tools of the turn's start out of them, and both step
// scopes), regenerating the latest answer gives the state that applying
// its message to the state before it gives, and keeps the usage.
func TestRegenerateProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	tools := []string{"critique", "debate", "reflect", "think", "search"}
	messages := []string{"critique this", "hello", "think about it", "critique that"}
	for _, scope := range []string{ScopeSession, ScopeTurn} {
		e := MustNew(&Spec{StepScope: scope, Steps: []Step{
			{Name: "ThinkMode", Conditions: []Condition{{Type: CondToolUsed, Value: "think"}, {Type: CondNotRecentlyUsed, Value: "search", Window: intp(2)}}},
			{Name: "EvaluationMode", Conditions: []Condition{{Type: CondMessageContains, Value: "critique"}},
				Sequence: []Group{{"critique"}, {"debate"}, {"reflect"}}},
			{Name: "Chat", IsDefault: true},
		}}, Config{Tools: tools, HistoryLimit: 3})
		for run := range 500 {
			var s State
			randomTurn := func() {
				s, _ = e.Apply(s, UserMessage(messages[rng.IntN(len(messages))]))
				for range rng.IntN(6) {
					s, _ = answer(e, s, tools[rng.IntN(len(tools))], tools[rng.IntN(len(tools))])
					s, _ = e.Apply(s, UsageReported(chat.Usage{Prompt: int64(rng.IntN(9)), Completion: 1}))
				}
			}
			for range rng.IntN(4) {
				randomTurn()
			}
			before := s
			randomTurn()
			msg, spent := s.LastUserMessage, s.TokenUsage
			if s.UserMessages == 0 {
				continue
			}
			got, _ := e.Apply(s, Regenerate(msg))
			want, _ := e.Apply(before, UserMessage(msg))
			if diff := sameTurnState(got, want); diff != "" {
				t.Fatalf("%s scope, run %d: %s", scope, run, diff)
			}
			if got.TokenUsage != spent {
				t.Fatalf("%s scope, run %d: usage %+v, want %+v kept", scope, run, got.TokenUsage, spent)
			}
		}
	}
}
