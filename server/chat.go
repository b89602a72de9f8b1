package server

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"slices"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/gin-gonic/gin"
)

// chatSession picks the session of a chat request: the x-session-id header,
// else body.sessionId, else body.id (the AI SDK's chat ID) when it is a valid
// session ID, else a new one.
func chatSession(r *http.Request, body *wire.ChatRequest) (string, *apiError) {
	if h := r.Header.Get("X-Session-Id"); h != "" {
		if !session.ValidID(h) {
			return "", errBadSessionID("the x-session-id header")
		}
		return h, nil
	}
	if body.SessionID != "" {
		if !session.ValidID(body.SessionID) {
			return "", errBadSessionID("sessionId")
		}
		return body.SessionID, nil
	}
	if body.ID != "" && session.ValidID(body.ID) {
		return body.ID, nil
	}
	return session.NewID(), nil
}

func errBadSessionID(where string) *apiError {
	return newError(http.StatusBadRequest, "invalid_session_id", "%s is not a valid session ID: want 8 to 128 letters, digits, '-' or '_'", where)
}

func (s *Server) postChat(c *gin.Context) {
	// The stream is served from a frame of its own: startChat's request
	// body and options are gone from the stack the handler waits on.
	if t := s.startChat(c); t != nil {
		s.streamTurn(c, t, 0)
	}
}

// startChat starts the turn a chat request asks for, or answers the
// request (nil).
func (s *Server) startChat(c *gin.Context) *turn {
	node, ok := s.cfg.Agents.Get(c.Param("agentId"))
	if !ok {
		abortWith(c, newError(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", c.Param("agentId")))
		return nil
	}
	var (
		body      wire.ChatRequest
		approvals wire.ApprovalRequest
	)
	if e := decodeJSON(c.Request, &body, &approvals); e != nil {
		abortWith(c, e)
		return nil
	}
	answers, messageID, aerr := approvals.Answers()
	if aerr != nil {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_approval", aerr.(*wire.AnswerError).Param, "%s", aerr.Error()))
		return nil
	}
	// The client's own tools (the AI SDK's client-side tools), and the
	// results its Chat sends of their calls (addToolOutput).
	tools, pe := approvals.Tools()
	if pe != nil {
		abortWith(c, bodyError(pe))
		return nil
	}
	var extra []agent.Option
	if len(tools) > 0 {
		extra = append(extra, agent.WithClientTools(tools))
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	results, resultsMessage := approvals.Results(names)
	if results != nil {
		extra = append(extra, agent.WithResults(results))
		if messageID == "" {
			messageID = resultsMessage
		}
	}
	if answers != nil || results != nil {
		return s.answerApprovals(c, node, &body, answers, messageID, extra...)
	}
	text, err := body.Text()
	if err != nil {
		abortWith(c, newError(http.StatusBadRequest, "invalid_message", "%s", err.Error()))
		return nil
	}
	sid, e := chatSession(c.Request, &body)
	if e != nil {
		abortWith(c, e)
		return nil
	}
	opts := extra
	atts, pe := body.Attachments()
	if pe != nil {
		abortWith(c, bodyError(pe))
		return nil
	}
	if len(atts) > 0 {
		if slices.ContainsFunc(atts, func(a chat.Attachment) bool { return !node.ModelInfo().Takes(a.Kind) }) {
			info := node.ModelInfo()
			abortWith(c, newParamError(http.StatusBadRequest, "unsupported_attachment", "messages", "agent %q runs on a model that does not take these attachments (%s %s); send text, or use an agent whose model takes them", node.ID(), info.Provider, info.Model))
			return nil
		}
		opts = append(opts, agent.WithAttachments(atts))
	}
	switch {
	case body.Trigger == "regenerate-message":
		// The AI SDK's regenerate() resends the conversation up to the
		// user message whose answer it replaces.
		opts = append(opts, agent.Regenerate())
	case body.Edits():
		opts = append(opts, agent.Edit())
	}
	t, err := s.startTurn(c.Request.Context(), node, sid, text, ownerOf(c), false, opts...)
	if err != nil {
		s.answerStartError(c, node.ID(), err)
		return nil
	}
	return t
}

// answerStartError answers an error that kept a turn from starting.
func (s *Server) answerStartError(c *gin.Context, agentID string, err error) {
	e := turnStartError(err)
	if e.Status >= 500 {
		s.log.Error("starting a turn", "agent", agentID, "err", err)
	}
	abortWith(c, e)
}

// startTurn starts one turn of node on the session in its own goroutine.
// The turn's context keeps the request's values (an embedder's middleware
// may put its user there, for tools to read) but not its cancellation:
// the request that started the turn may go away; the server's shutdown
// still ends it.
// keepEvents keeps each frame's event beside its data, for a reader that
// maps events again (the OpenAI endpoints); UI streams need the data only.
// opts are the agent's (agent.WithOwner(owner) comes first).
func (s *Server) startTurn(reqCtx context.Context, node *agent.Agent, sessionID, message, owner string, keepEvents bool, opts ...agent.Option) (*turn, error) {
	if s.cfg.MaxMessageBytes > 0 && len(message) > s.cfg.MaxMessageBytes {
		return nil, newError(http.StatusBadRequest, "invalid_message", "the message is %d bytes; the limit is %d", len(message), s.cfg.MaxMessageBytes)
	}
	return s.launch(reqCtx, node, sessionID, owner, keepEvents, "", func(ctx context.Context, turnID string, more ...agent.Option) iter.Seq2[chat.Event, error] {
		return node.Run(ctx, sessionID, message, append(append([]agent.Option{agent.WithOwner(owner), agent.WithTurnID(turnID)}, opts...), more...)...)
	})
}

// errShuttingDown answers a turn that arrives as the server shuts down.
func errShuttingDown() *apiError {
	return newError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry on another instance")
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

// beginTurn returns the turn to run (agent.Agent.Run or Answer), named
// turnID, with the options the server adds (agent.WithStreamPosition).
type beginTurn func(ctx context.Context, turnID string, opts ...agent.Option) iter.Seq2[chat.Event, error]

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
	go s.runTurn(t, begin(ctx, turnID, agent.WithStreamPosition(position)), started)
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
	s.runTurnWith(t, &uiMapper{turnID: t.id, messageID: t.messageID, keepEvents: t.keepEvents, raw: t.raw}, events, started)
}

// runTurnWith is runTurn with the mapper of the turn's frames. A turn
// taken over (turn.continued) goes on after the frames it holds: it gets
// no start frame of its own unless it holds none.
func (s *Server) runTurnWith(t *turn, m *uiMapper, events iter.Seq2[chat.Event, error], started chan<- error) {
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
