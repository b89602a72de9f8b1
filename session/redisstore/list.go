package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

// An owner's sessions are listed by a sorted set, PREFIX:owner:{DIGEST}
// (DIGEST is the owner part of the sessions' keys, "-" for the owner ""),
// of the keys of the sessions a Claim created, scored by creation time and
// cut to session.MaxListed. It is a key of its own, in its own Cluster slot,
// so it cannot be written in the claim's script; and a turn sends one
// command before its model call (the claim), so a session is listed by the
// first write or release under the lease of the claim that created it,
// which comes after the model call. The set lives session.Config.TTL past
// its last write or list, and a listed session found gone is removed from
// it then.

var _ session.Lister = (*Store)(nil)

// ownerIndex is the key of the sorted set listing the sessions of the owner
// of the session key.
func (r *Store) ownerIndex(key string) string {
	owner, _, ok := strings.Cut(key, ".")
	if !ok {
		owner = "-"
	}
	return r.prefix + ":owner:{" + owner + "}"
}

// listCreated lists the session that the claim of lease created, once
// (see above); other leases, and leases of sessions that existed, do
// nothing.
func listCreated(ctx context.Context, lease session.Lease) {
	l, ok := lease.(*redisLease)
	if !ok || l == nil {
		return
	}
	if ms := l.created.Swap(0); ms != 0 {
		l.r.index(ctx, l.id, time.UnixMilli(ms))
	}
}

// index adds a session that a claim created to its owner's list. A failure
// leaves the session out of the list, not out of the store: it is logged,
// and the claim stands.
func (r *Store) index(ctx context.Context, key string, created time.Time) {
	rctx, cancel := r.roundTrip(context.WithoutCancel(ctx))
	defer cancel()
	err := scriptIndex.Run(rctx, r.client, []string{r.ownerIndex(key)}, created.UnixMilli(), key, session.MaxListed, r.ttlMillis()).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		slog.Default().Warn("redis session store: the new session is missing from its owner's list", "err", err)
	}
}

// unindex removes a deleted session from its owner's list.
func (r *Store) unindex(ctx context.Context, key string) {
	rctx, cancel := r.roundTrip(context.WithoutCancel(ctx))
	defer cancel()
	_ = r.client.ZRem(rctx, r.ownerIndex(key), key).Err()
}

// List implements session.Lister: the owner's index, then every listed
// session's state and the page's first messages, one pipeline each.
func (r *Store) List(ctx context.Context, owner, cursor string, limit int) (session.Page, error) {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	idx := r.ownerIndex(session.Key(owner, "x"))
	keys, err := r.client.ZRevRange(rctx, idx, 0, session.MaxListed-1).Result()
	if err != nil {
		return session.Page{}, r.fail(owner, "list", err)
	}
	states := make([]*redis.StringCmd, len(keys))
	if _, err := r.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			states[i] = p.HGet(rctx, r.key(k, "state"), "data")
		}
		p.PExpire(rctx, idx, r.cfg.TTL)
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return session.Page{}, r.fail(owner, "list", err)
	}
	var all []session.Summary
	var gone []any
	named := map[string]string{} // Session.Title by key
	for i, k := range keys {
		data, err := states[i].Result()
		if errors.Is(err, redis.Nil) {
			gone = append(gone, k)
			continue
		}
		s, err := r.decode(k, data)
		if err != nil || s.Owner != owner || !session.OwnsKey(owner, k) {
			continue // a corrupt session says so when it is opened
		}
		all = append(all, session.SummaryOf(s))
		named[k] = s.Title
	}
	if len(gone) > 0 {
		_ = r.client.ZRem(rctx, idx, gone...).Err()
	}
	p, err := session.ListPage(all, cursor, limit)
	if err != nil {
		return session.Page{}, err
	}
	firsts := make([]*redis.StringCmd, len(p.Sessions))
	if _, err := r.client.Pipelined(rctx, func(pl redis.Pipeliner) error {
		for i, s := range p.Sessions {
			firsts[i] = pl.LIndex(rctx, r.key(s.Key, "messages"), 0)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return session.Page{}, r.fail(owner, "list", err)
	}
	for i, s := range p.Sessions {
		var first []chat.Message
		if raw, err := firsts[i].Result(); err == nil {
			var m chat.Message
			if json.Unmarshal([]byte(raw), &m) == nil {
				first = append(first, m)
			}
		}
		p.Sessions[i].Title = session.TitleOf(named[s.Key], first)
	}
	return p, nil
}
