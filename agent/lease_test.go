package agent_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/template"
)

// gatedModel blocks each call until the test lets it answer (or the call's
// context ends), so that a test can act while a turn is in the model call.
type gatedModel struct {
	started chan struct{} // receives once per call, when it starts
	proceed chan struct{} // one value lets one call answer
}

func newGatedModel() *gatedModel {
	return &gatedModel{started: make(chan struct{}, 16), proceed: make(chan struct{}, 16)}
}

func (m *gatedModel) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "gated"} }

func (m *gatedModel) Stream(ctx context.Context, _ llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		m.started <- struct{}{}
		select {
		case <-m.proceed:
		case <-ctx.Done():
			yield(chat.Event{}, ctx.Err())
			return
		}
		yield(chat.Event{Kind: chat.KindTextDelta, Text: "the model's answer"}, nil)
	}
}

// syncBuffer is a log destination that tests read while turns write to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitLog waits until the log holds want; the bound only keeps a broken
// build from hanging.
func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", want, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const plainTemplate = `{"agentId": "plain", "name": "Plain", "nodes": ["llm.openai"], "chatSettings": {"historyPolicy": "lastN", "historyLength": 4}}`

func gatedNode(t testing.TB, store session.Store, cfg agent.Options, model llmorch.Model) *agent.Agent {
	t.Helper()
	a, ds := template.Load("plain.json", []byte(plainTemplate), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	cfg.Store = store
	cfg.Models = func(*template.Template) (llmorch.Model, error) { return model, nil }
	agents, err := agent.NewSet(cfg, []*template.Loaded{a})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := agents.Get("plain")
	return n
}

// startTurn starts a turn and iterates it in the background; the channel
// gets its events when it ends.
func startTurn(t *testing.T, n *agent.Agent, id, msg string) <-chan []chat.Event {
	t.Helper()
	// Run starts the turn when iterated: the goroutine that collects its
	// events is the only one the turn has.
	done := make(chan []chat.Event, 1)
	go func() {
		var out []chat.Event
		for ev, err := range n.Run(context.Background(), id, agent.Text(msg)) {
			if err != nil {
				t.Errorf("Run: %v", err)
				break
			}
			out = append(out, ev)
		}
		done <- out
	}()
	return done
}

const privateMessage = "my private words about the merger"

// TestLeaseReleasedAfterRedisComesBack: Redis is stopped while a turn is in
// the model call, so the turn cannot release its lease, which Redis keeps
// (append-only file) across the restart. The release is retried in the
// background, so the session's next turn gets the lease although LockTTL
// is ten minutes.
func TestLeaseReleasedAfterRedisComesBack(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.New(redisstore.Config{
		URL: srv.URL(), DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		// LockWait lets the next turn wait for the release instead of
		// failing at once; it is far shorter than LockTTL.
		Config: session.Config{LockTTL: 10 * time.Minute, LockWait: 30 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	logs := &syncBuffer{}
	model := newGatedModel()
	n := gatedNode(t, store, agent.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, model)
	id := session.NewID()

	done := startTurn(t, n, id, privateMessage)
	<-model.started
	srv.Stop()
	model.proceed <- struct{}{}
	evs := <-done
	if len(evs) == 0 || evs[len(evs)-1].Kind != chat.KindDone {
		t.Fatalf("the turn with Redis down did not end with done: %v", kinds(evs))
	}
	var code string
	for _, ev := range evs {
		if ev.Kind == chat.KindError {
			code = ev.Error.Code
		}
	}
	if code != llmorch.CodeStoreUnavailable {
		t.Fatalf("the turn with Redis down reported error code %q, want %q (events %v)", code, llmorch.CodeStoreUnavailable, kinds(evs))
	}
	waitLog(t, logs, "retrying in the background")

	srv.Restart()
	done = startTurn(t, n, id, "and again")
	<-model.started
	model.proceed <- struct{}{}
	evs = <-done
	if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishStop {
		t.Fatalf("the next turn after Redis came back: %v, finish %q", kinds(evs), last.FinishReason)
	}
	waitLog(t, logs, "session lease released after the store came back")
	if strings.Contains(logs.String(), privateMessage) || strings.Contains(logs.String(), "the model's answer") {
		t.Fatalf("chat content in the log:\n%s", logs.String())
	}
}

// TestLeaseReleaseGivesUpAtExpiry: with Redis down for good, the background
// release stops once the lease has expired by itself.
func TestLeaseReleaseGivesUpAtExpiry(t *testing.T) {
	srv := redistest.Start(t)
	store, err := redisstore.New(redisstore.Config{
		URL: srv.URL(), DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		Config: session.Config{LockTTL: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	logs := &syncBuffer{}
	model := newGatedModel()
	n := gatedNode(t, store, agent.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))}, model)

	done := startTurn(t, n, session.NewID(), privateMessage)
	<-model.started
	srv.Stop()
	model.proceed <- struct{}{}
	<-done
	waitLog(t, logs, "retrying in the background")
	waitLog(t, logs, "session lease expired before it could be released")
	if strings.Contains(logs.String(), privateMessage) {
		t.Fatalf("chat content in the log:\n%s", logs.String())
	}
}

// TestLeaseFreeWhenDoneArrives: the lease is released before the turn's
// Done event is yielded, so a client that sends its next message as soon as
// it sees Done is not refused as busy (the stores' LockWait is 0: Lock
// refuses a held session at once).
func TestLeaseFreeWhenDoneArrives(t *testing.T) {
	for _, st := range memoryAndRedis() {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			defer store.Close()
			n := gatedNode(t, store, agent.Options{}, &recordingModel{})
			id := session.NewID()
			for i := range 3 {
				events, err := agent.Started(n.Run(context.Background(), id, agent.Text("hello")))
				if err != nil {
					t.Fatalf("turn %d: %v", i, err)
				}
				sawDone := false
				for ev := range events {
					if ev.Kind != chat.KindDone {
						continue
					}
					sawDone = true
					_, l, err := session.Lock(context.Background(), store, id)
					if err != nil {
						t.Fatalf("turn %d: Lock as Done arrives: %v", i, err)
					}
					if err := l.Release(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if !sawDone {
					t.Fatalf("turn %d: no Done", i)
				}
			}
		})
	}
}

// testClock is a memory store's Config.Now that the test moves.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// extendCounting reports every successful Extend of the leases it hands
// out.
type extendCounting struct {
	session.Store
	extended chan struct{}
}

func (s *extendCounting) Claim(ctx context.Context, id string, opts ...session.UpdateOption) (session.Session, session.Lease, error) {
	sess, l, err := s.Store.Claim(ctx, id, opts...)
	if err != nil {
		return sess, nil, err
	}
	return sess, &countedLease{Lease: l, extended: s.extended}, nil
}

type countedLease struct {
	session.Lease
	extended chan struct{}
}

func (l *countedLease) Extend(ctx context.Context) error {
	err := l.Lease.Extend(ctx)
	if err == nil {
		select {
		case l.extended <- struct{}{}:
		default:
		}
	}
	return err
}

// TestLeaseRenewal: a turn longer than LockTTL keeps its lease by renewing
// it, and a turn whose lease was lost is cancelled.
func TestLeaseRenewal(t *testing.T) {
	clock := &testClock{}
	const lockTTL = 30 * time.Second
	mem := session.NewMemory(session.Config{LockTTL: lockTTL, Now: clock.Now})
	defer mem.Close()
	store := &extendCounting{Store: mem, extended: make(chan struct{}, 1)}
	logs := &syncBuffer{}
	model := newGatedModel()
	n := gatedNode(t, store, agent.Options{LeaseRenewal: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))}, model)
	id := session.NewID()

	done := startTurn(t, n, id, "a long turn")
	<-model.started
	// Two thirds of LockTTL pass; wait for renewals that surely started
	// after that (one could have been under way), then pass the first
	// LockTTL: the lease holds.
	clock.advance(lockTTL * 2 / 3)
	for range 3 {
		<-store.extended
	}
	clock.advance(lockTTL * 2 / 3)
	if _, _, err := session.Lock(context.Background(), mem, id); !errors.Is(err, session.ErrBusy) {
		t.Fatalf("Lock past the first LockTTL of a renewing turn: %v, want ErrBusy", err)
	}

	// The lease is lost (the session deleted under the turn): the turn is
	// cancelled at the next renewal instead of running to its end.
	if err := mem.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	evs := <-done
	if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishCancelled {
		t.Fatalf("turn whose lease was lost: %v, finish %q, want cancelled", kinds(evs), last.FinishReason)
	}
	waitLog(t, logs, "session lease lost; cancelling the turn")
}

// TestOpenTurnGoroutines: a turn waiting in the model call costs one
// goroutine of the runtime's own, its lease renewal; the other one per
// turn here is the test's, which iterates the events.
func TestOpenTurnGoroutines(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	model := newGatedModel()
	model.started = make(chan struct{}, 100)
	n := gatedNode(t, store, agent.Options{}, model)
	const turns = 50
	before := runtime.NumGoroutine()
	var done []<-chan []chat.Event
	for range turns {
		done = append(done, startTurn(t, n, session.NewID(), "hello"))
	}
	for range turns {
		<-model.started
	}
	per := float64(runtime.NumGoroutine()-before) / turns
	for range turns {
		model.proceed <- struct{}{}
	}
	for _, d := range done {
		<-d
	}
	t.Logf("goroutines per open turn: %.2f (including the test's iterator)", per)
	if per > 2 {
		t.Fatalf("%.2f goroutines per open turn, want at most 2: the test's iterator and the lease renewal", per)
	}
}
