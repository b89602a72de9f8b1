package redisstore_test

import (
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/session/sessiontest"
)

// TestRedisClusterConformance runs the suite through a Cluster client on a
// cluster-mode server: a script touching keys of two slots would fail with
// CROSSSLOT here.
func TestRedisClusterConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Cluster())
	url := "redis+cluster://" + srv.Addr()
	sessiontest.Run(t, func(t *testing.T, cfg session.Config) session.Store {
		s, err := redisstore.Open(t.Context(), url, cfg)
		if err != nil {
			t.Fatalf("Open(%s): %v", url, err)
		}
		return s
	}, sessiontest.RealClock())
}

// TestRedisSentinel reaches the master through a real Sentinel.
func TestRedisSentinel(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.Start(t, redistest.Sentinel(master, "sessions"))
	ctx := t.Context()
	s, err := redisstore.Open(ctx, "redis+sentinel://"+sentinel.Addr()+"/sessions/0?prefix=via-sentinel", session.Config{})
	if err != nil {
		t.Fatalf("Open through Sentinel: %v", err)
	}
	defer s.Close()
	id := session.NewID()
	l, err := s.Lock(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, id, applyEvent(orchestration.ToolUsed("search")), session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, id, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	// The data is on the master, under the URL's prefix.
	raw := rawClient(t, master)
	keys, err := raw.Keys(ctx, "via-sentinel:{"+id+"}:*").Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys on the master: %q, %v; want state, messages and lease", keys, err)
	}
	got, err := s.Get(ctx, id)
	if err != nil || !got.State.RecentlyUsedTools.Equal("search") {
		t.Fatalf("Get through Sentinel: %+v, %v", got, err)
	}
}
