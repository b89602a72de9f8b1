package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
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

// oaResponse is a Responses API response object: every field the spec
// requires, each with the value the turn actually used (docs/api.md).
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
	MaxToolCalls       *int64            `json:"max_tool_calls"`
	Metadata           map[string]string `json:"metadata"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *oaConversation   `json:"conversation"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	TopP               float64           `json:"top_p"`
	PresencePenalty    float64           `json:"presence_penalty"`
	FrequencyPenalty   float64           `json:"frequency_penalty"`
	TopLogprobs        int               `json:"top_logprobs"`
	Reasoning          *oaReasoning      `json:"reasoning"`
	ServiceTier        string            `json:"service_tier"`
	SafetyIdentifier   *string           `json:"safety_identifier"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	Text               oaTextConfig      `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []oaFunctionTool  `json:"tools"`
	Truncation         string            `json:"truncation"`
	Usage              *oaResponseUsage  `json:"usage"`
	AgentDock          *oaRespExtension  `json:"agentdock,omitempty"`
}

// oaReasoning is the reasoning configuration used: none is asked of the
// model (the field is null), as the template chooses the model.
type oaReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// oaFunctionTool is a client's function tool as the response reports it.
type oaFunctionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type oaResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// oaErrorPayload is the error of an error event: OpenAI's error shape.
type oaErrorPayload struct {
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

type oaIncomplete struct {
	Reason string `json:"reason"`
}

type oaConversation struct {
	ID string `json:"id"`
}

// oaTextConfig is the text configuration used: the format the answer was
// asked in.
type oaTextConfig struct {
	Format any `json:"format"`
}

// oaJSONSchemaFormat is a JSON schema format as the response reports it.
type oaJSONSchemaFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      bool            `json:"strict"`
}

// textConfig reports the format f (nil: text).
func textConfig(f *llmorch.Format) oaTextConfig {
	switch {
	case f == nil:
		return oaTextConfig{Format: map[string]string{"type": "text"}}
	case f.Type == llmorch.FormatJSONObject:
		return oaTextConfig{Format: map[string]string{"type": f.Type}}
	}
	out := oaJSONSchemaFormat{Type: f.Type, Name: f.Name, Schema: f.Schema, Strict: f.Strict}
	if f.Description != "" {
		out.Description = ptr(f.Description)
	}
	return oaTextConfig{Format: out}
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
	Compaction   *wire.CompactionInfo `json:"compaction,omitempty"`
	FinishReason string               `json:"finishReason,omitempty"`
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
	// Error is an error event's.
	Error *oaErrorPayload `json:"error,omitempty"`
}

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
	case chat.KindToolCall, chat.KindClientCall:
		// A client call is the same item without an output after it:
		// the client runs it and sends its function_call_output.
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
		b.resp.AgentDock.Compaction = wire.CompactionOf(ev.Compaction)
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
	case b.reason == chat.FinishStop, b.reason == chat.FinishToolCalls:
		r.Status = "completed"
		r.CompletedAt = ptr(now.Unix())
	case b.reason == chat.FinishStopped:
		r.Status = "cancelled"
	default:
		r.Status = "incomplete"
		r.IncompleteDetails = &oaIncomplete{Reason: incompleteReason(b.reason, b.limit)}
	}
	u := b.usage
	ru := &oaResponseUsage{InputTokens: u.Prompt, OutputTokens: u.Completion, TotalTokens: wire.TotalOf(u)}
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
	case chat.FinishGuardrail:
		return "content_filter"
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
	case "cancelled":
		// The spec's streams have no event of their own for it: the
		// object says cancelled.
		return "response.incomplete"
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

// templateTemperature is the temperature the agent's model is called
// with: the template's, else the providers' default, 1.
func templateTemperature(n *agent.Agent) float64 {
	_, nc := n.Template().Provider()
	if nc.Temperature != nil {
		return *nc.Temperature
	}
	return 1
}

