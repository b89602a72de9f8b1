package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// LogTo sends what go-redis reports on its own (a pool that cannot
// dial, a Sentinel switching masters) to l as warnings, instead of
// go-redis's default of plain lines on stderr, which a JSON log pipeline
// cannot parse and which carry no level. go-redis has one logger per
// process, so this applies to every client, the turn log's included.
// Its messages name addresses and errors, never commands' arguments.
//
// While Redis is down go-redis reports every failed dial, several per
// request: each kind of message is logged at most once per
// redisLogInterval, with the number of the ones left out since.
func LogTo(l *slog.Logger) {
	redis.SetLogger(newRedisLogger(l, time.Now))
}

const redisLogInterval = 5 * time.Second

type redisLogger struct {
	l   *slog.Logger
	now func() time.Time

	mu sync.Mutex
	// kinds is keyed by go-redis's format strings, constants in its
	// code, so it stays small.
	kinds map[string]*redisLogKind
}

type redisLogKind struct {
	last    time.Time
	skipped int
}

func newRedisLogger(l *slog.Logger, now func() time.Time) *redisLogger {
	return &redisLogger{l: l, now: now, kinds: map[string]*redisLogKind{}}
}

func (r *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	now := r.now()
	r.mu.Lock()
	k := r.kinds[format]
	if k == nil {
		k = &redisLogKind{}
		r.kinds[format] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < redisLogInterval {
		k.skipped++
		r.mu.Unlock()
		return
	}
	skipped := k.skipped
	k.last, k.skipped = now, 0
	r.mu.Unlock()
	attrs := []any{"detail", fmt.Sprintf(format, v...)}
	if skipped > 0 {
		attrs = append(attrs, "similar_left_out", skipped)
	}
	r.l.WarnContext(ctx, "redis client", attrs...)
}
