package turns

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// A turn outlives its replica. When the replica running a turn dies, the
// first replica that notices (a client resuming the turn's stream there,
// or reading its session) takes the turn over once the dead turn's lease
// expired (agent.Set.TakeOver): it becomes the writer of the turn's
// stream in the shared log (turnlog.Taker), whose events it loads, and
// goes on with the turn from its last completed step, appending to the
// same stream. The continuation's first event is chat.KindRestart, and
// so is that of every takeover's stream, even one that only ends the
// turn: its events take up the numbering after the last event the shared
// log had, and the dead replica may have sent its clients events the log
// never got; a client holding one of those learns from the restart that
// they are void (see Seen).

// takeovers tracks the takeovers this replica attempts, one per turn at a
// time.
type takeovers struct {
	mu sync.Mutex
	m  map[string]*takeover
}

// takeover is one attempt to take a turn over; its fields are set before
// done is closed.
type takeover struct {
	done chan struct{}
	// over: the turn will not go on (it had ended, or its answer was
	// recovered instead: end says how to tell its readers), and busy:
	// another process holds the session (the turn's replica is alive, or
	// another replica took the turn over first).
	over, busy bool
	end        *chat.Error
}

// takenEnd is how this replica's takeover of turn turnID said to end its
// stream, when one concluded that the turn does not go on; nil otherwise.
func (r *Runtime) takenEnd(turnID string) *chat.Error {
	r.takeovers.mu.Lock()
	a := r.takeovers.m[turnID]
	r.takeovers.mu.Unlock()
	if a == nil {
		return nil
	}
	select {
	case <-a.done:
		if a.over {
			return a.end
		}
	default:
	}
	return nil
}

// refused reports whether the attempt concluded that another process
// holds the session: a later attempt may find the dead turn's lease
// expired, so it is not kept.
func (a *takeover) refused() bool {
	select {
	case <-a.done:
		return a.busy
	default:
		return false
	}
}

// takeOver starts taking over, in the background, the turn turnID of the
// session with store key key, whose writer stopped showing signs of life
// (or never listed the turn), unless this replica is at it already; the
// attempt waits up to wait for the dead turn's lease to expire. It
// returns the attempt, whose done channel closes once it concluded: the
// turn goes on here (over and busy false), goes on elsewhere (busy), or
// will not go on (over).
func (r *Runtime) takeOver(key, turnID string, wait time.Duration) *takeover {
	if r.turns.isClosing() {
		// This replica hands its turns over as it shuts down: it takes
		// none.
		a := &takeover{done: make(chan struct{}), busy: true}
		close(a.done)
		return a
	}
	r.takeovers.mu.Lock()
	defer r.takeovers.mu.Unlock()
	if r.takeovers.m == nil {
		r.takeovers.m = map[string]*takeover{}
	}
	if a := r.takeovers.m[turnID]; a != nil && !a.refused() {
		return a
	}
	a := &takeover{done: make(chan struct{})}
	r.takeovers.m[turnID] = a
	go func() {
		r.runTakeover(a, key, turnID, wait)
		close(a.done)
		// A concluded attempt is kept for a while, so that the readers
		// that wait on it learn how it ended, then forgotten: the turn
		// may die again on this replica or another.
		time.AfterFunc(r.writerTimeout(), func() {
			r.takeovers.mu.Lock()
			defer r.takeovers.mu.Unlock()
			if r.takeovers.m[turnID] == a {
				delete(r.takeovers.m, turnID)
			}
		})
	}()
	return a
}