func (d *Door) createResponse(w http.ResponseWriter, r *http.Request) {
	body, ok := door.ParseBody(w, r, wire.ParseResponses)
	if !ok {
		return
	}
	if body.Background && !body.Stored() {
		door.WriteProblem(w, r, turns.ParamProblem(http.StatusBadRequest, "invalid_request", "background", "background responses must be stored (store: true): GET /v1/responses/{id} reads them"))
		return
	}
	key, e := door.IdempotencyKey(r)
	if e != nil {
		door.WriteProblem(w, r, e)
		return
	}
	rs, e := d.startResponse(r.Context(), door.Owner(r), key, body, nil)
	if e != nil {
		door.WriteProblem(w, r, e)
		return
	}
	if rs.stateless {
		defer rs.t.Cancel(errNoReader)
	} else {
		w.Header().Set("X-Session-Id", rs.sid)
	}
	w.Header().Set("X-Turn-Id", rs.t.ID())
	if body.Stream {
		d.streamResponse(w, r, rs.t, rs.run)
		return
	}
	if body.Background {
		// It runs on; GET /v1/responses/{id} reads it, and
		// POST /v1/responses/{id}/cancel stops it. The server's webhook
		// hears when it ends.
		if d.cfg.Webhook != nil {
			d.responseWebhook(door.Owner(r), rs.run)
		}
		door.WriteJSON(w, http.StatusOK, rs.run.base)
		return
	}
	select {
	case <-rs.run.done:
	case <-r.Context().Done():
		return // the client went away; a stored response runs on
	}
	if rs.run.failure != nil {
		door.WriteProblem(w, r, turns.Describe(rs.run.failure))
		return
	}
	writeRaw(w, rs.run.final)
}

// responseStart is a response whose turn started.
type responseStart struct {
	t   *turns.Turn
	run *responseRun
	sid string
	// stateless: nothing is stored; conv, the conversation before the
	// turn's answer, is what a WebSocket connection keeps to continue it.
	stateless bool
	conv      []chat.Message
	client    clientRequest
}

