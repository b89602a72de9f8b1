package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/gin-gonic/gin"
)

// The Responses API (POST /v1/responses, GET /v1/responses/{id}). A
// response is one turn: of a session when it is stored (its conversation
// is that session, continued by previous_response_id or named by
// conversation), of a throwaway session otherwise. Its output items are
// the turn's text runs (message), the agent's tool calls (function_call)
// and their results (function_call_output), in the order they happened.
//
// The object is built twice from the same events: by a recorder that
// follows the turn to its end whatever the client does and stores the
// final object (Config.Responses), and, for a streaming client, by the
// stream, which sends the recorder's final object as its last event so that
// the stream and GET /v1/responses/{id} agree to the byte.

// oaResponse is a Responses API response object.
type oaResponse struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	CompletedAt        *int64            `json:"completed_at"`
	Error              *oaResponseError  `json:"error"`
	IncompleteDetails  *oaIncomplete     `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Metadata           map[string]string `json:"metadata"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *oaConversation   `json:"conversation"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               oaTextConfig      `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *oaResponseUsage  `json:"usage"`
	AgentDock          *oaRespExtension  `json:"agentdock,omitempty"`
}

type oaResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type oaIncomplete struct {
	Reason string `json:"reason"`
}

type oaConversation struct {
	ID string `json:"id"`
}

type oaTextConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type oaResponseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// oaRespExtension is the "agentdock" extension field of a response object:
// what OpenAI's shape has no place for.
type oaRespExtension struct {
	SessionID     string         `json:"sessionId,omitempty"`
	TurnID        string         `json:"turnId"`
	Orchestration *chat.Snapshot `json:"orchestration,omitempty"`
	Limit         *chat.Limit    `json:"limit,omitempty"`
	Warnings      []string       `json:"warnings,omitempty"`
	// Compaction: the turn summarized earlier turns for the model.
	Compaction   *uiCompaction `json:"compaction,omitempty"`
	FinishReason string        `json:"finishReason,omitempty"`
}

type oaMessageItem struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []oaOutputText `json:"content"`
}

type oaOutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type oaFunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type oaFunctionCallOutput struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// oaRespEvent is one event of a Responses stream.
type oaRespEvent struct {
	Type           string        `json:"type"`
	SequenceNumber int64         `json:"sequence_number"`
	Response       any           `json:"response,omitempty"`
	OutputIndex    *int          `json:"output_index,omitempty"`
	ItemID         string        `json:"item_id,omitempty"`
	ContentIndex   *int          `json:"content_index,omitempty"`
	Item           any           `json:"item,omitempty"`
	Part           *oaOutputText `json:"part,omitempty"`
	Delta          *string       `json:"delta,omitempty"`
	Text           *string       `json:"text,omitempty"`
	Arguments      *string       `json:"arguments,omitempty"`
	Logprobs       *[]any        `json:"logprobs,omitempty"`
	// Code and Message are an error event's.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// respBuilder turns a turn's events into a response's output items and the
// stream events that build them. Item IDs derive from the turn ID and the
// item's position, so two builders fed the same events agree.
type respBuilder struct {
	resp    oaResponse
	msg     *oaMessageItem // the open message item
	msgAt   int            // its output index
	text    strings.Builder
	failure *chat.Error
	limit   *chat.Limit
	reason  string
	usage   chat.Usage
}

func newRespBuilder(base oaResponse) *respBuilder {
	b := &respBuilder{resp: base}
	b.resp.Output = []any{}
	ext := *base.AgentDock
	b.resp.AgentDock = &ext
	return b
}

func (b *respBuilder) itemID(prefix string) string {
	return prefix + "_" + b.resp.AgentDock.TurnID + "_" + strconv.Itoa(len(b.resp.Output))
}

// add applies one event and returns the stream events it makes.
func (b *respBuilder) add(ev chat.Event) []oaRespEvent {
	var out []oaRespEvent
	switch ev.Kind {
	case chat.KindTextDelta:
		if ev.Text == "" {
			return nil
		}
		if b.msg == nil {
			b.msg = &oaMessageItem{ID: b.itemID("msg"), Type: "message", Status: "in_progress", Role: "assistant", Content: []oaOutputText{}}
			b.msgAt = len(b.resp.Output)
			b.resp.Output = append(b.resp.Output, b.msg)
			b.text.Reset()
			added := *b.msg
			out = append(out,
				oaRespEvent{Type: "response.output_item.added", OutputIndex: ptr(b.msgAt), Item: added},
				oaRespEvent{Type: "response.content_part.added", ItemID: b.msg.ID, OutputIndex: ptr(b.msgAt), ContentIndex: ptr(0), Part: newOutputText("")})
		}
		b.text.WriteString(ev.Text)
		out = append(out, oaRespEvent{Type: "response.output_text.delta", ItemID: b.msg.ID, OutputIndex: ptr(b.msgAt), ContentIndex: ptr(0), Delta: ptr(ev.Text), Logprobs: &[]any{}})
	case chat.KindStepFinish:
		out = b.closeMessage("completed")
	case chat.KindToolCall:
		if ev.ToolCall == nil {
			return nil
		}
		out = b.closeMessage("completed")
		call := ev.ToolCall
		args := string(call.Arguments)
		if args == "" {
			args = "{}"
		}
		item := &oaFunctionCall{ID: b.itemID("fc"), Type: "function_call", Status: "in_progress", CallID: call.ID, Name: call.Name}
		at := len(b.resp.Output)
		b.resp.Output = append(b.resp.Output, item)
		out = append(out,
			oaRespEvent{Type: "response.output_item.added", OutputIndex: ptr(at), Item: *item},
			oaRespEvent{Type: "response.function_call_arguments.delta", ItemID: item.ID, OutputIndex: ptr(at), Delta: ptr(args)},
			oaRespEvent{Type: "response.function_call_arguments.done", ItemID: item.ID, OutputIndex: ptr(at), Arguments: ptr(args)})
		item.Arguments, item.Status = args, "completed"
		out = append(out, oaRespEvent{Type: "response.output_item.done", OutputIndex: ptr(at), Item: *item})
	case chat.KindToolResult:
		r := ev.ToolResult
		if r == nil {
			return nil
		}
		out = b.closeMessage("completed")
		item := &oaFunctionCallOutput{ID: b.itemID("fco"), Type: "function_call_output", Status: "in_progress", CallID: r.CallID, Output: r.Content}
		at := len(b.resp.Output)
		b.resp.Output = append(b.resp.Output, item)
		out = append(out, oaRespEvent{Type: "response.output_item.added", OutputIndex: ptr(at), Item: *item})
		item.Status = "completed"
		out = append(out, oaRespEvent{Type: "response.output_item.done", OutputIndex: ptr(at), Item: *item})
	case chat.KindOrchestration:
		b.resp.AgentDock.Orchestration = ev.Orchestration
	case chat.KindWarning:
		b.resp.AgentDock.Warnings = append(b.resp.AgentDock.Warnings, ev.Text)
	case chat.KindCompaction:
		b.resp.AgentDock.Compaction = compactionOf(ev.Compaction)
	case chat.KindLimit:
		if ev.Limit != nil && ev.Limit.Name != chat.LimitToolCalls {
			// The turn ends here; a tool-call limit only refuses calls.
			b.limit = ev.Limit
			out = b.closeMessage("incomplete")
		}
	case chat.KindUsage:
		if ev.Final && ev.Usage != nil {
			b.usage = *ev.Usage
		}
	case chat.KindError:
		if ev.Error != nil {
			b.failure = ev.Error
		} else {
			b.failure = &chat.Error{Code: "internal_error", Message: "the turn failed"}
		}
		out = b.closeMessage("incomplete")
	case chat.KindDone:
		b.reason = ev.FinishReason
		status := "completed"
		if ev.FinishReason != chat.FinishStop {
			status = "incomplete"
		}
		out = b.closeMessage(status)
	}
	return out
}

func newOutputText(text string) *oaOutputText {
	return &oaOutputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// closeMessage ends the open message item, if any.
func (b *respBuilder) closeMessage(status string) []oaRespEvent {
	if b.msg == nil {
		return nil
	}
	m, at := b.msg, b.msgAt
	b.msg = nil
	text := b.text.String()
	part := newOutputText(text)
	m.Content = []oaOutputText{*part}
	m.Status = status
	return []oaRespEvent{
		{Type: "response.output_text.done", ItemID: m.ID, OutputIndex: ptr(at), ContentIndex: ptr(0), Text: ptr(text), Logprobs: &[]any{}},
		{Type: "response.content_part.done", ItemID: m.ID, OutputIndex: ptr(at), ContentIndex: ptr(0), Part: part},
		{Type: "response.output_item.done", OutputIndex: ptr(at), Item: *m},
	}
}

// finish returns the final object: failed (an error ended the turn),
// incomplete (a budget, with the reason, or a cancelled turn), or
// completed.
func (b *respBuilder) finish(now time.Time) oaResponse {
	b.closeMessage("incomplete")
	r := b.resp
	r.AgentDock.FinishReason = b.reason
	r.AgentDock.Limit = b.limit
	switch {
	case b.failure != nil:
		r.Status = "failed"
		r.Error = &oaResponseError{Code: b.failure.Code, Message: b.failure.Message}
	case b.reason == chat.FinishStop:
		r.Status = "completed"
		r.CompletedAt = ptr(now.Unix())
	default:
		r.Status = "incomplete"
		r.IncompleteDetails = &oaIncomplete{Reason: incompleteReason(b.reason, b.limit)}
	}
	u := b.usage
	ru := &oaResponseUsage{InputTokens: u.Prompt, OutputTokens: u.Completion, TotalTokens: totalOf(u)}
	ru.InputTokensDetails.CachedTokens = u.CacheRead
	r.Usage = ru
	return r
}

// incompleteReason names why a response is incomplete: OpenAI's
// max_output_tokens for the output budgets, the budget's name otherwise.
func incompleteReason(reason string, lim *chat.Limit) string {
	switch reason {
	case chat.FinishLength:
		return "max_output_tokens"
	case chat.FinishMaxSteps:
		return "max_steps"
	case chat.FinishTimeout:
		return "turn_timeout"
	case chat.FinishCancelled:
		return "cancelled"
	}
	if lim != nil {
		return lim.Name
	}
	return reason
}

// terminalEvent is the type of the last event of a response's stream.
func terminalEvent(status string) string {
	switch status {
	case "completed":
		return "response.completed"
	case "failed":
		return "response.failed"
	}
	return "response.incomplete"
}

// responseRun is one response being made: the object it started as and,
// once the recorder is done, the final one.
type responseRun struct {
	base oaResponse
	done chan struct{}
	// final and failure are set before done is closed.
	final   json.RawMessage
	failure *chat.Error
}

func responseID(turnID string) string { return "resp_" + turnID }

// templateTemperature is the temperature the agent's model is called with
// (nil: the provider's default).
func templateTemperature(n *agent.Agent) *float64 {
	_, nc := n.Template().Provider()
	return nc.Temperature
}

func (s *Server) createResponse(c *gin.Context) {
	data, e := readBody(c.Request)
	if e != nil {
		abortWith(c, e)
		return
	}
	body, err := wire.ParseResponses(data)
	if err != nil {
		abortWith(c, bodyError(err))
		return
	}
	node, e := s.openAIModel(body.Model)
	if e != nil {
		abortWith(c, e)
		return
	}
	metadata, pe := body.MetadataMap()
	if pe != nil {
		abortWith(c, bodyError(pe))
		return
	}
	conv, pe := body.ConversationID()
	if pe != nil {
		abortWith(c, bodyError(pe))
		return
	}
	msgs, index, pe := body.Conversation()
	if pe != nil {
		abortWith(c, bodyError(pe))
		return
	}
	last := len(msgs) - 1
	if msgs[last].Role != chat.RoleUser {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_message", "input", `the input must end with a user message: the agent answers the user (function_call_output items answer the agent's own tool calls, which it runs itself)`))
		return
	}
	history := msgs[:last]
	if e := checkHistory(node, history, index, "input"); e != nil {
		abortWith(c, e)
		return
	}
	owner, stored := ownerOf(c), body.Stored()
	var (
		sid       string
		stateless bool
		opts      []agent.Option
	)
	switch {
	case body.PreviousResponseID != "" && conv != "":
		e = newParamError(http.StatusBadRequest, "invalid_request", "conversation", "previous_response_id and conversation cannot be used together")
	case !stored && (body.PreviousResponseID != "" || conv != ""):
		e = newParamError(http.StatusBadRequest, "invalid_request", "store", "store: false cannot continue a conversation: a conversation here is a stored session, and every response in it is stored; send the whole conversation in input instead")
	case body.PreviousResponseID != "":
		sid, e = s.continueFrom(c.Request.Context(), owner, body.PreviousResponseID)
	case conv != "":
		if !session.ValidID(conv) {
			e = newParamError(http.StatusBadRequest, "invalid_request", "conversation", "conversation is not a valid ID: want 8 to 128 letters, digits, '-' or '_'")
		}
		sid = conv
	case stored:
		sid = session.NewID()
	default:
		sid, stateless = session.NewID(), true
		opts = append(opts, agent.Stateless())
	}
	if e != nil {
		abortWith(c, e)
		return
	}
	if len(history) > 0 {
		opts = append(opts, agent.WithHistory(history))
	}
	t, err := s.startTurn(c.Request.Context(), node, sid, msgs[last].Content, owner, true, opts...)
	if err != nil {
		s.answerStartError(c, node.ID(), err)
		return
	}
	base := oaResponse{
		ID: responseID(t.id), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Metadata: metadata, Model: node.ID(), Output: []any{}, ParallelToolCalls: true, Store: stored,
		Temperature: templateTemperature(node), ToolChoice: "auto", Tools: []any{}, Truncation: "disabled",
		AgentDock: &oaRespExtension{TurnID: t.id},
	}
	if base.Metadata == nil {
		base.Metadata = map[string]string{}
	}
	base.Text.Format.Type = "text"
	if body.PreviousResponseID != "" {
		base.PreviousResponseID = ptr(body.PreviousResponseID)
	}
	if stateless {
		defer stopIfRunning(t)
	} else {
		base.Conversation = &oaConversation{ID: sid}
		base.AgentDock.SessionID = sid
		c.Header("X-Session-Id", sid)
	}
	c.Header("X-Turn-Id", t.id)
	run := s.recordResponse(t, base, owner, stored)
	if body.Stream {
		s.streamResponse(c, t, run)
		return
	}
	select {
	case <-run.done:
	case <-c.Request.Context().Done():
		return // the client went away; a stored response runs on
	}
	if run.failure != nil {
		abortWith(c, turnErrorStatus(run.failure))
		return
	}
	c.Data(http.StatusOK, "application/json", run.final)
}

// continueFrom finds the session of the response a request continues
// from. Only its conversation's latest response can be continued: a
// session keeps one linear history, so continuing from an earlier one
// would answer a conversation other than the one the client means.
func (s *Server) continueFrom(ctx context.Context, owner, prev string) (string, *apiError) {
	notFound := newParamError(http.StatusNotFound, "previous_response_not_found", "previous_response_id", "no response %q (responses are kept as long as sessions, SESSION_TTL_SECONDS)", prev)
	if !session.ValidID(prev) {
		return "", notFound
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rec, err := s.cfg.Responses.Get(ctx, session.Key(owner, prev))
	switch {
	case errors.Is(err, responses.ErrNotFound):
		return "", notFound
	case err != nil:
		s.log.Error("reading a stored response", "err", err)
		return "", storeError(err)
	case rec.SessionID == "":
		return "", notFound
	case rec.UserMessages == responses.Running:
		return "", newParamError(http.StatusConflict, "previous_response_in_progress", "previous_response_id", "response %q is still in progress; continue from it once it is done", prev)
	}
	sess, err := s.cfg.Store.Get(ctx, session.Key(owner, rec.SessionID))
	switch {
	case errors.Is(err, session.ErrNotFound):
		return "", newParamError(http.StatusNotFound, "previous_response_not_found", "previous_response_id", "the conversation of response %q has expired or was deleted", prev)
	case err != nil:
		s.log.Error("reading the session of a stored response", "err", err)
		return "", storeError(err)
	case sess.State.UserMessages != rec.UserMessages:
		return "", newParamError(http.StatusConflict, "previous_response_not_latest", "previous_response_id", "response %q is not the latest of its conversation (%s), which went on since; only the latest response can be continued, as a conversation keeps one history (use conversation: %q to continue it as it is)", prev, rec.SessionID, rec.SessionID)
	}
	return rec.SessionID, nil
}

// recordResponse starts the recorder of a response: it follows the turn
// to its end whatever the client does, builds the final object and, for a
// stored response, stores it (the running object is stored at once, so
// that any replica can tell that the response exists).
func (s *Server) recordResponse(t *turn, base oaResponse, owner string, stored bool) *responseRun {
	run := &responseRun{base: base, done: make(chan struct{})}
	key := session.Key(owner, base.ID)
	put := func(rec responses.Record) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), 5*time.Second)
		defer cancel()
		if err := s.cfg.Responses.Put(ctx, key, rec); err != nil {
			s.log.Warn("storing a response", "response", base.ID, "err", err)
		}
	}
	if stored {
		put(responses.Record{SessionID: t.sessionID, UserMessages: responses.Running, Response: mustJSON(base)})
	}
	s.recorders.Add(1)
	go func() {
		defer s.recorders.Done()
		defer close(run.done)
		b := newRespBuilder(base)
		err := follow(s.base, t, s.cfg.Heartbeat, func(ev chat.Event) { b.add(ev) }, nil)
		if ce, ok := err.(*chat.Error); ok {
			b.add(chat.Event{Kind: chat.KindError, Error: ce})
		}
		final := b.finish(time.Now())
		run.final, run.failure = mustJSON(final), b.failure
		if !stored {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), 5*time.Second)
		sess, err := s.cfg.Store.Get(ctx, t.key)
		cancel()
		if err != nil {
			// Left running: continuing from it is refused, and the
			// session can still be continued by its conversation ID.
			s.log.Warn("reading a response's session to record it", "response", base.ID, "err", err)
			return
		}
		put(responses.Record{SessionID: t.sessionID, UserMessages: sess.State.UserMessages, Response: run.final})
	}()
	return run
}

