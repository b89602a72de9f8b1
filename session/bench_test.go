package session_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// benchEngine keeps the default tool history (100), as a real agent does.
var benchEngine = orchestration.MustNew(&orchestration.Spec{
	Steps: []orchestration.Step{{
		Name:       "research",
		Conditions: []orchestration.Condition{{Type: "tool_used", Value: "search"}},
		Sequence:   []orchestration.Group{{"search"}, {"fetch", "search"}},
	}},
}, orchestration.Config{Tools: []string{"search", "fetch", "think"}})

func benchEvent(i int) orchestration.Input {
	if i%3 == 2 {
		return orchestration.UsageReported(chat.Usage{Prompt: 120, Completion: 40})
	}
	return orchestration.ToolUsed([]string{"search", "fetch"}[i%2])
}

func benchApply(ev orchestration.Input) func(*orchestration.State) error {
	return func(s *orchestration.State) error {
		*s, _ = benchEngine.Apply(*s, ev)
		return nil
	}
}

// latencies records per-event latencies and reports their p50 and p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	µs := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(µs(l.d[len(l.d)/2]), "p50-µs")
	b.ReportMetric(µs(l.d[len(l.d)*99/100]), "p99-µs")
}

// benchSerial applies one event per iteration to one session from one
// goroutine: the latency of the agent's hot path.
func benchSerial(b *testing.B, s session.Store) {
	ctx := b.Context()
	id := session.NewID()
	if _, err := s.Update(ctx, id, benchApply(orchestration.UserMessage("hi"))); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		if _, err := s.Update(ctx, id, benchApply(benchEvent(i))); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
		i++
	}
	lat.report(b)
}

// benchParallel runs 8 goroutines per CPU, each on its own session: the
// throughput of many concurrent turns (ns/op is per event overall).
func benchParallel(b *testing.B, s session.Store) {
	ctx := b.Context()
	var lat latencies
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		id := session.NewID()
		for i := 0; pb.Next(); i++ {
			start := time.Now()
			if _, err := s.Update(ctx, id, benchApply(benchEvent(i))); err != nil {
				b.Error(err)
				return
			}
			lat.add(time.Since(start))
		}
	})
	lat.report(b)
}

func BenchmarkMemoryEvent(b *testing.B) {
	s := session.NewMemory(session.Config{})
	defer s.Close()
	b.Run("serial", func(b *testing.B) { benchSerial(b, s) })
	b.Run("parallel-sessions", func(b *testing.B) { benchParallel(b, s) })
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
				if leases[i], err = s.Lock(ctx, ids[i]); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Update(ctx, ids[i], benchApply(orchestration.UserMessage("research the history of tea"))); err != nil {
					b.Fatal(err)
				}
				for j := range benchEngine.HistoryLimit() {
					if _, err := s.Update(ctx, ids[i], benchApply(orchestration.ToolUsed(tools[j%2]))); err != nil {
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
				sess, err := s.Update(ctx, ids[k], func(st *orchestration.State) error {
					*st, d = benchEngine.Apply(*st, ev)
					return nil
				}, session.WithLease(leases[k]))
				if err != nil || d.Refused {
					b.Fatalf("event %d: %v, refused %v", i, err, d.Refused)
				}
				if len(benchEngine.Offer(sess.State).Tools) == 0 {
					b.Fatal("nothing offered")
				}
				i++
			}
		})
	}
}
