package session_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/sessiontest"
)

func BenchmarkMemoryEvent(b *testing.B) {
	s := session.NewMemory(session.Config{})
	defer s.Close()
	b.Run("serial", func(b *testing.B) { sessiontest.BenchSerial(b, s, nil) })
	b.Run("parallel-sessions", func(b *testing.B) { sessiontest.BenchParallel(b, s) })
}

// BenchmarkMemoryToolEvent measures one tool event through the memory store
// as the agent records it (llmorch's runTool): the engine's Apply inside the
// store's atomic Update, fenced by the turn's lease, then the offer from the
// returned state. Every session has a full tool history (the default 100
// entries) and a lease; the events go round the sessions, so with 1,000 of
// them each event finds its session's data out of the cache, as on a busy
// server.
func BenchmarkMemoryToolEvent(b *testing.B) {
	for _, sessions := range []int{1, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			s := session.NewMemory(session.Config{LockTTL: time.Hour})
			defer s.Close()
			ctx := b.Context()
			ids := make([]string, sessions)
			leases := make([]session.Lease, sessions)
			tools := []string{"search", "fetch"}
			for i := range ids {
				ids[i] = session.NewID()
				var err error
				if _, leases[i], err = s.Claim(ctx, ids[i]); err != nil {
					b.Fatal(err)
				}
				if _, err := session.Update(ctx, s, ids[i], sessiontest.BenchApply(orchestration.UserMessage("research the history of tea"))); err != nil {
					b.Fatal(err)
				}
				for j := range sessiontest.BenchEngine.HistoryLimit() {
					if _, err := session.Update(ctx, s, ids[i], sessiontest.BenchApply(orchestration.ToolUsed(tools[j%2]))); err != nil {
						b.Fatal(err)
					}
				}
			}
			var d orchestration.Decision
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ev := orchestration.ToolUsed(tools[i%2])
				k := i % sessions
				sess, err := session.Update(ctx, s, ids[k], func(st *orchestration.State) error {
					*st, d = sessiontest.BenchEngine.Apply(*st, ev)
					return nil
				}, session.WithLease(leases[k]))
				if err != nil || d.Refused {
					b.Fatalf("event %d: %v, refused %v", i, err, d.Refused)
				}
				if len(sessiontest.BenchEngine.Offer(sess.State).Tools) == 0 {
					b.Fatal("nothing offered")
				}
				i++
			}
		})
	}
}
