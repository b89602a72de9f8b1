package session

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestRedisRetriedScriptsApplyOnce replays a write script with the same
// arguments, as go-redis does when a connection breaks after Redis ran the
// script but before its reply arrived: the replay must not apply it again.
func TestRedisRetriedScriptsApplyOnce(t *testing.T) {
	srv := redistest.Start(t)
	r, err := NewRedis(RedisConfig{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := t.Context()
	id := NewID()
	keys := r.keys(id)

	s := Session{ID: id, Version: 1}
	s.State.RecentlyUsedTools = []string{"search"}
	args := []any{"", "1", encode(s), newToken(), r.ttlMillis(), ""}
	for attempt := range 2 {
		reply, err := scriptUpdate.Run(ctx, r.client, keys, args...).Slice()
		if err != nil || reply[0] != "ok" {
			t.Fatalf("update attempt %d: %v %v, want ok both times", attempt, reply, err)
		}
	}
	// A different writer with the same stale expectation conflicts.
	other := []any{"", "1", encode(s), newToken(), r.ttlMillis(), ""}
	if reply, err := scriptUpdate.Run(ctx, r.client, keys, other...).Slice(); err != nil || reply[0] != "conflict" {
		t.Fatalf("a stale write from another writer: %v %v, want conflict", reply, err)
	}
	if got, err := r.Get(ctx, id); err != nil || got.Version != 1 {
		t.Fatalf("after the replay: %+v %v, want version 1", got, err)
	}

	msg, _ := json.Marshal(chat.Message{Role: chat.RoleUser, Content: "once"})
	appendArgs := []any{r.ttlMillis(), strconv.Itoa(r.cfg.MaxMessages), "", newToken(), encode(Session{ID: id}), string(msg)}
	for attempt := range 2 {
		if status, err := scriptAppend.Run(ctx, r.client, keys, appendArgs...).Text(); err != nil || status != "ok" {
			t.Fatalf("append attempt %d: %q %v", attempt, status, err)
		}
	}
	if msgs, err := r.Messages(ctx, id, 0); err != nil || len(msgs) != 1 {
		t.Fatalf("history after a replayed append: %+v %v, want one message", msgs, err)
	}
}
