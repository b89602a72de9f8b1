package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// Errors of Waiters.Wait.
var (
	// ErrTooManyWaiting: the owner has as many messages waiting for busy
	// sessions as Waiters allows it.
	ErrTooManyWaiting = errors.New("the owner has as many messages waiting for busy sessions as it may")
	// ErrWaitedTooLong: the message waited for its turn until its deadline.
	ErrWaitedTooLong = errors.New("the message waited for the session's running turn longer than it may")
)

// Waiters wait for busy sessions' turns (a server's busy policy
// "enqueue"): each waiting message holds a ticket in its session's queue
// (a Queuer), so that messages start in the order they came, on whichever
// replica they reached. A waiter costs the store nothing while it waits
// but the renewal of its ticket: with a Notifier it tries its turn when
// told, and asks the store otherwise only when it renews its ticket
// (TicketTTL/3). A store that is not a Notifier is asked every poll.
// An owner has at most MaxPerOwner messages waiting in this process.
type Waiters struct {
	q   Queuer
	cfg WaitersConfig

	mu       sync.Mutex
	perOwner map[string]int
}

// WaitersConfig configures Waiters.
type WaitersConfig struct {
	// MaxPerOwner bounds the messages of one owner waiting at once in
	// this process (default DefaultMaxWaitingPerOwner; negative: none).
	MaxPerOwner int
	// TicketTTL is how long a ticket outlives its last renewal: a replica
	// that died with messages waiting holds their queue that long
	// (default DefaultTicketTTL). Tickets are renewed every third of it.
	TicketTTL time.Duration
}

// Defaults of WaitersConfig.
const (
	DefaultMaxWaitingPerOwner = 256
	DefaultTicketTTL          = 15 * time.Second
)

// poll is how often a waiter whose store is not a Notifier asks it.
const poll = 50 * time.Millisecond

// NewWaiters returns the waiters of q's sessions.
func NewWaiters(q Queuer, cfg WaitersConfig) *Waiters {
	if cfg.MaxPerOwner == 0 {
		cfg.MaxPerOwner = DefaultMaxWaitingPerOwner
	}
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	return &Waiters{q: q, cfg: cfg, perOwner: map[string]int{}}
}

// ownerOfKey is the owner part of a store key (Key): the digest before
// its dot, "" for the anonymous owner's.
func ownerOfKey(key string) string {
	owner, _, scoped := strings.Cut(key, ".")
	if !scoped {
		return ""
	}
	return owner
}

// hold counts one more waiting message of owner, unless it has its most.
func (w *Waiters) hold(owner string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.MaxPerOwner > 0 && w.perOwner[owner] >= w.cfg.MaxPerOwner {
		return false
	}
	w.perOwner[owner]++
	return true
}

func (w *Waiters) unhold(owner string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.perOwner[owner]--; w.perOwner[owner] <= 0 {
		delete(w.perOwner, owner)
	}
}

// Waiting is how many messages of the owner of key wait in this process.
func (w *Waiters) Waiting(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.perOwner[ownerOfKey(key)]
}

// Wait queues a message on session key (a store key, whose owner it
// counts) behind at most max others, and calls try when its turn may have
// come: when it is first in the queue and told the session is free, and
// on every renewal of its ticket while it is first. try reports whether
// the turn started (or failed for good: its error is Wait's); false means
// the session is still busy. The message leaves the queue when Wait
// returns. Wait returns ErrQueueFull, ErrTooManyWaiting, ErrWaitedTooLong
// once deadline passed, ctx's error when the client went away, the
// store's error, or try's.
func (w *Waiters) Wait(ctx context.Context, key string, max int, deadline time.Time, try func() (bool, error)) error {
	owner := ownerOfKey(key)
	if !w.hold(owner) {
		return ErrTooManyWaiting
	}
	defer w.unhold(owner)
	ticket := NewID()
	// Told before it is queued, so that no notice is missed.
	wake := make(chan struct{}, 1)
	renew := w.cfg.TicketTTL / 3
	if n, ok := w.q.(Notifier); ok {
		stop := n.Watch(key, func(first string) {
			if first == ticket {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
		defer stop()
	} else {
		renew = poll
	}
	pos, err := w.q.Enqueue(ctx, key, ticket, max, w.cfg.TicketTTL)
	if err != nil {
		return err
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// A ticket that could not be removed expires by itself.
		_ = w.q.Leave(lctx, key, ticket)
	}()
	timer := time.NewTimer(renew)
	defer timer.Stop()
	over := time.NewTimer(time.Until(deadline))
	defer over.Stop()
	for {
		if pos == 0 {
			if done, err := try(); done || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-over.C:
			return ErrWaitedTooLong
		case <-wake:
			// First, and the session was just freed: try at once; the
			// ticket keeps its place.
			pos = 0
			continue
		case <-timer.C:
			timer.Reset(renew)
		}
		if pos, err = w.q.Position(ctx, key, ticket, w.cfg.TicketTTL); err != nil {
			return err
		}
		if pos < 0 {
			// The ticket expired (the store did not answer for a while):
			// queue again, at the end.
			if pos, err = w.q.Enqueue(ctx, key, ticket, max+1, w.cfg.TicketTTL); err != nil {
				return err
			}
		}
	}
}
