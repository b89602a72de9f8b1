package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentdock-go/agentdock/chat"
)

var (
	spanFromContext = trace.SpanFromContext
	withAttrs       = trace.WithAttributes
	// nonRecording is what a span is with tracing off.
	nonRecording = trace.SpanFromContext(context.Background())
)

// start opens a span named op+name. With tracing off it returns ctx as it
// is and a non-recording span: no name, no context value, no allocation.
func (t *Telemetry) start(ctx context.Context, op, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if !t.tracing {
		return ctx, nonRecording
	}
	return t.tracer.Start(ctx, op+name, trace.WithSpanKind(kind))
}

// TurnInfo describes a turn for its invoke_agent span.
type TurnInfo struct {
	AgentID   string
	AgentName string
	SessionID string
	Provider  string
	Model     string
	// Message is the user message, recorded only with content capture.
	Message string
}

// Turn observes one turn: StartTurn opens its invoke_agent span, Observe
// sees each event the turn yields, End closes the span and records the
// turn's metrics. A nil *Turn does nothing. A Turn is used by one goroutine.
type Turn struct {
	t     *Telemetry
	span  trace.Span
	ctx   context.Context
	info  TurnInfo
	start time.Time

	firstText           bool
	ttft                time.Duration // start to the first text delta
	usage               chat.Usage
	finish, errCode     string
	snaps               int
	firstStep, lastStep string
	modelCalls, tools   int
	answer              strings.Builder // only with content capture
	ended               bool
}

// StartTurn opens the invoke_agent span of a turn; run the turn under the
// returned context so that its model and tool spans are children.
func (t *Telemetry) StartTurn(ctx context.Context, info TurnInfo) (context.Context, *Turn) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.start(ctx, "invoke_agent ", info.AgentID, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.GenAIOperationNameInvokeAgent,
			semconv.GenAIAgentID(info.AgentID),
			semconv.GenAIAgentName(info.AgentName),
			semconv.GenAIConversationID(info.SessionID),
			semconv.SessionIDKey.String(info.SessionID),
			semconv.GenAIProviderNameKey.String(info.Provider),
			semconv.GenAIRequestModel(info.Model),
		)
		if t.content {
			span.SetAttributes(semconv.GenAIInputMessagesKey.String(marshalMessages([]chat.Message{{Role: chat.RoleUser, Content: info.Message}})))
		}
	}
	return ctx, &Turn{t: t, span: span, ctx: ctx, info: info, start: time.Now()}
}

// Observe takes note of one event of the turn.
func (tu *Turn) Observe(ev chat.Event) {
	if tu == nil {
		return
	}
	switch ev.Kind {
	case chat.KindTextDelta:
		if !tu.firstText {
			// Measured now, recorded by End: a histogram's record (its
			// attribute set sorted and hashed) would otherwise delay the
			// first token it measures.
			tu.firstText, tu.ttft = true, time.Since(tu.start)
		}
		if tu.t.content {
			tu.answer.WriteString(ev.Text)
		}
	case chat.KindStepStart:
		tu.modelCalls++
	case chat.KindToolCall:
		tu.tools++
	case chat.KindOrchestration:
		if s := ev.Orchestration; s != nil {
			if tu.snaps == 0 {
				tu.firstStep = s.ActiveStep
				if s.Transition {
					tu.firstStep = s.PreviousStep
				}
			}
			tu.snaps++
			tu.lastStep = s.ActiveStep
		}
	case chat.KindUsage:
		if ev.Final && ev.Usage != nil {
			tu.usage = *ev.Usage
		}
	case chat.KindError:
		if ev.Error != nil {
			tu.errCode = ev.Error.Code
		}
	case chat.KindGuardrail:
		if g := ev.Guardrail; g != nil {
			tu.t.recordGuardrail(tu.ctx, tu.span, tu.info.AgentID, g)
		}
	case chat.KindDone:
		tu.finish = ev.FinishReason
	}
}

const eventGuardrail = "agentdock.guardrail"

