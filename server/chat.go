package server

import (
	"context"
	"iter"
	"net/http"
	"slices"
	"time"

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

// answerApprovals starts the turn that carries out a request's answers to
// the calls that wait for approval (docs/api.md, "Tool approvals"), to be
// streamed like a chat turn, or
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
