package sessiontest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// The owners' quotas (session.Config.SessionsPerOwner, BytesPerOwner). The
// sessions are keyed as the agent keys them (session.Key), so that a store
// may tell a key's owner from the key alone.

// wantQuota checks that err is the refusal of a store enforcing quotas
// (limit, max), or nil for a store that does not (NoQuotas).
func (h *harness) wantQuota(t *testing.T, what string, err error, limit string, quota int64) {
	t.Helper()
	if h.opts.noQuotas {
		if err != nil {
			t.Fatalf("%s: %v; a store without quotas (NoQuotas) must not refuse it", what, err)
		}
		return
	}
	var qe *session.QuotaError
	if !errors.Is(err, session.ErrQuota) || !errors.As(err, &qe) {
		t.Fatalf("%s: error %v, want a *session.QuotaError wrapping ErrQuota", what, err)
	}
	if qe.Limit != limit || qe.Max != quota || qe.Used+qe.Adding < quota {
		t.Fatalf("%s: %+v, want the %s quota of %d reached", what, *qe, limit, quota)
	}
}

// claimed claims id for owner and releases it at once.
func claimed(ctx context.Context, s session.Store, owner, id string) error {
	_, l, err := s.Claim(ctx, id, session.WithOwner(owner), session.WithAgent("agent"))
	if err == nil {
		err = l.Release(ctx)
	}
	return err
}

// quotaSessions: an owner at its quota of sessions cannot create another
// by any write, and nothing is created; its sessions keep working; other
// owners, and the anonymous owner, are not affected; a deleted session
// frees a place.
func (h *harness) quotaSessions(t *testing.T) {
	s, _ := h.store(t, session.Config{SessionsPerOwner: 3})
	ctx := t.Context()
	// Owners of this test alone: a store the cases share (one Redis)
	// keeps every owner's sessions together.
	aliceName, bobName := "alice-"+session.NewID(), "bob-"+session.NewID()
	owned := []string{session.Key(aliceName, session.NewID()), session.Key(aliceName, session.NewID()), session.Key(aliceName, session.NewID())}
	for _, id := range owned {
		if err := claimed(ctx, s, aliceName, id); err != nil {
			t.Fatalf("Claim within the quota: %v", err)
		}
	}
	user := []chat.Message{{Role: chat.RoleUser, Content: "hi"}}
	noop := func(*orchestration.State) error { return nil }
	alice := session.WithOwner(aliceName)
	for _, tc := range []struct {
		name string
		fn   func(id string) error
	}{
		{"Claim", func(id string) error { return claimed(ctx, s, aliceName, id) }},
		{"Update", func(id string) error { _, err := session.Update(ctx, s, id, noop, alice); return err }},
		{"AppendMessages", func(id string) error { return session.AppendMessages(ctx, s, id, user, alice) }},
		{"UpdateAppend", func(id string) error { _, _, err := s.UpdateAppend(ctx, id, noop, user, -1, alice); return err }},
		{"ClaimStart", func(id string) error {
			st, ok := s.(session.Starter)
			if !ok {
				return claimed(ctx, s, aliceName, id)
			}
			_, l, _, err := st.ClaimStart(ctx, id, func(session.Session) (session.Write, bool) {
				return session.Write{Update: noop, Messages: user, Window: -1}, true
			}, alice, session.WithAgent("agent"))
			if err == nil {
				err = l.Release(ctx)
			}
			return err
		}},
	} {
		id := session.Key(aliceName, session.NewID())
		h.wantQuota(t, tc.name+" of a fourth session", tc.fn(id), session.QuotaSessions, 3)
		if h.opts.noQuotas {
			continue
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("%s refused by the quota left a session behind: %v", tc.name, err)
		}
	}
	// Its sessions keep working.
	if err := claimed(ctx, s, aliceName, owned[0]); err != nil {
		t.Fatalf("Claim of an existing session at the quota: %v", err)
	}
	if err := session.AppendMessages(ctx, s, owned[0], user, alice); err != nil {
		t.Fatalf("a write to an existing session at the quota: %v", err)
	}
	// Other owners are not affected, nor is the anonymous owner, which has
	// no quota.
	if err := claimed(ctx, s, bobName, session.Key(bobName, session.NewID())); err != nil {
		t.Fatalf("another owner's Claim: %v", err)
	}
	for i := range 5 {
		// An Update, not a Claim: a Lister would list claimed sessions
		// of the anonymous owner, whom other cases list.
		if _, err := session.Update(ctx, s, session.NewID(), noop); err != nil {
			t.Fatalf("the anonymous owner's session %d: %v", i+1, err)
		}
	}
	// A deleted session frees its place.
	must(0, s.Delete(ctx, owned[0]))(t)
	if err := claimed(ctx, s, aliceName, session.Key(aliceName, session.NewID())); err != nil {
		t.Fatalf("Claim after a Delete freed a place: %v", err)
	}
}