// streamResponse streams a response as the Responses API's events. The
// last one carries the recorder's final object.
func (s *Server) streamResponse(c *gin.Context, t *turn, run *responseRun) {
	defer s.cfg.Telemetry.TrackStream(c.Request.Context(), "openai")()
	w := c.Writer
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	var (
		seq int64
		buf bytes.Buffer
	)
	send := func(ev oaRespEvent) {
		ev.SequenceNumber = seq
		seq++
		buf.Reset()
		buf.WriteString("event: ")
		buf.WriteString(ev.Type)
		buf.WriteString("\ndata: ")
		buf.Write(mustJSON(ev))
		buf.WriteString("\n\n")
		_, _ = w.Write(buf.Bytes())
		_ = rc.Flush()
	}
	send(oaRespEvent{Type: "response.created", Response: run.base})
	send(oaRespEvent{Type: "response.in_progress", Response: run.base})
	b := newRespBuilder(run.base)
	ctx := c.Request.Context()
	err := follow(ctx, t, s.cfg.Heartbeat, func(ev chat.Event) {
		for _, out := range b.add(ev) {
			send(out)
		}
	}, func() {
		_, _ = w.Write([]byte(": heartbeat\n\n"))
		_ = rc.Flush()
	})
	if err != nil {
		if ce, ok := err.(*chat.Error); ok {
			send(oaRespEvent{Type: "error", Code: ce.Code, Message: ce.Message})
		}
		return
	}
	select {
	case <-run.done:
	case <-ctx.Done():
		return
	}
	var final struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(run.final, &final)
	send(oaRespEvent{Type: terminalEvent(final.Status), Response: run.final})
}

func (s *Server) getResponse(c *gin.Context) {
	id := c.Param("id")
	if v := c.Query("stream"); v != "" && v != "false" {
		abortWith(c, newParamError(http.StatusBadRequest, "unsupported_parameter", "stream", "streaming a stored response is not supported; GET it when it is done"))
		return
	}
	notFound := newParamError(http.StatusNotFound, "response_not_found", "id", "no response %q", id)
	if !session.ValidID(id) {
		abortWith(c, notFound)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	rec, err := s.cfg.Responses.Get(ctx, session.Key(ownerOf(c), id))
	switch {
	case errors.Is(err, responses.ErrNotFound):
		abortWith(c, notFound)
	case err != nil:
		s.log.Error("reading a stored response", "err", err)
		abortWith(c, storeError(err))
	default:
		c.Data(http.StatusOK, "application/json", rec.Response)
	}
}
