// Package redisoutbox keeps an outbox's deliveries (package outbox) in
// Redis, so that any replica makes a delivery another queued. It lives
// apart from package outbox so that a program without Redis does not
// link go-redis.
package redisoutbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/session"
)

// DefaultPrefix starts the keys unless Config.Prefix says otherwise.
const DefaultPrefix = "agentdock-outbox"

// DefaultTimeout bounds one round trip unless Config.Timeout says
// otherwise.
const DefaultTimeout = 3 * time.Second

// Config configures a Store.
type Config struct {
	// Client is the connection to Redis, typically the session store's;
	// the store does not close it.
	Client redis.UniversalClient
	// Prefix starts every key (default "agentdock-outbox").
	Prefix string
	// Timeout bounds each round trip (default 3 s); an earlier deadline
	// of the caller's ctx wins.
	Timeout time.Duration
}

// Store is the outbox.Store of replicas: two keys in one Cluster slot
// (the {outbox} hash tag),
//
//	<prefix>:{outbox}:due         sorted set: delivery ID by due time (unix ms)
//	<prefix>:{outbox}:deliveries  hash: delivery ID -> its JSON
//
// Put is one transaction, Claim one script (one round trip each, a Claim
// with nothing due included); deliveries are few and short-lived (made,
// or given up, within minutes), so that one slot holds them all.
type Store struct {
	cfg Config
}

var _ outbox.Store = (*Store)(nil)

// New validates cfg; it does not contact Redis (the session store sharing
// the client has).
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("outbox: redisoutbox.Config.Client is nil")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, fmt.Errorf("outbox: Prefix %q contains a brace, which would change the Cluster hash tag", cfg.Prefix)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("outbox: Timeout is negative (%v)", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Store{cfg: cfg}, nil
}

func (s *Store) dueKey() string        { return s.cfg.Prefix + ":{outbox}:due" }
func (s *Store) deliveriesKey() string { return s.cfg.Prefix + ":{outbox}:deliveries" }

func fail(op string, err error) error {
	return fmt.Errorf("outbox: redis: %s: %w: %w", op, session.ErrUnavailable, err)
}

// Put implements outbox.Store.
func (s *Store) Put(ctx context.Context, d outbox.Delivery, due time.Time) error {
	v, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("outbox: encoding delivery %s: %w", d.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, err = s.cfg.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.deliveriesKey(), d.ID, v)
		p.ZAdd(ctx, s.dueKey(), redis.Z{Score: float64(due.UnixMilli()), Member: d.ID})
		return nil
	})
	if err != nil {
		return fail("put", err)
	}
	return nil
}

// claimScript: KEYS due, deliveries; ARGV nowMs, n, heldUntilMs. It hands
// out up to n deliveries due by now, each held until heldUntil, and drops
// due entries whose delivery is gone.
var claimScript = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    out[#out + 1] = v
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
`)

// Claim implements outbox.Store.
func (s *Store) Claim(ctx context.Context, now time.Time, n int, hold time.Duration) ([]outbox.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	vals, err := claimScript.Run(ctx, s.cfg.Client, []string{s.dueKey(), s.deliveriesKey()},
		now.UnixMilli(), n, strconv.FormatInt(now.Add(hold).UnixMilli(), 10)).StringSlice()
	if err != nil {
		return nil, fail("claim", err)
	}
	out := make([]outbox.Delivery, 0, len(vals))
	var bad []string
	for _, v := range vals {
		var d outbox.Delivery
		if err := json.Unmarshal([]byte(v), &d); err != nil || d.ID == "" {
			// Not written by this package: dropped rather than handed
			// out every hold, forever.
			if id, _, ok := strings.Cut(strings.TrimPrefix(v, `{"id":"`), `"`); ok {
				bad = append(bad, id)
			}
			continue
		}
		out = append(out, d)
	}
	for _, id := range bad {
		_ = s.Delete(ctx, id)
	}
	return out, nil
}

// Delete implements outbox.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, err := s.cfg.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, s.deliveriesKey(), id)
		p.ZRem(ctx, s.dueKey(), id)
		return nil
	})
	if err != nil {
		return fail("delete", err)
	}
	return nil
}
