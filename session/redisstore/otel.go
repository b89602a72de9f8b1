package redisstore

import (
	"fmt"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Instrument adds a client span per Redis command (and pipeline) to rdb,
// children of the current span, recorded by tp. Commands are recorded
// without their arguments (WithDBStatement(false)): session values hold
// chat content. Call it only when tracing is on, so that commands pay no
// tracing cost otherwise.
func Instrument(rdb redis.UniversalClient, tp trace.TracerProvider) error {
	if err := redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(tp),
		redisotel.WithDBStatement(false),
		// The caller is always this package; finding it costs a stack
		// walk per command.
		redisotel.WithCallerEnabled(false),
	); err != nil {
		return fmt.Errorf("redisstore: instrumenting redis: %w", err)
	}
	return nil
}
