package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/session/sessiontest"
)

func openRedis(t testing.TB, srv *redistest.Server, rc redisstore.Config) *redisstore.Store {
	t.Helper()
	rc.URL = srv.URL()
	r, err := redisstore.New(rc)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// rawClient is a client of its own, to look at and tamper with the keys.
func rawClient(t testing.TB, srv *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

var engine = orchestration.MustNew(&orchestration.Spec{}, orchestration.Config{
	Tools: []string{"search", "fetch"}, HistoryLimit: 10000,
})

func applyEvent(ev orchestration.Input) func(*orchestration.State) error {
	return func(s *orchestration.State) error {
		next, d := engine.Apply(*s, ev)
		if d.Refused {
			return errors.New(d.Reason)
		}
		*s = next
		return nil
	}
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	sessiontest.Run(t, func(t *testing.T, cfg session.Config) session.Store {
		return openRedis(t, srv, redisstore.Config{Config: cfg})
	}, sessiontest.RealClock())
}

func TestRedisKeysAndTTL(t *testing.T) {
	srv := redistest.Start(t)
	const ttl, lockTTL = time.Hour, 10 * time.Second
	s := openRedis(t, srv, redisstore.Config{Config: session.Config{TTL: ttl, LockTTL: lockTTL}, Prefix: "test-prefix"})
	raw := rawClient(t, srv)
	ctx := t.Context()
	id := session.NewID()
	if _, err := session.Update(ctx, s, id, applyEvent(orchestration.UserMessage("hi"))); err != nil {
		t.Fatal(err)
	}
	_, l, err := session.Lock(ctx, s, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")), session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	keys, err := raw.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{"test-prefix:{" + id + "}:lease", "test-prefix:{" + id + "}:messages", "test-prefix:{" + id + "}:state"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %q, want %q (one hash tag, so one Cluster slot)", keys, want)
	}
	for _, k := range []struct {
		key  string
		want time.Duration
	}{{want[0], lockTTL}, {want[1], ttl}, {want[2], ttl}} {
		got, err := raw.PTTL(ctx, k.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got > k.want || got < k.want-5*time.Second {
			t.Errorf("TTL of %s = %v, want close to %v", k.key, got, k.want)
		}
	}
}

func TestRedisPersistence(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = time.Hour
	s := openRedis(t, srv, redisstore.Config{Config: session.Config{TTL: ttl}})
	ctx := t.Context()
	id := session.NewID()
	before, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("fetch")), session.WithOwner("owner"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser, Content: "kept"}}); err != nil {
		t.Fatal(err)
	}
	srv.Restart()

	// Same store, no reopening: go-redis reconnects, EVALSHA finds no
	// script after the restart and falls back to EVAL.
	after, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get after a restart: %v", err)
	}
	if after.Version != before.Version || after.Owner != "owner" || !after.State.RecentlyUsedTools.Equal("fetch") {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	msgs, err := s.Messages(ctx, id, 0)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "kept" {
		t.Fatalf("history after restart: %+v, %v", msgs, err)
	}
	pttl, err := rawClient(t, srv).PTTL(ctx, "orchestration-state:{"+id+"}:state").Result()
	if err != nil || pttl > ttl || pttl < ttl-time.Minute {
		t.Fatalf("TTL after restart = %v (%v), want close to %v", pttl, err, ttl)
	}
	if _, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search"))); err != nil {
		t.Fatalf("Update after a restart: %v", err)
	}
}

