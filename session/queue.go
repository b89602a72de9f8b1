package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrQueueFull: a session's queue of waiting messages holds its maximum
// already (Queuer.Enqueue).
var ErrQueueFull = errors.New("the session's queue of waiting messages is full")

// A Notifier is a Queuer that tells, on every replica, when the ticket
// first in a session's queue may start its turn: the session's lease was
// released while tickets wait, or the first ticket left and others wait.
// A waiter then asks the store once, instead of asking it on a timer. The
// memory store tells its own waiters; the Redis store publishes on the
// queue's key (pub/sub), which every replica's store hears on one
// connection.
type Notifier interface {
	Queuer
	// Watch calls fn with the ticket now first in session id's queue each
	// time it may start its turn, until stop is called. fn must not block.
	// A notice can be lost (a replica's subscription was down): a waiter
	// still asks the store every renewal of its ticket.
	Watch(id string, fn func(first string)) (stop func())
}

// A Queuer is a Store that keeps, beside each session, the queue of the
// messages that wait for the turn running on it (a server's busy policy
// "enqueue"): tickets in the order they came, which any replica can read.
// A ticket that is not renewed within its ttl is dropped, so that the
// tickets of a replica that died do not hold a queue. The memory store
// and the Redis store are Queuers.
type Queuer interface {
	// Enqueue adds ticket at the end of the queue of session id, unless
	// the queue holds max tickets already (ErrQueueFull), and returns its
	// position (0: first). Enqueueing a ticket that waits already renews
	// it.
	Enqueue(ctx context.Context, id, ticket string, max int, ttl time.Duration) (int, error)
	// Position renews ticket and returns its position (0: first), or -1
	// when the queue no longer holds it (it expired).
	Position(ctx context.Context, id, ticket string, ttl time.Duration) (int, error)
	// Leave removes ticket from the queue (its turn started, or its
	// client went away).
	Leave(ctx context.Context, id, ticket string) error
	// Queued returns how many tickets wait in the session's queue.
	Queued(ctx context.Context, id string) (int, error)
}

// memQueues are the memory store's queues, and who watches them.
type memQueues struct {
	mu sync.Mutex
	q  map[string][]memTicket
	// watchers are the Watch functions of each session.
	watchers map[string]map[*func(string)]struct{}
}

type memTicket struct {
	id      string
	expires time.Time
}

// live drops the expired tickets of the session's queue; q.mu is held.
func (q *memQueues) live(id string, now time.Time) []memTicket {
	l := slices.DeleteFunc(q.q[id], func(t memTicket) bool { return !now.Before(t.expires) })
	if len(l) == 0 {
		delete(q.q, id)
		return nil
	}
	q.q[id] = l
	return l
}

// Enqueue implements Queuer.
func (m *Memory) Enqueue(_ context.Context, id, ticket string, max int, ttl time.Duration) (int, error) {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	now := m.cfg.Now()
	l := q.live(id, now)
	if i := slices.IndexFunc(l, func(t memTicket) bool { return t.id == ticket }); i >= 0 {
		l[i].expires = now.Add(ttl)
		return i, nil
	}
	if len(l) >= max {
		return 0, ErrQueueFull
	}
	if q.q == nil {
		q.q = make(map[string][]memTicket)
	}
	q.q[id] = append(l, memTicket{id: ticket, expires: now.Add(ttl)})
	return len(l), nil
}

// Position implements Queuer.
func (m *Memory) Position(_ context.Context, id, ticket string, ttl time.Duration) (int, error) {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	now := m.cfg.Now()
	l := q.live(id, now)
	i := slices.IndexFunc(l, func(t memTicket) bool { return t.id == ticket })
	if i >= 0 {
		l[i].expires = now.Add(ttl)
	}
	return i, nil
}

// Leave implements Queuer.
func (m *Memory) Leave(_ context.Context, id, ticket string) error {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	wasFirst := len(q.q[id]) > 0 && q.q[id][0].id == ticket
	l := slices.DeleteFunc(q.q[id], func(t memTicket) bool { return t.id == ticket })
	if len(l) == 0 {
		delete(q.q, id)
	} else {
		q.q[id] = l
	}
	if wasFirst {
		q.notify(id, m.cfg.Now())
	}
	return nil
}

// Watch implements Notifier.
func (m *Memory) Watch(id string, fn func(first string)) (stop func()) {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.watchers == nil {
		q.watchers = map[string]map[*func(string)]struct{}{}
	}
	if q.watchers[id] == nil {
		q.watchers[id] = map[*func(string)]struct{}{}
	}
	q.watchers[id][&fn] = struct{}{}
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.watchers[id], &fn)
		if len(q.watchers[id]) == 0 {
			delete(q.watchers, id)
		}
	}
}

// notify tells the watchers of session id which ticket is first, when one
// waits. q.mu is held.
func (q *memQueues) notify(id string, now time.Time) {
	l := q.live(id, now)
	if len(l) == 0 {
		return
	}
	for fn := range q.watchers[id] {
		(*fn)(l[0].id)
	}
}

// released tells the watchers of session id that its lease was released.
// m.mu may be held: the queues have a lock of their own, taken after it.
func (m *Memory) released(id string, now time.Time) {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	q.notify(id, now)
}

// Queued implements Queuer.
func (m *Memory) Queued(_ context.Context, id string) (int, error) {
	q := &m.queues
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.live(id, m.cfg.Now())), nil
}
