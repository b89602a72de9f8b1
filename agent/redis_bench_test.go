package agent_test

import (
	"context"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// commandCount counts the commands a go-redis client sends (round trips;
// a script's own commands run inside Redis and are not counted).
type commandCount struct{ n atomic.Int64 }

func (c *commandCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *commandCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// markModel answers a few words with usage, and notes the command count and
// the time when the call starts.
type markModel struct {
	count    *commandCount
	atCall   int64
	calledAt time.Time
}

func (m *markModel) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "mark"} }

func (m *markModel) Stream(_ context.Context, _ llmorch.Request) iter.Seq2[chat.Event, error] {
	m.atCall, m.calledAt = m.count.n.Load(), time.Now()
	return func(yield func(chat.Event, error) bool) {
		for _, w := range []string{"a ", "short ", "answer"} {
			if !yield(chat.Event{Kind: chat.KindTextDelta, Text: w}, nil) {
				return
			}
		}
		yield(chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 100, Completion: 3}}, nil)
	}
}

// BenchmarkRedisTextTurn runs text turns (one model call that answers at
// once, with usage) on one session through the runtime with a local
// redis-server: rt-before-model/turn and rt/turn count the commands sent
// before the model call and in the whole turn; p50/p99-µs-to-model is the
// time from Run to the model call.
func BenchmarkRedisTextTurn(b *testing.B) {
	srv := redistest.Start(b)
	store, err := redisstore.New(redisstore.Config{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	count := &commandCount{}
	store.Client().AddHook(count)
	model := &markModel{count: count}
	n := gatedNode(b, store, agent.Options{}, model)
	id := session.NewID()
	var before, total int64
	var lat []time.Duration
	var mu sync.Mutex
	b.ReportAllocs()
	turns := 0
	for b.Loop() {
		start, c0 := time.Now(), count.n.Load()
		events, err := agent.Started(n.Run(context.Background(), id, agent.Text("hello there")))
		if err != nil {
			b.Fatal(err)
		}
		for range events {
		}
		mu.Lock()
		before += model.atCall - c0
		total += count.n.Load() - c0
		lat = append(lat, model.calledAt.Sub(start))
		mu.Unlock()
		turns++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(before)/float64(turns), "rt-before-model/turn")
	b.ReportMetric(float64(total)/float64(turns), "rt/turn")
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs-to-model")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs-to-model")
}

// TestRedisTurnStartsInOneRoundTrip: with the Redis store, a turn sends
// one command before its model call (session.Starter: the claim and the
// message together) on a new session and on one this process wrote last,
// and two when another replica wrote the session since; the history the
// turn saves is whole either way.
func TestRedisTurnStartsInOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *redisstore.Store {
		s, err := redisstore.New(redisstore.Config{URL: srv.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	store := open()
	count := &commandCount{}
	store.Client().AddHook(count)
	model := &markModel{count: count}
	n := gatedNode(t, store, agent.Options{}, model)
	id := session.NewID()
	turn := func(message string) int64 {
		t.Helper()
		c0 := count.n.Load()
		events, err := agent.Started(n.Run(t.Context(), id, agent.Text(message)))
		if err != nil {
			t.Fatal(err)
		}
		for range events {
		}
		return model.atCall - c0
	}
	for _, tc := range []struct {
		name  string
		setup func()
		want  int64
	}{
		{"a new session", func() {}, 1},
		{"the session this process wrote last", func() {}, 1},
		{"a session another replica wrote since", func() {
			if _, err := session.Update(t.Context(), open(), id, func(*orchestration.State) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"the next turn", func() {}, 1},
	} {
		tc.setup()
		if got := turn(tc.name); got != tc.want {
			t.Errorf("%s: %d commands before the model call, want %d", tc.name, got, tc.want)
		}
	}
	msgs, err := store.Messages(t.Context(), id, 0)
	if err != nil || len(msgs) != 8 {
		t.Fatalf("history after four turns: %d messages, %v; want 8 (a question and an answer each)", len(msgs), err)
	}
	for i, m := range msgs {
		if want := []chat.Role{chat.RoleUser, chat.RoleAssistant}[i%2]; m.Role != want {
			t.Fatalf("message %d is %s, want %s: %+v", i, m.Role, want, msgs)
		}
	}
}
