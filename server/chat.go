package server

import (
	"context"
	"fmt"
	"iter"
	"net/http"

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
	node, ok := s.cfg.Agents.Get(c.Param("agentId"))
	if !ok {
		abortWith(c, newError(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", c.Param("agentId")))
		return
	}
	var (
		body      wire.ChatRequest
		approvals wire.ApprovalRequest
	)
	if e := decodeJSON(c.Request, &body, &approvals); e != nil {
		abortWith(c, e)
		return
	}
	answers, messageID, aerr := approvals.Answers()
	if aerr != nil {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_approval", aerr.(*wire.AnswerError).Param, "%s", aerr.Error()))
		return
	}
	if answers != nil {
		s.answerApprovals(c, node, &body, answers, messageID)
		return
	}
	text, err := body.Text()
	if err != nil {
		abortWith(c, newError(http.StatusBadRequest, "invalid_message", "%s", err.Error()))
		return
	}
	sid, e := chatSession(c.Request, &body)
	if e != nil {
		abortWith(c, e)
		return
	}
	var opts []agent.Option
	if body.Trigger == "regenerate-message" {
		// The AI SDK's regenerate() resends the conversation up to the
		// user message whose answer it replaces.
		opts = append(opts, agent.Regenerate())
	}
	t, err := s.startTurn(c.Request.Context(), node, sid, text, ownerOf(c), false, opts...)
	if err != nil {
		s.answerStartError(c, node.ID(), err)
		return
	}
	s.streamTurn(c, t, 0)
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
func (s *Server) startTurn(reqCtx context.Context, node *agent.Node, sessionID, message, owner string, keepEvents bool, opts ...agent.Option) (*turn, error) {
	if s.cfg.MaxMessageBytes > 0 && len(message) > s.cfg.MaxMessageBytes {
		return nil, newError(http.StatusBadRequest, "invalid_message", "the message is %d bytes; the limit is %d", len(message), s.cfg.MaxMessageBytes)
	}
	return s.launch(reqCtx, node, sessionID, owner, keepEvents, "", func(ctx context.Context, turnID string) (iter.Seq[chat.Event], error) {
		return node.HandleMessage(ctx, sessionID, message, append([]agent.Option{agent.WithOwner(owner), agent.WithTurnID(turnID)}, opts...)...)
	})
}

// launch starts the turn that begin starts (HandleMessage, HandleApprovals)
// in its own goroutine; messageID, when set, is its start chunk's
// messageId. The turn's context keeps the request's values (an embedder's
// middleware may put its user there, for tools to read) but not its
// cancellation: the request that started the turn may go away; the
// server's shutdown still ends it.
func (s *Server) launch(reqCtx context.Context, node *agent.Node, sessionID, owner string, keepEvents bool, messageID string, begin func(ctx context.Context, turnID string) (iter.Seq[chat.Event], error)) (*turn, error) {
	if s.turns.isClosing() {
		return nil, newError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry on another instance")
	}
	ctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(reqCtx))
	stopWithServer := context.AfterFunc(s.base, func() { cancelCtx(errShutdown) })
	cancel := func(cause error) { stopWithServer(); cancelCtx(cause) }
	turnID := session.NewID()
	events, err := begin(ctx, turnID)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	t := newTurn(turnID, sessionID, node.ID(), owner, cancel, s.cfg.MaxTurnEvents, s.cfg.DisconnectGrace)
	t.keepEvents = keepEvents
	t.messageID = messageID
	if !s.turns.register(t) {
		// Shutdown began in between: run the turn's sequence cancelled, so
		// that it releases the session.
		cancel(errShutdown)
		for range events {
		}
		return nil, newError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry on another instance")
	}
	var started chan struct{}
	if s.cfg.Turns != nil {
		started = make(chan struct{})
	}
	go func() {
		defer cancel(nil)
		defer s.turns.ended(t)
		if started != nil {
			mirrored := make(chan struct{})
			go func() {
				defer close(mirrored)
				s.mirror(t, started)
			}()
			defer func() { <-mirrored }()
		}
		s.runTurn(t, events)
	}()
	if started != nil {
		// The model call is under way meanwhile; only the client's first
		// frame waits for the shared log to know the turn.
		<-started
	}
	return t, nil
}

// runTurn drains the turn's events into its log. It recovers a panic of the
// agent into an error frame, so that clients always get finish and [DONE].
// A cancellation the server caused (shutdown, disconnect grace, a full
// log) is reported by the turn itself, from its context's cause.
func (s *Server) runTurn(t *turn, events iter.Seq[chat.Event]) {
	m := &uiMapper{turnID: t.id, messageID: t.messageID}
	finished := false
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic in turn", "agent", t.agentID, "session", t.sessionID, "turn", t.id, "panic", fmt.Sprint(v))
		}
		if !finished {
			e := chat.Event{Kind: chat.KindError, Error: &chat.Error{Code: "internal_error", Message: "the turn failed"}}
			t.add(m.mapEvent(e, nil)...)
			t.add(m.mapEvent(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishError}, nil)...)
		}
		t.finish()
	}()
	t.add(m.start())
	usage := func() *chat.Usage { return s.sessionUsage(t.key) }
	for ev := range events {
		finished = ev.Kind == chat.KindDone
		t.add(m.mapEvent(ev, usage)...)
		if finished {
			return
		}
	}
}
