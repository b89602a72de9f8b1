package turns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// Replicas share turns through Config.Turns (a redislog.Log on the session
// store's Redis). The replica that runs a turn stays its only writer: the
// turn's frames go to its local log first (clients attached to this replica
// read them from there, with no round trip) and the replica's mirror
// (mirrors) copies them to the shared log in batches. A client that reconnects to another
// replica is served from the shared log (sharedTurn).
//
// The mirror lags the local log by up to mirrorBatch plus a round trip, so a
// client can hold frames that the shared log does not have yet: another
// replica then waits for the log to catch up rather than calling the
// client's Last-Event-ID invalid. If the writer died, the log never catches
// up; the writer's sign of life (turnlog.Status.Written, advanced at least
// every Config.Liveness) tells readers so after writerTimeout, and they
// take the turn over (takeover.go), or end the stream with errAbandoned.

// mirrorBatch is how long the mirror lets frames gather before one write:
// a paced model stream (a chunk every 10-50 ms) then costs ten round trips
// per second instead of one per chunk, and a reader elsewhere is at most
// this much behind. The turn's first frames wait for a batch too, and its
// last ones go with its end in one write, so that a turn that ends within
// mirrorBatch/2 of its first frame costs the shared log two writes: its
// start and its end (batchDue).
const mirrorBatch = 100 * time.Millisecond

// batchDue is when a batch whose oldest frame came at t is due: on a grid
// of mirrorBatch/2 on the wall clock, the same for every turn of the
// replica, at least mirrorBatch/2 after t. The mirrors of the turns
// streaming at once then write together, and the shared log sends their
// writes to Redis in a few pipelines per tick instead of one round trip each
// (redislog's pipe). A frame waits at most mirrorBatch; a steady stream
// is written about every mirrorBatch (its next frame comes after a write);
// a turn that ends within mirrorBatch/2 of its first frame writes nothing
// before its end.
func batchDue(t time.Time) time.Time { return onGrid(t.Add(mirrorGrid)) }

// mirrorGrid is the spacing of the replica's shared grid (batchDue).
const mirrorGrid = mirrorBatch / 2

// onGrid is the first point of the shared grid at or after t. A turn's
// last frames and its end are written there too, up to mirrorGrid after
// the turn ended, with the other turns' batches: the client has its
// [DONE] from this replica already, and another replica goes by the
// session's turn marker (runsElsewhere) or waits for the frames.
func onGrid(t time.Time) time.Time {
	r := t.Truncate(mirrorGrid)
	if r.Before(t) {
		r = r.Add(mirrorGrid)
	}
	return r
}

// mirrorDrain bounds the wait for the mirror's work once the turn is over
// (the last frames and Finish), so that an unreachable Redis cannot hold
// up shutdown. The mirror goes on trying after it, until mirrorGiveUp:
// a turn whose end never reaches the shared log looks, to the other
// replicas, like one whose replica died (and another would take it over,
// although its client was told it ended), so the end is written as soon
// as Redis answers again.
const (
	mirrorDrain  = 10 * time.Second
	mirrorGiveUp = 15 * time.Minute
)

// ErrTurnGone ends a stream whose turn is no longer kept.
var ErrTurnGone = &chat.Error{Code: "stream_gone", Message: "this turn's events are no longer kept; read the answer from the session history"}

var errSharedLog = &chat.Error{Code: "store_unavailable", Message: "the turn's events could not be read from the shared store; reconnect to resume"}

// errTakenOver ends a turn whose stream another replica took over while
// this one was stalled (its writes are refused): the other replica goes
// on with it, and a client of this one resumes it there.
var errTakenOver = &chat.Error{Code: "turn_taken_over", Message: "another server took this turn over while this one was stalled; reconnect to follow it there"}

// writerTimeout is how long a running turn may go without a sign of life
// from its writer before readers on other replicas give it up. The writer
// shows one at least every Liveness; three missed ones are not a slow
// network.
func (r *Runtime) writerTimeout() time.Duration { return 3 * r.cfg.Liveness }

// alive reports whether a running turn's writer still shows signs of life.
// It compares the writer's clock with this replica's: replicas' clocks must
// agree to well within writerTimeout (NTP does). A turn handed over has
// no writer until one takes it over.
func (r *Runtime) alive(st turnlog.Status) bool {
	return st.Done || !st.HandedOver && time.Since(st.Written) < r.writerTimeout()
}

