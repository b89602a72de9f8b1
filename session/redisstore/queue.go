package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/session"
)

// scriptQueue keeps a session's queue of waiting messages (session.Queuer):
// KEYS[1] a sorted set of the tickets by arrival (Redis's clock, ms),
// KEYS[2] a hash of each ticket's expiry. Expired tickets are dropped
// first. ARGV: op (enqueue, position, leave, len), ticket, max, ttl ms.
// Reply: the ticket's position, -1 when not queued, -2 when the queue is
// full; the length for len. Both keys expire a minute after the last
// renewal, so that an abandoned queue leaves nothing behind.
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
  redis.call('ZREM', KEYS[1], ticket)
  redis.call('HDEL', KEYS[2], ticket)
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