func TestRedisFaults(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 200 * time.Millisecond
	budget := 3 * timeout // dial + read + write
	const writeRetry = 2 * timeout
	s := openRedis(t, srv, redisstore.Config{Config: session.Config{WriteRetry: writeRetry}, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout})
	ctx := t.Context()
	id := session.NewID()
	stored, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")))
	if err != nil {
		t.Fatal(err)
	}
	write := applyEvent(orchestration.ToolUsed("fetch"))

	for _, fault := range []struct {
		name         string
		break_, heal func()
	}{
		{"stopped", srv.Stop, srv.Restart},
		{"paused", srv.Pause, srv.Resume},
	} {
		t.Run(fault.name, func(t *testing.T) {
			fault.break_()
			healed := false
			defer func() {
				if !healed {
					fault.heal()
				}
			}()
			calls := []struct {
				name string
				call func() error
			}{
				{"Get", func() error { _, err := s.Get(ctx, id); return err }},
				{"Update", func() error { _, err := session.Update(ctx, s, id, write); return err }},
				{"AppendMessages", func() error {
					return s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser, Content: "lost"}})
				}},
				{"Claim", func() error { _, _, err := s.Claim(ctx, id); return err }},
				{"Ping", func() error { return s.Ping(ctx) }},
			}
			maybeApplied := false
			for _, c := range calls {
				start := time.Now()
				err := c.call()
				took := time.Since(start)
				if !errors.Is(err, session.ErrUnavailable) {
					t.Fatalf("%s with Redis %s: error %v, want ErrUnavailable", c.name, fault.name, err)
				}
				// A stopped Redis refuses connections: the write cannot
				// have been applied. A paused one may apply it later.
				if errors.Is(err, session.ErrMaybeApplied) != (fault.name == "paused" && c.name == "AppendMessages") {
					t.Errorf("%s with Redis %s: %v; ErrMaybeApplied only for a write a paused Redis may have taken", c.name, fault.name, err)
				}
				maybeApplied = maybeApplied || errors.Is(err, session.ErrMaybeApplied)
				// Update reads once before writing: two round trips at most;
				// a write that may have been applied is resent for
				// WriteRetry.
				if took > 2*budget+writeRetry+time.Second {
					t.Errorf("%s with Redis %s took %v, want the failure within about %v", c.name, fault.name, took, 2*budget+writeRetry)
				}
				t.Logf("%s with Redis %s: %v after %v", c.name, fault.name, err, took.Round(time.Millisecond))
			}
			fault.heal()
			healed = true
			got, err := s.Get(ctx, id)
			if err != nil {
				t.Fatalf("Get after Redis came back (same store): %v", err)
			}
			if got.Version != stored.Version || !got.State.RecentlyUsedTools.Equal(stored.State.RecentlyUsedTools.Slice()...) {
				t.Fatalf("state changed by the failed calls: %+v, want %+v", got, stored)
			}
			if msgs, err := s.Messages(ctx, id, 0); err != nil || len(msgs) > 1 || len(msgs) == 1 && !maybeApplied {
				t.Fatalf("history after the failed append: %+v, %v (it may hold the message once only when the failure said it may have been applied)", msgs, err)
			}
			if msgs, _ := s.Messages(ctx, id, 0); len(msgs) == 1 {
				// Clear it for the next fault.
				_ = s.Delete(ctx, id)
				stored, _ = session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")))
			}
		})
	}
	if _, err := session.Update(ctx, s, id, write); err != nil {
		t.Fatalf("Update after the faults: %v", err)
	}
}

// TestRedisWriteOutlivesPause: a write sent while Redis is paused, which
// the client cannot know was applied, is resent with the same nonce until
// Redis answers: it succeeds once Redis is back, applied exactly once, so
// that the caller never reports as lost what was saved.
func TestRedisWriteOutlivesPause(t *testing.T) {
	srv := redistest.Start(t)
	const timeout = 200 * time.Millisecond
	s := openRedis(t, srv, redisstore.Config{Config: session.Config{WriteRetry: 10 * time.Second}, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout})
	ctx := t.Context()
	id := session.NewID()
	_, lease, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	for i, write := range []func() error{
		func() error {
			return s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser, Content: "kept once"}}, session.WithLease(lease))
		},
		func() error {
			_, _, err := s.UpdateAppend(ctx, id, applyEvent(orchestration.ToolUsed("search")), []chat.Message{{Role: chat.RoleAssistant, Content: "also once"}}, 0, session.WithLease(lease))
			return err
		},
	} {
		srv.Pause()
		resumed := make(chan struct{})
		go func() {
			time.Sleep(1500 * time.Millisecond)
			srv.Resume()
			close(resumed)
		}()
		err := write()
		<-resumed
		if err != nil {
			t.Fatalf("write %d across a 1.5 s pause: %v", i, err)
		}
	}
	msgs, err := s.Messages(ctx, id, 0)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "kept once" || msgs[1].Content != "also once" {
		t.Fatalf("history %+v, %v: each write applied exactly once", msgs, err)
	}
	sess, _ := s.Get(ctx, id)
	if !sess.State.RecentlyUsedTools.Equal("search") || sess.Version != 1 {
		t.Fatalf("state %+v", sess)
	}
}

