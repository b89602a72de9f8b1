package turns

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// The runtime's view of a session's turns: the latest one, running or
// kept, wherever it runs; a turn by its ID; stopping; forgetting.

// Status describes a session's turn.
type Status struct {
	ID string
	// Running: the turn runs (here or on a replica that shows signs of
	// life, or one taking it over).
	Running bool
	// Last is the seq of its last event so far; Restarts the seqs of its
	// takeovers' restart events.
	Last     int64
	Restarts []int64
}

// Session reads the owner's session; another owner's is
// session.ErrNotFound, an invalid ID a *Problem.
func (r *Runtime) Session(ctx context.Context, owner, sessionID string) (session.Session, error) {
	if !session.ValidID(sessionID) {
		return session.Session{}, ErrBadSessionID("the session ID")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := r.cfg.Store.Get(ctx, session.Key(owner, sessionID))
	if err == nil && sess.Owner != owner {
		err = session.ErrNotFound // a digest collision, or data written by hand
	}
	return sess, err
}

// Settle saves what an interrupted turn of sess streamed before its
// history is read: when the session's last turn did not clear its marker,
// runs nowhere and cannot go on (taken over), no replica holds the
// session, so the turn is over. It reports whether it saved something
// (the session is then to be read again).
func (r *Runtime) Settle(ctx context.Context, sess session.Session) bool {
	if sess.Turn == "" || r.runsHere(sess.Turn) || r.mayGoOn(ctx, sess) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rec, err := r.cfg.Agents.RecoverTurn(ctx, sess.ID, 0)
	switch {
	case err == nil:
		return rec.Turn != ""
	case !errors.Is(err, session.ErrBusy):
		r.log.Warn("recovering an interrupted turn", "session", sess.ID, "err", err)
	}
	return false
}

// mayGoOn reports whether sess's turn, which does not run here, may go
// on: the shared log's turns can be taken over, and the log does not say
// the turn ended.
func (r *Runtime) mayGoOn(ctx context.Context, sess session.Session) bool {
	if _, ok := r.cfg.Log.(turnlog.Taker); !ok {
		return false
	}
	st, found, err := r.sharedLookup(ctx, sess.ID, sess.Turn, sess.Owner)
	return err != nil || !found || !st.Done
}

// runsHere reports whether the turn runs on this replica.
func (r *Runtime) runsHere(turnID string) bool {
	t := r.turns.get(turnID)
	if t == nil {
		return false
	}
	_, done := t.state()
	return !done
}

// Latest describes the session's latest turn (sess as the store read
// it), nil when none is kept. A turn this replica runs or ran is described
// from its own log, which is ahead of the shared one; a newer turn can
// only be another replica's (turns of a session never overlap), and a
// running turn whose writer stopped showing signs of life is not running
// any more, unless it is taken over (which this starts).
func (r *Runtime) Latest(ctx context.Context, sess session.Session) (*Status, error) {
	var local *Status
	if t := r.turns.latest(sess.ID); t != nil { // sess.ID is the store key
		last, done := t.state()
		local = &Status{ID: t.id, Running: !done, Last: last, Restarts: t.restarts}
		if local.Running {
			return local, nil
		}
	}
	st, found, err := r.sharedLookup(ctx, sess.ID, "", sess.Owner)
	if err != nil {
		return local, err
	}
	if u, ok := r.unlistedHeld(ctx, sess, st, found, true); ok {
		st, found = u, true
	}
	if !found || r.turns.get(st.Turn) != nil {
		return local, nil
	}
	running := r.runsElsewhere(sess, st) || sess.Turn == st.Turn && !st.Done && r.goesOn(st)
	return &Status{ID: st.Turn, Running: running, Last: st.Last, Restarts: st.Restarts}, nil
}

// Turn finds a kept turn of the owner's session by its ID, on this
// replica or in the shared log, or fails with ErrTurnNotFound.
func (r *Runtime) Turn(ctx context.Context, owner, sessionID, turnID string) (*Turn, error) {
	key := session.Key(owner, sessionID)
	if t := r.turns.get(turnID); t != nil && t.key == key {
		return r.localTurn(t), nil
	}
	if r.cfg.Log == nil || !session.ValidID(sessionID) || !session.ValidID(turnID) {
		return nil, ErrTurnNotFound
	}
	st, found, err := r.sharedLookup(ctx, key, turnID, owner)
	if err != nil {
		return nil, err
	}
	if !found {
		st, found, err = r.unlistedRunning(ctx, key, owner, st, found)
		if err != nil {
			return nil, err
		}
		found = found && st.Turn == turnID
	}
	if !found {
		return nil, ErrTurnNotFound
	}
	return r.sharedTurn(turnlog.Ref{Session: key, Turn: turnID}, owner, sessionID, st.AgentID), nil
}

// Running returns the session's running turn, wherever it runs, or nil.
func (r *Runtime) Running(ctx context.Context, owner, sessionID string) (*Turn, error) {
	key := session.Key(owner, sessionID)
	if t := r.turns.latest(key); t != nil {
		if _, done := t.state(); !done {
			return r.localTurn(t), nil
		}
	}
	if r.cfg.Log == nil {
		return nil, nil
	}
	st, found, err := r.sharedLookup(ctx, key, "", owner)
	if err == nil && (!found || st.Done) {
		st, found, err = r.unlistedRunning(ctx, key, owner, st, found)
	}
	if err != nil {
		return nil, err
	}
	if found && !st.Done && r.turns.get(st.Turn) == nil && r.goesOn(st) {
		return r.sharedTurn(st.Ref, owner, sessionID, st.AgentID), nil
	}
	return nil, nil
}

// Stop stops the running turn of the owner's session, on whichever
// replica runs it (the API's POST /api/sessions/:id/stop): the ID of the
// turn being stopped, "" when none was running. Its partial answer is
// saved and it ends with KindAbort and Done.
func (r *Runtime) Stop(ctx context.Context, owner, sessionID string) (turnID string, err error) {
	sess, err := r.Session(ctx, owner, sessionID)
	if err != nil {
		return "", err
	}
	return r.stopSession(ctx, sess)
}

// StopSession is Stop for a session already read (sess.ID is its store
// key).
func (r *Runtime) StopSession(ctx context.Context, sess session.Session) (string, error) {
	return r.stopSession(ctx, sess)
}

// Forget drops the kept turns of a deleted session (sess.ID is its store
// key), here and in the shared log.
func (r *Runtime) Forget(ctx context.Context, key string) error {
	r.turns.forgetSession(key)
	return r.forgetShared(ctx, key)
}

// ErrRunning refuses to delete a session while a turn runs on it.
var ErrRunning = NewProblem(http.StatusConflict, "session_busy", "a turn is running on this session; wait for it to finish before deleting the session")

// Delete deletes sess (read from the store: sess.ID is its store key)
// and its kept turns, unless a turn runs on it (ErrRunning).
func (r *Runtime) Delete(ctx context.Context, sess session.Session) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if t, err := r.Latest(ctx, sess); err != nil {
		return err
	} else if t != nil && t.Running {
		return ErrRunning
	}
	if err := r.cfg.Store.Delete(ctx, sess.ID); err != nil {
		return err
	}
	if err := r.Forget(ctx, sess.ID); err != nil {
		// The session is gone; its turns' events expire with the retention.
		r.log.Warn("deleting a session's turns from the shared log", "session", sess.ID, "err", err)
	}
	return nil
}

func isFinishedOrGone(err error) bool {
	return errors.Is(err, turnlog.ErrFinished) || errors.Is(err, turnlog.ErrNotFound)
}