// recordGuardrail counts a guardrail's match and adds it to the turn's
// span as an event: which guardrail, where, what it did, what matched,
// never the text. The labels are bounded: guardrails, stages, actions and
// kinds come from templates and the runtime.
func (t *Telemetry) recordGuardrail(ctx context.Context, span trace.Span, agentID string, g *chat.Guardrail) {
	attrs := []attribute.KeyValue{
		semconv.GenAIAgentID(agentID), AttrGuardrail.String(g.Name), AttrGuardrailStage.String(g.On),
		AttrGuardrailAction.String(g.Action), AttrGuardrailKind.String(g.Kind),
	}
	t.inst.guardrails.Add(ctx, 1, metric.WithAttributes(attrs...))
	if span.IsRecording() {
		ev := attrs[1:]
		if g.ToolName != "" {
			ev = append(ev, semconv.GenAIToolName(g.ToolName), semconv.GenAIToolCallID(g.ToolCallID))
		}
		span.AddEvent(eventGuardrail, withAttrs(ev...))
	}
}

// Reject ends a turn that did not start (busy session, invalid message,
// store failure): the span records the error; no turn metrics are recorded.
func (tu *Turn) Reject(err error) {
	if tu == nil || tu.ended {
		return
	}
	tu.ended = true
	if tu.span.IsRecording() {
		tu.span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		tu.span.SetStatus(codes.Error, errorDescription(err))
	}
	tu.span.End()
}

// End closes the turn. A turn whose consumer stopped before Done counts as
// cancelled.
func (tu *Turn) End() {
	if tu == nil || tu.ended {
		return
	}
	tu.ended = true
	if tu.finish == "" {
		tu.finish = chat.FinishCancelled
	}
	attrs := tu.metricAttrs()
	if tu.firstText {
		tu.t.inst.turnTTFT.Record(tu.ctx, tu.ttft.Seconds(), metric.WithAttributes(attrs...))
	}
	tu.t.inst.turnDuration.Record(tu.ctx, time.Since(tu.start).Seconds(), metric.WithAttributes(append(attrs, AttrFinishReason.String(tu.finish))...))
	if !tu.span.IsRecording() {
		tu.span.End()
		return
	}
	tu.span.SetAttributes(usageAttrs(tu.usage)...)
	tu.span.SetAttributes(
		semconv.GenAIResponseFinishReasons(tu.finish),
		AttrFinishReason.String(tu.finish),
		AttrModelCalls.Int(tu.modelCalls),
		AttrToolCalls.Int(tu.tools),
	)
	if tu.snaps > 0 {
		tu.span.SetAttributes(AttrActiveStep.String(tu.lastStep), AttrTransition.Bool(tu.firstStep != tu.lastStep))
		if tu.firstStep != tu.lastStep {
			tu.span.SetAttributes(AttrPreviousStep.String(tu.firstStep))
		}
	}
	if tu.t.content {
		tu.span.SetAttributes(semconv.GenAIOutputMessagesKey.String(marshalOutput(tu.answer.String(), nil, tu.finish)))
	}
	if tu.finish == chat.FinishError {
		code := tu.errCode
		if code == "" {
			code = otherValue
		}
		tu.span.SetAttributes(semconv.ErrorTypeKey.String(code))
		tu.span.SetStatus(codes.Error, "the turn failed: "+code)
	}
	tu.span.End()
}

func (tu *Turn) metricAttrs() []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIAgentID(tu.info.AgentID),
		semconv.GenAIProviderNameKey.String(tu.info.Provider),
		semconv.GenAIRequestModel(tu.info.Model),
	}
}

// ChatInfo describes one model call for its chat span.
type ChatInfo struct {
	AgentID   string
	SessionID string
	Provider  string
	Model     string
	// Config is the key of the model's configuration in the template
	// ("llm.openai", "llm.cheap"), when it has one.
	Config string
	// Temperature and MaxTokens are the request's settings (nil/0: unset).
	Temperature *float64
	MaxTokens   int
	// Call numbers the model calls of a turn from 1.
	Call int
	// Snapshot is the orchestration at the call: the active step, the
	// sequence index and the offered tools.
	Snapshot chat.Snapshot
	// PreviousStep is the active step at the turn's previous model call
	// (for the first call: before the user message).
	PreviousStep string
	// System, Messages and Note (the call's guidance after the
	// conversation, sent as the user's side) are the prompt, recorded only
	// with content capture.
	System   string
	Messages []chat.Message
	Note     string
}

// Chat observes one model call. A nil *Chat does nothing.
type Chat struct {
	t     *Telemetry
	span  trace.Span
	ctx   context.Context
	info  ChatInfo
	start time.Time

	firstChunk      bool
	firstChunkAfter time.Duration // start to the first chunk
	usage           chat.Usage
	calls           []chat.ToolCall // with content capture; else only counted
	nCalls          int
	text            strings.Builder // only with content capture
	err             error
	ended           bool
	// answered is the model that answered, when a fallback did
	// (chat.KindFallback); fallbacks names the models that failed first.
	answered  string
	fallbacks []string
}

