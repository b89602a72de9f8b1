package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// claim claims id for owner and releases it.
func claim(t testing.TB, m *Memory, owner, id string) error {
	t.Helper()
	_, l, err := m.Claim(context.Background(), id, WithOwner(owner), WithAgent("agent"))
	if err == nil {
		err = l.Release(context.Background())
	}
	return err
}

// TestOwnerFloodMeetsItsQuota: with the defaults, an owner creating
// 100,000 sessions gets the first 10,000 (its quota) and is refused the
// rest, and another owner's session stays readable.
func TestOwnerFloodMeetsItsQuota(t *testing.T) {
	m := NewMemory(Config{})
	defer m.Close()
	if err := claim(t, m, "alice", "alice-session"); err != nil {
		t.Fatal(err)
	}
	created, refused := 0, 0
	for i := range 100_000 {
		err := claim(t, m, "bob", fmt.Sprintf("bob-%06d", i))
		var qe *QuotaError
		switch {
		case err == nil:
			created++
		case errors.As(err, &qe) && qe.Limit == QuotaSessions && qe.Max == DefaultSessionsPerOwner:
			refused++
		default:
			t.Fatalf("session %d: %v", i, err)
		}
	}
	if created != DefaultSessionsPerOwner || refused != 100_000-DefaultSessionsPerOwner {
		t.Fatalf("bob created %d sessions and was refused %d", created, refused)
	}
	if _, err := m.Get(context.Background(), "alice-session"); err != nil {
		t.Fatalf("alice's session after bob's flood: %v", err)
	}
}

// TestFairEviction: without quotas, an owner flooding a full store evicts
// only its own sessions; owners within their share keep every one, and a
// newcomer's sessions take the flooder's places.
func TestFairEviction(t *testing.T) {
	m := NewMemory(Config{MaxSessions: 1000, SessionsPerOwner: -1, BytesPerOwner: -1})
	defer m.Close()
	own := func(owner string, n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%06d", owner, i)
			if err := claim(t, m, owner, ids[i]); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}
	alice, carol := own("alice", 10), own("carol", 100)
	own("bob", 100_000)
	if m.Len() > 1000 {
		t.Fatalf("the store holds %d sessions, over its cap", m.Len())
	}
	dave := own("dave", 200)
	for _, ids := range [][]string{alice, carol, dave} {
		for _, id := range ids {
			if _, err := m.Get(context.Background(), id); err != nil {
				t.Fatalf("%s lost to bob's flood: %v", id, err)
			}
		}
	}
	if n, _ := m.OwnerUsage("bob"); n != 1000-10-100-200 {
		t.Errorf("bob holds %d sessions, want the rest of the store", n)
	}
	// Bob's newest sessions are the ones he kept.
	if _, err := m.Get(context.Background(), "bob-099999"); err != nil {
		t.Errorf("bob's newest session: %v", err)
	}
	if _, err := m.Get(context.Background(), "bob-000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob's oldest session: %v, want it evicted", err)
	}
}

// TestBytesCap: the store's bytes stay within MaxBytes; an owner writing
// large sessions evicts its own, not another's.
func TestBytesCap(t *testing.T) {
	const capBytes = 1 << 20
	m := NewMemory(Config{MaxBytes: capBytes, SessionsPerOwner: -1, BytesPerOwner: -1})
	defer m.Close()
	ctx := context.Background()
	write := func(owner, id string, size int) {
		t.Helper()
		if err := AppendMessages(ctx, m, id, []chat.Message{{Role: chat.RoleUser, Content: strings.Repeat("x", size)}}, WithOwner(owner)); err != nil {
			t.Fatal(err)
		}
	}
	write("alice", "alice-session", 100_000)
	for i := range 100 {
		write("bob", fmt.Sprintf("bob-%03d", i), 50_000)
		if _, bytes := m.OwnerUsage("bob"); bytes > capBytes {
			t.Fatalf("bob's sessions weigh %d bytes, over the store's cap", bytes)
		}
	}
	_, a := m.OwnerUsage("alice")
	_, b := m.OwnerUsage("bob")
	if a+b > capBytes || a < 100_000 {
		t.Fatalf("alice %d bytes, bob %d: want alice kept and both within %d", a, b, capBytes)
	}
	if _, err := m.Get(ctx, "alice-session"); err != nil {
		t.Fatalf("alice's session: %v", err)
	}
}