// TestRedisAppendsThousands: the scripts push messages 1,000 at a time
// (Lua's unpack takes a bounded number of values), so an append of more
// keeps them all, in order, through AppendMessages and UpdateAppend.
func TestRedisAppendsThousands(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv, redisstore.Config{Config: session.Config{MaxMessages: 10000}})
	ctx := t.Context()
	id := session.NewID()
	batch := func(from, n int) []chat.Message {
		msgs := []chat.Message{{Role: chat.RoleUser, Content: strconv.Itoa(from)}}
		for i := from + 1; i < from+n; i++ {
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: strconv.Itoa(i)})
		}
		return msgs
	}
	if err := s.AppendMessages(ctx, id, batch(0, 2500)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpdateAppend(ctx, id, applyEvent(orchestration.UserMessage("more")), batch(2500, 2500), 0); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Messages(ctx, id, 0)
	if err != nil || len(msgs) != 5000 {
		t.Fatalf("history: %d messages, %v; want 5000", len(msgs), err)
	}
	for i, m := range msgs {
		if m.Content != strconv.Itoa(i) {
			t.Fatalf("message %d is %q: the history is out of order", i, m.Content)
		}
	}
}

func TestNewRedisUnreachable(t *testing.T) {
	// A port nobody listens on: start a server to learn a free port, stop it.
	srv := redistest.Start(t)
	srv.Stop()
	_, err := redisstore.New(redisstore.Config{URL: srv.URL(), DialTimeout: 200 * time.Millisecond})
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("New without a server: %v, want ErrUnavailable", err)
	}
	_, err = redisstore.Open(t.Context(), srv.URL(), session.Config{})
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Open without a server: %v, want ErrUnavailable", err)
	}
}

func TestRedisCorrupt(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv, redisstore.Config{})
	raw := rawClient(t, srv)
	ctx := t.Context()

	t.Run("undecodable state", func(t *testing.T) {
		id := session.NewID()
		key := "orchestration-state:{" + id + "}:state"
		if err := raw.HSet(ctx, key, "version", "3", "data", "{not json").Err(); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, id)
		if !errors.Is(err, session.ErrCorrupt) {
			t.Fatalf("Get: %v, want ErrCorrupt", err)
		}
		if _, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search"))); !errors.Is(err, session.ErrCorrupt) {
			t.Fatalf("Update: %v, want ErrCorrupt", err)
		}
		if _, _, err := s.Claim(ctx, id); !errors.Is(err, session.ErrCorrupt) {
			t.Fatalf("Claim: %v, want ErrCorrupt", err)
		}
		if got, _ := raw.HGet(ctx, key, "data").Result(); got != "{not json" {
			t.Fatalf("the corrupt value was replaced by %q", got)
		}
	})
	t.Run("wrong type", func(t *testing.T) {
		id := session.NewID()
		key := "orchestration-state:{" + id + "}:state"
		if err := raw.Set(ctx, key, "a string", 0).Err(); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Get": func() error { _, err := s.Get(ctx, id); return err }(),
			"Update": func() error {
				_, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")))
				return err
			}(),
			"AppendMessages": s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser}}),
		} {
			if !errors.Is(err, session.ErrCorrupt) {
				t.Errorf("%s on a string key: %v, want ErrCorrupt", name, err)
			}
		}
		if got, _ := raw.Get(ctx, key).Result(); got != "a string" {
			t.Fatalf("the foreign value was replaced by %q", got)
		}
	})
	t.Run("undecodable message", func(t *testing.T) {
		id := session.NewID()
		if err := s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser, Content: "ok"}}); err != nil {
			t.Fatal(err)
		}
		if err := raw.RPush(ctx, "orchestration-state:{"+id+"}:messages", "garbage").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Messages(ctx, id, 0); !errors.Is(err, session.ErrCorrupt) {
			t.Fatalf("Messages: %v, want ErrCorrupt", err)
		}
		if msgs, err := s.Messages(ctx, id, -1); err == nil {
			t.Fatalf("Messages read %+v from a corrupt history", msgs)
		}
	})
}