// mirrors copies the frames of this replica's turns to the shared log:
// one goroutine for all of them, which wakes on the shared grid (onGrid)
// while any turn is mirrored, decides for each turn what is due, and sends
// the due writes from short-lived goroutines, so that the shared log's
// pipe sends them to Redis together. A turn that waits (for the model's
// first token, a long tool call) holds no goroutine of the mirror, and a
// streaming turn does not wake one per frame.
type mirrors struct {
	r       *Runtime
	mu      sync.Mutex
	turns   map[*mirrorState]struct{}
	running bool // the loop goroutine runs (it exits when turns is empty)
}

// mirrorState is one turn's copy to the shared log. Its fields are used by
// the loop while busy is false and by the turn's write while it is true.
type mirrorState struct {
	t    *turn
	ref  turnlog.Ref
	busy atomic.Bool
	// done is closed when the copy is over (finished, given up, or the turn
	// gone from the shared log).
	done chan struct{}

	sent   int64 // the last seq the shared log has
	doneAt time.Time
	// drained: done was closed after mirrorDrain; the copy goes on.
	drained   bool
	lastWrite time.Time
	// pending is when the loop first saw the frames not written yet
	// (zero: none).
	pending  time.Time
	failures int
}

// mirror starts copying t's frames to the shared log until the turn is
// over, then finishes it there; the returned channel is closed when that is
// done. The turn is opened, not started: its first batch registers it in
// the same write (a turn whose frames all go with its end costs the shared
// log one write). Until then, up to mirrorBatch after the client heard of
// the turn, other replicas find it by the session's turn marker, which the
// turn set before its first frame (unlisted).
//
// A turn taken over (turn.continued) is already this replica's in the
// shared log (turnlog.Taker.TakeOver): its copy starts after the frames
// it holds, which came from there.
func (r *Runtime) mirror(t *turn) <-chan struct{} {
	st := &mirrorState{t: t, ref: turnlog.Ref{Session: t.key, Turn: t.id}, done: make(chan struct{}), lastWrite: time.Now()}
	if t.continued {
		st.sent = t.loaded
	} else if err := r.cfg.Log.Open(turnlog.Meta{Ref: st.ref, Owner: t.owner, AgentID: t.agentID}); err != nil {
		r.log.Warn("shared turn log: opening the turn failed; its stream can be resumed on this replica only", "session", t.sessionID, "turn", t.id, "err", err)
		close(st.done)
		return st.done
	}
	m := &r.mirrors
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.turns == nil {
		m.r = r
		m.turns = make(map[*mirrorState]struct{})
	}
	m.turns[st] = struct{}{}
	if !m.running {
		m.running = true
		go m.loop()
	}
	return st.done
}

// loop wakes on the grid until no turn is left to copy.
func (m *mirrors) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []*mirrorState
	for {
		// Step at the grid point itself, not at the moment the timer
		// fired (a little after it): frames first seen at one point are
		// then due at the next (batchDue), 50-100 ms after they came, not
		// a point later.
		at := onGrid(time.Now().Add(time.Nanosecond))
		timer.Reset(time.Until(at))
		<-timer.C
		m.mu.Lock()
		if len(m.turns) == 0 {
			m.running = false
			m.mu.Unlock()
			return
		}
		due = due[:0]
		for st := range m.turns {
			if !st.busy.Load() {
				due = append(due, st)
			}
		}
		m.mu.Unlock()
		for _, st := range due {
			if w := m.r.mirrorStep(st, at); w != nil {
				st.busy.Store(true)
				go func() {
					if w() {
						// Out of the set before it is free again: the
						// loop never steps a copy that is over.
						m.remove(st)
					}
					st.busy.Store(false)
				}()
			}
		}
		clear(due)
	}
}

func (m *mirrors) remove(st *mirrorState) {
	m.mu.Lock()
	delete(m.turns, st)
	m.mu.Unlock()
	if !st.drained {
		close(st.done)
	}
}