// StartChat opens the chat span of a model call; run the call under the
// returned context so that the provider's HTTP spans are its children.
func (t *Telemetry) StartChat(ctx context.Context, info ChatInfo) (context.Context, *Chat) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.start(ctx, "chat ", info.Model, trace.SpanKindClient)
	if span.IsRecording() {
		snap := info.Snapshot
		span.SetAttributes(
			semconv.GenAIOperationNameChat,
			semconv.GenAIProviderNameKey.String(info.Provider),
			semconv.GenAIRequestModel(info.Model),
			semconv.GenAIRequestStream(true),
			semconv.GenAIAgentID(info.AgentID),
			semconv.GenAIConversationID(info.SessionID),
			AttrModelCall.Int(info.Call),
			AttrActiveStep.String(snap.ActiveStep),
			AttrSequenceIndex.Int(snap.SequenceIndex),
			AttrOfferedTools.Int(len(snap.OfferedTools)),
			AttrOfferedToolNames.StringSlice(snap.OfferedTools),
			AttrTransition.Bool(snap.ActiveStep != info.PreviousStep),
		)
		if snap.ActiveStep != info.PreviousStep {
			span.SetAttributes(AttrPreviousStep.String(info.PreviousStep))
		}
		if info.Config != "" {
			span.SetAttributes(AttrModelConfig.String(info.Config))
		}
		if info.Temperature != nil {
			span.SetAttributes(semconv.GenAIRequestTemperature(*info.Temperature))
		}
		if info.MaxTokens > 0 {
			span.SetAttributes(semconv.GenAIRequestMaxTokens(info.MaxTokens))
		}
		if t.content {
			span.SetAttributes(
				semconv.GenAISystemInstructionsKey.String(marshalParts([]part{{Type: "text", Content: info.System}})),
				semconv.GenAIInputMessagesKey.String(marshalMessages(withNote(info.Messages, info.Note))),
			)
		}
	}
	return ctx, &Chat{t: t, span: span, ctx: ctx, info: info, start: time.Now()}
}

// Observe takes note of one item of the model's stream.
func (c *Chat) Observe(ev chat.Event, err error) {
	if c == nil {
		return
	}
	if err != nil {
		c.err = err
		return
	}
	switch ev.Kind {
	case chat.KindTextDelta, chat.KindToolCall:
		if !c.firstChunk {
			// Measured now, recorded by End, off the first chunk's way
			// (see Turn.Observe).
			c.firstChunk, c.firstChunkAfter = true, time.Since(c.start)
		}
		if ev.Kind == chat.KindToolCall {
			c.addCall(ev.ToolCall)
		} else if c.t.content {
			c.text.WriteString(ev.Text)
		}
	case chat.KindError:
		// An invalid tool call: it is answered, and counts as a call.
		c.addCall(ev.ToolCall)
	case chat.KindUsage:
		if ev.Usage != nil {
			c.usage = c.usage.Add(*ev.Usage)
		}
	case chat.KindFallback:
		if f := ev.Fallback; f != nil {
			c.answered = f.To.Model
			c.fallbacks = append(c.fallbacks, f.From.String())
			c.span.AddEvent("fallback", trace.WithAttributes(
				attribute.String("agentdock.model.from", f.From.String()),
				attribute.String("agentdock.model.to", f.To.String()),
				semconv.ErrorTypeKey.String(f.Error.Code)))
		}
	}
}

func (c *Chat) addCall(call *chat.ToolCall) {
	if call == nil {
		return
	}
	c.nCalls++
	if c.t.content {
		c.calls = append(c.calls, *call)
	}
}

