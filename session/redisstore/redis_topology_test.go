package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	_, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Update(ctx, s, id, applyEvent(orchestration.ToolUsed("search")), session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, session.WithLease(l)); err != nil {
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

// TestRedisWaitReplicas: with replicas, a turn's claim and its last
// write wait for every one of them by default (WAIT 2 with two): the
// written session is on both when the write returns, and one replica that
// does not answer makes the last write return its result with
// session.ErrNotReplicated after the wait's timeout (the write is made on
// the primary). Without replicas the store does not wait.
func TestRedisWaitReplicas(t *testing.T) {
	primary := redistest.Start(t)
	alone, err := redisstore.New(redisstore.Config{URL: primary.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	if alone.Waits() != 0 {
		t.Fatalf("a primary without replicas: the store waits for %d", alone.Waits())
	}
	other := redistest.Start(t, redistest.ReplicaOf(primary))
	replica := redistest.Start(t, redistest.ReplicaOf(primary))
	ctx := t.Context()
	raw, rawOther := rawClient(t, replica), rawClient(t, other)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info, _ := rawClient(t, primary).Info(ctx, "replication").Result(); strings.Contains(info, "connected_slaves:2") && strings.Count(info, "state=online") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not connect to the primary")
		}
	}
	// Long enough that a loaded machine's replica acknowledges in time:
	// the paused case below waits all of it.
	const wait = 3 * time.Second
	s, err := redisstore.New(redisstore.Config{URL: primary.URL(), Prefix: "wait", WaitTimeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Waits() != 2 {
		t.Fatalf("a primary with two replicas: the store waits for %d, want 2 by default", s.Waits())
	}
	turn := func(id, text string) error {
		_, l, err := s.Claim(ctx, id, session.WithTurn("t-"+id))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.UpdateAppend(ctx, id, applyEvent(orchestration.ToolUsed("search")), []chat.Message{{Role: chat.RoleUser, Content: text}}, 0,
			session.WithLease(l), session.WithTurn(""), session.WithRelease())
		return err
	}
	id := session.NewID()
	if err := turn(id, "acknowledged"); err != nil {
		t.Fatalf("the last write with the replica up: %v", err)
	}
	// WAIT returned: both replicas have the write already.
	for _, rc := range []*redis.Client{raw, rawOther} {
		if n, err := rc.LLen(ctx, "wait:{"+id+"}:messages").Result(); err != nil || n != 1 {
			t.Fatalf("a replica's copy right after the write: %d messages, %v", n, err)
		}
	}
	replica.Pause()
	defer replica.Resume()
	id2 := session.NewID()
	start := time.Now()
	err = turn(id2, "not acknowledged")
	if !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("the last write with the replica paused: %v, want ErrNotReplicated", err)
	}
	if took := time.Since(start); took < wait {
		t.Fatalf("the write returned after %v, before the wait's timeout", took)
	}
	if msgs, err := s.Messages(ctx, id2, 0); err != nil || len(msgs) != 1 || msgs[0].Content != "not acknowledged" {
		t.Fatalf("the unacknowledged write on the primary: %+v, %v", msgs, err)
	}
	// The turn's lease renewed while its last write, which released the
	// lease, waits for the replicas: the lease is not lost.
	id3 := session.NewID()
	_, l3, err := s.Claim(ctx, id3, session.WithTurn("t-"+id3))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.UpdateAppend(ctx, id3, applyEvent(orchestration.ToolUsed("search")), []chat.Message{{Role: chat.RoleUser, Content: "last"}}, 0,
			session.WithLease(l3), session.WithTurn(""), session.WithRelease())
		done <- err
	}()
	time.Sleep(wait / 3) // the write is waiting for the paused replica
	if err := l3.Extend(ctx); err != nil {
		t.Fatalf("renewing the lease while the write that released it waits: %v", err)
	}
	if err := <-done; !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("the last write: %v, want ErrNotReplicated", err)
	}
}

// TestRedisClusterWaits: in a Cluster whose shards have a replica each,
// the store waits for the replica of the session's shard by default: a
// turn's last write returns once it has the write, and with the replicas
// paused it returns session.ErrNotReplicated after the wait's timeout.
func TestRedisClusterWaits(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	const wait = 2 * time.Second
	rc, err := redisstore.ParseURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc.WaitTimeout = wait
	s, err := redisstore.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Waits() != 1 {
		t.Fatalf("shards of a primary and a replica: the store waits for %d, want 1 by default", s.Waits())
	}
	ctx := t.Context()
	turn := func(id string) error {
		_, l, err := s.Claim(ctx, id, session.WithTurn("t-"+id))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = s.UpdateAppend(ctx, id, applyEvent(orchestration.ToolUsed("search")), []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 0,
			session.WithLease(l), session.WithTurn(""), session.WithRelease())
		return err
	}
	if err := turn(session.NewID()); err != nil {
		t.Fatalf("the last write with the replicas up: %v", err)
	}
	for _, r := range c.Replicas {
		r.Pause()
		defer r.Resume()
	}
	if err := turn(session.NewID()); !errors.Is(err, session.ErrNotReplicated) {
		t.Fatalf("the last write with the replicas paused: %v, want ErrNotReplicated", err)
	}
}