// mirrorStep decides what is due for st at now: nothing (nil), or a write
// to run, which reports whether the copy is over. Let frames gather for a
// batch; write them when the batch is due, or a sign of life when the turn
// streams nothing for a heartbeat; once the turn is done, its last frames
// and its end in one write on the grid.
func (r *Runtime) mirrorStep(st *mirrorState, now time.Time) (write func() (over bool)) {
	t := st.t
	events, done, gap, _ := t.read(st.sent)
	switch {
	case len(events) == 0:
		st.pending = time.Time{}
	case st.pending.IsZero():
		// The grid point the frames were first seen at, even when the
		// step runs a little after it: they are then due at the next.
		st.pending = now.Truncate(mirrorGrid)
	}
	if done && st.doneAt.IsZero() {
		st.doneAt = now.Truncate(mirrorGrid)
	}
	switch over := now.Sub(st.doneAt); {
	case st.doneAt.IsZero():
	case over > mirrorGiveUp:
		r.log.Warn("shared turn log: gave up copying the turn's last frames", "session", t.sessionID, "turn", t.id, "sent", st.sent)
		r.mirrors.remove(st)
		return nil
	case over > mirrorDrain && !st.drained:
		r.log.Warn("shared turn log: the turn's last frames could not be copied yet; trying on in the background", "session", t.sessionID, "turn", t.id, "sent", st.sent)
		st.drained = true
		close(st.done)
	}
	log := r.cfg.Log
	data := func() [][]byte { return encodeEvents(events) }
	switch {
	case gap:
		// More than MaxTurnEvents frames piled up behind an unreachable
		// shared log: the missing ones are gone, and a reader on another
		// replica gets the gap answer there.
		r.log.Warn("shared turn log: frames were dropped before they could be copied", "session", t.sessionID, "turn", t.id, "sent", st.sent)
		return func() bool {
			_ = log.Finish(r.mirrorContext(), st.ref)
			return true
		}
	case done && !now.Before(onGrid(st.doneAt)) && t.isHandedOver():
		// The last frames and the hand-over in one call (two writes):
		// another replica goes on with the turn.
		d := data()
		return func() bool {
			err := log.(turnlog.Taker).HandOver(r.mirrorContext(), st.ref, d...)
			return err == nil || r.mirrorFailed(st, err)
		}
	case done && !now.Before(onGrid(st.doneAt)):
		// The last frames and the end in one write.
		d := data()
		return func() bool {
			err := log.Finish(r.mirrorContext(), st.ref, d...)
			return err == nil || r.mirrorFailed(st, err)
		}
	case done:
		return nil
	case len(events) > 0 && !now.Before(batchDue(st.pending)), len(events) == 0 && now.Sub(st.lastWrite) >= r.cfg.Liveness:
		// A batch, or the sign of life of a turn that streams nothing.
		d, lastSeq := data(), int64(0)
		if len(events) > 0 {
			lastSeq = events[len(events)-1].Seq
		}
		return func() bool {
			last, err := log.Append(r.mirrorContext(), st.ref, d...)
			if err != nil {
				return r.mirrorFailed(st, err)
			}
			if lastSeq != 0 && last != lastSeq {
				r.log.Error("shared turn log: the turn's frames are numbered differently there; stopped copying", "session", t.sessionID, "turn", t.id, "local", lastSeq, "shared", last)
				return true
			}
			st.sent = last
			if st.failures > 0 {
				r.log.Info("shared turn log: copying resumed", "session", t.sessionID, "turn", t.id)
				st.failures = 0
			}
			st.lastWrite, st.pending = time.Now(), time.Time{}
			return false
		}
	}
	return nil
}

// mirrorContext is the context of the mirror's writes, made by each write:
// a step that writes nothing (most of a waiting turn's steps, 20 a
// second) allocates nothing.
func (r *Runtime) mirrorContext() context.Context { return context.WithoutCancel(r.base) }

