package sessiontest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// The benchmarks of the stores measure the same events the same way, as
// Run checks them the same way: an event per Update, from one goroutine
// (BenchSerial) or from many on their own sessions (BenchParallel), with
// the latencies' p50 and p99.

// BenchEngine is the benchmarks' orchestration: a step entered by a tool
// use, with a sequence, and the default tool history (100), as a real
// agent has.
var BenchEngine = orchestration.MustNew(&orchestration.Spec{
	Steps: []orchestration.Step{{
		Name:       "research",
		Conditions: []orchestration.Condition{{Type: "tool_used", Value: "search"}},
		Sequence:   []orchestration.Group{{"search"}, {"fetch", "search"}},
	}},
}, orchestration.Config{Tools: []string{"search", "fetch", "think"}})

// BenchInput is the i-th event of a benchmark: a tool use, and every
// third one a model call's usage.
func BenchInput(i int) orchestration.Input {
	if i%3 == 2 {
		return orchestration.UsageReported(chat.Usage{Prompt: 120, Completion: 40})
	}
	return orchestration.ToolUsed([]string{"search", "fetch"}[i%2])
}

// BenchApply is the update that applies ev with BenchEngine.
func BenchApply(ev orchestration.Input) func(*orchestration.State) error {
	return func(s *orchestration.State) error {
		*s, _ = BenchEngine.Apply(*s, ev)
		return nil
	}
}

// Latencies records the latencies of a benchmark's operations; it is safe
// for concurrent use.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one latency.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Report reports the p50 and p99 of the recorded latencies, in µs.
func (l *Latencies) Report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	µs := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(µs(l.d[len(l.d)/2]), "p50-µs")
	b.ReportMetric(µs(l.d[len(l.d)*99/100]), "p99-µs")
}

// BenchSerial applies one event per iteration to one session from one
// goroutine: the latency of the agent's hot path. commands, when not nil,
// returns how many commands the store sent since it was last called; their
// number per event is then reported as cmds/event.
func BenchSerial(b *testing.B, s session.Store, commands func() int) {
	ctx := b.Context()
	id := session.NewID()
	if _, err := session.Update(ctx, s, id, BenchApply(orchestration.UserMessage("hi"))); err != nil {
		b.Fatal(err)
	}
	if commands != nil {
		commands()
	}
	var lat Latencies
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		if _, err := session.Update(ctx, s, id, BenchApply(BenchInput(i))); err != nil {
			b.Fatal(err)
		}
		lat.Add(time.Since(start))
		i++
	}
	lat.Report(b)
	if commands != nil {
		b.ReportMetric(float64(commands())/float64(i), "cmds/event")
	}
}

// BenchParallel runs 8 goroutines per CPU, each on its own session: the
// throughput of many concurrent turns (ns/op is per event overall).
func BenchParallel(b *testing.B, s session.Store) {
	ctx := b.Context()
	var lat Latencies
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		id := session.NewID()
		for i := 0; pb.Next(); i++ {
			start := time.Now()
			if _, err := session.Update(ctx, s, id, BenchApply(BenchInput(i))); err != nil {
				b.Error(err)
				return
			}
			lat.Add(time.Since(start))
		}
	})
	lat.Report(b)
}
