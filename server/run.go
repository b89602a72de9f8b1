package server

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"net/http"
	"strings"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// A turn runs in a goroutine of its own (runTurn), which pulls the agent's
// events and logs each one's frames in the turn's log (frameEncoder); the
// HTTP routes and the edges start it (startTurn, continueTurn, launch, run)
// and read the log.

// startTurn starts one turn of node on the session in its own goroutine.
// The turn's context keeps the request's values (an embedder's middleware
// may put its user there, for tools to read) but not its cancellation:
// the request that started the turn may go away; the server's shutdown
// still ends it.
// keepEvents keeps each frame's event beside its data, for a reader that
// maps events again (the OpenAI endpoints); UI streams need the data only.
// in is the turn's input (its Owner, TurnID and Position are set here).
func (s *Server) startTurn(reqCtx context.Context, node *agent.Agent, sessionID, owner string, keepEvents bool, in agent.Input) (*turn, error) {
	if s.cfg.MaxMessageBytes > 0 && len(in.Text) > s.cfg.MaxMessageBytes {
		return nil, newError(http.StatusBadRequest, "invalid_message", "the message is %d bytes; the limit is %d", len(in.Text), s.cfg.MaxMessageBytes)
	}
	return s.launch(reqCtx, node, sessionID, owner, keepEvents, "", runInput(node, sessionID, owner, in))
}

// runInput is the beginTurn of node's turn on the session with in.
func runInput(node *agent.Agent, sessionID, owner string, in agent.Input) beginTurn {
	return func(ctx context.Context, turnID string, position func() int64) iter.Seq2[chat.Event, error] {
		in.Owner, in.TurnID, in.Position = owner, turnID, position
		return node.Run(ctx, sessionID, in)
	}
}

// continueTurn starts a turn that goes on from the session's conversation
// without a new message: the results of the
// client's tools' calls, or a stateless conversation ending with them.
func (s *Server) continueTurn(reqCtx context.Context, node *agent.Agent, sessionID, owner string, keepEvents bool, messageID string, in agent.Input) (*turn, error) {
	return s.launch(reqCtx, node, sessionID, owner, keepEvents, messageID, runInput(node, sessionID, owner, in))
}

// launch runs the turn that begin returns (agent.Agent.Run or Answer) in a
// goroutine of its own, and returns once the turn started (its session
// claimed, its first event out), or with the error that kept it from
// starting. messageID, when set, is its start chunk's messageId. The
// turn's context keeps the request's values (an embedder's middleware may
// put its user there, for tools to read) but not its cancellation: the
// request that started the turn may go away; the server's shutdown still
// ends it.
func (s *Server) launch(reqCtx context.Context, node *agent.Agent, sessionID, owner string, keepEvents bool, messageID string, begin beginTurn) (*turn, error) {
	return s.run(reqCtx, node, sessionID, owner, turnMode{keepEvents: keepEvents, messageID: messageID}, begin)
}

// turnMode is how a turn logs its frames: see turn's fields of the same
// names.
type turnMode struct {
	keepEvents, raw bool
	messageID       string
}

// beginTurn returns the turn to run (agent.Agent.Run), named turnID, at
// the stream position the server gives (agent.Input.Position).
type beginTurn func(ctx context.Context, turnID string, position func() int64) iter.Seq2[chat.Event, error]

// run is launch for a turn of any mode.
func (s *Server) run(reqCtx context.Context, node *agent.Agent, sessionID, owner string, mode turnMode, begin beginTurn) (*turn, error) {
	if s.turns.isClosing() {
		return nil, errShuttingDown()
	}
	ctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(reqCtx))
	stopWithServer := context.AfterFunc(s.base, func() { cancelCtx(errShutdown) })
	cancel := func(cause error) { stopWithServer(); cancelCtx(cause) }
	turnID := session.NewID()
	t := newTurn(turnID, sessionID, node.ID(), owner, cancel, s.cfg.MaxTurnEvents, s.cfg.DisconnectGrace)
	t.keepEvents, t.raw, t.messageID = mode.keepEvents, mode.raw, mode.messageID
	started := make(chan error, 1)
	// The turn's writes record how far its stream reaches (a frame of
	// this replica's log, numbered as in the shared one).
	position := func() int64 { last, _ := t.state(); return last }
	go s.runTurn(t, begin(ctx, turnID, position), started)
	if err := <-started; err != nil {
		return nil, err
	}
	return t, nil
}

