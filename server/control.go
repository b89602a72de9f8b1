package server

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/gin-gonic/gin"
)

// A person's control of a turn: stopping it from any replica, and
// answering the tool calls that wait for approval (docs/api.md, "Stopping
// a turn" and "Tool approvals").

// stopTurn serves POST /api/sessions/:id/stop: 202 when a turn of the
// session was running and is being stopped, 204 when none was. The turn
// runs here or on another replica: there the request goes through the
// shared turn log (turnlog.Log.Stop), whose writer cancels the turn.
func (s *Server) stopTurn(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	turnID, err := s.stopSession(c.Request.Context(), sess)
	switch {
	case err != nil:
		s.log.Error("stopping a turn", "session", c.Param("id"), "err", err)
		abortWith(c, storeError(err))
	case turnID != "":
		c.JSON(http.StatusAccepted, gin.H{"turnId": turnID, "status": "stopping"})
	default:
		c.Header("X-Session-Id", c.Param("id"))
		c.Status(http.StatusNoContent)
	}
}

// stopSession stops the running turn of sess, here or on another replica:
// the ID of the turn being stopped, "" when none was running.
func (s *Server) stopSession(ctx context.Context, sess session.Session) (string, error) {
	key := sess.ID // the store key
	if t := s.turns.latest(key); t != nil {
		if _, done := t.state(); !done {
			t.cancel(chat.StoppedByUser)
			return t.id, nil
		}
	}
	if s.cfg.Turns == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, found, err := s.sharedLookup(ctx, key, "", sess.Owner)
	if err != nil {
		return "", err
	}
	u, unlisted := s.unlistedHeld(ctx, sess, st, found, false)
	if unlisted {
		st, found = u, true
	}
	if !found || !s.runsElsewhere(sess, st) {
		return "", nil
	}
	err = s.cfg.Turns.Stop(ctx, st.Ref)
	// A turn not listed yet will be with its first batch (within
	// mirrorBatch): wait for that rather than find nothing to stop.
	for wait := time.Now().Add(time.Second); unlisted && errors.Is(err, turnlog.ErrNotFound) && time.Now().Before(wait); {
		time.Sleep(mirrorGrid / 5)
		err = s.cfg.Turns.Stop(ctx, st.Ref)
	}
	switch {
	case err == nil:
		return st.Turn, nil
	case errors.Is(err, turnlog.ErrFinished), errors.Is(err, turnlog.ErrNotFound):
		return "", nil // it ended meanwhile
	}
	return "", fmt.Errorf("stopping the turn on another replica: %w", err)
}

// watchStops cancels the turns this replica runs when a stop request for
// one arrives through the shared turn log.
func (s *Server) watchStops() (cancel func()) {
	if s.cfg.Turns == nil {
		return func() {}
	}
	return s.cfg.Turns.WatchStops(func(ref turnlog.Ref) {
		if t := s.turns.get(ref.Turn); t != nil && t.key == ref.Session {
			t.cancel(chat.StoppedByUser)
		}
	})
}

// answerApprovals starts the turn that carries out a request's answers to
// the calls that wait for approval, to be streamed like a chat turn, or
// answers the request (nil).
// The client's results of its tools' calls (extra: agent.WithResults)
// go with them, or alone.
func (s *Server) answerApprovals(c *gin.Context, node *agent.Agent, body *wire.ChatRequest, answers []wire.Answer, messageID string, extra ...agent.Option) *turn {
	if c.GetHeader("X-Session-Id") == "" && body.SessionID == "" && !session.ValidID(body.ID) {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_request", "sessionId", "answers to approvals and tool results need their session: sessionId, the x-session-id header or the AI SDK chat id"))
		return nil
	}
	sid, e := chatSession(c.Request, body)
	if e != nil {
		abortWith(c, e)
		return nil
	}
	list := make([]agent.ApprovalAnswer, len(answers))
	for i, a := range answers {
		list[i] = agent.ApprovalAnswer{ID: a.ID, Approved: a.Approved, Reason: a.Reason}
	}
	if len(messageID) > 256 {
		messageID = ""
	}
	owner := ownerOf(c)
	if messageID == "" {
		// The plain shape names no message: the turn goes on under the
		// answer that asked for the calls, as a client that shows that
		// answer expects (the AI SDK's readUIMessageStream, for one).
		messageID = s.approvalMessage(c.Request.Context(), session.Key(owner, sid), owner, answers[0].ID)
	}
	t, err := s.launch(c.Request.Context(), node, sid, owner, false, messageID, func(ctx context.Context, turnID string, opts ...agent.Option) iter.Seq2[chat.Event, error] {
		return node.Answer(ctx, sid, list, append(append([]agent.Option{agent.WithOwner(owner), agent.WithTurnID(turnID)}, extra...), opts...)...)
	})
	if err != nil {
		s.answerStartError(c, node.ID(), err)
		return nil
	}
	return t
}

// approvalMessage is the answer that asked for the approval with this ID,
// "" when the session does not say (the agent then refuses the answers with
// the reason, or the turn streams under its own ID).
func (s *Server) approvalMessage(ctx context.Context, key, owner, approvalID string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := s.cfg.Store.Get(ctx, key)
	if err != nil || sess.Owner != owner {
		return ""
	}
	for _, a := range sess.Approvals {
		if a.ID == approvalID {
			return a.MessageID
		}
	}
	return ""
}

// approvalError maps an answer that does not fit the session's waiting
// calls.
func approvalError(e *agent.ApprovalError) *apiError {
	param := "approvals"
	if e.Index >= 0 {
		param = "approvals[" + strconv.Itoa(e.Index) + "].id"
	}
	switch {
	case errors.Is(e, agent.ErrUnknownApproval):
		return newParamError(http.StatusBadRequest, "unknown_approval", param, "%s", e.Msg)
	case errors.Is(e, agent.ErrApprovalAnswered):
		return newParamError(http.StatusConflict, "approval_answered", param, "%s", e.Msg)
	case errors.Is(e, agent.ErrApprovalsIncomplete):
		return newParamError(http.StatusBadRequest, "approvals_incomplete", param, "%s", e.Msg)
	}
	return newParamError(http.StatusBadRequest, "invalid_approval", param, "%s", e.Msg)
}
