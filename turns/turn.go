package turns

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/turnlog"
)

// Turn is one turn of an agent, running or kept after its end: on this
// replica, on another one (read from the shared turn log), or rebuilt from
// the answer its session stored (a retried request's, see Start). Its
// events are numbered from 1 (chat.Event.Seq) in every case, the same on
// every replica.
type Turn struct {
	r         *Runtime
	id        string
	owner     string
	sessionID string
	agentID   string
	local     *turn       // a turn of this replica, or a stored answer
	shared    *sharedTurn // another replica's
	replayed  bool
}

func (r *Runtime) localTurn(t *turn) *Turn {
	return &Turn{r: r, id: t.id, owner: t.owner, sessionID: t.sessionID, agentID: t.agentID, local: t}
}

func (r *Runtime) sharedTurn(ref turnlog.Ref, owner, sessionID, agentID string) *Turn {
	return &Turn{r: r, id: ref.Turn, owner: owner, sessionID: sessionID, agentID: agentID, shared: &sharedTurn{r: r, ref: ref, sessionID: sessionID}}
}

// ID names the turn.
func (t *Turn) ID() string { return t.id }

// SessionID is the turn's session, as its client knows it.
func (t *Turn) SessionID() string { return t.sessionID }

// Owner is the owner of the turn's session (an API key's fingerprint).
func (t *Turn) Owner() string { return t.owner }

// Agent is the ID of the turn's agent.
func (t *Turn) Agent() string { return t.agentID }

// Replayed reports whether Start returned the turn that an earlier request
// with the same idempotency key started, instead of a turn of its own.
func (t *Turn) Replayed() bool { return t.replayed }

// Local reports whether the turn's events are in this replica's memory
// (it runs here, or Start rebuilt it), so that Locked works.
func (t *Turn) Local() bool { return t.local != nil }

// Next waits for the events after seq after, until there are some, the
// turn ends, tick fires, stop is closed or ctx ends; done reports that the
// events returned reach the turn's end. No events and no error (a tick, a
// stop, ctx) ask the caller to decide (a heartbeat, the shutdown). An
// error ends the reading: the events cannot be served (dropped, ErrGap;
// no longer kept, ErrTurnGone; the turn abandoned and its answer saved;
// the shared log unreadable). The events are shared: they must not be
// modified.
func (t *Turn) Next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) (events []chat.Event, done bool, err *chat.Error) {
	if t.local != nil {
		return t.local.next(ctx, after, tick, stop)
	}
	return t.shared.next(ctx, after, tick, stop)
}

// Events yields the turn's events after seq after, in order, until Done,
// wherever the turn runs; an error ends them: ctx's, the runtime's
// shutdown (Runtime.StreamEnd), or Next's (ErrHandedOver for a turn this
// replica handed over as it shut down).
func (t *Turn) Events(ctx context.Context, after int64) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		tick := time.NewTicker(t.r.cfg.Heartbeat)
		defer tick.Stop()
		for {
			events, done, cerr := t.Next(ctx, after, tick.C, t.r.closing)
			if cerr != nil {
				yield(chat.Event{}, cerr)
				return
			}
			for _, ev := range events {
				after = ev.Seq
				if !yield(ev, nil) || ev.Kind == chat.KindDone {
					return
				}
			}
			switch {
			case done && len(events) == 0:
				return
			case ctx.Err() != nil:
				yield(chat.Event{}, ctx.Err())
				return
			case isClosed(t.r.closing) && len(events) == 0:
				yield(chat.Event{}, t.r.StreamEnd())
				return
			}
		}
	}
}

// Attach counts a reader of the turn until the returned func is called:
// with Config.DisconnectGrace, a turn of this replica that no reader has
// followed for that long is stopped. It does nothing for another
// replica's turn (its own replica counts its readers).
func (t *Turn) Attach() (detach func()) {
	if t.local == nil {
		return func() {}
	}
	return t.local.attach()
}