// TestEvictionSparesLeases: a session whose lease is held is not evicted,
// even when its owner is the only one and the store is full.
func TestEvictionSparesLeases(t *testing.T) {
	m := NewMemory(Config{MaxSessions: 10, SessionsPerOwner: -1})
	defer m.Close()
	ctx := context.Background()
	_, held, err := m.Claim(ctx, "held-session", WithOwner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := claim(t, m, "alice", fmt.Sprintf("other-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Update(ctx, m, "held-session", func(*orchestration.State) error { return nil }, WithLease(held)); err != nil {
		t.Fatalf("the turn's write after the others were created: %v", err)
	}
	if m.Len() != 10 {
		t.Fatalf("%d sessions, want the cap", m.Len())
	}
}

// TestMemoryInvariants: whatever owners do, the store's books agree with
// its sessions, and it stays within its caps when no lease holds a
// session: a property test over random operations.
func TestMemoryInvariants(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 41))
			now := time.Unix(1_800_000_000, 0)
			m := NewMemory(Config{MaxSessions: 50, MaxBytes: 64 << 10, SessionsPerOwner: 30, BytesPerOwner: 40 << 10,
				TTL: time.Minute, Now: func() time.Time { return now }})
			defer m.Close()
			ctx := context.Background()
			owners := []string{"", "alice", "bob", "carol"}
			for range 2000 {
				owner := owners[rnd.IntN(len(owners))]
				id := fmt.Sprintf("%s-%03d", owner, rnd.IntN(60))
				var err error
				switch rnd.IntN(6) {
				case 0:
					err = claim(t, m, owner, id)
				case 1:
					err = AppendMessages(ctx, m, id, []chat.Message{{Role: chat.RoleUser, Content: strings.Repeat("y", rnd.IntN(4000))}}, WithOwner(owner))
				case 2:
					_, _, err = m.UpdateAppend(ctx, id, func(*orchestration.State) error { return nil },
						[]chat.Message{{Role: chat.RoleAssistant, Content: strings.Repeat("z", rnd.IntN(2000))}}, 0, WithOwner(owner), DropLastAnswer())
				case 3:
					err = m.Delete(ctx, id)
				case 4:
					_, err = m.Get(ctx, id)
				case 5:
					now = now.Add(time.Duration(rnd.IntN(20)) * time.Second)
				}
				if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrQuota) && !errors.Is(err, ErrForeign) {
					t.Fatal(err)
				}
				checkBooks(t, m)
			}
		})
	}
}

// checkBooks checks the memory store's accounts against its sessions.
func checkBooks(t *testing.T, m *Memory) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var total int64
	counted := 0
	for owner, ow := range m.owners {
		var bytes int64
		if ow.lru.Len() == 0 {
			t.Fatalf("owner %q is kept without sessions", owner)
		}
		for el := ow.lru.Front(); el != nil; el = el.Next() {
			e := el.Value.(*memEntry)
			if e.sess.Owner != owner || m.items[e.sess.ID] == nil {
				t.Fatalf("owner %q lists %q, which is not its session in the store", owner, e.sess.ID)
			}
			if w := Weight(e.sess, e.msgs); w != e.weight {
				t.Fatalf("session %q weighs %d, its books say %d", e.sess.ID, w, e.weight)
			}
			bytes += e.weight
		}
		if bytes != ow.bytes {
			t.Fatalf("owner %q: its sessions weigh %d, its books say %d", owner, bytes, ow.bytes)
		}
		counted += ow.lru.Len()
		total += bytes
	}
	if counted != len(m.items) || total != m.bytes || m.lru.Len() != len(m.items) {
		t.Fatalf("the owners hold %d sessions of %d bytes; the store %d (list %d) of %d", counted, total, len(m.items), m.lru.Len(), m.bytes)
	}
	if len(m.items) > m.cfg.MaxSessions || m.bytes > m.cfg.MaxBytes {
		t.Fatalf("%d sessions of %d bytes, over the caps", len(m.items), m.bytes)
	}
}
