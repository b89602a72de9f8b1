package scenario

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// Step is the outcome of one event.
type Step struct {
	Index int
	// Event describes the event: `user "..."`, `tool x`, `usage 10+5`.
	Event    string
	State    orchestration.State
	Offered  []string
	Decision orchestration.Decision
	// Refused lists the tools of an answer event's calls that were
	// refused, in order.
	Refused []string
	// Mismatches lists the expectations that did not hold, each as
	// "key: expected X, got Y".
	Mismatches []string
}

// Report is the outcome of one scenario.
type Report struct {
	Scenario  *Scenario
	SessionID string
	Steps     []Step
}

// Failed reports whether any expectation did not hold.
func (r *Report) Failed() bool {
	for _, s := range r.Steps {
		if len(s.Mismatches) > 0 {
			return true
		}
	}
	return false
}

// Mismatches returns every failed expectation, prefixed with its event.
func (r *Report) Mismatches() []string {
	var out []string
	for _, s := range r.Steps {
		for _, m := range s.Mismatches {
			out = append(out, fmt.Sprintf("events[%d] %s: %s", s.Index, s.Event, m))
		}
	}
	return out
}

// Run plays sc in a fresh session of store, one atomic update per event, and
// checks every expectation. The session is left in the store, to expire with
// its TTL like any other; Report.SessionID names it. The error is for
// failures to run (store errors), not for mismatches, which are in the
// Report.
func Run(ctx context.Context, sc *Scenario, engine *orchestration.Engine, store session.Store) (*Report, error) {
	rep := &Report{Scenario: sc, SessionID: session.NewID()}
	id := rep.SessionID
	for i, ev := range sc.Events {
		var in orchestration.Input
		var desc string
		switch {
		case ev.Answer != nil:
			desc = "answer " + strings.Join(ev.Answer, " ")
		case ev.User != nil:
			in, desc = orchestration.UserMessage(*ev.User), fmt.Sprintf("user %q", *ev.User)
		case ev.Tool != nil:
			in, desc = orchestration.ToolUsed(*ev.Tool), "tool "+*ev.Tool
		default:
			in, desc = orchestration.UsageReported(*ev.Usage), fmt.Sprintf("usage %d+%d", ev.Usage.Prompt, ev.Usage.Completion)
		}
		var dec orchestration.Decision
		var refused []string
		sess, err := session.Update(ctx, store, id, func(s *orchestration.State) error {
			if ev.Answer != nil {
				// One model call's answer: every call against its offer.
				refused = nil
				offer := engine.Offer(*s)
				for _, tool := range ev.Answer {
					var d orchestration.Decision
					if *s, d = engine.Apply(*s, orchestration.ToolUsedIn(tool, offer)); d.Refused {
						refused = append(refused, tool)
					}
				}
				return nil
			}
			var next orchestration.State
			next, dec = engine.Apply(*s, in)
			*s = next
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("%s: events[%d]: %w", sc.File, i, err)
		}
		step := Step{Index: i, Event: desc, State: sess.State, Offered: engine.Offer(sess.State).Tools, Decision: dec, Refused: refused}
		step.Mismatches = check(ev, step)
		rep.Steps = append(rep.Steps, step)
	}
	return rep, nil
}

func check(ev Event, s Step) []string {
	var out []string
	x := ev.Expect
	add := func(key string, want, got any) {
		out = append(out, fmt.Sprintf("%s: expected %v, got %v", key, want, got))
	}
	if x.ActiveStep.Set {
		want := x.ActiveStep.Value
		if x.ActiveStep.Null {
			want = ""
		}
		if s.State.ActiveStep != want {
			add("activeStep", stepName(want), stepName(s.State.ActiveStep))
		}
	}
	if x.SequenceIndex != nil && *x.SequenceIndex != s.State.SequenceIndex {
		add("sequenceIndex", *x.SequenceIndex, s.State.SequenceIndex)
	}
	if x.AllowedTools != nil && !sameSet(*x.AllowedTools, s.Offered) {
		add("allowedTools", list(sorted(*x.AllowedTools)), list(sorted(s.Offered)))
	}
	if x.RecentlyUsedTools != nil && !s.State.RecentlyUsedTools.Equal(*x.RecentlyUsedTools...) {
		add("recentlyUsedTools", list(*x.RecentlyUsedTools), list(s.State.RecentlyUsedTools.Slice()))
	}
	if ev.Tool != nil {
		want := x.Rejected != nil && *x.Rejected
		if want != s.Decision.Refused {
			add("rejected", want, s.Decision.Refused)
		}
	}
	if ev.Answer != nil {
		var want []string
		if x.Refused != nil {
			want = *x.Refused
		}
		if !slices.Equal(want, s.Refused) {
			add("refused", list(want), list(s.Refused))
		}
	}
	if x.TokenUsage != nil {
		want := *x.TokenUsage
		if want.Total == 0 {
			want.Total = want.Prompt + want.Completion
		}
		if want != s.State.TokenUsage {
			add("tokenUsage", usage(want), usage(s.State.TokenUsage))
		}
	}
	return out
}

// Print writes the report: one line per event with the active step, the
// sequence index and the offered tools, and under it any mismatch.
func (r *Report) Print(w io.Writer) {
	status := "PASS"
	if r.Failed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s %s (%s)\n", status, r.Scenario.Name, r.Scenario.File)
	for _, s := range r.Steps {
		refused := ""
		if s.Decision.Refused {
			refused = " REFUSED"
		}
		if len(s.Refused) > 0 {
			refused = " REFUSED " + strings.Join(s.Refused, " ")
		}
		fmt.Fprintf(w, "  [%d] %-40s%s -> step=%s seq=%d offered=%s\n",
			s.Index, clip(s.Event, 40), refused, stepName(s.State.ActiveStep), s.State.SequenceIndex, list(s.Offered))
		for _, m := range s.Mismatches {
			fmt.Fprintf(w, "      MISMATCH %s\n", m)
		}
	}
}

func stepName(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func list(l []string) string { return "[" + strings.Join(l, " ") + "]" }

func usage(u chat.Usage) string {
	return fmt.Sprintf("{prompt %d, completion %d, total %d}", u.Prompt, u.Completion, u.Total)
}

func sorted(l []string) []string {
	c := slices.Clone(l)
	sort.Strings(c)
	return c
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Compact(sorted(a)), slices.Compact(sorted(b)))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
