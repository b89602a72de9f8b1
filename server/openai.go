package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/gin-gonic/gin"
)

// The OpenAI-compatible endpoint. Only standard chat.completion and
// chat.completion.chunk objects go out; the agent's tool activity,
// orchestration and usage ride in an extension field "agentdock" inside the
// objects, which OpenAI clients ignore.

// oaUsage is OpenAI's usage: prompt_tokens counts the cached input too,
// and prompt_tokens_details.cached_tokens says how much of it was cached.
type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func oaUsageOf(u chat.Usage) oaUsage {
	ou := oaUsage{PromptTokens: u.Prompt, CompletionTokens: u.Completion, TotalTokens: totalOf(u)}
	ou.PromptTokensDetails.CachedTokens = u.CacheRead
	return ou
}

type oaCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	SystemFingerprint string      `json:"system_fingerprint"`
	Choices           []oaChoice  `json:"choices"`
	Usage             oaUsage     `json:"usage"`
	AgentDock         *oaExtended `json:"agentdock,omitempty"`
}

type oaChoice struct {
	Index        int             `json:"index"`
	Message      oaReplyMessage  `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type oaReplyMessage struct {
	Role      string       `json:"role"`
	Content   *string      `json:"content"`
	Refusal   *string      `json:"refusal"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaToolCall is a call of a client tool, for the client to run.
type oaToolCall struct {
	// Index is a streamed call's position among the answer's calls.
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func oaToolCallOf(call *chat.ToolCall) oaToolCall {
	tc := oaToolCall{ID: call.ID, Type: "function"}
	tc.Function.Name, tc.Function.Arguments = call.Name, argumentsText(call.Arguments)
	return tc
}

// argumentsText is a call's arguments as OpenAI sends them: a string of
// JSON, "{}" when there are none.
func argumentsText(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	return string(args)
}

type oaChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []oaChunkChoice `json:"choices"`
	Usage             *oaUsage        `json:"usage,omitempty"`
	AgentDock         *oaExtended     `json:"agentdock,omitempty"`
}

type oaChunkChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type oaDelta struct {
	Role      string       `json:"role,omitempty"`
	Content   *string      `json:"content,omitempty"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaExtended is the "agentdock" extension field.
type oaExtended struct {
	SessionID     string           `json:"sessionId,omitempty"`
	TurnID        string           `json:"turnId,omitempty"`
	ToolCall      *chat.ToolCall   `json:"toolCall,omitempty"`
	ToolResult    *chat.ToolResult `json:"toolResult,omitempty"`
	Orchestration *chat.Snapshot   `json:"orchestration,omitempty"`
	Usage         *uiUsage         `json:"usage,omitempty"`
	Warning       string           `json:"warning,omitempty"`
	Compaction    *uiCompaction    `json:"compaction,omitempty"`
	Limit         *chat.Limit      `json:"limit,omitempty"`
	Error         *chat.Error      `json:"error,omitempty"`
	// Approval: the call of toolCall waits for a person's approval
	// (answer it with POST /api/chat/:agentId, docs/api.md).
	Approval     *chat.Approval `json:"approval,omitempty"`
	FinishReason string         `json:"finishReason,omitempty"`
	// ToolCalls and ToolResults list a whole turn's tool activity in a
	// non-streaming answer.
	ToolCalls   []chat.ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []chat.ToolResult `json:"toolResults,omitempty"`
}

// openAISession picks the session: the x-session-id header, else the body's
// user when it is a valid session ID, else a session derived from user (a
// hash, so that any user string keeps its conversation), else a new one.
func openAISession(r *http.Request, user, owner string) (string, *apiError) {
	if h := r.Header.Get("X-Session-Id"); h != "" {
		if !session.ValidID(h) {
			return "", errBadSessionID("the x-session-id header")
		}
		return h, nil
	}
	if user == "" {
		return session.NewID(), nil
	}
	if session.ValidID(user) {
		return user, nil
	}
	sum := sha256.Sum256([]byte(owner + "\x00" + user))
	return "user-" + hex.EncodeToString(sum[:16]), nil
}

func (s *Server) listModels(c *gin.Context) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := s.cfg.Agents.List()
	out := make([]model, 0, len(list))
	for _, n := range list {
		out = append(out, model{ID: n.ID(), Object: "model", Created: s.started.Unix(), OwnedBy: "agentdock"})
	}
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": out})
}

func (s *Server) chatCompletions(c *gin.Context) {
	body, ok := parseBody(c, wire.ParseChatCompletion)
	if !ok {
		return
	}
	node, e := s.openAIModel(body.Model)
	if e != nil {
		abortWith(c, e)
		return
	}
	cr, e := chatClient(body)
	if e != nil {
		abortWith(c, e)
		return
	}
	owner := ownerOf(c)
	var (
		sid, text string
		reqKey    string // the Idempotency-Key, with a session
		opts      = cr.options()
		stateless bool
		goOn      bool   // no new message: the turn goes on from the results
		at        string // the new message's field, for errors
	)
	if c.GetHeader("X-Session-Id") != "" || body.User != "" {
		// A session keeps the conversation: the request adds its last
		// user message, or the results of the client's tools' calls, and
		// the earlier messages are the client's copy.
		msg, ok, results, pe := body.Turn()
		if pe != nil {
			abortWith(c, bodyError(pe))
			return
		}
		if sid, e = openAISession(c.Request, body.User, owner); e != nil {
			abortWith(c, e)
			return
		}
		if e := checkAttachments(node, []chat.Message{msg}, []int{len(body.Messages) - 1}, "messages"); e != nil {
			abortWith(c, e)
			return
		}
		if results != nil {
			opts = append(opts, agent.WithResults(results))
		}
		if reqKey, e = idempotencyKey(c.Request, nil); e != nil {
			abortWith(c, e)
			return
		}
		if reqKey != "" {
			opts = append(opts, agent.WithRequest(reqKey))
		}
		if len(msg.Attachments) > 0 {
			opts = append(opts, agent.WithAttachments(msg.Attachments))
		}
		text, goOn, at = msg.Content, !ok, fmt.Sprintf("messages[%d].content", len(body.Messages)-1)
	} else {
		// No session: the messages are the conversation.
		msgs, index, pe := body.Conversation()
		if pe != nil {
			abortWith(c, bodyError(pe))
			return
		}
		last := len(msgs) - 1
		if last < 0 || msgs[last].Role != chat.RoleUser && msgs[last].Role != chat.RoleTool {
			abortWith(c, newParamError(http.StatusBadRequest, "invalid_message", "messages", `without a session (no user, no x-session-id) the messages are the conversation, and it must end with a message with role "user", or with the results ("tool" messages) of the calls of the client's tools`))
			return
		}
		history := msgs[:last]
		goOn = msgs[last].Role == chat.RoleTool
		if goOn {
			history = msgs
		}
		if e := checkHistory(node, history, index, "messages", cr.names()); e != nil {
			abortWith(c, e)
			return
		}
		if e := checkAttachments(node, msgs, index, "messages"); e != nil {
			abortWith(c, e)
			return
		}
		sid, stateless, at = session.NewID(), true, fmt.Sprintf("messages[%d].content", index[last])
		opts = append(opts, agent.Stateless(), agent.WithHistory(history))
		if !goOn {
			text = msgs[last].Content
			if len(msgs[last].Attachments) > 0 {
				opts = append(opts, agent.WithAttachments(msgs[last].Attachments))
			}
		}
	}
	var t *turn
	var err error
	if goOn {
		t, err = s.continueTurn(c.Request.Context(), node, sid, owner, true, "", opts...)
	} else {
		policy := template.BusyReject
		if !stateless {
			if policy, e = busyPolicy(c.Request, "", node, template.BusyReject); e != nil {
				abortWith(c, e)
				return
			}
		}
		t, err = s.startBusy(c.Request.Context(), policy, session.Key(owner, sid), reqKey, func() (*turn, error) {
			return s.startTurn(c.Request.Context(), node, sid, text, owner, true, opts...)
		})
	}
	if err != nil {
		// A retry gets the turn its request started while this replica
		// keeps it: the completion is made again from its events.
		if req, ok := s.duplicateOf(c.Request.Context(), session.Key(owner, sid), reqKey, err); ok {
			if kept := s.turns.get(req.Turn); kept != nil && kept.key == session.Key(owner, sid) && kept.keepEvents {
				t, err = kept, nil
				c.Header("Idempotent-Replayed", "true")
			} else {
				err = &agent.DuplicateError{Request: req}
			}
		}
	}
	if err != nil {
		if e := turnStartError(err); e.Status < 500 {
			err = startErrorAt(e, at, "messages")
		}
		s.answerStartError(c, node.ID(), err)
		return
	}
	if stateless {
		// Nothing can read a stateless turn but this request: it ends
		// when the client goes away.
		defer stopIfRunning(t)
		sid = ""
	} else {
		c.Header("X-Session-Id", sid)
	}
	c.Header("X-Turn-Id", t.id)
	if body.Stream {
		s.streamCompletion(c, t, body.Model, sid, body.StreamOptions != nil && body.StreamOptions.IncludeUsage)
		return
	}
	s.completion(c, t, body.Model, sid)
}