// startResponse starts the turn of a response (POST /v1/responses, or a
// response.create of the WebSocket mode). prior, when not nil, is the
// conversation of the store: false response the request continues from
// (a WebSocket connection keeps it): the input follows it.
// key is the request's idempotency key (idempotencyKey), "" for none.
func (d *Door) startResponse(ctx context.Context, owner, key string, body *wire.ResponsesRequest, prior []chat.Message) (*responseStart, *turns.Problem) {
	node, e := d.openAIModel(body.Model)
	if e != nil {
		return nil, e
	}
	metadata, pe := body.MetadataMap()
	if pe != nil {
		return nil, door.BodyProblem(pe)
	}
	conv, pe := body.ConversationID()
	if pe != nil {
		return nil, door.BodyProblem(pe)
	}
	in, pe := body.Conversation(d.cfg.CompactionKey)
	if pe != nil {
		return nil, door.BodyProblem(pe)
	}
	tools, pe := body.Tools()
	if pe != nil {
		return nil, door.BodyProblem(pe)
	}
	choice, pe := body.Choice()
	if pe != nil {
		return nil, door.BodyProblem(pe)
	}
	wf, pe := body.Format()
	if pe != nil {
		return nil, door.BodyProblem(pe)
	}
	cr, e := newClientRequest(tools, choice, wf, "text.format", joinText(in.Summary, in.Instructions))
	if e != nil {
		return nil, e
	}
	msgs, index := in.Messages, in.Index
	if prior != nil {
		// The input goes on from the connection's conversation; its
		// positions still name the input's items.
		msgs = append(slices.Clone(prior), msgs...)
		index = append(make([]int, len(prior)), index...)
	}
	if e := checkAttachments(node, in.Messages, in.Index, "input"); e != nil {
		return nil, e
	}
	last := len(msgs) - 1
	goOn := msgs[last].Role == chat.RoleTool
	if msgs[last].Role != chat.RoleUser && !goOn {
		return nil, turns.ParamProblem(http.StatusBadRequest, "invalid_message", "input", `the input must end with a user message, or with the function_call_output items of the calls of the client's tools the last response made`)
	}
	history := msgs[:last]
	if goOn {
		history = msgs
	}
	stored := body.Stored()
	var (
		sid       string
		stateless bool
		tin       = cr.input()
	)
	switch {
	case body.PreviousResponseID != "" && conv != "":
		e = turns.ParamProblem(http.StatusBadRequest, "invalid_request", "conversation", "previous_response_id and conversation cannot be used together")
	case prior != nil:
		sid, stateless = session.NewID(), true
		tin.Stateless = true
	case !stored && (body.PreviousResponseID != "" || conv != ""):
		e = turns.ParamProblem(http.StatusBadRequest, "invalid_request", "store", "store: false cannot continue a conversation: a conversation here is a stored session, and every response in it is stored; send the whole conversation in input instead")
	case body.PreviousResponseID != "":
		sid, e = d.continueFrom(ctx, owner, body.PreviousResponseID)
	case conv != "":
		if !session.ValidID(conv) {
			e = turns.ParamProblem(http.StatusBadRequest, "invalid_request", "conversation", "conversation is not a valid ID: want 8 to 128 letters, digits, '-' or '_'")
		}
		sid = conv
	case stored:
		sid = session.NewID()
	default:
		sid, stateless = session.NewID(), true
		tin.Stateless = true
	}
	if e != nil {
		return nil, e
	}
	continues := body.PreviousResponseID != "" && prior == nil || conv != ""
	if end := len(history); continues && end > 0 && history[end-1].Role == chat.RoleTool {
		// The session holds the calls; the function_call_output items
		// that end the input (or come before its user message) are their
		// results.
		k := end
		for k > 0 && history[k-1].Role == chat.RoleTool {
			k--
		}
		var results []chat.ToolResult
		for _, m := range history[k:] {
			results = append(results, chat.ToolResult{CallID: m.ToolCallID, Content: m.Content, NotRun: m.NotRun})
		}
		tin.Results = results
		history, index = history[:k], index[:k]
		if goOn && k > 0 {
			return nil, turns.ParamProblem(http.StatusBadRequest, "invalid_message", fmt.Sprintf("input[%d]", index[k-1]), "continuing a conversation, an input that ends with function_call_output items holds only them: the conversation has the rest")
		}
	}
	if e := checkHistory(node, append(slices.Clone(in.Compacted), history...), append(make([]int, len(in.Compacted)), index...), "input", cr.names()); e != nil {
		return nil, e
	}
	tin.Compacted, tin.History = in.Compacted, history
	if !stateless {
		tin.Key = key
	}
	tin.Owner = owner
	if !goOn {
		tin.Text, tin.Attachments = msgs[last].Content, msgs[last].Attachments
	}
	t, err := d.rt.Start(ctx, turns.Input{Input: tin, Agent: node.ID(), Session: sid})
	if err != nil {
		e := turns.Describe(err)
		if e.Status >= 500 {
			d.log.Error("starting a turn", "agent", node.ID(), "err", err)
		}
		return nil, startErrorAt(e, inputParam(body, index[last]), "input")
	}
	base := d.responseBase(node, t, body, cr, metadata, stored)
	if !stateless {
		base.Conversation = &oaConversation{ID: sid}
		base.AgentDock.SessionID = sid
	}
	rs := &responseStart{t: t, sid: sid, stateless: stateless, client: cr, conv: msgs}
	rs.run = d.recordResponse(t, base, owner, stored)
	return rs, nil
}

// joinText joins the non-empty texts with blank lines.
func joinText(texts ...string) string {
	var out []string
	for _, t := range texts {
		if t != "" {
			out = append(out, t)
		}
	}
	return strings.Join(out, "\n\n")
}

// responseBase is the object of a response that starts: every required
// field with the value its turn uses.
func (d *Door) responseBase(node *agent.Agent, t *turns.Turn, body *wire.ResponsesRequest, cr clientRequest, metadata map[string]string, stored bool) oaResponse {
	budget := node.Budget()
	base := oaResponse{
		ID: responseID(t.ID()), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress",
		Background: body.Background,
		Metadata:   metadata, Model: node.ID(), Output: []any{}, ParallelToolCalls: true, Store: stored,
		Temperature: templateTemperature(node), TopP: 1, ServiceTier: "default",
		MaxToolCalls: ptr(int64(budget.MaxSteps * budget.MaxToolCalls)),
		Text:         textConfig(cr.format), ToolChoice: body.ToolChoice, Tools: []oaFunctionTool{}, Truncation: "disabled",
		SafetyIdentifier: body.SafetyIdentifier, PromptCacheKey: body.PromptCacheKey,
		AgentDock: &oaRespExtension{TurnID: t.ID()},
	}
	if _, nc := node.Template().Provider(); nc.MaxTokens > 0 {
		base.MaxOutputTokens = ptr(int64(nc.MaxTokens))
	}
	if isAbsentJSON(base.ToolChoice) {
		base.ToolChoice = json.RawMessage(`"auto"`)
	}
	if cr.instructions != "" {
		base.Instructions = ptr(cr.instructions)
	}
	for _, tool := range cr.tools {
		ft := oaFunctionTool{Type: "function", Name: tool.Name, Parameters: tool.Parameters}
		if tool.Description != "" {
			ft.Description = ptr(tool.Description)
		}
		base.Tools = append(base.Tools, ft)
	}
	if base.Metadata == nil {
		base.Metadata = map[string]string{}
	}
	if body.PreviousResponseID != "" {
		base.PreviousResponseID = ptr(body.PreviousResponseID)
	}
	return base
}