// runTurn runs a turn in its goroutine. The turn starts when its sequence
// is first pulled (the agent claims the session then): started gets the
// outcome, and only a turn that started is registered, copied to the
// shared log and drained into its own log, frame by frame. A panic of the
// agent becomes an error frame, so that clients always get finish and
// [DONE]; a cancellation the server caused (shutdown, disconnect grace, a
// full log) is reported by the turn itself, from its context's cause.
func (s *Server) runTurn(t *turn, events iter.Seq2[chat.Event, error], started chan<- error) {
	var m frameEncoder = &uiMapper{turnID: t.id, messageID: t.messageID, keepEvents: t.keepEvents}
	if t.raw {
		m = &edgeFrames{}
	}
	s.runTurnWith(t, m, events, started)
}

// runTurnWith is runTurn with the encoder of the turn's frames. A turn
// taken over (turn.continued) goes on after the frames it holds: it gets
// no start frame of its own unless it holds none.
func (s *Server) runTurnWith(t *turn, m frameEncoder, events iter.Seq2[chat.Event, error], started chan<- error) {
	defer t.cancel(nil)
	answered := false
	answer := func(err error) {
		if !answered {
			answered = true
			started <- err
		}
	}
	var (
		registered bool
		draining   bool // the server began shutting down as the turn started
		finished   bool
		mirrored   <-chan struct{}
	)
	defer func() {
		v := recover()
		if v != nil {
			s.log.Error("panic in turn", "agent", t.agentID, "session", t.sessionID, "turn", t.id, "panic", fmt.Sprint(v))
		}
		answer(newError(http.StatusInternalServerError, "internal_error", "the turn could not be started"))
		if !registered {
			return
		}
		if !finished {
			e := chat.Event{Kind: chat.KindError, Error: &chat.Error{Code: "internal_error", Message: "the turn failed"}}
			t.add(m.mapEvent(e)...)
			t.addLast(m.mapEvent(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishError})...)
		}
		t.finish()
		if mirrored != nil {
			<-mirrored
		}
		s.turns.ended(t)
	}()
	for ev, err := range events {
		if draining {
			continue // cancelled: the turn ends and frees its session
		}
		if !registered {
			if err != nil {
				answer(err)
				return
			}
			if !s.turns.register(t) {
				t.cancel(errShutdown)
				draining = true
				answer(errShuttingDown())
				continue
			}
			registered = true
			if s.cfg.Turns != nil {
				mirrored = s.mirror(t)
			}
			if last, _ := t.state(); !t.continued || last == 0 {
				t.add(m.start())
			}
			answer(nil)
		}
		if finished = ev.Kind == chat.KindDone; finished {
			t.addLast(m.mapEvent(ev)...)
			return
		}
		t.add(m.mapEvent(ev)...)
	}
}

// goOnTaken runs a turn taken over on this replica: a turn of its own,
// holding the frames the shared log had, whose new frames follow them and
// are copied there by this replica's mirror.
func (s *Server) goOnTaken(h *agent.Takeover, key string, st turnlog.Status, frames []frame) {
	sessionID := key
	if _, id, scoped := strings.Cut(key, "."); scoped {
		sessionID = id // as the client knows it (session.Key)
	}
	ctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(s.base))
	stopWithServer := context.AfterFunc(s.base, func() { cancelCtx(errShutdown) })
	cancel := func(cause error) { stopWithServer(); cancelCtx(cause) }
	t := newTurn(h.Turn(), sessionID, h.Agent(), h.Owner(), cancel, s.cfg.MaxTurnEvents, s.cfg.DisconnectGrace)
	t.continued, t.restarts = true, st.Restarts
	t.frames, t.nextSeq = frames, st.Last+1
	var m frameEncoder
	if len(frames) > 0 && frames[0].seq == 1 && bytes.Equal(frames[0].data, edgeStart) {
		m, t.raw = &edgeFrames{}, true
	} else {
		ui := &uiMapper{turnID: t.id}
		ui.continueAfter(frames, h.Frame())
		m = ui
	}
	events := h.Run(ctx, func() int64 { last, _ := t.state(); return last })
	started := make(chan error, 1)
	s.runTurnWith(t, m, func(yield func(chat.Event, error) bool) {
		for ev := range events {
			if !yield(ev, nil) {
				return
			}
		}
	}, started)
	if err := <-started; err != nil {
		s.log.Warn("taking over an interrupted turn", "session", key, "turn", t.id, "err", err)
	}
}