// chatClient reads what a chat completion request brings besides its
// messages.
func chatClient(body *wire.ChatCompletionRequest) (clientRequest, *apiError) {
	tools, pe := body.Tools()
	if pe != nil {
		return clientRequest{}, bodyError(pe)
	}
	choice, pe := body.Choice()
	if pe != nil {
		return clientRequest{}, bodyError(pe)
	}
	wf, pe := body.Format()
	if pe != nil {
		return clientRequest{}, bodyError(pe)
	}
	instructions, _, pe := body.Instructions()
	if pe != nil {
		return clientRequest{}, bodyError(pe)
	}
	return newClientRequest(tools, choice, wf, "response_format", instructions)
}

// openAIModel finds the agent an OpenAI request names as its model.
func (s *Server) openAIModel(model string) (*agent.Agent, *apiError) {
	if model == "" {
		return nil, newParamError(http.StatusBadRequest, "invalid_request", "model", "model is required: an agent ID (GET /v1/models lists them)")
	}
	node, ok := s.cfg.Agents.Get(model)
	if !ok {
		return nil, newParamError(http.StatusNotFound, "model_not_found", "model", "no agent %q; GET /v1/models lists them", model)
	}
	return node, nil
}

// checkHistory refuses a conversation the agent cannot take, naming the
// message: index maps the history's messages to their position in the
// request's list param.
func checkHistory(node *agent.Agent, history []chat.Message, index []int, param string, client []string) *apiError {
	err := node.CheckHistory(history, client)
	var he *agent.HistoryError
	if !errors.As(err, &he) {
		return nil
	}
	at := fmt.Sprintf("%s[%d]", param, index[he.Index])
	return newParamError(http.StatusBadRequest, "invalid_message", at, "%s: %s", at, he.Reason)
}

