package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/outbox/redisoutbox"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// stores opens, for each implementation, a function that gives another
// replica's view of one store: the same Memory, or a new Redis client on
// the same keys.
func stores(t *testing.T) map[string]func() outbox.Store {
	mem := outbox.NewMemory()
	out := map[string]func() outbox.Store{"memory": func() outbox.Store { return mem }}
	srv := redistest.Start(t)
	prefix := "outbox-" + session.NewID()
	out["redis"] = func() outbox.Store {
		st, err := redisstore.New(redisstore.Config{URL: srv.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := redisoutbox.New(redisoutbox.Config{Client: st.Client(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return out
}

// TestStoreClaim: a delivery is handed out once it is due, and then not
// again before its hold expires; one put with a later due time waits;
// a deleted one is gone.
func TestStoreClaim(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			ctx := context.Background()
			now := time.Now()
			due := outbox.Delivery{ID: "msg_" + session.NewID(), Target: "http://h/x", Owner: "o", Body: []byte(`{"a":1}`), Attempts: 2}
			later := outbox.Delivery{ID: "msg_" + session.NewID(), Target: "http://h/y", Run: &outbox.Run{Session: "s1", Turn: "t1", Agent: "a"}}
			if err := s.Put(ctx, due, now.Add(-time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, later, now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			got, err := s.Claim(ctx, now, 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ID != due.ID || string(got[0].Body) != `{"a":1}` || got[0].Attempts != 2 || got[0].Owner != "o" {
				t.Fatalf("claimed %+v, want %+v", got, due)
			}
			if again, _ := s.Claim(ctx, now.Add(30*time.Second), 10, time.Minute); len(again) != 0 {
				t.Fatalf("claimed again within the hold: %+v", again)
			}
			both, _ := s.Claim(ctx, now.Add(2*time.Hour), 10, time.Minute)
			ids := []string{}
			for _, d := range both {
				ids = append(ids, d.ID)
				if d.ID == later.ID && (d.Run == nil || d.Run.Turn != "t1" || d.Body != nil) {
					t.Errorf("the run's delivery came back as %+v", d)
				}
			}
			slices.Sort(ids)
			want := []string{due.ID, later.ID}
			slices.Sort(want)
			if !slices.Equal(ids, want) {
				t.Fatalf("after both were due: %v, want %v", ids, want)
			}
			for _, id := range want {
				if err := s.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if left, _ := s.Claim(ctx, now.Add(24*time.Hour), 10, time.Minute); len(left) != 0 {
				t.Fatalf("deleted deliveries handed out: %+v", left)
			}
		})
	}
}

// calls records the calls a receiver got, by delivery ID, and fails the
// first fail of them.
type calls struct {
	mu   sync.Mutex
	ids  []string
	fail int
	got  chan string
}

func (c *calls) send(_ context.Context, d outbox.Delivery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, d.ID+" "+string(d.Body))
	if len(c.ids) <= c.fail {
		return errors.New("503 (simulated)")
	}
	c.got <- d.ID
	return nil
}

func quick(s outbox.Store, send func(context.Context, outbox.Delivery) error, resolve func(context.Context, outbox.Delivery) ([]byte, error)) outbox.Config {
	return outbox.Config{Store: s, Send: send, Resolve: resolve, Backoff: 20 * time.Millisecond, Poll: 20 * time.Millisecond,
		Hold: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
}

func wait(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery made")
		return ""
	}
}

// TestOutboxRetries: a receiver that fails twice gets the delivery a
// third time, with the same ID and body each time, and the store keeps
// nothing after it.
func TestOutboxRetries(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			c := &calls{fail: 2, got: make(chan string, 1)}
			o, err := outbox.New(quick(open(), c.send, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close(context.Background())
			id := "msg_" + session.NewID()
			if err := o.Add(context.Background(), outbox.Delivery{ID: id, Target: "http://h/x", Body: []byte(`{"n":1}`)}); err != nil {
				t.Fatal(err)
			}
			if got := wait(t, c.got); got != id {
				t.Fatalf("made %s, want %s", got, id)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			want := id + ` {"n":1}`
			if len(c.ids) != 3 || c.ids[0] != want || c.ids[1] != want || c.ids[2] != want {
				t.Fatalf("the receiver got %q, want three calls of %q", c.ids, want)
			}
		})
	}
}

// TestOutboxGivesUp: a delivery whose calls all fail is dropped after
// Attempts calls, one the receiver refuses for good after one.
func TestOutboxGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		calls int
	}{
		{"failing", errors.New("503"), 3},
		{"refused", fmt.Errorf("410: %w", outbox.ErrGiveUp), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := outbox.NewMemory()
			var mu sync.Mutex
			n := 0
			cfg := quick(mem, func(context.Context, outbox.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				n++
				return tc.err
			}, nil)
			cfg.Attempts = 3
			o, err := outbox.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close(context.Background())
			if err := o.Add(context.Background(), outbox.Delivery{ID: "msg_1", Target: "http://h/x", Body: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); mem.Len() > 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the delivery was never dropped")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if n != tc.calls {
				t.Fatalf("%d calls, want %d", n, tc.calls)
			}
		})
	}
}

// dying is a replica's view of a store that the replica stops reaching
// once it died: its writes (the hold it renews) no longer land.
type dying struct {
	outbox.Store
	mu   sync.Mutex
	dead bool
}

func (d *dying) kill() { d.mu.Lock(); d.dead = true; d.mu.Unlock() }

func (d *dying) gone() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return fmt.Errorf("the replica died: %w", session.ErrUnavailable)
	}
	return nil
}

func (d *dying) Put(ctx context.Context, dl outbox.Delivery, due time.Time) error {
	if err := d.gone(); err != nil {
		return err
	}
	return d.Store.Put(ctx, dl, due)
}

func (d *dying) Claim(ctx context.Context, now time.Time, n int, hold time.Duration) ([]outbox.Delivery, error) {
	if err := d.gone(); err != nil {
		return nil, err
	}
	return d.Store.Claim(ctx, now, n, hold)
}

// TestOutboxOutlivesItsReplica: replica A queues a delivery of a run's end
// and dies waiting for the run (its Resolve never returns, and nothing it
// writes lands any more); once A's hold expired, replica B takes the delivery,
// waits for the run itself and makes the call, with A's ID. And a replica
// that closes (its run goes on elsewhere) leaves its delivery to the
// next, at once.
func TestOutboxOutlivesItsReplica(t *testing.T) {
	for name, open := range stores(t) {
		for _, closes := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s", name, map[bool]string{false: "killed", true: "closed"}[closes]), func(t *testing.T) {
				hang := make(chan struct{})
				defer close(hang)
				deadResolve := func(ctx context.Context, d outbox.Delivery) ([]byte, error) {
					select {
					case <-hang:
					case <-ctx.Done():
					}
					return nil, errors.New("the replica is gone")
				}
				c := &calls{got: make(chan string, 1)}
				storeA := &dying{Store: open()}
				a, err := outbox.New(quick(storeA, c.send, deadResolve))
				if err != nil {
					t.Fatal(err)
				}
				id := "msg_" + session.NewID()
				run := &outbox.Run{Session: "sess-0001", Turn: "turn-0001", Agent: "ag"}
				if err := a.Add(context.Background(), outbox.Delivery{ID: id, Target: "http://h/x", Run: run}); err != nil {
					t.Fatal(err)
				}
				if closes {
					if err := a.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
				} else {
					storeA.kill()
				}
				b, err := outbox.New(quick(open(), c.send, func(_ context.Context, d outbox.Delivery) ([]byte, error) {
					return []byte(`{"turn":"` + d.Run.Turn + `"}`), nil
				}))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close(context.Background())
				if got := wait(t, c.got); got != id {
					t.Fatalf("B made %s, want A's %s", got, id)
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				if len(c.ids) != 1 || c.ids[0] != id+` {"turn":"turn-0001"}` {
					t.Fatalf("the receiver got %q", c.ids)
				}
			})
		}
	}
}

