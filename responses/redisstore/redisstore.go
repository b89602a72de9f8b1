// Package redisstore keeps the stored responses of the Responses API
// (package responses) in Redis, so that every replica finds a response any
// replica stored. It lives apart from package responses so that a program
// without Redis does not link go-redis.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/session"
)

// DefaultPrefix starts the Redis keys unless Config.Prefix says
// otherwise.
const DefaultPrefix = "agentdock-responses"

// DefaultTimeout bounds one Redis round trip unless Config.Timeout says
// otherwise.
const DefaultTimeout = 3 * time.Second

// Config configures a Store.
type Config struct {
	responses.Config
	// Client is the connection to Redis, typically the session store's
	// (session/redisstore's Store.Client); the store does not close it.
	Client redis.UniversalClient
	// Prefix starts every key (default "agentdock-responses").
	Prefix string
	// Timeout bounds each round trip (default 3 s); an earlier deadline
	// of the caller's ctx wins.
	Timeout time.Duration
}

// Store is the responses.Store of replicas: each record is one string key,
// <prefix>:{<key>}, holding the Record's JSON with a TTL (SET PX), so
// that Redis drops it by itself.
type Store struct {
	cfg Config
}

var _ responses.Store = (*Store)(nil)

// New validates cfg. It does not contact Redis: the session store
// sharing the client has checked it.
func New(cfg Config) (*Store, error) {
	var err error
	if cfg.Config, err = cfg.Config.WithDefaults(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		return nil, errors.New("responses: redisstore.Config.Client is nil")
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
	return &Store{cfg: cfg}, nil
}

func (r *Store) key(key string) string { return r.cfg.Prefix + ":{" + key + "}" }

func (r *Store) fail(key, op string, err error) error {
	return fmt.Errorf("responses: %s %s: %w: %w", op, key, session.ErrUnavailable, err)
}

// Put implements responses.Store.
func (r *Store) Put(ctx context.Context, key string, rec responses.Record) error {
	if err := responses.CheckKey(key); err != nil {
		return err
	}
	if err := rec.Validate(); err != nil {
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

// Get implements responses.Store.
func (r *Store) Get(ctx context.Context, key string) (responses.Record, error) {
	if err := responses.CheckKey(key); err != nil {
		return responses.Record{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	data, err := r.cfg.Client.Get(ctx, r.key(key)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return responses.Record{}, responses.ErrNotFound
	case err != nil:
		return responses.Record{}, r.fail(key, "reading", err)
	}
	var rec responses.Record
	if err := json.Unmarshal(data, &rec); err != nil || rec.Validate() != nil {
		return responses.Record{}, fmt.Errorf("responses: record %s: %w", key, session.ErrCorrupt)
	}
	return rec, nil
}
