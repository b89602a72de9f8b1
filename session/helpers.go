package session

import (
	"context"
	"errors"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// A Pinger is a Store that can tell whether its backing store is
// reachable without touching a session. It is optional: the server's
// readiness check (GET /readyz) asks a store that has it, and counts a
// store without it as ready.
type Pinger interface {
	Store
	// Ping reports whether the store is reachable: nil, or an error
	// wrapping ErrUnavailable.
	Ping(ctx context.Context) error
}

// An Appender is a Store with a faster way to append messages than an
// UpdateAppend that leaves the state alone (the Redis store appends in
// one script without reading the state). AppendMessages uses it.
type Appender interface {
	Store
	// AppendMessages appends msgs to the history like UpdateAppend with a
	// function that changes nothing and window 0, except that the
	// session's Version may stay as it was and options other than
	// WithLease, WithOwner and WithAgent are ignored.
	AppendMessages(ctx context.Context, id string, msgs []chat.Message, opts ...UpdateOption) error
}

// Update applies fn to the session's state atomically and returns the
// stored session: UpdateAppend without messages. A missing session is
// created empty first (WithOwner, WithAgent). fn may run more than once
// (optimistic retries) and must have no side effects; an error from fn
// aborts the update and is returned as is.
func Update(ctx context.Context, s Store, id string, fn func(*orchestration.State) error, opts ...UpdateOption) (Session, error) {
	sess, _, err := s.UpdateAppend(ctx, id, fn, nil, 0, opts...)
	return sess, err
}

// AppendMessages adds msgs to the session's history, creating the session
// when there is none (WithOwner, WithAgent), under the lease of WithLease
// if given: UpdateAppend with a function that changes nothing, or the
// store's own append when it is an Appender. Beyond Config.MaxMessages
// the oldest whole turns are dropped (see TrimTurns).
func AppendMessages(ctx context.Context, s Store, id string, msgs []chat.Message, opts ...UpdateOption) error {
	if a, ok := s.(Appender); ok {
		return a.AppendMessages(ctx, id, msgs, opts...)
	}
	_, _, err := s.UpdateAppend(ctx, id, keepState, msgs, 0, opts...)
	return err
}

func keepState(*orchestration.State) error { return nil }

// Lock takes the turn lease of the existing session id, whoever owns it
// (a recovery or a takeover acts for the session's own owner): Claim under
// the session's owner and agent. It returns the session as claimed, or
// ErrNotFound when there is none, and waits for a busy session like Claim
// (Config.LockWait) before ErrBusy.
func Lock(ctx context.Context, s Store, id string) (Session, Lease, error) {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return Session{}, nil, err
	}
	sess, l, err := s.Claim(ctx, id, WithOwner(cur.Owner), WithAgent(cur.Agent))
	switch {
	case errors.Is(err, ErrForeign):
		// Deleted and made again by another owner or agent since Get: the
		// session that was asked for is gone.
		return Session{}, nil, ErrNotFound
	case err != nil:
		return Session{}, nil, err
	case !sess.CreatedAt.Equal(cur.CreatedAt):
		// Deleted since Get, and made again (by this Claim, or by its
		// owner meanwhile): the session that was asked for is gone. The
		// new one is left alone, empty or not, and expires unused.
		_ = l.Release(ctx)
		return Session{}, nil, ErrNotFound
	}
	return sess, l, nil
}