// runTakeover is one attempt of takeOver.
func (r *Runtime) runTakeover(a *takeover, key, turnID string, wait time.Duration) {
	ctx := context.WithoutCancel(r.base)
	h, err := r.cfg.Agents.TakeOver(ctx, key, turnID, wait)
	switch {
	case errors.Is(err, session.ErrBusy):
		a.busy = true
		return
	case errors.Is(err, agent.ErrTurnOver):
		// The turn ended; its replica may have died before the stream's
		// last frames reached the shared log: they are made from the
		// session.
		a.over = true
		r.endFromSession(ctx, key, turnID)
		return
	case err != nil:
		r.log.Warn("taking over an interrupted turn", "session", key, "turn", turnID, "err", err)
		a.over, a.end = true, &chat.Error{Code: errAbandoned.Code, Message: errAbandoned.Message +
			"; its partial answer could not be saved yet and will be when the session is next used"}
		return
	}
	taker, ok := r.cfg.Log.(turnlog.Taker)
	if !ok || !h.CanContinue() {
		a.over, a.end = true, r.recoverTaken(ctx, h)
		return
	}
	ref := turnlog.Ref{Session: key, Turn: turnID}
	st, err := taker.TakeOver(ctx, turnlog.Meta{Ref: ref, Owner: h.Owner(), AgentID: h.Agent()})
	switch {
	case errors.Is(err, turnlog.ErrFinished):
		// The stream ended (its replica finished it, late): only the
		// session's last write is missing.
		a.over, a.end = true, r.recoverTaken(ctx, h)
		return
	case err != nil:
		r.log.Warn("taking over an interrupted turn: the shared turn log", "session", key, "turn", turnID, "err", err)
		h.Release(ctx)
		a.over, a.end = true, errSharedLog
		return
	case st.Stop:
		// Someone asked to stop it: its answer so far is kept, and the
		// stream ends.
		a.over = true
		a.end = r.recoverTaken(ctx, h)
		r.endTaken(ctx, taker, ref, st, a.end)
		return
	}
	events, err := r.loadEvents(ctx, ref, st)
	if err != nil {
		r.log.Warn("taking over an interrupted turn: reading its events", "session", key, "turn", turnID, "err", err)
		a.over, a.end = true, r.recoverTaken(ctx, h)
		r.endTaken(ctx, taker, ref, st, a.end)
		return
	}
	r.goOnTaken(h, key, st, events)
}

// recoverTaken saves what a turn that cannot go on streamed, and says so
// to the stream's readers.
func (r *Runtime) recoverTaken(ctx context.Context, h *agent.Takeover) *chat.Error {
	rec, err := h.Recover(ctx)
	if err != nil {
		r.log.Warn("recovering an interrupted turn", "turn", h.Turn(), "err", err)
	}
	return abandoned(rec, err)
}

// endTaken ends the stream of a turn taken over that does not go on: its
// last events say why (after a restart, like every takeover's first
// event), so that every reader gets them from the shared log.
func (r *Runtime) endTaken(ctx context.Context, taker turnlog.Taker, ref turnlog.Ref, st turnlog.Status, e *chat.Error) {
	var events []chat.Event
	if st.Last == 0 {
		events = append(events, chat.Event{Kind: chat.KindStart, Start: &chat.Start{Turn: ref.Turn, Message: ref.Turn}})
	}
	events = append(events,
		chat.Event{Kind: chat.KindRestart, Restart: &chat.Restart{Step: 1, Since: st.Last, Message: e.Message}},
		chat.Event{Kind: chat.KindError, Error: e}, chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishError})
	if err := taker.Finish(ctx, ref, encodeEvents(events)...); err != nil {
		r.log.Warn("ending the stream of an interrupted turn", "session", ref.Session, "turn", ref.Turn, "err", err)
	}
}

// endFromSession ends the shared stream of a turn that finished (its last
// write cleared the session's marker) but whose replica died before its
// last events were copied: after a restart that drops the text the
// stream left open, the rest of the answer the session saved follows,
// then Done with finish stop. When the session's answer does not go on
// from what the stream showed, the stream ends with an error that says the
// answer is in the history.
func (r *Runtime) endFromSession(ctx context.Context, key, turnID string) {
	taker, ok := r.cfg.Log.(turnlog.Taker)
	if !ok {
		return
	}
	ref := turnlog.Ref{Session: key, Turn: turnID}
	st, err := r.cfg.Log.Lookup(ctx, ref)
	if err != nil || st.Done {
		return
	}
	sess, err := r.cfg.Store.Get(ctx, key)
	if err != nil {
		return
	}
	st, err = taker.TakeOver(ctx, turnlog.Meta{Ref: ref, Owner: sess.Owner, AgentID: sess.Agent})
	if err != nil {
		return // finished meanwhile, or the log is unreachable
	}
	events, err := r.loadEvents(ctx, ref, st)
	if err != nil || len(events) == 0 {
		r.endTaken(ctx, taker, ref, st, errAbandoned)
		return
	}
	hist, err := r.cfg.Store.Messages(ctx, key, 0)
	if err != nil {
		r.endTaken(ctx, taker, ref, st, errAbandoned)
		return
	}
	saved := ""
	for i := len(hist) - 1; i >= 0 && hist[i].Role != chat.RoleUser; i-- {
		if hist[i].Role == chat.RoleAssistant {
			saved = hist[i].Content + saved
		}
	}
	// A client may hold events the log never got (the dead replica's
	// last ones): the restart written here drops what came after since,
	// the start of the text the log has open, if any, whose text then
	// follows whole with the rest of the answer.
	since, steps, open := st.Last, 0, false
	for _, ev := range events {
		switch ev.Kind {
		case chat.KindStepStart:
			steps++
		case chat.KindTextDelta:
			if ev.Text != "" && !open {
				open, since = true, ev.Seq-1
			}
		case chat.KindStepFinish, chat.KindToolCall, chat.KindClientCall, chat.KindToolResult, chat.KindApproval,
			chat.KindAbort, chat.KindLimit, chat.KindError, chat.KindDone, chat.KindRestart:
			open = false
		}
	}
	if !open {
		since = st.Last
	}
	var shown chat.AnswerText
	for _, ev := range events {
		if ev.Seq <= since {
			shown.Add(ev)
		}
	}
	rest, ok := strings.CutPrefix(saved, shown.String())
	if !ok || saved == "" {
		// No answer after the last user message: not this turn's.
		r.endTaken(ctx, taker, ref, st, errAbandoned)
		return
	}
	end := []chat.Event{
		{Kind: chat.KindRestart, Restart: &chat.Restart{Step: max(steps, 1), Since: since, Message: "the server running this turn stopped after it ended; its answer follows from the session history"}},
		{Kind: chat.KindTextDelta, Text: rest}, {Kind: chat.KindStepFinish}, {Kind: chat.KindDone, FinishReason: chat.FinishStop},
	}
	if err := taker.Finish(ctx, ref, encodeEvents(end)...); err != nil {
		r.log.Warn("ending the stream of a finished turn from its session", "session", key, "turn", turnID, "err", err)
	}
}

