package orchestration_test

import (
	"context"
	"testing"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// reasonerSpec is shaped like the Cognitive Reasoner: seven tools, six modes
// entered by message patterns, each with a three-tool sequence, and a
// default mode.
func reasonerSpec() (*orchestration.Spec, []string) {
	tools := []string{"search", "think", "reflect", "compare", "critique", "brainstorm", "debate"}
	mode := func(name, re string, seq ...string) orchestration.Step {
		groups := make([]orchestration.Group, len(seq))
		for i, s := range seq {
			groups[i] = orchestration.Group{s}
		}
		return orchestration.Step{Name: name, Description: name,
			Conditions: []orchestration.Condition{{Type: orchestration.CondMessageRegex, Value: re}},
			Sequence:   groups, AvailableTools: &orchestration.ToolFilter{Allowed: append(seq, "search")}}
	}
	return &orchestration.Spec{StepScope: orchestration.ScopeTurn, Steps: []orchestration.Step{
		mode("Research", `\b(research|history|latest)\b`, "search", "think", "reflect"),
		mode("ProblemSolving", `\b(solve|fix|how can)\b`, "think", "brainstorm", "compare"),
		mode("Evaluation", `\b(critique|evaluate|assess)\b`, "critique", "debate", "reflect"),
		mode("Comparison", `\b(compare|versus|vs)\b`, "search", "compare", "reflect"),
		mode("Ideation", `\b(brainstorm|ideas)\b`, "think", "brainstorm", "critique"),
		mode("Debate", `\b(debate|whether)\b`, "search", "debate", "reflect"),
		{Name: "Default", IsDefault: true},
	}}, tools
}

// BenchmarkToolEvent measures one tool event through the memory store:
// record, advance the sequence, re-choose the step, compute the offer.
func BenchmarkToolEvent(b *testing.B) {
	spec, tools := reasonerSpec()
	e := orchestration.MustNew(spec, orchestration.Config{Tools: tools})
	store := session.NewMemory(session.Config{})
	defer store.Close()
	ctx := context.Background()
	const id = "bench-session-0001"
	seq := []string{"critique", "debate", "reflect"}
	session.Update(ctx, store, id, func(s *orchestration.State) error {
		*s, _ = e.Apply(*s, orchestration.UserMessage("Critique the argument that remote work improves productivity"))
		return nil
	})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tool := seq[i%3]
		if i%3 == 0 {
			// Start the sequence again so every event is accepted.
			session.Update(ctx, store, id, func(s *orchestration.State) error { s.SequenceIndex = 0; return nil })
		}
		sess, err := session.Update(ctx, store, id, func(s *orchestration.State) error {
			*s, _ = e.Apply(*s, orchestration.ToolUsed(tool))
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(e.Offer(sess.State).Tools) == 0 {
			b.Fatal("nothing offered")
		}
	}
}

// BenchmarkUserMessage measures one user message through the memory store:
// record it, evaluate every step's conditions, compute the offer.
func BenchmarkUserMessage(b *testing.B) {
	spec, tools := reasonerSpec()
	e := orchestration.MustNew(spec, orchestration.Config{Tools: tools})
	store := session.NewMemory(session.Config{})
	defer store.Close()
	ctx := context.Background()
	msgs := []string{
		"Critique the argument that remote work improves productivity",
		"Research the history of electric cars",
		"How can cities solve traffic congestion problems?",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m := msgs[i%len(msgs)]
		sess, err := session.Update(ctx, store, "bench-session-0002", func(s *orchestration.State) error {
			*s, _ = e.Apply(*s, orchestration.UserMessage(m))
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		_ = e.Offer(sess.State)
	}
}

// BenchmarkApplyTool measures the pure engine alone.
func BenchmarkApplyTool(b *testing.B) {
	spec, tools := reasonerSpec()
	e := orchestration.MustNew(spec, orchestration.Config{Tools: tools})
	s0, _ := e.Apply(orchestration.State{}, orchestration.UserMessage("Critique the argument"))
	b.ReportAllocs()
	for b.Loop() {
		s, _ := e.Apply(s0, orchestration.ToolUsed("critique"))
		_ = e.Offer(s)
	}
}

// BenchmarkApplyMessageText measures the pure engine choosing a step by
// message_contains and message_starts_with conditions (case-insensitive by
// Unicode simple folding): every step's conditions are evaluated, the
// message is folded once.
func BenchmarkApplyMessageText(b *testing.B) {
	tools := []string{"search", "think", "reflect", "compare", "critique", "brainstorm", "debate"}
	step := func(name, typ, value string) orchestration.Step {
		return orchestration.Step{Name: name, Conditions: []orchestration.Condition{{Type: typ, Value: value}},
			AvailableTools: &orchestration.ToolFilter{Allowed: []string{"search"}}}
	}
	e := orchestration.MustNew(&orchestration.Spec{Steps: []orchestration.Step{
		step("Research", orchestration.CondMessageContains, "Research"),
		step("Quick", orchestration.CondMessageStartsWith, "quick"),
		step("Deep", orchestration.CondMessageContains, "deep dive"),
		step("Greek", orchestration.CondMessageContains, "οδος"),
		step("Compare", orchestration.CondMessageContains, "versus"),
		step("Plan", orchestration.CondMessageStartsWith, "/plan"),
		{Name: "Default", IsDefault: true},
	}}, orchestration.Config{Tools: tools})
	for _, tc := range []struct{ name, msg string }{
		{"ascii", "Could you compare the latest electric cars versus hybrids for a family of four?"},
		{"unicode", "Ποιος είναι ο καλύτερος δρόμος; Compare the routes through the ΟΔΟΣ Ερμού versus the metro."},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s, _ := e.Apply(orchestration.State{}, orchestration.UserMessage(tc.msg))
				_ = e.Offer(s)
			}
		})
	}
}
