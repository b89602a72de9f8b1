package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// With RELAY_REDIS_URL the relay keeps each session's conversation in
// Redis the plain way, in two round trips per turn: one before the model
// request (take the session's lock, read its last messages) and one after
// the model's answer (append the user's message and the answer, trim, let
// the lock go). It is the floor of a server that keeps its sessions in
// Redis: what one round trip on the first token's way costs on the machine
// that runs the benchmark, next to what the runtime's Redis store costs.

// historyLength is how many earlier messages the relay sends the model:
// the load-test agent's template keeps the last 4 (historyPolicy lastN).
const historyLength = 4

// lockTTL bounds a turn's hold on its session should the relay die mid-turn.
const lockTTL = 60 * time.Second

// errBusy answers a turn on a session whose previous turn still runs.
var errBusy = errors.New("the session has a turn running")

// begin takes the session's lock and returns its last messages, oldest
// first. KEYS: lock, messages. ARGV: lock token, lock TTL (ms), messages.
var begin = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return redis.call('LRANGE', KEYS[2], -tonumber(ARGV[3]), -1)`)

// end appends the turn's messages, keeps the last 64, and lets the lock go
// if it is still the turn's. KEYS: lock, messages. ARGV: lock token,
// messages (JSON, one per argument).
var end = redis.NewScript(`
for i = 2, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
redis.call('LTRIM', KEYS[2], -64, -1)
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`)

// sessions keeps the relay's sessions in Redis.
type sessions struct {
	rc *redis.Client
}

func openSessions(ctx context.Context, url string) (*sessions, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("RELAY_REDIS_URL: %w", err)
	}
	rc := redis.NewClient(opt)
	if err := rc.Ping(ctx).Err(); err != nil {
		rc.Close()
		return nil, fmt.Errorf("RELAY_REDIS_URL %s: %w", opt.Addr, err)
	}
	return &sessions{rc: rc}, nil
}

func keys(sessionID string) []string {
	return []string{"relay:" + sessionID + ":lock", "relay:" + sessionID + ":messages"}
}

// begin takes the session for a turn identified by token and returns its
// last messages; errBusy when another turn holds it.
func (s *sessions) begin(ctx context.Context, sessionID, token string) ([]modelMessage, error) {
	v, err := begin.Run(ctx, s.rc, keys(sessionID), token, lockTTL.Milliseconds(), historyLength).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, errBusy
	}
	if err != nil {
		return nil, fmt.Errorf("reading the session: %w", err)
	}
	msgs := make([]modelMessage, len(v))
	for i, s := range v {
		if err := json.Unmarshal([]byte(s), &msgs[i]); err != nil {
			return nil, fmt.Errorf("the session's message %d is not JSON: %w", i, err)
		}
	}
	return msgs, nil
}

// end appends the turn's messages and gives the session back.
func (s *sessions) end(ctx context.Context, sessionID, token string, msgs ...modelMessage) error {
	args := []any{token}
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		args = append(args, b)
	}
	if err := end.Run(ctx, s.rc, keys(sessionID), args...).Err(); err != nil {
		return fmt.Errorf("saving the session: %w", err)
	}
	return nil
}