// quotaBytes: an owner whose sessions hold its quota of bytes cannot
// create another, nor start a turn (a Charged claim) on one it has; a
// claim that starts no turn still works; another owner can; deleting
// frees the bytes.
func (h *harness) quotaBytes(t *testing.T) {
	const quota = 50_000
	s, _ := h.store(t, session.Config{BytesPerOwner: quota})
	ctx := t.Context()
	aliceName, bobName := "alice-"+session.NewID(), "bob-"+session.NewID()
	big := session.Key(aliceName, session.NewID())
	_, l, err := s.Claim(ctx, big, session.WithOwner(aliceName), session.WithAgent("agent"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "show me"}, {Role: chat.RoleAssistant, Content: strings.Repeat("x", 60_000)}}
	if _, _, err := s.UpdateAppend(ctx, big, func(*orchestration.State) error { return nil }, msgs, 0, session.WithLease(l), session.WithRelease()); err != nil {
		t.Fatal(err)
	}
	h.wantQuota(t, "Claim of a new session over the bytes quota", claimed(ctx, s, aliceName, session.Key(aliceName, session.NewID())), session.QuotaBytes, quota)
	if err := claimed(ctx, s, aliceName, big); err != nil {
		t.Fatalf("Claim of the existing session over the bytes quota: %v", err)
	}
	_, l, err = s.Claim(ctx, big, session.WithOwner(aliceName), session.WithAgent("agent"), session.Charged(0))
	if err == nil {
		err = l.Release(ctx)
	}
	h.wantQuota(t, "a turn's Claim (Charged) of the existing session over the bytes quota", err, session.QuotaBytes, quota)
	if st, ok := s.(session.Starter); ok {
		_, l, _, err := st.ClaimStart(ctx, big, func(session.Session) (session.Write, bool) {
			return session.Write{Update: func(*orchestration.State) error { return nil }, Messages: msgs[:1], Window: -1}, true
		}, session.WithOwner(aliceName), session.WithAgent("agent"), session.Charged(0))
		if err == nil {
			err = l.Release(ctx)
		}
		h.wantQuota(t, "a turn's ClaimStart of the existing session over the bytes quota", err, session.QuotaBytes, quota)
	}
	if err := claimed(ctx, s, bobName, session.Key(bobName, session.NewID())); err != nil {
		t.Fatalf("another owner's Claim: %v", err)
	}
	must(0, s.Delete(ctx, big))(t)
	if err := claimed(ctx, s, aliceName, session.Key(aliceName, session.NewID())); err != nil {
		t.Fatalf("Claim after the Delete freed the bytes: %v", err)
	}
	// A turn whose message would pass the quota is refused, though the
	// owner is under it.
	_, l, err = s.Claim(ctx, session.Key(aliceName, session.NewID()), session.WithOwner(aliceName), session.WithAgent("agent"), session.Charged(quota))
	if err == nil {
		err = l.Release(ctx)
	}
	h.wantQuota(t, "a turn's Claim whose message would pass the bytes quota", err, session.QuotaBytes, quota)
	// Images count by their data.
	pic := session.Key(aliceName, session.NewID())
	_, l, err = s.Claim(ctx, pic, session.WithOwner(aliceName), session.WithAgent("agent"), session.Charged(0))
	if err != nil {
		t.Fatal(err)
	}
	image := []chat.Message{{Role: chat.RoleUser, Content: "look", Attachments: []chat.Attachment{{Kind: chat.AttachImage, URL: "data:image/png;base64," + strings.Repeat("A", 60_000)}}}}
	if _, _, err := s.UpdateAppend(ctx, pic, func(*orchestration.State) error { return nil }, image, 0, session.WithLease(l), session.WithRelease()); err != nil {
		t.Fatal(err)
	}
	_, l, err = s.Claim(ctx, pic, session.WithOwner(aliceName), session.WithAgent("agent"), session.Charged(0))
	if err == nil {
		err = l.Release(ctx)
	}
	h.wantQuota(t, "a turn's Claim after an image over the bytes quota", err, session.QuotaBytes, quota)
}

// quotaExpiry: an expired session does not count toward its owner's
// quota.
func (h *harness) quotaExpiry(t *testing.T) {
	const ttl = 500 * time.Millisecond
	s, c := h.store(t, session.Config{SessionsPerOwner: 2, TTL: ttl})
	ctx := t.Context()
	alice := "alice-" + session.NewID()
	for range 2 {
		if err := claimed(ctx, s, alice, session.Key(alice, session.NewID())); err != nil {
			t.Fatal(err)
		}
	}
	h.wantQuota(t, "Claim at the quota", claimed(ctx, s, alice, session.Key(alice, session.NewID())), session.QuotaSessions, 2)
	c.advance(ttl + 300*time.Millisecond)
	if err := claimed(ctx, s, alice, session.Key(alice, session.NewID())); err != nil {
		t.Fatalf("Claim once the sessions expired: %v", err)
	}
}
