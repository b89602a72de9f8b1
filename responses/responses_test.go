package responses_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/responses"
	respredis "github.com/agentdock-go/agentdock/responses/redisstore"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// open returns a store with cfg and a function that moves its clock (the
// memory store's) or waits (Redis expires keys on its own clock).
type open func(t *testing.T, cfg responses.Config) (responses.Store, func(time.Duration))

func TestMemory(t *testing.T) {
	conformance(t, func(t *testing.T, cfg responses.Config) (responses.Store, func(time.Duration)) {
		var mu sync.Mutex
		now := time.Now()
		cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		m, err := responses.NewMemory(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	})
}

func redisOpen(srv *redistest.Server, cluster bool) open {
	return func(t *testing.T, cfg responses.Config) (responses.Store, func(time.Duration)) {
		rc := redisstore.Config{URL: srv.URL()}
		if cluster {
			rc = redisstore.Config{ClusterAddrs: []string{srv.Addr()}}
		}
		ss, err := redisstore.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		r, err := respredis.New(respredis.Config{Config: cfg, Client: ss.Client(), Prefix: "test-" + session.NewID()})
		if err != nil {
			t.Fatal(err)
		}
		return r, time.Sleep
	}
}

func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	conformance(t, redisOpen(srv, false))
}

func TestRedisCluster(t *testing.T) {
	srv := redistest.Start(t, redistest.Cluster())
	conformance(t, redisOpen(srv, true))
}

// TestRedisDown: a store that cannot reach Redis says so with
// session.ErrUnavailable, which the server answers 503.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := redisOpen(srv, false)(t, responses.Config{})
	srv.Stop()
	key := session.Key("", "resp_"+session.NewID())
	if err := s.Put(t.Context(), key, record("x")); !errors.Is(err, session.ErrUnavailable) {
		t.Errorf("Put with Redis down: %v", err)
	}
	if _, err := s.Get(t.Context(), key); !errors.Is(err, session.ErrUnavailable) {
		t.Errorf("Get with Redis down: %v", err)
	}
}

func TestMemoryBound(t *testing.T) {
	m, err := responses.NewMemory(responses.Config{MaxRecords: 3})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for range 5 {
		k := session.Key("o", "resp_"+session.NewID())
		keys = append(keys, k)
		if err := m.Put(t.Context(), k, record("x")); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != 3 {
		t.Fatalf("%d records kept, want 3", m.Len())
	}
	if _, err := m.Get(t.Context(), keys[1]); !errors.Is(err, responses.ErrNotFound) {
		t.Errorf("the second oldest record is still there: %v", err)
	}
	if _, err := m.Get(t.Context(), keys[4]); err != nil {
		t.Errorf("the newest record: %v", err)
	}
	if _, err := responses.NewMemory(responses.Config{TTL: -time.Second}); err == nil {
		t.Error("a negative TTL was accepted")
	}
}

func record(text string) responses.Record {
	body, _ := json.Marshal(map[string]string{"object": "response", "text": text})
	return responses.Record{SessionID: "sess-" + session.NewID(), UserMessages: 2, Response: body}
}

func conformance(t *testing.T, open open) {
	t.Run("RoundTripAndOwners", func(t *testing.T) {
		s, _ := open(t, responses.Config{})
		ctx := context.Background()
		id := "resp_" + session.NewID()
		mine, theirs := session.Key("alice", id), session.Key("bob", id)
		if _, err := s.Get(ctx, mine); !errors.Is(err, responses.ErrNotFound) {
			t.Fatalf("Get before Put: %v", err)
		}
		want := record("hello")
		if err := s.Put(ctx, mine, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, mine)
		if err != nil || got.SessionID != want.SessionID || got.UserMessages != 2 || string(got.Response) != string(want.Response) {
			t.Fatalf("Get: %+v %v, want %+v", got, err, want)
		}
		if _, err := s.Get(ctx, theirs); !errors.Is(err, responses.ErrNotFound) {
			t.Fatalf("another owner's key: %v", err)
		}
		// A Put replaces: the running record becomes the final one.
		final := record("done")
		if err := s.Put(ctx, mine, final); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, mine); string(got.Response) != string(final.Response) {
			t.Fatalf("after the second Put: %s", got.Response)
		}
	})
	t.Run("Expiry", func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		s, wait := open(t, responses.Config{TTL: ttl})
		ctx := context.Background()
		key := session.Key("", "resp_"+session.NewID())
		if err := s.Put(ctx, key, record("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, key); err != nil {
			t.Fatalf("Get within the TTL: %v", err)
		}
		wait(ttl + 400*time.Millisecond)
		if _, err := s.Get(ctx, key); !errors.Is(err, responses.ErrNotFound) {
			t.Fatalf("Get after the TTL: %v", err)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		s, _ := open(t, responses.Config{})
		ctx := context.Background()
		if err := s.Put(ctx, "bad key!", record("x")); err == nil {
			t.Error("Put under an invalid key")
		}
		if _, err := s.Get(ctx, "x"); err == nil || errors.Is(err, responses.ErrNotFound) {
			t.Errorf("Get of an invalid key: %v", err)
		}
		if err := s.Put(ctx, session.Key("", session.NewID()), responses.Record{Response: json.RawMessage("{nope")}); err == nil {
			t.Error("Put of a record that is not JSON")
		}
	})
}
