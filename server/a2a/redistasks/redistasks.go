// Package redistasks is an a2a.Index on Redis, for replicas: each owner's
// task IDs in a sorted set scored by the time of their last write, trimmed
// to a2a.MaxListed and expiring with the tasks.
package redistasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/session"
	"github.com/redis/go-redis/v9"
)

// Index is an a2a.Index on Redis.
type Index struct {
	c      redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// New returns an index under prefix (e.g. "agentdock:a2a") whose sets live
// ttl after their last write (0: a day, the tasks' default lifetime).
func New(c redis.UniversalClient, prefix string, ttl time.Duration) *Index {
	if ttl <= 0 {
		ttl = session.DefaultTTL
	}
	return &Index{c: c, prefix: prefix, ttl: ttl}
}

var _ a2a.Index = (*Index)(nil)

func (x *Index) key(owner string) string {
	d := sha256.Sum256([]byte(owner))
	return x.prefix + ":tasks:" + hex.EncodeToString(d[:12])
}

// Touch implements a2a.Index.
func (x *Index) Touch(ctx context.Context, owner, id string, t time.Time) error {
	k := x.key(owner)
	_, err := x.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k, redis.Z{Score: float64(t.UnixMilli()), Member: id})
		p.ZRemRangeByRank(ctx, k, 0, -a2a.MaxListed-1)
		p.PExpire(ctx, k, x.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("a2a tasks index: %w: %w", session.ErrUnavailable, err)
	}
	return nil
}

// Recent implements a2a.Index.
func (x *Index) Recent(ctx context.Context, owner string, n int) ([]string, error) {
	ids, err := x.c.ZRevRange(ctx, x.key(owner), 0, int64(n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("a2a tasks index: %w: %w", session.ErrUnavailable, err)
	}
	return ids, nil
}