// commandCounter counts the commands a client sends.
type commandCounter struct {
	mu   sync.Mutex
	cmds []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.cmds = append(c.cmds, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		for _, cmd := range cmds {
			c.cmds = append(c.cmds, cmd.Name())
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (c *commandCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.cmds
	c.cmds = nil
	return out
}

func TestRedisRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	s := openRedis(t, srv, withoutQuotas) // their cost: TestRedisAdmissionRoundTrip
	counter := &commandCounter{}
	s.Client().AddHook(counter)
	ctx := t.Context()
	id := session.NewID()
	var l session.Lease
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"Update creating", func() error {
			_, err := session.Update(ctx, s, id, applyEvent(orchestration.UserMessage("hi")))
			return err
		}, []string{"hget", "evalsha"}},
		// session.Lock: Get, then Claim under the session's owner.
		{"session.Lock", func() (err error) {
			_, l, err = session.Lock(ctx, s, id)
			return err
		}, []string{"evalsha", "evalsha"}},
		// The lease remembers what its turn wrote: no read.
		{"Update tool", func() error {
			_, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")), session.WithLease(l))
			return err
		}, []string{"evalsha"}},
		{"Update usage", func() error {
			_, err := session.Update(ctx, s, id, applyEvent(orchestration.UsageReported(chat.Usage{Prompt: 3})))
			return err
		}, []string{"hget", "evalsha"}},
		{"AppendMessages", func() error {
			return s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser}, {Role: chat.RoleAssistant}}, session.WithLease(l))
		}, []string{"evalsha"}},
		{"Messages", func() error { _, err := s.Messages(ctx, id, 10); return err }, []string{"evalsha"}},
		{"Get", func() error { _, err := s.Get(ctx, id); return err }, []string{"evalsha"}},
		{"Extend", func() error { return l.Extend(ctx) }, []string{"evalsha"}},
		{"script cache flushed", func() error {
			if err := rawClient(t, srv).ScriptFlush(ctx).Err(); err != nil {
				return err
			}
			_, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("fetch")))
			return err
		}, []string{"hget", "evalsha", "eval"}},
		{"Update after the flush", func() error {
			_, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")))
			return err
		}, []string{"hget", "evalsha"}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := counter.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s sent %q, want %q", tc.name, got, tc.want)
		}
	}
	got, err := s.Get(ctx, id)
	if err != nil || !got.State.RecentlyUsedTools.Equal("search", "fetch", "search") || got.State.TokenUsage.Prompt != 3 {
		t.Fatalf("state after the round-trip checks: %+v, %v", got.State, err)
	}

	// A turn's start: Claim, then the user message and the history window
	// in one write, each one round trip. A new store loads the scripts the
	// flush above removed.
	s = openRedis(t, srv, withoutQuotas)
	s.Client().AddHook(counter)
	counter.take()
	id2 := session.NewID()
	var claimed session.Lease
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"Claim creating", func() (err error) {
			_, claimed, err = s.Claim(ctx, id2, session.WithOwner("o"))
			return err
		}, []string{"evalsha"}},
		// The first write under the lease of the claim that created the
		// session also lists it for its owner (after the model call, in a
		// turn): once per session.
		{"UpdateAppend", func() error {
			_, _, err := s.UpdateAppend(ctx, id2, applyEvent(orchestration.UserMessage("hi")), []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 4, session.WithLease(claimed))
			return err
		}, []string{"evalsha", "evalsha"}},
		{"Update usage with the lease", func() error {
			_, err := session.Update(ctx, s, id2, applyEvent(orchestration.UsageReported(chat.Usage{Prompt: 3})), session.WithLease(claimed))
			return err
		}, []string{"evalsha"}},
		{"Release", func() error { return claimed.Release(ctx) }, []string{"evalsha"}},
		{"Claim existing", func() (err error) {
			_, claimed, err = s.Claim(ctx, id2, session.WithOwner("o"))
			return err
		}, []string{"evalsha"}},
		{"UpdateAppend after a write by another replica", func() error {
			other := openRedis(t, srv, redisstore.Config{})
			if _, err := session.Update(ctx, other, id2, applyEvent(orchestration.ToolUsed("fetch"))); err != nil {
				return err
			}
			counter.take()
			st, hist, err := s.UpdateAppend(ctx, id2, applyEvent(orchestration.ToolUsed("search")), nil, -1, session.WithLease(claimed))
			if err == nil && (!st.State.RecentlyUsedTools.Equal("fetch", "search") || len(hist) != 1) {
				err = fmt.Errorf("state %+v, history %+v: the other replica's write was lost", st.State, hist)
			}
			return err
		}, []string{"evalsha", "evalsha"}}, // the conflict hands over the current value
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := counter.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s sent %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := claimed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	counter.take()

	// ClaimStart: the claim and the turn's first write in one round trip
	// when the store knows the session: a new one, or one it wrote last.
	id3 := session.NewID()
	start := func(message string, wantStarted bool, wantHistory int) func() error {
		return func() error {
			_, l, started, err := s.ClaimStart(ctx, id3, func(session.Session) (session.Write, bool) {
				return session.Write{Update: applyEvent(orchestration.UserMessage(message)), Messages: []chat.Message{{Role: chat.RoleUser, Content: message}}, Window: -1}, true
			}, session.WithOwner("o"))
			if err != nil {
				return err
			}
			claimed = l
			if (started != nil) != wantStarted {
				return fmt.Errorf("ClaimStart made the write: %v, want %v", started != nil, wantStarted)
			}
			if started != nil && (started.Session.State.LastUserMessage != message || len(started.History) != wantHistory) {
				return fmt.Errorf("ClaimStart stored %+v with a history of %d, want %q and %d", started.Session.State, len(started.History), message, wantHistory)
			}
			return nil
		}
	}
	end := func() error {
		_, err := session.Update(ctx, s, id3, applyEvent(orchestration.ToolUsed("search")), session.WithLease(claimed), session.WithRelease())
		return err
	}
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"ClaimStart creating", start("one", true, 0), []string{"evalsha"}},
		{"the turn's last write (listing the new session)", end, []string{"evalsha", "evalsha"}},
		{"ClaimStart of the session it wrote", start("two", true, 1), []string{"evalsha"}},
		{"the second turn's last write", end, []string{"evalsha"}},
		{"ClaimStart after a write by another replica", func() error {
			other := openRedis(t, srv, redisstore.Config{})
			if _, err := session.Update(ctx, other, id3, applyEvent(orchestration.ToolUsed("fetch"))); err != nil {
				return err
			}
			counter.take()
			// The claim only: the caller writes on what it claimed.
			return start("three", false, 0)()
		}, []string{"evalsha"}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := counter.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s sent %q, want %q", tc.name, got, tc.want)
		}
	}
	got, err = s.Get(ctx, id3)
	if err != nil || got.State.UserMessages != 2 || !got.State.RecentlyUsedTools.Equal("search", "search", "fetch") {
		t.Fatalf("after the ClaimStarts: %+v, %v", got.State, err)
	}
}

