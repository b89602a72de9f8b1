package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
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
// stream in the shared log (turnlog.Taker), whose frames it loads, and
// goes on with the turn from its last completed step, appending to the
// same stream. The continuation's first event is chat.KindRestart; its
// frames take up the numbering after the last frame the shared log had,
// and their IDs count the takeovers before them ("<turn>:<seq>.<n>",
// wire.RestartedEventID), because the dead replica may have sent its
// clients frames the log never got: a client holding one of those resumes
// from the restart, not from the new frame of the same seq.

// takeovers tracks the takeovers this replica attempts, one per turn at a
// time.
type takeovers struct {
	mu sync.Mutex
	m  map[string]*takeover
	// goOn runs a turn taken over here (Server.goOnTaken; New sets it).
	goOn func(h *agent.Takeover, key string, st turnlog.Status, frames []frame)
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
func (s *Server) takenEnd(turnID string) *chat.Error {
	s.takeovers.mu.Lock()
	a := s.takeovers.m[turnID]
	s.takeovers.mu.Unlock()
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
func (s *Server) takeOver(key, turnID string, wait time.Duration) *takeover {
	s.takeovers.mu.Lock()
	defer s.takeovers.mu.Unlock()
	if s.takeovers.m == nil {
		s.takeovers.m = map[string]*takeover{}
	}
	if a := s.takeovers.m[turnID]; a != nil && !a.refused() {
		return a
	}
	a := &takeover{done: make(chan struct{})}
	s.takeovers.m[turnID] = a
	go func() {
		s.runTakeover(a, key, turnID, wait)
		close(a.done)
		// A concluded attempt is kept for a while, so that the readers
		// that wait on it learn how it ended, then forgotten: the turn
		// may die again on this replica or another.
		time.AfterFunc(s.writerTimeout(), func() {
			s.takeovers.mu.Lock()
			defer s.takeovers.mu.Unlock()
			if s.takeovers.m[turnID] == a {
				delete(s.takeovers.m, turnID)
			}
		})
	}()
	return a
}

// runTakeover is one attempt of takeOver.
func (s *Server) runTakeover(a *takeover, key, turnID string, wait time.Duration) {
	ctx := context.WithoutCancel(s.base)
	h, err := s.cfg.Agents.TakeOver(ctx, key, turnID, wait)
	switch {
	case errors.Is(err, session.ErrBusy):
		a.busy = true
		return
	case errors.Is(err, agent.ErrTurnOver):
		// The turn ended; its replica may have died before the stream's
		// last frames reached the shared log: they are made from the
		// session.
		a.over = true
		s.endFromSession(ctx, key, turnID)
		return
	case err != nil:
		s.log.Warn("taking over an interrupted turn", "session", key, "turn", turnID, "err", err)
		a.over, a.end = true, &chat.Error{Code: errAbandoned.Code, Message: errAbandoned.Message +
			"; its partial answer could not be saved yet and will be when the session is next used"}
		return
	}
	taker, ok := s.cfg.Turns.(turnlog.Taker)
	if !ok || !h.CanContinue() {
		a.over, a.end = true, s.recoverTaken(ctx, h)
		return
	}
	ref := turnlog.Ref{Session: key, Turn: turnID}
	st, err := taker.TakeOver(ctx, turnlog.Meta{Ref: ref, Owner: h.Owner(), AgentID: h.Agent()})
	switch {
	case errors.Is(err, turnlog.ErrFinished):
		// The stream ended (its replica finished it, late): only the
		// session's last write is missing.
		a.over, a.end = true, s.recoverTaken(ctx, h)
		return
	case err != nil:
		s.log.Warn("taking over an interrupted turn: the shared turn log", "session", key, "turn", turnID, "err", err)
		h.Release(ctx)
		a.over, a.end = true, errSharedLog
		return
	case st.Stop:
		// Someone asked to stop it: its answer so far is kept, and the
		// stream ends.
		a.over = true
		a.end = s.recoverTaken(ctx, h)
		s.endTaken(ctx, taker, ref, st, a.end)
		return
	}
	frames, err := s.loadFrames(ctx, ref, st)
	if err != nil {
		s.log.Warn("taking over an interrupted turn: reading its frames", "session", key, "turn", turnID, "err", err)
		a.over, a.end = true, s.recoverTaken(ctx, h)
		s.endTaken(ctx, taker, ref, st, a.end)
		return
	}
	s.takeovers.goOn(h, key, st, frames)
}

// recoverTaken saves what a turn that cannot go on streamed, and says so
// to the stream's readers.
func (s *Server) recoverTaken(ctx context.Context, h *agent.Takeover) *chat.Error {
	rec, err := h.Recover(ctx)
	if err != nil {
		s.log.Warn("recovering an interrupted turn", "turn", h.Turn(), "err", err)
	}
	return abandoned(rec, err)
}

// endTaken ends the stream of a turn taken over that does not go on: its
// last frames say why, so that every reader gets them from the shared log.
func (s *Server) endTaken(ctx context.Context, taker turnlog.Taker, ref turnlog.Ref, st turnlog.Status, e *chat.Error) {
	raw := false
	if st.Last > 0 {
		if b, err := taker.Read(ctx, ref, 0); err == nil && len(b.Frames) > 0 {
			raw = bytes.Equal(b.Frames[0].Data, edgeStart)
		}
	}
	var m frameEncoder = &uiMapper{turnID: ref.Turn}
	if raw {
		m = &edgeFrames{}
	}
	var data [][]byte
	if st.Last == 0 {
		data = append(data, m.start().data)
	}
	for _, ev := range []chat.Event{{Kind: chat.KindError, Error: e}, {Kind: chat.KindDone, FinishReason: chat.FinishError}} {
		for _, it := range m.mapEvent(ev) {
			data = append(data, it.data)
		}
	}
	if err := taker.Finish(ctx, ref, data...); err != nil {
		s.log.Warn("ending the stream of an interrupted turn", "session", ref.Session, "turn", ref.Turn, "err", err)
	}
}

// endFromSession ends the shared stream of a turn that finished (its last
// write cleared the session's marker) but whose replica died before its
// last frames were copied: after a restart that drops the text part the
// stream left open, the rest of the answer the session saved follows,
// then finish stop. When the session's answer does not go on from what
// the stream showed, the stream ends with an error that says the answer
// is in the history.
func (s *Server) endFromSession(ctx context.Context, key, turnID string) {
	taker, ok := s.cfg.Turns.(turnlog.Taker)
	if !ok {
		return
	}
	ref := turnlog.Ref{Session: key, Turn: turnID}
	st, err := s.cfg.Turns.Lookup(ctx, ref)
	if err != nil || st.Done {
		return
	}
	sess, err := s.cfg.Store.Get(ctx, key)
	if err != nil {
		return
	}
	st, err = taker.TakeOver(ctx, turnlog.Meta{Ref: ref, Owner: sess.Owner, AgentID: sess.Agent})
	if err != nil {
		return // finished meanwhile, or the log is unreachable
	}
	frames, err := s.loadFrames(ctx, ref, st)
	if err != nil || len(frames) == 0 || bytes.Equal(frames[0].data, edgeStart) {
		s.endTaken(ctx, taker, ref, st, errAbandoned)
		return
	}
	hist, err := s.cfg.Store.Messages(ctx, key, 0)
	if err != nil {
		s.endTaken(ctx, taker, ref, st, errAbandoned)
		return
	}
	saved := ""
	for i := len(hist) - 1; i >= 0 && hist[i].Role != chat.RoleUser; i-- {
		if hist[i].Role == chat.RoleAssistant {
			saved = hist[i].Content + saved
		}
	}
	// A client may hold frames the log never got (the dead replica's
	// last ones), and resumes from the first frame written here (the
	// takeover lists it as a restart): that frame is a restart, which
	// drops the text part the log has open, if any, whose text then
	// follows whole with the rest of the answer.
	since, steps := st.Last, 0
	for _, f := range frames {
		var c uiChunk
		if json.Unmarshal(f.data, &c) != nil {
			continue
		}
		switch c.Type {
		case "start-step":
			steps++
		case "text-start":
			since = f.seq - 1
		case "text-end":
			since = st.Last
		}
	}
	kept := slices.DeleteFunc(slices.Clone(frames), func(f frame) bool { return f.seq > since })
	rest, ok := strings.CutPrefix(saved, shownText(kept))
	if !ok || saved == "" {
		// No answer after the last user message: not this turn's.
		s.endTaken(ctx, taker, ref, st, errAbandoned)
		return
	}
	m := &uiMapper{turnID: turnID}
	m.continueAfter(frames, since)
	var data [][]byte
	for _, ev := range []chat.Event{
		{Kind: chat.KindRestart, Restart: &chat.Restart{Step: max(steps, 1), Since: since, Message: "the server running this turn stopped after it ended; its answer follows from the session history"}},
		{Kind: chat.KindTextDelta, Text: rest}, {Kind: chat.KindStepFinish}, {Kind: chat.KindDone, FinishReason: chat.FinishStop},
	} {
		for _, f := range m.mapEvent(ev) {
			data = append(data, f.data)
		}
	}
	if err := taker.Finish(ctx, ref, data...); err != nil {
		s.log.Warn("ending the stream of a finished turn from its session", "session", key, "turn", turnID, "err", err)
	}
}

// shownText is the answer text of a UI stream's frames, as a client that
// honours data-restart shows it (uiRestart): a restart drops the text
// parts that began after its since.
func shownText(frames []frame) string {
	type part struct {
		start int64
		text  strings.Builder
	}
	var (
		order []string
		parts = map[string]*part{}
	)
	for _, f := range frames {
		var c struct {
			uiChunk
			Data struct {
				Since int64 `json:"since"`
			} `json:"data"`
		}
		if json.Unmarshal(f.data, &c) != nil {
			continue
		}
		switch c.Type {
		case "text-delta":
			p := parts[c.ID]
			if p == nil {
				p = &part{start: f.seq}
				parts[c.ID] = p
				order = append(order, c.ID)
			}
			p.text.WriteString(c.Delta)
		case "data-restart":
			for id, p := range parts {
				if p.start > c.Data.Since {
					delete(parts, id)
				}
			}
			order = slices.DeleteFunc(order, func(id string) bool { return parts[id] == nil })
		}
	}
	var out strings.Builder
	for _, id := range order {
		out.WriteString(parts[id].text.String())
	}
	return out.String()
}

// loadFrames reads the frames the shared log keeps of a turn taken over.
func (s *Server) loadFrames(ctx context.Context, ref turnlog.Ref, st turnlog.Status) ([]frame, error) {
	var (
		out   []frame
		after = st.First - 1
	)
	for after < st.Last {
		b, err := s.cfg.Turns.Read(ctx, ref, after)
		switch {
		case err != nil:
			return nil, err
		case b.Gap:
			// Dropped meanwhile (more than MaxTurnEvents): start after
			// what is kept now.
			ls, err := s.cfg.Turns.Lookup(ctx, ref)
			if err != nil {
				return nil, err
			}
			out, after = nil, ls.First-1
			continue
		case len(b.Frames) == 0:
			return out, nil
		}
		for _, f := range b.Frames {
			out = append(out, frame{seq: f.Seq, data: f.Data})
		}
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
func (s *Server) abandoned(ctx context.Context, ref turnlog.Ref, wait time.Duration) *chat.Error {
	if _, ok := s.cfg.Turns.(turnlog.Taker); !ok {
		return s.recoverAbandoned(ctx, ref.Session)
	}
	a := s.takeOver(ref.Session, ref.Turn, wait)
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
func (s *Server) goesOn(st turnlog.Status) bool {
	if s.alive(st) {
		return true
	}
	if _, ok := s.cfg.Turns.(turnlog.Taker); !ok {
		return false
	}
	a := s.takeOver(st.Session, st.Turn, s.cfg.RecoverWait)
	select {
	case <-a.done:
		return !a.over
	default:
		return true
	}
}
