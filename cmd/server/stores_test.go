package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestOpenBackend: the store kind follows from the configuration alone,
// and a Redis backend keeps the Responses objects, the turn log and the
// A2A index beside the sessions, under their prefix.
func TestOpenBackend(t *testing.T) {
	srv := redistest.Start(t)
	for _, tt := range []struct {
		name, store, redisURL string
		wantKind, prefix      string
		shared                bool // turns and A2A index in the store
	}{
		{name: "nothing set", wantKind: "memory"},
		{name: "memory URL", store: "memory://", wantKind: "memory"},
		{name: "store URL", store: srv.URL() + "?prefix=viaurl", wantKind: "redis", prefix: "viaurl", shared: true},
		{name: "REDIS_URL", redisURL: srv.URL() + "?prefix=viaenv", wantKind: "redis", prefix: "viaenv", shared: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearConfigEnv(t)
			t.Setenv("REDIS_URL", tt.redisURL)
			args := []string{}
			if tt.store != "" {
				args = append(args, "--store", tt.store)
			}
			cfg, err := loadServeConfig(args, testConfigEnv(t), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			b, err := openBackend(ctx, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.close()
			if b.kind != tt.wantKind || b.sessions == nil || b.responses == nil {
				t.Fatalf("kind %q, sessions %v, responses %v; want kind %q and both", b.kind, b.sessions, b.responses, tt.wantKind)
			}
			if got := b.turns != nil && b.a2aIndex != nil; got != tt.shared {
				t.Fatalf("turn log and A2A index: %v, want %v", got, tt.shared)
			}
			if _, l, err := b.sessions.Claim(ctx, "s1", session.WithAgent("a")); err != nil {
				t.Fatal(err)
			} else if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if !tt.shared {
				return
			}
			client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer client.Close()
			keys, err := client.Keys(ctx, tt.prefix+":*").Result()
			if err != nil || len(keys) == 0 {
				t.Fatalf("keys under the prefix: %v, %v", keys, err)
			}
		})
	}
}