// End closes the model call's span and records its metrics.
func (c *Chat) End() {
	if c == nil || c.ended {
		return
	}
	c.ended = true
	err := c.err
	if err == nil {
		err = c.ctx.Err()
	}
	finish := "stop"
	switch {
	case err != nil:
		finish = "error"
	case c.nCalls > 0:
		finish = "tool_calls"
	}
	op, prov := genaiconv.OperationNameAttr("chat"), genaiconv.ProviderNameAttr(c.info.Provider)
	model := c.t.inst.opDuration.AttrRequestModel(c.info.Model)
	durAttrs := []attribute.KeyValue{model}
	if err != nil {
		durAttrs = append(durAttrs, semconv.ErrorTypeKey.String(errorType(err)))
	}
	c.t.inst.opDuration.Record(c.ctx, time.Since(c.start).Seconds(), op, prov, durAttrs...)
	if c.firstChunk {
		c.t.inst.firstChunk.Record(c.ctx, c.firstChunkAfter.Seconds(), op, prov, c.t.inst.firstChunk.AttrRequestModel(c.info.Model))
	}
	if c.usage.Prompt > 0 || c.usage.Completion > 0 {
		c.t.inst.tokenUsage.Record(c.ctx, c.usage.Prompt, op, prov, genaiconv.TokenTypeInput, model)
		c.t.inst.tokenUsage.Record(c.ctx, c.usage.Completion, op, prov, genaiconv.TokenTypeOutput, model)
	}
	if !c.span.IsRecording() {
		c.span.End()
		return
	}
	c.span.SetAttributes(usageAttrs(c.usage)...)
	c.span.SetAttributes(semconv.GenAIResponseFinishReasons(finish))
	if c.answered != "" {
		// The model that answered, which the request did not name.
		c.span.SetAttributes(semconv.GenAIResponseModel(c.answered), AttrFallbackFrom.StringSlice(c.fallbacks))
	}
	if c.t.content {
		c.span.SetAttributes(semconv.GenAIOutputMessagesKey.String(marshalOutput(c.text.String(), c.calls, finish)))
	}
	if err != nil {
		c.span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		c.span.SetStatus(codes.Error, errorDescription(err))
	}
	c.span.End()
}

// ToolInfo describes one tool call for its execute_tool span.
type ToolInfo struct {
	AgentID   string
	SessionID string
	// Call is the call; its arguments are recorded only with content
	// capture.
	Call chat.ToolCall
	// ActiveStep and SequenceIndex are the orchestration when the call is
	// handled.
	ActiveStep    string
	SequenceIndex int
	// UnknownTool says the name is not one of the runtime's tools (a
	// model's invention); it is then kept out of metric labels.
	UnknownTool bool
}

// ToolEnd is how a tool call ended.
type ToolEnd struct {
	Result chat.ToolResult
	// Refused: the orchestration did not offer the tool.
	Refused bool
	// Transition: recording the tool changed the active step, to NextStep.
	// The span gets the transition's event; the transitions metric counts
	// it when it is stored (Telemetry.CountTransition).
	Transition bool
	NextStep   string
	// Err is a failure around the tool (recording it in the store) that
	// ends the turn.
	Err error
}

// Tool observes one tool call. A nil *Tool does nothing.
type Tool struct {
	t     *Telemetry
	span  trace.Span
	ctx   context.Context
	info  ToolInfo
	start time.Time
	ended bool
}

// StartTool opens the execute_tool span of a tool call.
func (t *Telemetry) StartTool(ctx context.Context, info ToolInfo) (context.Context, *Tool) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.start(ctx, "execute_tool ", info.Call.Name, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.GenAIOperationNameExecuteTool,
			semconv.GenAIToolName(info.Call.Name),
			semconv.GenAIToolCallID(info.Call.ID),
			semconv.GenAIToolType("function"),
			semconv.GenAIAgentID(info.AgentID),
			semconv.GenAIConversationID(info.SessionID),
			AttrActiveStep.String(info.ActiveStep),
			AttrSequenceIndex.Int(info.SequenceIndex),
		)
		if t.content {
			span.SetAttributes(semconv.GenAIToolCallArgumentsKey.String(string(info.Call.Arguments)))
		}
	}
	return ctx, &Tool{t: t, span: span, ctx: ctx, info: info, start: time.Now()}
}