func isAbsentJSON(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// continueFrom finds the session of the response a request continues
// from. Only its conversation's latest response can be continued: a
// session keeps one linear history, so continuing from an earlier one
// would answer a conversation other than the one the client means.
func (d *Door) continueFrom(ctx context.Context, owner, prev string) (string, *turns.Problem) {
	notFound := turns.ParamProblem(http.StatusNotFound, "previous_response_not_found", "previous_response_id", "no response %q (responses are kept as long as sessions, SESSION_TTL_SECONDS)", prev)
	if !session.ValidID(prev) {
		return "", notFound
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rec, err := d.cfg.Responses.Get(ctx, session.Key(owner, prev))
	switch {
	case errors.Is(err, responses.ErrNotFound):
		return "", notFound
	case err != nil:
		d.log.Error("reading a stored response", "err", err)
		return "", storeError(err)
	case rec.SessionID == "":
		return "", notFound
	case rec.UserMessages == responses.Running:
		return "", turns.ParamProblem(http.StatusConflict, "previous_response_in_progress", "previous_response_id", "response %q is still in progress; continue from it once it is done", prev)
	}
	sess, err := d.rt.Store().Get(ctx, session.Key(owner, rec.SessionID))
	switch {
	case errors.Is(err, session.ErrNotFound):
		return "", turns.ParamProblem(http.StatusNotFound, "previous_response_not_found", "previous_response_id", "the conversation of response %q has expired or was deleted", prev)
	case err != nil:
		d.log.Error("reading the session of a stored response", "err", err)
		return "", storeError(err)
	case sess.State.UserMessages != rec.UserMessages:
		return "", turns.ParamProblem(http.StatusConflict, "previous_response_not_latest", "previous_response_id", "response %q is not the latest of its conversation (%s), which went on since; only the latest response can be continued, as a conversation keeps one history (use conversation: %q to continue it as it is)", prev, rec.SessionID, rec.SessionID)
	}
	return rec.SessionID, nil
}

// recordResponse starts the recorder of a response: it follows the turn
// to its end whatever the client does, builds the final object and, for a
// stored response, stores it (the running object is stored at once, so
// that any replica can tell that the response exists).
func (d *Door) recordResponse(t *turns.Turn, base oaResponse, owner string, stored bool) *responseRun {
	run := &responseRun{base: base, done: make(chan struct{})}
	key := session.Key(owner, base.ID)
	put := func(rec responses.Record) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(d.rt.Base()), 5*time.Second)
		defer cancel()
		if err := d.cfg.Responses.Put(ctx, key, rec); err != nil {
			d.log.Warn("storing a response", "response", base.ID, "err", err)
		}
	}
	if stored {
		put(responses.Record{SessionID: t.SessionID(), UserMessages: responses.Running, Response: mustJSON(base)})
	}
	d.recorders.Add(1)
	go func() {
		defer d.recorders.Done()
		defer close(run.done)
		b := newRespBuilder(base)
		err := door.Follow(d.rt.Base(), d.rt, t, 0, d.cfg.Heartbeat, func(ev chat.Event) { b.add(ev) }, nil)
		if ce, ok := err.(*chat.Error); ok {
			b.add(chat.Event{Kind: chat.KindError, Error: ce})
		}
		final := b.finish(time.Now())
		run.final, run.failure = mustJSON(final), b.failure
		if !stored {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(d.rt.Base()), 5*time.Second)
		sess, err := d.rt.Store().Get(ctx, session.Key(owner, t.SessionID()))
		cancel()
		if err != nil {
			// Left running: continuing from it is refused, and the
			// session can still be continued by its conversation ID.
			d.log.Warn("reading a response's session to record it", "response", base.ID, "err", err)
			return
		}
		put(responses.Record{SessionID: t.SessionID(), UserMessages: sess.State.UserMessages, Response: run.final})
	}()
	return run
}