// TestOutboxHoldsWhileItWorks: a call that lasts several holds is not
// taken up by another replica meanwhile: its replica renews the hold
// while it works. Once it failed, the other replica may make the next
// attempt.
func TestOutboxHoldsWhileItWorks(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			// A hold with room for a late renewal on a loaded machine.
			const hold = 600 * time.Millisecond
			var (
				mu      sync.Mutex
				starts  []string
				working bool // the first call is under way
			)
			made := make(chan string, 2)
			send := func(who string) func(context.Context, outbox.Delivery) error {
				return func(ctx context.Context, d outbox.Delivery) error {
					mu.Lock()
					if working {
						who += " (while the first call was under way)"
					}
					starts = append(starts, who)
					first := len(starts) == 1
					working = first
					mu.Unlock()
					if first {
						// Three holds long, then a failure.
						select {
						case <-time.After(3 * hold):
						case <-ctx.Done():
						}
						mu.Lock()
						working = false
						mu.Unlock()
						return errors.New("503 (simulated)")
					}
					made <- d.ID
					return nil
				}
			}
			cfg := quick(open(), send("A"), nil)
			cfg.Hold = hold
			a, err := outbox.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close(context.Background())
			id := "msg_" + session.NewID()
			if err := a.Add(context.Background(), outbox.Delivery{ID: id, Target: "http://h/x", Body: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			cfg = quick(open(), send("B"), nil)
			cfg.Hold = hold
			b, err := outbox.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close(context.Background())
			if got := wait(t, made); got != id {
				t.Fatalf("made %s, want %s", got, id)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(starts) != 2 || starts[0] != "A" || strings.Contains(starts[1], "while") {
				t.Fatalf("calls started by %v; want A's, then one more once it failed", starts)
			}
		})
	}
}