// TestRedisReplicas runs several stores (replicas) on one session: only the
// compare-and-set keeps their writes apart.
func TestRedisReplicas(t *testing.T) {
	srv := redistest.Start(t)
	const replicas, workers, events = 4, 4, 50
	var stores []*redisstore.Store
	for range replicas {
		stores = append(stores, openRedis(t, srv, redisstore.Config{}))
	}
	ctx := t.Context()
	id := session.NewID()
	var fnRuns atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, replicas*workers)
	for r, s := range stores {
		for w := range workers {
			wg.Go(func() {
				for i := range events {
					ev := orchestration.ToolUsed("search")
					if i%2 == 1 {
						ev = orchestration.UsageReported(chat.Usage{Prompt: 1, Completion: 2})
					}
					_, err := session.Update(ctx, s, id, func(st *orchestration.State) error {
						fnRuns.Add(1)
						return applyEvent(ev)(st)
					})
					if err != nil {
						errs <- fmt.Errorf("replica %d worker %d event %d: %w", r, w, i, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := stores[0].Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	total := replicas * workers * events
	if got.Version != int64(total) || got.State.RecentlyUsedTools.Len() != total/2 ||
		got.State.TokenUsage != (chat.Usage{Prompt: int64(total / 2), Completion: int64(total), Total: int64(total / 2 * 3)}) {
		t.Fatalf("after %d events from %d replicas: version %d, %d tools, usage %+v", total, replicas, got.Version, got.State.RecentlyUsedTools.Len(), got.State.TokenUsage)
	}
	t.Logf("%d events, fn ran %d times (the rest were compare-and-set retries)", total, fnRuns.Load())
}
