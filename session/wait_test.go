package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counting is a memory store that counts the Position calls, the only
// store calls of a waiter between its Enqueue and its turn.
type counting struct {
	*Memory
	positions atomic.Int64
}

func (c *counting) Position(ctx context.Context, id, ticket string, ttl time.Duration) (int, error) {
	c.positions.Add(1)
	return c.Memory.Position(ctx, id, ticket, ttl)
}

// polling is a Queuer that is not a Notifier: its Watch hides the
// memory store's.
type polling struct{ *counting }

func (p polling) Watch() {}

// TestWaitersInOrder: messages queued behind a running turn start in the
// order they came, each when the turn before it released the session;
// with a Notifier store none asks the store while it waits, and without
// one they poll.
func TestWaitersInOrder(t *testing.T) {
	for _, notify := range []bool{true, false} {
		m := NewMemory(Config{})
		defer m.Close()
		c := &counting{Memory: m}
		var q Queuer = c
		if !notify {
			q = polling{c}
		}
		if _, ok := q.(Notifier); ok != notify {
			t.Fatalf("notifier %v", ok)
		}
		w := NewWaiters(q, WaitersConfig{})
		ctx := t.Context()
		key := Key("alice", "waited-session")
		_, held, err := m.Claim(ctx, key, WithOwner("alice"))
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			started []int
			leases  = make(chan Lease, 3)
			wg      sync.WaitGroup
		)
		for i := range 3 {
			wg.Go(func() {
				err := w.Wait(ctx, key, 8, time.Now().Add(time.Minute), func() (bool, error) {
					_, l, err := m.Claim(ctx, key, WithOwner("alice"))
					if errors.Is(err, ErrBusy) {
						return false, nil
					}
					if err == nil {
						mu.Lock()
						started = append(started, i)
						mu.Unlock()
						leases <- l
					}
					return true, err
				})
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
				}
			})
			// In order: each is queued before the next comes.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				if n, _ := m.Queued(ctx, key); n == i+1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the waiter was not queued")
				}
			}
		}
		if got := w.Waiting(key); got != 3 {
			t.Fatalf("Waiting: %d", got)
		}
		time.Sleep(300 * time.Millisecond)
		asked := c.positions.Load()
		if notify && asked != 0 {
			t.Errorf("with notices, the waiters asked the store %d times in 300 ms", asked)
		}
		if !notify && asked < 3 {
			t.Errorf("without notices, the waiters asked the store %d times in 300 ms; want them to poll", asked)
		}
		_ = held.Release(ctx)
		for range 3 {
			select {
			case l := <-leases:
				_ = l.Release(ctx)
			case <-time.After(10 * time.Second):
				t.Fatal("a waiter did not start")
			}
		}
		wg.Wait()
		if len(started) != 3 || started[0] != 0 || started[1] != 1 || started[2] != 2 {
			t.Errorf("notify %v: started %v, want 0 1 2", notify, started)
		}
		if n, _ := m.Queued(ctx, key); n != 0 || w.Waiting(key) != 0 {
			t.Errorf("after: %d queued, %d waiting", n, w.Waiting(key))
		}
	}
}

// TestWaitersBounds: an owner's waiters are capped, other owners' are
// not affected, and a waiter gives up at its deadline or when its client
// goes away, leaving the queue.
func TestWaitersBounds(t *testing.T) {
	m := NewMemory(Config{})
	defer m.Close()
	w := NewWaiters(m, WaitersConfig{MaxPerOwner: 2})
	ctx, cancel := context.WithCancel(t.Context())
	busy := func() (bool, error) { return false, nil }
	a, b := Key("alice", "session-one"), Key("alice", "session-two")
	errs := make(chan error, 2)
	for _, key := range []string{a, b} {
		go func() { errs <- w.Wait(ctx, key, 8, time.Now().Add(time.Minute), busy) }()
	}
	for deadline := time.Now().Add(5 * time.Second); w.Waiting(a) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiters did not wait")
		}
	}
	if err := w.Wait(t.Context(), a, 8, time.Now().Add(time.Minute), busy); !errors.Is(err, ErrTooManyWaiting) {
		t.Fatalf("alice's third waiter: %v", err)
	}
	if err := w.Wait(t.Context(), Key("bob", "session-three"), 8, time.Now().Add(100*time.Millisecond), busy); !errors.Is(err, ErrWaitedTooLong) {
		t.Fatalf("bob's waiter past its deadline: %v", err)
	}
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiter whose client went away: %v", err)
		}
	}
	if n, _ := m.Queued(t.Context(), a); n != 0 || w.Waiting(a) != 0 {
		t.Fatalf("after: %d queued, %d waiting", n, w.Waiting(a))
	}
}