// mirrorFailed handles a write to the shared log that failed, and reports
// whether the copy is over.
func (r *Runtime) mirrorFailed(st *mirrorState, err error) (over bool) {
	t := st.t
	switch {
	case errors.Is(err, turnlog.ErrFenced):
		// Another replica took the turn over (this one stalled past its
		// lease): its frames are no longer this replica's to copy.
		r.log.Warn("shared turn log: another replica took the turn over; stopped copying", "session", t.sessionID, "turn", t.id, "sent", st.sent)
		t.cancel(errTakenOver)
		return true
	case errors.Is(err, turnlog.ErrNotFound) || errors.Is(err, turnlog.ErrFinished) || errors.Is(err, turnlog.ErrClosed):
		// The session was deleted: nothing more to copy.
		return true
	case errors.Is(err, turnlog.ErrExists):
		// The shared log has another turn under this turn's ID: a write
		// sent again would add this turn's frames to it.
		r.log.Error("shared turn log: another turn there has this turn's ID; stopped copying", "session", t.sessionID, "turn", t.id, "sent", st.sent)
		return true
	case errors.Is(err, session.ErrCorrupt):
		// The shared log lacks frames it had (Redis lost data): a
		// reader elsewhere gets what it has, then the writer's end.
		r.log.Error("shared turn log: the turn's frames there are not the ones copied; stopped copying", "session", t.sessionID, "turn", t.id, "sent", st.sent, "err", err)
		return true
	}
	st.failures++
	if st.failures == 1 {
		r.log.Warn("shared turn log: copying the turn's frames failed; retrying", "session", t.sessionID, "turn", t.id, "err", err)
	}
	// Whether the write went in is unknown: the next one sends the same
	// frames again from st.sent on, and the shared log keeps each once.
	time.Sleep(min(time.Duration(st.failures)*100*time.Millisecond, time.Second))
	return false
}

// sharedTurn is a turn another replica runs, read from the shared log;
// ref names it by its session's store key, sessionID as the client knows
// the session. Its reader reads the events in order, from the first: a
// client that holds events the shared log never got (a dead replica's
// last ones) learns what to drop from the restart that the turn's
// takeover writes (chat.KindRestart; see Seen).
type sharedTurn struct {
	r         *Runtime
	ref       turnlog.Ref
	sessionID string
	// unlisted is when the shared log first did not have the turn while
	// the session's marker named it, missing when it did not have it and
	// the marker no longer named it (checkUnlisted).
	unlisted, missing time.Time
}

// next waits for the events after seq `after` in the shared log (see
// Turn.Next). While it waits it checks, every Liveness, that the turn's
// writer lives: a turn whose writer died, or that was handed over, is
// taken over (or its answer saved) without waiting for the caller's tick.
func (t *sharedTurn) next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) ([]chat.Event, bool, *chat.Error) {
	log := t.r.cfg.Log
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-tick:
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	for {
		wctx, stopWait := context.WithTimeout(ctx, t.r.cfg.Liveness)
		b, err := log.Wait(wctx, t.ref, after)
		stopWait()
		if err != nil && ctx.Err() == nil && wctx.Err() != nil {
			// Liveness without a frame: check the writer, and wait on.
			if e := t.check(ctx); e != nil {
				return nil, false, e
			}
			continue
		}
		switch {
		case err == nil && b.Gap:
			return nil, false, ErrGap
		case err == nil:
			events, err := decodeEvents(b.Frames)
			if err != nil {
				t.r.log.Error("shared turn log: a turn's event could not be read", "session", t.ref.Session, "turn", t.ref.Turn, "err", err)
				return nil, false, errSharedLog
			}
			return events, b.Done, nil
		case ctx.Err() != nil:
			// The tick (or the end): check that the writer lives.
			return nil, false, t.check(context.WithoutCancel(ctx))
		case errors.Is(err, turnlog.ErrAhead):
			// The shared log lost events it had (Redis lost data): what
			// comes next is the writer's to say, or its takeover's.
			if e := t.check(ctx); e != nil {
				return nil, false, e
			}
			select {
			case <-time.After(mirrorBatch):
			case <-ctx.Done():
			}
		case errors.Is(err, turnlog.ErrNotFound):
			// Not listed yet, or gone (check tells).
			if e := t.check(ctx); e != nil {
				return nil, false, e
			}
			select {
			case <-time.After(mirrorGrid):
			case <-ctx.Done():
			}
		default:
			t.r.log.Warn("shared turn log: reading a turn failed", "session", t.ref.Session, "turn", t.ref.Turn, "err", err)
			return nil, false, errSharedLog
		}
	}
}

// check ends the stream when the turn's writer stopped showing signs of
// life.
func (t *sharedTurn) check(ctx context.Context) *chat.Error {
	st, err := t.r.cfg.Log.Lookup(ctx, t.ref)
	switch {
	case errors.Is(err, turnlog.ErrNotFound):
		return t.checkUnlisted(ctx)
	case err != nil:
		// A blip of the shared store is not the writer's death: the next
		// read tells.
		return nil
	case !t.r.alive(st):
		return t.r.abandoned(ctx, t.ref, t.r.cfg.RecoverWait)
	}
	return nil
}