// End closes the tool call's span and records its metrics.
func (tl *Tool) End(end ToolEnd) {
	if tl == nil || tl.ended {
		return
	}
	tl.ended = true
	outcome := OutcomeOK
	switch {
	case end.Refused:
		outcome = OutcomeRefused
	case end.Result.NotRun:
		outcome = OutcomeInvalid
	case end.Result.IsError || end.Err != nil:
		outcome = OutcomeError
	}
	name := tl.info.Call.Name
	if tl.info.UnknownTool {
		name = otherValue
	}
	tool := semconv.GenAIToolName(name)
	in := &tl.t.inst
	in.toolDuration.Record(tl.ctx, time.Since(tl.start).Seconds(), metric.WithAttributes(tool, AttrToolOutcome.String(outcome)))
	switch outcome {
	case OutcomeError, OutcomeInvalid:
		in.toolErrors.Add(tl.ctx, 1, metric.WithAttributes(tool, AttrToolOutcome.String(outcome)))
	case OutcomeRefused:
		in.toolRefused.Add(tl.ctx, 1, metric.WithAttributes(semconv.GenAIAgentID(tl.info.AgentID), tool, AttrActiveStep.String(stepLabel(tl.info.ActiveStep))))
	}
	if !tl.span.IsRecording() {
		tl.span.End()
		return
	}
	tl.span.SetAttributes(
		AttrToolOutcome.String(outcome),
		AttrRefused.Bool(end.Refused),
		AttrTransition.Bool(end.Transition),
	)
	if end.Transition {
		tl.span.SetAttributes(AttrPreviousStep.String(tl.info.ActiveStep), AttrNextStep.String(end.NextStep))
		tl.span.AddEvent(eventTransition, withAttrs(transitionAttrs(tl.info.AgentID, tl.info.ActiveStep, end.NextStep, CauseTool)[1:]...))
	}
	if tl.t.content {
		tl.span.SetAttributes(semconv.GenAIToolCallResultKey.String(end.Result.Content))
	}
	switch {
	case end.Err != nil:
		tl.span.SetAttributes(semconv.ErrorTypeKey.String(errorType(end.Err)))
		tl.span.SetStatus(codes.Error, errorDescription(end.Err))
	case outcome != OutcomeOK:
		typ := end.Result.Type
		if typ == "" {
			typ = outcome
		}
		// The result's content may quote the arguments: only its type
		// goes into the status.
		tl.span.SetAttributes(semconv.ErrorTypeKey.String(typ))
		tl.span.SetStatus(codes.Error, "the tool call ended with an error result ("+typ+")")
	}
	tl.span.End()
}

// errorType classifies err with a bounded value for error.type.
func errorType(err error) string {
	var ce *chat.Error
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return otherValue
}

// maxDescription bounds an error's text in a span status.
const maxDescription = 512

// errorDescription is the error's text for a span status. Errors of this
// runtime never carry chat content (chat.Error messages are written to be
// shown to clients); the text is bounded all the same.
func errorDescription(err error) string {
	s := err.Error()
	if len(s) <= maxDescription {
		return s
	}
	s = s[:maxDescription]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// The GenAI conventions' message format for content capture.
type (
	message struct {
		Role         string `json:"role"`
		Parts        []part `json:"parts"`
		FinishReason string `json:"finish_reason,omitempty"`
	}
	part struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
	}
)

func toMessage(m chat.Message) message {
	out := message{Role: string(m.Role)}
	if m.Role == chat.RoleTool {
		out.Parts = append(out.Parts, part{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
		return out
	}
	if m.Content != "" {
		out.Parts = append(out.Parts, part{Type: "text", Content: m.Content})
	}
	for _, c := range m.ToolCalls {
		out.Parts = append(out.Parts, toolCallPart(c))
	}
	return out
}

func toolCallPart(c chat.ToolCall) part {
	p := part{Type: "tool_call", ID: c.ID, Name: c.Name}
	if json.Valid(c.Arguments) {
		p.Arguments = c.Arguments
	}
	return p
}

func marshalMessages(msgs []chat.Message) string {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, toMessage(m))
	}
	return marshal(out)
}

func marshalOutput(text string, calls []chat.ToolCall, finish string) string {
	m := toMessage(chat.Message{Role: chat.RoleAssistant, Content: text, ToolCalls: calls})
	m.FinishReason = finish
	return marshal([]message{m})
}

func marshalParts(p []part) string { return marshal(p) }

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only invalid UTF-8 or raw JSON could fail, and both are
		// checked before; an attribute is not worth a failed turn.
		return ""
	}
	return string(b)
}

// usageAttrs are the GenAI usage attributes of u: the input tokens count
// the cached input too (the conventions' reading), and the cache counts are
// set only when the provider reported cached input.
func usageAttrs(u chat.Usage) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.GenAIUsageInputTokens(int(u.Prompt)),
		semconv.GenAIUsageOutputTokens(int(u.Completion)),
	}
	if u.CacheRead > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(u.CacheRead)))
	}
	if u.CacheWrite > 0 {
		attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWrite)))
	}
	return attrs
}

// withNote is msgs with the call's note after them, as the model reads it.
func withNote(msgs []chat.Message, note string) []chat.Message {
	if note == "" {
		return msgs
	}
	return append(slices.Clip(msgs), chat.Message{Role: chat.RoleUser, Content: note})
}