// stopIfRunning cancels a turn that is still running because the only
// client that could read it went away.
func stopIfRunning(t *turn) {
	if _, done := t.state(); !done {
		t.cancel(errNoReader)
	}
}

var errNoReader = &chat.Error{Code: "client_gone", Message: "the client went away, and a turn without a session has no other reader; it was stopped"}

func oaFinish(reason string) string {
	switch reason {
	case chat.FinishLength, chat.FinishMaxSteps, chat.FinishTimeout:
		return "length"
	case chat.FinishToolCalls:
		return "tool_calls"
	}
	return "stop"
}

// completion waits for the turn and answers one chat.completion. The turn
// runs on when the client goes away. sessionID is "" for a stateless turn.
func (s *Server) completion(c *gin.Context, t *turn, model, sessionID string) {
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetWriteDeadline(time.Time{})
	var (
		text   strings.Builder
		ext    = &oaExtended{SessionID: sessionID, TurnID: t.id}
		usage  chat.Usage
		errEv  *chat.Error
		reason string
		newRun bool
		calls  []oaToolCall
	)
	err := follow(c.Request.Context(), t, s.cfg.Heartbeat, func(ev chat.Event) {
		switch ev.Kind {
		case chat.KindTextDelta:
			if newRun && text.Len() > 0 {
				text.WriteString("\n\n")
			}
			newRun = false
			text.WriteString(ev.Text)
		case chat.KindToolCall, chat.KindStepFinish:
			newRun = true
			if ev.ToolCall != nil {
				ext.ToolCalls = append(ext.ToolCalls, *ev.ToolCall)
			}
		case chat.KindClientCall:
			calls = append(calls, oaToolCallOf(ev.ToolCall))
		case chat.KindToolResult:
			ext.ToolResults = append(ext.ToolResults, *ev.ToolResult)
		case chat.KindOrchestration:
			ext.Orchestration = ev.Orchestration
		case chat.KindLimit:
			ext.Limit = ev.Limit
		case chat.KindUsage:
			if ev.Final {
				usage = *ev.Usage
			}
		case chat.KindError:
			errEv = ev.Error
		case chat.KindDone:
			reason = ev.FinishReason
		}
	}, nil)
	if err != nil {
		if ce, ok := err.(*chat.Error); ok {
			errEv = ce
		} else {
			return // the client went away; the turn runs on
		}
	}
	if errEv != nil {
		abortWith(c, turnErrorStatus(errEv))
		return
	}
	ext.FinishReason = reason
	reply := oaReplyMessage{Role: "assistant", ToolCalls: calls}
	if text.Len() > 0 || len(calls) == 0 {
		reply.Content = ptr(text.String())
	}
	c.JSON(http.StatusOK, oaCompletion{
		ID: "chatcmpl-" + t.id, Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		SystemFingerprint: "agentdock",
		Choices:           []oaChoice{{Index: 0, Message: reply, FinishReason: oaFinish(reason), Logprobs: json.RawMessage("null")}},
		Usage:             oaUsageOf(usage),
		AgentDock:         ext,
	})
}

// openEventStream starts an SSE response that the OpenAI-compatible
// streams write themselves: no deadline (the http.Server's WriteTimeout
// and ReadTimeout would cut a long stream), the SSE headers, the status.
func openEventStream(w http.ResponseWriter) *http.ResponseController {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return rc
}

