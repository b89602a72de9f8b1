package llmorch_test

import (
	"context"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// TestHandOver: a journaled turn asked to hand over stops at its next
// safe point without writing or yielding anything more (no Done): during
// a tool call, the step's calls run to their end and the step is saved
// first; during a model call, the call is cut. Cut at once (its context's
// cause ErrHandedOver), it stops like a turn whose process died. Each time
// the session keeps the turn's marker and journal, and a taker goes on
// from the journal to the turn's end: no call runs twice, a call cut at
// once is reported interrupted, and the history holds every call once.
func TestHandOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at fires the hand-over: during a call (its ID) or at the first
		// text of the model call n ("text-n").
		at   string
		hard bool
		// steps: the steps the session holds at the hand-over;
		// interrupted: the call reported interrupted.
		steps       int
		interrupted string
	}{
		{name: "gently, during a tool call", at: "pay-1", steps: 1},
		{name: "gently, during the second model call", at: "text-1", steps: 1},
		{name: "gently, during the first model call", at: "text-0", steps: 0},
		{name: "at once, during a tool call", at: "pay-1", hard: true, steps: 0, interrupted: "pay-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &byResults{calls: map[int][]string{0: {"pay-1"}, 1: {"pay-2"}}}
			f, fx := journalFixture(t, model, nil)
			var frames int64
			turn := f.startJournaled(t, "pay", &frames)
			signal, handOver := context.WithCancel(context.Background())
			ctx, cut := context.WithCancelCause(llmorch.WithHandOver(context.Background(), signal))
			defer cut(nil)
			fire := func() {
				if tc.hard {
					cut(llmorch.ErrHandedOver)
				} else {
					handOver()
				}
			}
			fx.during = func(id string) {
				if id == tc.at {
					fire()
				}
			}
			texts := 0
			var evs []chat.Event
			for ev := range f.svc.StreamWithOrchestration(ctx, turn) {
				frames++
				evs = append(evs, ev)
				if ev.Kind == chat.KindTextDelta {
					if tc.at == "text-"+string(rune('0'+texts)) {
						fire()
					}
					texts++
				}
			}
			for _, ev := range evs {
				if ev.Kind == chat.KindDone || ev.Kind == chat.KindError {
					t.Fatalf("the turn handed over yielded %+v; events: %+v", ev, evs)
				}
			}
			sess, _ := f.store.Get(context.Background(), f.id)
			if sess.Turn != turn.ID || sess.Journal == nil {
				t.Fatalf("after the hand-over the session has marker %q journal %+v", sess.Turn, sess.Journal)
			}
			if sess.Journal.Steps != tc.steps {
				t.Errorf("the journal holds %d steps, want %d: %+v", sess.Journal.Steps, tc.steps, sess.Journal)
			}
			if !tc.hard && sess.Journal.Step != nil {
				t.Errorf("a gentle hand-over left a step under way: %+v", sess.Journal.Step)
			}
			// The agent releases the lease of a turn that ended so.
			_ = turn.Lease.Release(context.Background())

			// The taker: the session's lease, the turn from its journal.
			_, lease, err := f.store.Claim(context.Background(), f.id)
			if err != nil {
				t.Fatal(err)
			}
			hist, _ := f.store.Messages(context.Background(), f.id, 0)
			turn.Lease, turn.State, turn.History, turn.Resume = lease, sess.State, hist, sess.Journal
			evs = nil
			for ev := range f.svc.StreamWithOrchestration(context.Background(), turn) {
				frames++
				evs = append(evs, ev)
			}
			if evs[0].Kind != chat.KindRestart {
				t.Errorf("the taker's first event is %+v, want a restart", evs[0])
			}
			if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishStop {
				t.Fatalf("the taker ended %+v", last)
			}
			msgs, _ := f.store.Messages(context.Background(), f.id, 0)
			results := map[string]int{}
			for _, m := range msgs {
				if m.Role == chat.RoleTool {
					results[m.ToolCallID]++
					if got := m.NotRun && m.IsError; got != (m.ToolCallID == tc.interrupted) {
						t.Errorf("call %s: result %+v; want interrupted %v", m.ToolCallID, m, m.ToolCallID == tc.interrupted)
					}
				}
			}
			for _, id := range []string{"pay-1", "pay-2"} {
				if n := fx.count(id); n != 1 {
					t.Errorf("call %s ran %d times", id, n)
				}
				if results[id] != 1 {
					t.Errorf("call %s has %d results in the history", id, results[id])
				}
			}
		})
	}
}
