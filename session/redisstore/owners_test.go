package redisstore_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// withoutQuotas is a store's configuration with the owners' quotas off.
var withoutQuotas = redisstore.Config{Config: session.Config{SessionsPerOwner: -1, BytesPerOwner: -1}}

// TestRedisAdmissionRoundTrip: with the quotas, a write that creates a
// session for an owner sends one more script than without, its admission
// by the owner's index (another slot); the session's later writes, and
// the anonymous owner's sessions, send the same.
func TestRedisAdmissionRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	sent := func(cfg redisstore.Config) [][]string {
		s := openRedis(t, srv, cfg)
		counter := &commandCounter{}
		s.Client().AddHook(counter)
		key := session.Key("o", session.NewID())
		var l session.Lease
		var out [][]string
		for _, call := range []func() error{
			func() (err error) { _, l, err = s.Claim(ctx, key, session.WithOwner("o")); return err },
			func() error {
				_, _, err := s.UpdateAppend(ctx, key, applyEvent(orchestration.UserMessage("hi")), []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 4, session.WithLease(l), session.WithRelease())
				return err
			},
			func() (err error) { _, l, err = s.Claim(ctx, key, session.WithOwner("o")); return err },
			func() error { _, _, err := s.Claim(ctx, session.NewID()); return err },
		} {
			if err := call(); err != nil {
				t.Fatal(err)
			}
			out = append(out, counter.take())
		}
		return out
	}
	with, without := sent(redisstore.Config{}), sent(withoutQuotas)
	for i, step := range []string{"Claim creating", "UpdateAppend", "Claim existing", "Claim, anonymous"} {
		want := slices.Clone(without[i])
		if i == 0 {
			want = append(want, "evalsha")
		}
		if !slices.Equal(with[i], want) {
			t.Errorf("%s sent %q with the quotas, %q without", step, with[i], without[i])
		}
	}
}

// TestRedisOwnerIndex: the owners' index lists an owner's sessions in its
// slot, counts the bytes written (added by the next admission and by
// Close), and forgets a deleted session.
func TestRedisOwnerIndex(t *testing.T) {
	srv := redistest.Start(t)
	raw := rawClient(t, srv)
	ctx := t.Context()
	s := openRedis(t, srv, redisstore.Config{})
	owner := "index-owner"
	ids := []string{session.Key(owner, "first-session"), session.Key(owner, "second-session")}
	for _, id := range ids {
		_, l, err := s.Claim(ctx, id, session.WithOwner(owner))
		if err != nil {
			t.Fatal(err)
		}
		msgs := []chat.Message{{Role: chat.RoleUser, Content: strings.Repeat("m", 10_000)}}
		if _, _, err := s.UpdateAppend(ctx, id, applyEvent(orchestration.UserMessage("m")), msgs, 0, session.WithLease(l), session.WithRelease()); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := raw.Keys(ctx, "orchestration-state:owner:*:[sb][ey]*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("owner index keys %q, %v", keys, err)
	}
	tag := keys[0][strings.Index(keys[0], "{"):strings.Index(keys[0], "}")]
	if !strings.Contains(keys[1], tag) {
		t.Fatalf("the index keys %q are not in one slot", keys)
	}
	listed, err := raw.ZRange(ctx, "orchestration-state:owner:"+tag+"}:sessions", 0, -1).Result()
	if err != nil || !slices.Equal(slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(ids))) {
		t.Fatalf("the index lists %q, %v; want %q", listed, err, ids)
	}
	// The second session's bytes wait in the process until Close.
	s.Close()
	total, err := raw.HGet(ctx, "orchestration-state:owner:"+tag+"}:bytes", "total").Int64()
	if err != nil || total < 20_000 {
		t.Fatalf("the index counts %d bytes (%v), want the 20,000 of the messages and more", total, err)
	}
	s = openRedis(t, srv, redisstore.Config{})
	if err := s.Delete(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	listed, _ = raw.ZRange(ctx, "orchestration-state:owner:"+tag+"}:sessions", 0, -1).Result()
	after, _ := raw.HGet(ctx, "orchestration-state:owner:"+tag+"}:bytes", "total").Int64()
	if !slices.Equal(listed, ids[1:]) || after >= total || after < 10_000 {
		t.Fatalf("after the delete the index lists %q and counts %d bytes (before: %d)", listed, after, total)
	}
}
