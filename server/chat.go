package server

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/turns"
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
		s.streamTurn(c, t, seen{})
	}
}

// startChat starts the turn a chat request asks for, or answers the
// request (nil). A request whose idempotency key (idempotencyKey) already
// started a turn gets that turn (replay) instead of a second one.
func (s *Server) startChat(c *gin.Context) *turns.Turn {
	node, ok := s.rt.Agents().Get(c.Param("agentId"))
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
	answers, _, aerr := approvals.Answers()
	if aerr != nil {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_approval", aerr.(*wire.AnswerError).Param, "%s", aerr.Error()))
		return nil
	}
	in := turns.Input{Agent: node.ID(), DefaultBusy: template.BusyEnqueue}
	in.Owner = ownerOf(c)
	// The client's own tools (the AI SDK's client-side tools), and the
	// results its Chat sends of their calls (addToolOutput).
	tools, pe := approvals.Tools()
	if pe != nil {
		abortWith(c, bodyError(pe))
		return nil
	}
	in.ClientTools = tools
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	in.Results, _ = approvals.Results(names)
	if answers != nil || in.Results != nil {
		return s.answerApprovals(c, &body, answers, in)
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
	in.Session, in.Text = sid, text
	if in.Key, e = idempotencyKey(c.Request, &body); e != nil {
		abortWith(c, e)
		return nil
	}
	if in.Attachments, pe = body.Attachments(); pe != nil {
		abortWith(c, bodyError(pe))
		return nil
	}
	if slices.ContainsFunc(in.Attachments, func(a chat.Attachment) bool { return !node.ModelInfo().Takes(a.Kind) }) {
		info := node.ModelInfo()
		abortWith(c, newParamError(http.StatusBadRequest, "unsupported_attachment", "messages", "agent %q runs on a model that does not take these attachments (%s %s); send text, or use an agent whose model takes them", node.ID(), info.Provider, info.Model))
		return nil
	}
	switch {
	case body.Trigger == "regenerate-message":
		// The AI SDK's regenerate() resends the conversation up to the
		// user message whose answer it replaces.
		in.Regenerate = true
	case body.Edits():
		in.Edit = true
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
	in.Busy = cmp.Or(body.Busy, c.GetHeader("X-Busy"))
	if in.Policy(node) != template.BusyReject {
		// A queued message may wait longer than the server's WriteTimeout
		// before its stream starts.
		_ = http.NewResponseController(c.Writer).SetWriteDeadline(time.Time{})
	}
	t, err := s.rt.Start(c.Request.Context(), in)
	if err != nil {
		s.answerStartError(c, node.ID(), err)
		return nil
	}
	if t.Replayed() {
		c.Header("Idempotent-Replayed", "true")
	}
	if body.Background {
		// Nobody reads the stream: the turn runs on to its end (the
		// disconnect grace counts clients that came and went), and its
		// webhook is called then (a replayed run's was, by the request
		// that started it).
		if !t.Replayed() {
			s.runInBackground(t, webhook)
		}
		c.Header("X-Session-Id", sid)
		c.Header("X-Turn-Id", t.ID())
		c.JSON(http.StatusAccepted, acceptBackground(sid, t.ID()))
		return nil
	}
	return t
}

// answerApprovals starts the turn that carries out a request's answers to
// the calls that wait for approval (docs/api.md, "Tool approvals"), to be
// streamed like a chat turn, or answers the request (nil). The client's
// results of its tools' calls (in.Results) go with them, or alone.
func (s *Server) answerApprovals(c *gin.Context, body *wire.ChatRequest, answers []wire.Answer, in turns.Input) *turns.Turn {
	if c.GetHeader("X-Session-Id") == "" && body.SessionID == "" && !session.ValidID(body.ID) {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_request", "sessionId", "answers to approvals and tool results need their session: sessionId, the x-session-id header or the AI SDK chat id"))
		return nil
	}
	sid, e := chatSession(c.Request, body)
	if e != nil {
		abortWith(c, e)
		return nil
	}
	in.Session = sid
	for _, a := range answers {
		in.Answers = append(in.Answers, agent.ApprovalAnswer{ID: a.ID, Approved: a.Approved, Reason: a.Reason})
	}
	t, err := s.rt.Start(c.Request.Context(), in)
	if err != nil {
		s.answerStartError(c, in.Agent, err)
		return nil
	}
	return t
}
