// Package responses keeps the response objects of the OpenAI Responses API
// (POST /v1/responses) that the server stored, so that any replica can
// serve GET /v1/responses/{id} and continue a conversation from a
// previous_response_id.
//
// A Record is the response object as it was served, with what the server
// needs to continue from it: the session that holds its conversation and
// how many user messages that session had counted when it ended (a
// response that is no longer its conversation's latest cannot be
// continued: a session keeps one linear history). Records are keyed like
// sessions, by session.Key of the caller's owner and the response ID, so
// that another owner's response is simply absent.
//
// Two implementations share one behaviour, checked by the same tests:
// Memory for one process and, in package responses/redisstore, one for
// replicas (one string key per response, on the session store's Redis).
// Records live Config.TTL from their last Put; they are never slid by reads.
package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/session"
)

// ErrNotFound: no record under the key (never stored, expired, or
// another owner's). Failures to reach the backing store wrap
// session.ErrUnavailable, and a stored value that does not decode wraps
// session.ErrCorrupt, so that callers map them as they map the session
// store's.
var ErrNotFound = errors.New("response not found")

// Running is Record.UserMessages while the response's turn runs.
const Running = -1

// Record is one stored response.
type Record struct {
	// SessionID is the session holding the response's conversation, as the
	// client knows it (the owner's keyspace applies).
	SessionID string `json:"sessionId"`
	// UserMessages is the session's count of user messages
	// (orchestration.State.UserMessages) when the response ended, or
	// Running.
	UserMessages int `json:"userMessages"`
	// Response is the response object as served.
	Response json.RawMessage `json:"response"`
}

// Store keeps records. Implementations are safe for concurrent use.
type Store interface {
	// Put stores r under key (a session.Key), replacing any record there,
	// for Config.TTL.
	Put(ctx context.Context, key string, r Record) error
	// Get returns the record under key, or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
}

// Defaults of Config.
const (
	DefaultTTL        = session.DefaultTTL
	DefaultMaxRecords = 100000
)

// Config is shared by the stores.
type Config struct {
	// TTL is how long a record lives after its last Put (default
	// session.DefaultTTL, the sessions' default lifetime: a response is
	// useful as long as its conversation is kept).
	TTL time.Duration
	// MaxRecords bounds the memory store (default 100000); the oldest
	// records go first. Ignored by Redis.
	MaxRecords int
	// Now is the memory store's clock (default time.Now).
	Now func() time.Time
}

// WithDefaults returns c with its zero fields set to the defaults, or an
// error for a negative one. Stores call it once, when they are made.
func (c Config) WithDefaults() (Config, error) {
	if c.TTL < 0 || c.MaxRecords < 0 {
		return c, fmt.Errorf("responses: TTL (%v) and MaxRecords (%d) must not be negative", c.TTL, c.MaxRecords)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// CheckKey refuses a key that is not a session.Key of a valid session ID:
// stores put keys in their own names (a Redis key, a file name).
func CheckKey(key string) error {
	if !session.ValidKey(key) {
		return fmt.Errorf("responses: key %q is not a session.Key of a valid ID", key)
	}
	return nil
}

// Validate refuses a record a store must not keep: its Response must be
// JSON.
func (r Record) Validate() error {
	if len(r.Response) == 0 || !json.Valid(r.Response) {
		return errors.New("responses: Record.Response is not JSON")
	}
	return nil
}
