package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
)

// scriptQueue keeps a session's queue of waiting messages (session.Queuer):
// KEYS[1] a sorted set of the tickets by arrival (Redis's clock, ms),
// KEYS[2] a hash of each ticket's expiry. Expired tickets are dropped
// first. ARGV: op (enqueue, position, leave, len), ticket, max, ttl ms.
// Reply: the ticket's position, -1 when not queued, -2 when the queue is
// full; the length for len. Both keys expire a minute after the last
// renewal, so that an abandoned queue leaves nothing behind. The first
// ticket leaving publishes the next on KEYS[1] (session.Notifier), as a
// released lease does (luaWake).
var scriptQueue = newScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) <= now then
    redis.call('HDEL', KEYS[2], all[i])
    redis.call('ZREM', KEYS[1], all[i])
  end
end
local op, ticket = ARGV[1], ARGV[2]
if op == 'len' then
  return redis.call('ZCARD', KEYS[1])
end
if op == 'leave' then
  local rank = redis.call('ZRANK', KEYS[1], ticket)
  redis.call('ZREM', KEYS[1], ticket)
  redis.call('HDEL', KEYS[2], ticket)
  if rank == 0 then
    -- The first left (its client went away): the next may start.
    local first = redis.call('ZRANGE', KEYS[1], 0, 0)
    if first[1] then
      redis.call('PUBLISH', KEYS[1], first[1])
    end
  end
  return -1
end
local queued = redis.call('ZSCORE', KEYS[1], ticket)
if not queued then
  if op ~= 'enqueue' then
    return -1
  end
  if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
    return -2
  end
  redis.call('ZADD', KEYS[1], now, ticket)
end
local ttl = tonumber(ARGV[4])
redis.call('HSET', KEYS[2], ticket, now + ttl)
redis.call('PEXPIRE', KEYS[1], ttl + 60000)
redis.call('PEXPIRE', KEYS[2], ttl + 60000)
return redis.call('ZRANK', KEYS[1], ticket)
`)

func (r *Store) queue(ctx context.Context, id, op, ticket string, max int, ttl time.Duration) (int, error) {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	n, err := scriptQueue.Run(rctx, r.client, []string{r.key(id, "queue"), r.key(id, "queued")}, op, ticket, max, ttl.Milliseconds()).Int()
	if err != nil {
		return 0, r.fail(id, "queue "+op, err)
	}
	if n == -2 {
		return 0, fmt.Errorf("redis session store: session %s: %w", id, session.ErrQueueFull)
	}
	return n, nil
}

// Enqueue implements session.Queuer.
func (r *Store) Enqueue(ctx context.Context, id, ticket string, max int, ttl time.Duration) (int, error) {
	return r.queue(ctx, id, "enqueue", ticket, max, ttl)
}

// Position implements session.Queuer.
func (r *Store) Position(ctx context.Context, id, ticket string, ttl time.Duration) (int, error) {
	return r.queue(ctx, id, "position", ticket, 0, ttl)
}

// Leave implements session.Queuer.
func (r *Store) Leave(ctx context.Context, id, ticket string) error {
	_, err := r.queue(ctx, id, "leave", ticket, 0, 0)
	return err
}

// Queued implements session.Queuer.
func (r *Store) Queued(ctx context.Context, id string) (int, error) {
	return r.queue(ctx, id, "len", "", 0, 0)
}

// queueWatch hears the notices of the session queues (session.Notifier)
// on one pattern subscription of the store, started by the first Watch,
// and hands each to this process's watchers of its session.
type queueWatch struct {
	mu       sync.Mutex
	ps       *redis.PubSub
	closed   bool
	watchers map[string]map[*func(string)]struct{}
}

var _ session.Notifier = (*Store)(nil)

// Watch implements session.Notifier.
func (r *Store) Watch(id string, fn func(first string)) (stop func()) {
	w := &r.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ps == nil && !w.closed {
		r.subscribe()
	}
	if w.watchers == nil {
		w.watchers = map[string]map[*func(string)]struct{}{}
	}
	if w.watchers[id] == nil {
		w.watchers[id] = map[*func(string)]struct{}{}
	}
	w.watchers[id][&fn] = struct{}{}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.watchers[id], &fn)
		if len(w.watchers[id]) == 0 {
			delete(w.watchers, id)
		}
	}
}

// subscribe starts the subscription to every queue's key of the store,
// and waits for Redis to confirm it, so that a ticket queued after Watch
// misses no notice; a subscription that cannot be made leaves the
// waiters to their renewals, and the next Watch tries again. r.watch.mu
// is held.
func (r *Store) subscribe() {
	w := &r.watch
	ctx, cancel := context.WithTimeout(context.Background(), r.budget)
	defer cancel()
	ps := r.client.PSubscribe(ctx, globEscape(r.prefix+":{")+"*"+globEscape("}:queue"))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return
	}
	w.ps = ps
	head, tail := r.prefix+":{", "}:queue"
	go func() {
		for msg := range ps.Channel() {
			id, ok := strings.CutPrefix(msg.Channel, head)
			if id, ok = strings.CutSuffix(id, tail); !ok {
				continue
			}
			w.mu.Lock()
			for fn := range w.watchers[id] {
				(*fn)(msg.Payload)
			}
			w.mu.Unlock()
		}
	}()
}

// close ends the subscription.
func (w *queueWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ps != nil {
		_ = w.ps.Close()
	}
}

// globEscape escapes the characters special to a Redis glob pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
