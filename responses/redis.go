package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
)

// DefaultPrefix starts the Redis keys unless RedisConfig.Prefix says
// otherwise.
const DefaultPrefix = "agentdock-responses"

// DefaultTimeout bounds one Redis round trip unless RedisConfig.Timeout
// says otherwise.
const DefaultTimeout = 3 * time.Second

// RedisConfig configures a Redis store.
type RedisConfig struct {
	Config
	// Client is the connection to Redis, typically the session store's
	// (session.Redis.Client()); the store does not close it.
	Client redis.UniversalClient
	// Prefix starts every key (default "agentdock-responses").
	Prefix string
	// Timeout bounds each round trip (default 3 s); an earlier deadline
	// of the caller's ctx wins.
	Timeout time.Duration
}

// Redis is the Store of replicas: each record is one string key,
// <prefix>:{<key>}, holding the Record's JSON with a TTL (SET PX), so
// that Redis drops it by itself.
type Redis struct {
	cfg RedisConfig
}

// NewRedis validates cfg. It does not contact Redis: the session store
// sharing the client has checked it.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	var err error
	if cfg.Config, err = cfg.Config.withDefaults(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		return nil, errors.New("responses: RedisConfig.Client is nil")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("responses: Timeout is negative (%v)", cfg.Timeout)
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	}
	return &Redis{cfg: cfg}, nil
}

func (r *Redis) key(key string) string { return r.cfg.Prefix + ":{" + key + "}" }

func (r *Redis) fail(key, op string, err error) error {
	return fmt.Errorf("responses: %s %s: %w: %w", op, key, session.ErrUnavailable, err)
}

// Put implements Store.
func (r *Redis) Put(ctx context.Context, key string, rec Record) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := rec.validate(); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("responses: encoding the record: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	if err := r.cfg.Client.Set(ctx, r.key(key), data, r.cfg.TTL).Err(); err != nil {
		return r.fail(key, "storing", err)
	}
	return nil
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, key string) (Record, error) {
	if err := checkKey(key); err != nil {
		return Record{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	data, err := r.cfg.Client.Get(ctx, r.key(key)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return Record{}, ErrNotFound
	case err != nil:
		return Record{}, r.fail(key, "reading", err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil || rec.validate() != nil {
		return Record{}, fmt.Errorf("responses: record %s: %w", key, session.ErrCorrupt)
	}
	return rec, nil
}
