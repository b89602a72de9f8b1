package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
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
func benchSerial(b *testing.B, s session.Store, counter *commandCounter) {
	ctx := b.Context()
	id := session.NewID()
	if _, err := s.Update(ctx, id, benchApply(orchestration.UserMessage("hi"))); err != nil {
		b.Fatal(err)
	}
	if counter != nil {
		counter.take()
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
	if counter != nil {
		b.ReportMetric(float64(len(counter.take()))/float64(i), "cmds/event")
	}
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

func BenchmarkRedisEvent(b *testing.B) {
	srv := redistest.Start(b)
	b.Run("serial", func(b *testing.B) {
		s := openRedis(b, srv, redisstore.Config{})
		counter := &commandCounter{}
		s.Client().AddHook(counter)
		benchSerial(b, s, counter)
	})
	b.Run("parallel-sessions", func(b *testing.B) {
		benchParallel(b, openRedis(b, srv, redisstore.Config{}))
	})
}

func BenchmarkRedisAppendMessage(b *testing.B) {
	srv := redistest.Start(b)
	s := openRedis(b, srv, redisstore.Config{Config: session.Config{MaxMessages: 200}})
	ctx := b.Context()
	id := session.NewID()
	msg := []chat.Message{{Role: chat.RoleAssistant, Content: "a typical answer of a few dozen words, give or take, about the topic"}}
	var lat latencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := s.AppendMessages(ctx, id, msg); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
	}
	lat.report(b)
}

// BenchmarkRedisTurnStart measures what a turn does with the store before
// its model call, on one session turn after turn: "separate" is the
// sequence of single calls (GetOrCreate, Lock, the user message's Update,
// Messages, AppendMessages), "merged" is Claim and UpdateAppend. The lease's
// Release after the model call is not counted. rt/turn counts the commands
// sent (round trips), as TestRedisRoundTrips does.
func BenchmarkRedisTurnStart(b *testing.B) {
	srv := redistest.Start(b)
	user := []chat.Message{{Role: chat.RoleUser, Content: "a user message of a dozen words or so, as people type them"}}
	answer := []chat.Message{{Role: chat.RoleAssistant, Content: "a typical answer of a few dozen words, give or take, about the topic"}}
	const window = 4
	variants := []struct {
		name  string
		start func(ctx context.Context, s *redisstore.Store, id string) (session.Lease, []chat.Message, error)
	}{
		{"separate", func(ctx context.Context, s *redisstore.Store, id string) (session.Lease, []chat.Message, error) {
			if _, _, err := s.GetOrCreate(ctx, id, session.WithOwner("o"), session.WithAgent("a")); err != nil {
				return nil, nil, err
			}
			l, err := s.Lock(ctx, id)
			if err != nil {
				return nil, nil, err
			}
			if _, err := s.Update(ctx, id, benchApply(orchestration.UserMessage(user[0].Content)), session.WithLease(l)); err != nil {
				return l, nil, err
			}
			hist, err := s.Messages(ctx, id, window)
			if err != nil {
				return l, nil, err
			}
			return l, hist, s.AppendMessages(ctx, id, user, session.WithLease(l))
		}},
		{"merged", func(ctx context.Context, s *redisstore.Store, id string) (session.Lease, []chat.Message, error) {
			_, l, err := s.Claim(ctx, id, session.WithOwner("o"), session.WithAgent("a"))
			if err != nil {
				return nil, nil, err
			}
			_, hist, err := s.UpdateAppend(ctx, id, benchApply(orchestration.UserMessage(user[0].Content)), user, window, session.WithLease(l))
			return l, hist, err
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			s := openRedis(b, srv, redisstore.Config{Config: session.Config{MaxMessages: 200}})
			counter := &commandCounter{}
			s.Client().AddHook(counter)
			ctx := b.Context()
			id := session.NewID()
			var lat latencies
			var before int
			b.ReportAllocs()
			turns := 0
			for b.Loop() {
				counter.take()
				start := time.Now()
				l, _, err := v.start(ctx, s, id)
				if err != nil {
					b.Fatal(err)
				}
				lat.add(time.Since(start))
				before += len(counter.take())
				// The rest of a text turn, not measured: the answer and
				// the release.
				if err := s.AppendMessages(ctx, id, answer, session.WithLease(l)); err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				turns++
			}
			lat.report(b)
			b.ReportMetric(float64(before)/float64(turns), "rt/turn")
		})
	}
}