// checkUnlisted judges a turn the shared log does not have: still to come
// while the session's marker names it (unlisted), abandoned when it stayed
// unlisted for writerTimeout (its writer lists it within mirrorBatch, so
// it died first), gone otherwise. A turn's end reaches the shared log up
// to mirrorGrid after its last session write cleared the marker, so a
// turn is gone only once it has been missing for longer than that.
func (t *sharedTurn) checkUnlisted(ctx context.Context) *chat.Error {
	sess, err := t.r.cfg.Store.Get(ctx, t.ref.Session)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return ErrTurnGone
	case err != nil:
		return nil // a blip of the store: the next read tells
	}
	if u, ok := t.r.unlisted(sess, turnlog.Status{}, false); ok && u.Turn == t.ref.Turn {
		t.missing = time.Time{}
		if t.unlisted.IsZero() {
			t.unlisted = time.Now()
		}
		if time.Since(t.unlisted) < t.r.writerTimeout() {
			return nil
		}
		return t.r.abandoned(ctx, t.ref, t.r.cfg.RecoverWait)
	}
	if e := t.r.takenEnd(t.ref.Turn); e != nil {
		// This replica's takeover ended it (its answer was recovered).
		return e
	}
	if t.missing.IsZero() {
		t.missing = time.Now()
	}
	if time.Since(t.missing) <= 2*mirrorBatch {
		return nil
	}
	return ErrTurnGone
}

// unlisted is the turn that sess's marker names when the shared log's
// answer for the session (st, found) is not that turn and the turn does
// not run here: a turn is listed in the shared log by its first batch
// (mirror), up to mirrorBatch after its client heard of it, and the
// session's marker, set by the turn's first write, names it from before
// that. Its status is made from the session: no frame copied, and alive
// (the session's lease is the judge: a replica that dies before its first
// batch leaves the marker behind until its lease expires and the next
// read or turn recovers the session; a stream waiting for it gives it up
// after writerTimeout, see checkUnlisted). ok is false when there is no
// such turn.
func (r *Runtime) unlisted(sess session.Session, st turnlog.Status, found bool) (u turnlog.Status, ok bool) {
	if r.cfg.Log == nil || sess.Turn == "" || r.turns.get(sess.Turn) != nil || found && st.Turn == sess.Turn {
		return u, false
	}
	return turnlog.Status{
		Meta:    turnlog.Meta{Ref: turnlog.Ref{Session: sess.ID, Turn: sess.Turn}, Owner: sess.Owner, AgentID: sess.Agent},
		First:   1,
		Written: time.Now(),
	}, true
}

// unlistedHeld is unlisted, confirmed by the session's lease: a marker
// that a turn left behind (its replica died before listing it, or its
// frames expired from the shared log) names no running turn once nothing
// holds the session; RecoverTurn then saves what the turn left and clears
// the marker, unless takeOver asks that the turn go on instead (with a log
// whose turns can be taken over): the turn is then reported running. A
// running turn holds the lease, so the check costs it one refused lock.
func (r *Runtime) unlistedHeld(ctx context.Context, sess session.Session, st turnlog.Status, found, takeOver bool) (turnlog.Status, bool) {
	u, ok := r.unlisted(sess, st, found)
	if !ok {
		return u, false
	}
	if _, takes := r.cfg.Log.(turnlog.Taker); takeOver && takes {
		a := r.takeOver(sess.ID, sess.Turn, 0)
		select {
		case <-a.done:
			return u, !a.over
		default:
			return u, true
		}
	}
	_, err := r.cfg.Agents.RecoverTurn(ctx, sess.ID, 0)
	switch {
	case err == nil:
		return u, false
	case !errors.Is(err, session.ErrBusy):
		r.log.Warn("recovering an interrupted turn", "session", sess.ID, "err", err)
	}
	return u, true
}

// unlistedRunning is the session's unlisted turn (unlisted) when it has
// one, else st and found as they were: the shared log's answer for the
// session (by its store key), which did not find a running turn. It reads
// the session, as another owner's answers alike: the key is the owner's.
func (r *Runtime) unlistedRunning(ctx context.Context, key, owner string, st turnlog.Status, found bool) (turnlog.Status, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := r.cfg.Store.Get(ctx, key)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return st, found, nil
	case err != nil:
		return st, found, fmt.Errorf("reading the session for its running turn: %w", err)
	case sess.Owner != owner:
		return st, found, nil
	}
	if u, ok := r.unlistedHeld(ctx, sess, st, found, true); ok {
		return u, true, nil
	}
	return st, found, nil
}