// loadEvents reads the events the shared log keeps of a turn taken over.
func (r *Runtime) loadEvents(ctx context.Context, ref turnlog.Ref, st turnlog.Status) ([]chat.Event, error) {
	var (
		out   []chat.Event
		after = st.First - 1
	)
	for after < st.Last {
		b, err := r.cfg.Log.Read(ctx, ref, after)
		switch {
		case err != nil:
			return nil, err
		case b.Gap:
			// Dropped meanwhile (more than MaxEvents): start after what is
			// kept now.
			ls, err := r.cfg.Log.Lookup(ctx, ref)
			if err != nil {
				return nil, err
			}
			out, after = nil, ls.First-1
			continue
		case len(b.Frames) == 0:
			return out, nil
		}
		events, err := decodeEvents(b.Frames)
		if err != nil {
			return nil, err
		}
		out = append(out, events...)
		after = b.Frames[len(b.Frames)-1].Seq
	}
	return out, nil
}

// resumeAfter is where a client that last saw frame seq of the turn,
// after restart of its takeovers, resumes: after that frame, unless the
// turn was taken over again since, from a seq at or before it. Its frames
// from there on were the dead replica's, which the shared log never got;
// the client resumes at the takeover's first frame, which says what to
// drop.
func resumeAfter(restarts []int64, seq int64, restart int) int64 {
	if restart < len(restarts) && restarts[restart] <= seq {
		return restarts[restart] - 1
	}
	return seq
}

// abandoned handles a turn whose writer stopped showing signs of life, for
// a reader of its stream, which keeps reading when it returns nil: with a
// log whose turns can be taken over, the turn goes on, here (this replica
// takes it over, waiting up to wait for its lease) or on a replica that
// took it over first; otherwise, or when the turn cannot go on, what it
// streamed is saved and the error says so.
func (r *Runtime) abandoned(ctx context.Context, ref turnlog.Ref, wait time.Duration) *chat.Error {
	if _, ok := r.cfg.Log.(turnlog.Taker); !ok {
		return r.recoverAbandoned(ctx, ref.Session)
	}
	a := r.takeOver(ref.Session, ref.Turn, wait)
	select {
	case <-a.done:
	default:
		return nil // under way
	}
	switch {
	case a.end != nil:
		return a.end
	case a.over:
		// It ended without its end reaching the shared log.
		return errAbandoned
	}
	return nil
}

// goesOn reports whether st, a running turn of the shared log, goes on: its
// writer shows signs of life, or it is being taken over (the log's turns
// can be; this starts it).
func (r *Runtime) goesOn(st turnlog.Status) bool {
	if r.alive(st) {
		return true
	}
	if _, ok := r.cfg.Log.(turnlog.Taker); !ok {
		return false
	}
	a := r.takeOver(st.Session, st.Turn, r.cfg.RecoverWait)
	select {
	case <-a.done:
		return !a.over
	default:
		return true
	}
}
