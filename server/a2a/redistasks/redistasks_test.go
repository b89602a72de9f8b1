package redistasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/a2a/redistasks"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/redis/go-redis/v9"
)

// The Redis index and the memory index keep the same order and bounds.
func TestIndexes(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	for name, x := range map[string]a2a.Index{"memory": a2a.NewMemoryIndex(0), "redis": redistasks.New(c, "test:a2a", time.Hour)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			base := time.Now()
			for i, id := range []string{"task-a", "task-b", "task-c"} {
				if err := x.Touch(ctx, "owner-1", id, base.Add(time.Duration(i)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			// Written again: newest.
			if err := x.Touch(ctx, "owner-1", "task-a", base.Add(5*time.Second)); err != nil {
				t.Fatal(err)
			}
			got, err := x.Recent(ctx, "owner-1", 10)
			if err != nil || len(got) != 3 || got[0] != "task-a" || got[1] != "task-c" || got[2] != "task-b" {
				t.Fatalf("recent = %v, %v", got, err)
			}
			if got, _ := x.Recent(ctx, "owner-1", 1); len(got) != 1 || got[0] != "task-a" {
				t.Fatalf("recent 1 = %v", got)
			}
			if got, _ := x.Recent(ctx, "owner-2", 10); len(got) != 0 {
				t.Fatalf("another owner's = %v", got)
			}
			for i := range a2a.MaxListed + 5 {
				x.Touch(ctx, "owner-3", "t"+time.Duration(i).String(), base.Add(time.Duration(i)*time.Millisecond))
			}
			if got, _ := x.Recent(ctx, "owner-3", 2*a2a.MaxListed); len(got) != a2a.MaxListed {
				t.Fatalf("kept %d, want %d", len(got), a2a.MaxListed)
			}
		})
	}
}
