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
	"github.com/agentdock-go/agentdock/template"
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
	if src := s.startChat(c); src != nil {
		s.streamTurn(c, src, 0)
	}
}

// startChat starts the turn a chat request asks for, or answers the
// request (nil). A request whose idempotency key (idempotencyKey) already
// started a turn gets that turn (replay) instead of a second one.
func (s *Server) startChat(c *gin.Context) source {
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
		if t := s.answerApprovals(c, node, &body, answers, messageID, extra...); t != nil {
			return t
		}
		return nil
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
	reqKey, e := idempotencyKey(c.Request, &body)
	if e != nil {
		abortWith(c, e)
		return nil
	}
	if reqKey != "" {
		opts = append(opts, agent.WithRequest(reqKey))
	}
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
	webhook := body.Webhook
	switch {
	case webhook != "" && !body.Background:
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_request", "webhook", "a webhook is called when a background run ends: send background: true with it"))
		return nil
	case webhook != "":
		if err := s.checkWebhook(ownerOf(c), webhook); err != nil {
			abortWith(c, newParamError(http.StatusBadRequest, "invalid_webhook", "webhook", "%s", err.Error()))
			return nil
		}
	case body.Background:
		webhook = s.webhookURL(ownerOf(c))
	}
	policy, e := busyPolicy(c.Request, body.Busy, node, template.BusyEnqueue)
	if e != nil {
		abortWith(c, e)
		return nil
	}
	if policy != template.BusyReject {
		// A queued message may wait longer than the server's WriteTimeout
		// before its stream starts.
		_ = http.NewResponseController(c.Writer).SetWriteDeadline(time.Time{})
	}
	key := session.Key(ownerOf(c), sid)
	t, err := s.startBusy(c.Request.Context(), policy, key, reqKey, func() (*turn, error) {
		// A background run keeps its events, for the webhook's outcome.
		return s.startTurn(c.Request.Context(), node, sid, text, ownerOf(c), body.Background, opts...)
	})
	if err != nil {
		if req, ok := s.duplicateOf(c.Request.Context(), key, reqKey, err); ok {
			if body.Background {
				// The run the request started already.
				c.Header("Idempotent-Replayed", "true")
				c.JSON(http.StatusAccepted, acceptBackground(sid, req.Turn))
				return nil
			}
			return s.replay(c, node.ID(), sid, req)
		}
		s.answerStartError(c, node.ID(), err)
		return nil
	}
	if body.Background {
		// Nobody reads the stream: the turn runs on to its end (the
		// disconnect grace counts clients that came and went), and its
		// webhook is called then.
		s.runInBackground(t, webhook)
		c.Header("X-Session-Id", sid)
		c.Header("X-Turn-Id", t.id)
		c.JSON(http.StatusAccepted, acceptBackground(sid, t.id))
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
