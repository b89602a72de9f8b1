package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/session/sessiontest"
)

func BenchmarkRedisEvent(b *testing.B) {
	srv := redistest.Start(b)
	b.Run("serial", func(b *testing.B) {
		s := openRedis(b, srv, redisstore.Config{})
		counter := &commandCounter{}
		s.Client().AddHook(counter)
		sessiontest.BenchSerial(b, s, func() int { return len(counter.take()) })
	})
	b.Run("parallel-sessions", func(b *testing.B) {
		sessiontest.BenchParallel(b, openRedis(b, srv, redisstore.Config{}))
	})
}

func BenchmarkRedisAppendMessage(b *testing.B) {
	srv := redistest.Start(b)
	s := openRedis(b, srv, redisstore.Config{Config: session.Config{MaxMessages: 200}})
	ctx := b.Context()
	id := session.NewID()
	msg := []chat.Message{{Role: chat.RoleAssistant, Content: "a typical answer of a few dozen words, give or take, about the topic"}}
	var lat sessiontest.Latencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := s.AppendMessages(ctx, id, msg); err != nil {
			b.Fatal(err)
		}
		lat.Add(time.Since(start))
	}
	lat.Report(b)
}

// BenchmarkRedisTurnStart measures what a turn does with the store before
// its model call, on one session turn after turn: "separate" is Claim
// and a sequence of single calls (the user message's session.Update,
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
			_, l, err := s.Claim(ctx, id, session.WithOwner("o"), session.WithAgent("a"))
			if err != nil {
				return nil, nil, err
			}
			if _, err := session.Update(ctx, s, id, sessiontest.BenchApply(orchestration.UserMessage(user[0].Content)), session.WithLease(l)); err != nil {
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
			_, hist, err := s.UpdateAppend(ctx, id, sessiontest.BenchApply(orchestration.UserMessage(user[0].Content)), user, window, session.WithLease(l))
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
			var lat sessiontest.Latencies
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
				lat.Add(time.Since(start))
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
			lat.Report(b)
			b.ReportMetric(float64(before)/float64(turns), "rt/turn")
		})
	}
}