// streamResponse streams a response as the Responses API's events over
// SSE. The last one carries the recorder's final object.
func (d *Door) streamResponse(w http.ResponseWriter, r *http.Request, t *turns.Turn, run *responseRun) {
	defer d.cfg.Telemetry.TrackStream(r.Context(), "openai")()
	rc := openEventStream(w)

	var buf bytes.Buffer
	send := func(ev oaRespEvent) error {
		buf.Reset()
		buf.WriteString("event: ")
		buf.WriteString(ev.Type)
		buf.WriteString("\ndata: ")
		buf.Write(mustJSON(ev))
		buf.WriteString("\n\n")
		_, _ = w.Write(buf.Bytes())
		return rc.Flush()
	}
	tick := func() {
		_, _ = w.Write([]byte(": heartbeat\n\n"))
		_ = rc.Flush()
	}
	d.sendResponseEvents(r.Context(), t, run, send, tick, nil)
}

// sendResponseEvents sends a response's events, numbered from 0, through
// send (SSE, or a WebSocket connection), and its final object last. tick
// is called on idle heartbeats; observe, when set, sees every event of the
// turn. It returns the final object's status ("" when the stream ended
// before it: the client went away, or events were lost).
func (d *Door) sendResponseEvents(ctx context.Context, t *turns.Turn, run *responseRun, send func(oaRespEvent) error, tick func(), observe func(chat.Event)) string {
	var seq int64
	emit := func(ev oaRespEvent) {
		ev.SequenceNumber = seq
		seq++
		_ = send(ev)
	}
	emit(oaRespEvent{Type: "response.created", Response: run.base})
	emit(oaRespEvent{Type: "response.in_progress", Response: run.base})
	b := newRespBuilder(run.base)
	err := door.Follow(ctx, d.rt, t, 0, d.cfg.Heartbeat, func(ev chat.Event) {
		if observe != nil {
			observe(ev)
		}
		for _, out := range b.add(ev) {
			emit(out)
		}
	}, tick)
	if err != nil {
		if ce, ok := err.(*chat.Error); ok {
			emit(oaRespEvent{Type: "error", Error: &oaErrorPayload{Type: "server_error", Code: ce.Code, Message: ce.Message}})
		}
		return ""
	}
	select {
	case <-run.done:
	case <-ctx.Done():
		return ""
	}
	var final struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(run.final, &final)
	emit(oaRespEvent{Type: terminalEvent(final.Status), Response: run.final})
	return final.Status
}

func (d *Door) getResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if v := r.URL.Query().Get("stream"); v != "" && v != "false" {
		door.WriteProblem(w, r, turns.ParamProblem(http.StatusBadRequest, "unsupported_parameter", "stream", "streaming a stored response is not supported; GET it when it is done"))
		return
	}
	notFound := turns.ParamProblem(http.StatusNotFound, "response_not_found", "id", "no response %q", id)
	if !session.ValidID(id) {
		door.WriteProblem(w, r, notFound)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	rec, err := d.cfg.Responses.Get(ctx, session.Key(door.Owner(r), id))
	switch {
	case errors.Is(err, responses.ErrNotFound):
		door.WriteProblem(w, r, notFound)
	case err != nil:
		d.log.Error("reading a stored response", "err", err)
		door.WriteProblem(w, r, storeError(err))
	default:
		writeRaw(w, rec.Response)
	}
}

// responseWebhook calls the server's webhook with a background response's
// final object once its run ends.
func (d *Door) responseWebhook(owner string, run *responseRun) {
	d.recorders.Add(1)
	go func() {
		defer d.recorders.Done()
		<-run.done
		d.cfg.Webhook(owner, "response.completed", json.RawMessage(run.final))
	}()
}

// storeError describes a failure of the responses' store or the session
// store.
func storeError(err error) *turns.Problem {
	if errors.Is(err, responses.ErrNotFound) {
		return turns.NewProblem(http.StatusNotFound, "response_not_found", "no such response")
	}
	return turns.Describe(err)
}