// Stop stops the turn as a person's Stop does, on whichever replica runs
// it: its partial answer is saved and it ends with KindAbort and Done. It
// does nothing to a finished turn.
func (t *Turn) Stop(ctx context.Context) error {
	if t.local != nil {
		if _, done := t.local.state(); !done {
			t.local.cancel(chat.StoppedByUser)
		}
		return nil
	}
	err := t.r.cfg.Log.Stop(ctx, t.shared.ref)
	if err != nil && !isFinishedOrGone(err) {
		return err
	}
	return nil
}

// Last reports the seq of the turn's last event so far, whether it ended,
// and the seqs at which it was taken over (the restart events), as far
// as this replica knows them.
func (t *Turn) Last(ctx context.Context) (last int64, done bool, restarts []int64, err error) {
	if t.local != nil {
		last, done = t.local.state()
		return last, done, t.local.restarts, nil
	}
	st, err := t.r.cfg.Log.Lookup(ctx, t.shared.ref)
	if err != nil {
		return 0, false, nil, err
	}
	// The turn's last write clears the session's marker before the shared
	// log learns of its end.
	sess, err := t.r.cfg.Store.Get(ctx, t.shared.ref.Session)
	if err != nil {
		return 0, false, nil, err
	}
	return st.Last, !t.r.runsElsewhere(sess, st), st.Restarts, nil
}

// Locked calls fn with the events of a turn of this replica held still,
// for a reader that writes them as they come (a Live reader): fn reads
// what it has not written (Held.After) and makes itself live or not, and
// no event is logged meanwhile. It reports false, without calling fn, for
// another replica's turn. fn must not block.
func (t *Turn) Locked(fn func(h Held)) bool {
	if t.local == nil {
		return false
	}
	t.local.mu.Lock()
	defer t.local.mu.Unlock()
	fn(Held{t.local})
	return true
}

// Held is a turn of this replica under its lock (Turn.Locked).
type Held struct{ t *turn }

// After returns the events after seq after, whether the turn is done, and
// gap when events after `after` were already dropped.
func (h Held) After(after int64) (events []chat.Event, done, gap bool) {
	events, gap = h.t.after(after)
	return events, h.t.done, gap
}

// Live makes r a live reader of the turn: it is handed every event the
// turn logs from now on, until the turn ends (Live.End) or r cannot take
// them (Live.Push reports false).
func (h Held) Live(r Live) { h.t.live = append(h.t.live, r) }

// Drop stops handing events to r.
func (h Held) Drop(r Live) {
	for i, l := range h.t.live {
		if l == r {
			h.t.live = append(h.t.live[:i], h.t.live[i+1:]...)
			return
		}
	}
}

// Read returns the turn's events after seq after that are there now,
// without waiting, and whether they reach the turn's end. The shared log's
// are read in as many round trips as it takes. It fails with ErrGap when
// events after `after` were dropped.
func (t *Turn) Read(ctx context.Context, after int64) ([]chat.Event, bool, error) {
	if t.local != nil {
		t.local.mu.Lock()
		defer t.local.mu.Unlock()
		events, gap := t.local.after(after)
		if gap {
			return nil, false, ErrGap
		}
		return events, t.local.done, nil
	}
	var out []chat.Event
	for {
		b, err := t.r.cfg.Log.Read(ctx, t.shared.ref, after)
		switch {
		case errors.Is(err, turnlog.ErrNotFound) && out == nil:
			// Not listed yet: its replica lists it with its first batch
			// (Next waits for it, and tells a turn that is gone).
			return nil, false, nil
		case err != nil:
			return nil, false, err
		case b.Gap:
			return nil, false, ErrGap
		}
		events, err := decodeEvents(b.Frames)
		if err != nil {
			return nil, false, err
		}
		out = append(out, events...)
		if b.Done || len(events) == 0 {
			return out, b.Done, nil
		}
		after = events[len(events)-1].Seq
	}
}

// Cancel stops a turn of this replica with cause, which says why in its
// last events (a *chat.Stop, a *chat.Error or a *chat.Limit); it does
// nothing to another replica's turn or a finished one.
func (t *Turn) Cancel(cause error) {
	if t.local == nil {
		return
	}
	if _, done := t.local.state(); !done {
		t.local.cancel(cause)
	}
}