// streamCompletion streams the turn as chat.completion.chunk objects.
func (s *Server) streamCompletion(c *gin.Context, t *turn, model, sessionID string, includeUsage bool) {
	defer s.cfg.Telemetry.TrackStream(c.Request.Context(), "openai")()
	w := c.Writer
	rc := openEventStream(w)

	id, created := "chatcmpl-"+t.id, time.Now().Unix()
	var buf bytes.Buffer
	send := func(v any) {
		buf.Reset()
		buf.WriteString("data: ")
		buf.Write(mustJSON(v))
		buf.WriteString("\n\n")
		_, _ = w.Write(buf.Bytes())
		_ = rc.Flush()
	}
	chunk := func(delta oaDelta, finish *string, ext *oaExtended) oaChunk {
		return oaChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, SystemFingerprint: "agentdock",
			Choices: []oaChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}}, AgentDock: ext}
	}
	empty := ""
	send(chunk(oaDelta{Role: "assistant", Content: &empty}, nil, &oaExtended{SessionID: sessionID, TurnID: t.id}))

	var usage chat.Usage
	finished := false
	finish := func(reason string, ext *oaExtended) {
		fr := oaFinish(reason)
		send(chunk(oaDelta{}, &fr, ext))
		if includeUsage {
			send(oaChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, SystemFingerprint: "agentdock",
				Choices: []oaChunkChoice{}, Usage: ptr(oaUsageOf(usage))})
		}
		// Not flushed: the handler returns right after, and net/http
		// writes [DONE] with the response's end in one write, so that a
		// client that stops at [DONE] can keep the connection.
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
		finished = true
	}
	// sendError writes an error object the way OpenAI streams errors; OpenAI
	// clients raise it. The finish chunk and [DONE] follow.
	sendError := func(e *chat.Error) {
		send(errorBody{Error: &apiError{Status: http.StatusBadGateway, Code: e.Code, Message: e.Message}, openAI: true})
	}
	var failed *chat.Error
	clientCalls := 0
	err := follow(c.Request.Context(), t, s.cfg.Heartbeat, func(ev chat.Event) {
		switch ev.Kind {
		case chat.KindTextDelta:
			text := ev.Text
			send(chunk(oaDelta{Content: &text}, nil, nil))
		case chat.KindClientCall:
			tc := oaToolCallOf(ev.ToolCall)
			tc.Index = ptr(clientCalls)
			clientCalls++
			send(chunk(oaDelta{ToolCalls: []oaToolCall{tc}}, nil, nil))
		case chat.KindToolCall:
			send(chunk(oaDelta{}, nil, &oaExtended{ToolCall: ev.ToolCall}))
		case chat.KindToolResult:
			send(chunk(oaDelta{}, nil, &oaExtended{ToolResult: ev.ToolResult}))
		case chat.KindApproval:
			send(chunk(oaDelta{}, nil, &oaExtended{ToolCall: ev.ToolCall, Approval: ev.Approval}))
		case chat.KindOrchestration:
			send(chunk(oaDelta{}, nil, &oaExtended{Orchestration: ev.Orchestration}))
		case chat.KindWarning:
			send(chunk(oaDelta{}, nil, &oaExtended{Warning: ev.Text}))
		case chat.KindCompaction:
			send(chunk(oaDelta{}, nil, &oaExtended{Compaction: compactionOf(ev.Compaction)}))
		case chat.KindLimit:
			send(chunk(oaDelta{}, nil, &oaExtended{Limit: ev.Limit}))
		case chat.KindUsage:
			u := uiUsage{usageTotals: totalsOf(*ev.Usage), Final: ev.Final}
			if ev.Final {
				usage = *ev.Usage
			}
			send(chunk(oaDelta{}, nil, &oaExtended{Usage: &u}))
		case chat.KindError:
			failed = ev.Error
			sendError(ev.Error)
		case chat.KindDone:
			reason := ev.FinishReason
			finish(reason, &oaExtended{FinishReason: reason, Error: failed})
		}
	}, func() {
		_, _ = w.Write([]byte(": heartbeat\n\n"))
		_ = rc.Flush()
	})
	if err != nil && !finished {
		if ce, ok := err.(*chat.Error); ok {
			sendError(ce)
			finish(chat.FinishError, &oaExtended{FinishReason: chat.FinishError, Error: ce})
			return
		}
		// The client closed its streaming connection: nobody reads this
		// turn now, so it stops like one a person stopped (its partial
		// answer is saved; its stream can still be read from the session).
		t.cancel(errStreamClosed)
	}
}

// errStreamClosed stops a /v1 streaming turn whose client went away.
var errStreamClosed = &chat.Stop{Reason: "the client closed its streaming connection"}

func ptr[T any](v T) *T { return &v }