// runsElsewhere reports whether st, a turn of sess found in the shared log,
// is running on another replica. The session's turn marker must still name
// it: the turn's last write clears the marker before its client gets
// [DONE], while the shared log learns of its end a batch later, so a stop
// or a delete sent right after [DONE] would otherwise find it running.
func (r *Runtime) runsElsewhere(sess session.Session, st turnlog.Status) bool {
	return !st.Done && sess.Turn == st.Turn && r.alive(st) && r.turns.get(st.Turn) == nil
}

// sharedLookup finds a turn of the session (by its store key) in the
// shared log; found is false when there is no shared log, the turn is not
// kept there or it is another owner's.
func (r *Runtime) sharedLookup(ctx context.Context, key, turnID, owner string) (st turnlog.Status, found bool, err error) {
	if r.cfg.Log == nil {
		return st, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if turnID == "" {
		st, err = r.cfg.Log.Latest(ctx, key)
	} else {
		st, err = r.cfg.Log.Lookup(ctx, turnlog.Ref{Session: key, Turn: turnID})
	}
	switch {
	case errors.Is(err, turnlog.ErrNotFound):
		return st, false, nil
	case err != nil:
		return st, false, fmt.Errorf("looking up the session's turn in the shared log: %w", err)
	}
	return st, st.Owner == owner, nil
}

// forgetShared drops the session's turns (by its store key) from the
// shared log.
func (r *Runtime) forgetShared(ctx context.Context, key string) error {
	if r.cfg.Log == nil {
		return nil
	}
	if err := r.cfg.Log.Forget(ctx, key); err != nil && !errors.Is(err, session.ErrNotFound) {
		return err
	}
	return nil
}

// stopSession stops the running turn of sess, here or on another replica
// (docs/api.md, "Stopping a turn"): the ID of the turn being stopped, ""
// when none was running. Another replica's turn is stopped through the
// shared turn log (turnlog.Log.Stop), whose writer cancels it
// (watchStops).
func (r *Runtime) stopSession(ctx context.Context, sess session.Session) (string, error) {
	key := sess.ID // the store key
	if t := r.turns.latest(key); t != nil {
		if _, done := t.state(); !done {
			t.cancel(chat.StoppedByUser)
			return t.id, nil
		}
	}
	if r.cfg.Log == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, found, err := r.sharedLookup(ctx, key, "", sess.Owner)
	if err != nil {
		return "", err
	}
	u, unlisted := r.unlistedHeld(ctx, sess, st, found, false)
	if unlisted {
		st, found = u, true
	}
	if !found || !r.runsElsewhere(sess, st) {
		return "", nil
	}
	err = r.cfg.Log.Stop(ctx, st.Ref)
	// A turn not listed yet will be with its first batch (within
	// mirrorBatch): wait for that rather than find nothing to stop.
	for wait := time.Now().Add(time.Second); unlisted && errors.Is(err, turnlog.ErrNotFound) && time.Now().Before(wait); {
		time.Sleep(mirrorGrid / 5)
		err = r.cfg.Log.Stop(ctx, st.Ref)
	}
	switch {
	case err == nil:
		return st.Turn, nil
	case errors.Is(err, turnlog.ErrFinished), errors.Is(err, turnlog.ErrNotFound):
		return "", nil // it ended meanwhile
	}
	return "", fmt.Errorf("stopping the turn on another replica: %w", err)
}

// encodeEvents is the shared log's form of events: each one's JSON
// (chat.Event's encoding), without its seq, which the log gives.
func encodeEvents(events []chat.Event) [][]byte {
	data := make([][]byte, len(events))
	for i, ev := range events {
		ev.Seq = 0
		data[i], _ = json.Marshal(&ev) // chat.Event always encodes
	}
	return data
}

// decodeEvents reads events back from the shared log's frames.
func decodeEvents(frames []turnlog.Frame) ([]chat.Event, error) {
	events := make([]chat.Event, len(frames))
	for i, f := range frames {
		if err := json.Unmarshal(f.Data, &events[i]); err != nil {
			return nil, fmt.Errorf("turn log: event %d: %w", f.Seq, err)
		}
		events[i].Seq = f.Seq
	}
	return events, nil
}
