package telemetry

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// Attribute keys of the runtime's own attributes, beside the GenAI ones.
// Every value is bounded: step and tool names come from templates and the
// tool registry, never from users.
const (
	// AttrActiveStep is the orchestration step active at the span's start
	// (chat, execute_tool) or end (invoke_agent).
	AttrActiveStep = attribute.Key("agentdock.orchestration.active_step")
	// AttrSequenceIndex is the position in the active step's sequence.
	AttrSequenceIndex = attribute.Key("agentdock.orchestration.sequence_index")
	// AttrOfferedTools counts the tools offered to the model; the names are
	// in AttrOfferedToolNames.
	AttrOfferedTools     = attribute.Key("agentdock.orchestration.offered_tools")
	AttrOfferedToolNames = attribute.Key("agentdock.orchestration.offered_tool_names")
	// AttrTransition tells whether the active step changed: since the
	// previous model call (chat), because of the tool (execute_tool), or
	// during the turn, user message included (invoke_agent). AttrPreviousStep
	// is the step before, AttrNextStep the step after a tool's transition.
	AttrTransition   = attribute.Key("agentdock.orchestration.transition")
	AttrPreviousStep = attribute.Key("agentdock.orchestration.previous_step")
	AttrNextStep     = attribute.Key("agentdock.orchestration.next_step")
	// AttrFromStep, AttrToStep and AttrCause label the transitions metric;
	// the cause is CauseUserMessage or CauseTool.
	AttrFromStep = attribute.Key("agentdock.orchestration.from_step")
	AttrToStep   = attribute.Key("agentdock.orchestration.to_step")
	AttrCause    = attribute.Key("agentdock.orchestration.cause")
	// AttrRefused marks a tool call the orchestration refused (not offered).
	AttrRefused = attribute.Key("agentdock.tool.refused")
	// AttrToolOutcome is one of the Outcome* values.
	AttrToolOutcome = attribute.Key("agentdock.tool.outcome")
	// AttrModelConfig is the key of a model call's configuration in the
	// template ("llm.openai", "llm.cheap").
	AttrModelConfig = attribute.Key("agentdock.model.config")
	// AttrFallbackFrom lists the models that failed before the one that
	// answered a model call (chat.KindFallback).
	AttrFallbackFrom = attribute.Key("agentdock.model.fallback_from")
	// AttrModelCall numbers a turn's model calls from 1.
	AttrModelCall = attribute.Key("agentdock.turn.model_call")
	// AttrModelCalls and AttrToolCalls count a turn's model and tool calls.
	AttrModelCalls = attribute.Key("agentdock.turn.model_calls")
	AttrToolCalls  = attribute.Key("agentdock.turn.tool_calls")
	// AttrFinishReason is the turn's finish reason (chat.Finish*).
	AttrFinishReason = attribute.Key("agentdock.turn.finish_reason")
	// AttrStreamKind labels the active-streams metric (e.g. "chat",
	// "resume", "openai").
	AttrStreamKind = attribute.Key("agentdock.stream.kind")
	// AttrStoreOperation labels the store-errors metric.
	AttrStoreOperation = attribute.Key("agentdock.store.operation")
	// AttrGuardrail, AttrGuardrailStage, AttrGuardrailAction and
	// AttrGuardrailKind label a guardrail's match (a span event and the
	// guardrail-hits metric): its name in the template, the stage
	// (input, output, tool_arguments, tool_result), what it did and what
	// matched; never the text.
	AttrGuardrail       = attribute.Key("agentdock.guardrail.name")
	AttrGuardrailStage  = attribute.Key("agentdock.guardrail.stage")
	AttrGuardrailAction = attribute.Key("agentdock.guardrail.action")
	AttrGuardrailKind   = attribute.Key("agentdock.guardrail.kind")
)

// Tool outcomes.
const (
	OutcomeOK      = "ok"      // the tool ran and succeeded
	OutcomeError   = "error"   // the tool ran and returned an error result
	OutcomeInvalid = "invalid" // the call never reached the tool (bad arguments, unknown tool)
	OutcomeRefused = "refused" // the orchestration did not offer the tool
)

// Transition causes.
const (
	CauseUserMessage = "user_message"
	CauseTool        = "tool"
)

// otherValue stands for a value outside the bounded set, as in the OTel
// semantic conventions.
const otherValue = "_OTHER"

// Histogram buckets: the GenAI conventions' advice for token counts and
// operation durations.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	toolBuckets     = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

type instruments struct {
	tokenUsage   genaiconv.ClientTokenUsage
	opDuration   genaiconv.ClientOperationDuration
	firstChunk   genaiconv.ClientOperationTimeToFirstChunk
	turnDuration metric.Float64Histogram
	turnTTFT     metric.Float64Histogram
	toolDuration metric.Float64Histogram
	toolErrors   metric.Int64Counter
	toolRefused  metric.Int64Counter
	transitions  metric.Int64Counter
	streams      metric.Int64UpDownCounter
	storeErrors  metric.Int64Counter
	guardrails   metric.Int64Counter
	// streamKinds holds the attribute option of each stream kind
	// (TrackStream): the kinds are a few constants, so each set is built
	// (sorted and hashed) once, not on every stream.
	streamKinds *sync.Map // string -> metric.AddOption
}

func newInstruments(m metric.Meter) (instruments, error) {
	var (
		in   instruments
		errs []error
	)
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	in.streamKinds = new(sync.Map)
	var err error
	in.tokenUsage, err = genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	add(err)
	in.opDuration, err = genaiconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	in.firstChunk, err = genaiconv.NewClientOperationTimeToFirstChunk(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	in.turnDuration, err = m.Float64Histogram("agentdock.turn.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a chat turn, from the user message to the last event."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	in.turnTTFT, err = m.Float64Histogram("agentdock.turn.time_to_first_token", metric.WithUnit("s"),
		metric.WithDescription("Time from the user message to the first text of the answer."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	in.toolDuration, err = m.Float64Histogram("agentdock.tool.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a tool call, orchestration bookkeeping included."),
		metric.WithExplicitBucketBoundaries(toolBuckets...))
	add(err)
	in.toolErrors, err = m.Int64Counter("agentdock.tool.errors", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls that returned an error result or never reached the tool."))
	add(err)
	in.toolRefused, err = m.Int64Counter("agentdock.tool.refused", metric.WithUnit("{call}"),
		metric.WithDescription("Tool calls refused because the active step did not offer the tool."))
	add(err)
	in.transitions, err = m.Int64Counter("agentdock.orchestration.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Changes of the active orchestration step."))
	add(err)
	in.streams, err = m.Int64UpDownCounter("agentdock.streams.active", metric.WithUnit("{stream}"),
		metric.WithDescription("Open event streams to clients."))
	add(err)
	in.storeErrors, err = m.Int64Counter("agentdock.store.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed session store operations."))
	add(err)
	in.guardrails, err = m.Int64Counter("agentdock.guardrail.hits", metric.WithUnit("{hit}"),
		metric.WithDescription("Matches of the templates' guardrails, by guardrail, stage, action and kind."))
	add(err)
	return in, errors.Join(errs...)
}

// RecordTransition counts a change of the active step of an agent and adds
// an event to the current span. cause is CauseUserMessage or CauseTool.
func (t *Telemetry) RecordTransition(ctx context.Context, agentID, from, to, cause string) {
	if t == nil {
		return
	}
	attrs := transitionAttrs(agentID, from, to, cause)
	t.inst.transitions.Add(ctx, 1, metric.WithAttributes(attrs...))
	if span := spanFromContext(ctx); span.IsRecording() {
		span.AddEvent(eventTransition, withAttrs(attrs[1:]...))
	}
}

// CountTransition counts a change of the active step made by a tool call,
// once it is stored; the event is on the call's span (Tool.End with
// ToolEnd.Transition), which may have ended by then.
func (t *Telemetry) CountTransition(ctx context.Context, agentID, from, to string) {
	if t == nil {
		return
	}
	t.inst.transitions.Add(ctx, 1, metric.WithAttributes(transitionAttrs(agentID, from, to, CauseTool)...))
}

const eventTransition = "agentdock.orchestration.transition"

func transitionAttrs(agentID, from, to, cause string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIAgentID(agentID), AttrFromStep.String(stepLabel(from)),
		AttrToStep.String(stepLabel(to)), AttrCause.String(cause),
	}
}

// TrackStream counts an open event stream in agentdock.streams.active until
// the returned function is called (once; later calls do nothing). kind is a
// fixed label such as "chat", "resume" or "openai".
func (t *Telemetry) TrackStream(ctx context.Context, kind string) (done func()) {
	if t == nil {
		return func() {}
	}
	opt := t.inst.streamKind(kind)
	t.inst.streams.Add(ctx, 1, opt)
	var once sync.Once
	return func() {
		once.Do(func() {
			// The stream's context is often cancelled by now; the
			// count must still go down.
			t.inst.streams.Add(context.WithoutCancel(ctx), -1, opt)
		})
	}
}

func (in *instruments) streamKind(kind string) metric.AddOption {
	if opt, ok := in.streamKinds.Load(kind); ok {
		return opt.(metric.AddOption)
	}
	opt, _ := in.streamKinds.LoadOrStore(kind, metric.WithAttributeSet(attribute.NewSet(AttrStreamKind.String(kind))))
	return opt.(metric.AddOption)
}

// RecordStoreError counts a failed store operation. op names the operation
// ("get", "update", "append_messages", "lock", ...) and kind classifies the
// failure with a fixed word ("unavailable", "fenced", "timeout", ...);
// neither may carry IDs or content.
func (t *Telemetry) RecordStoreError(ctx context.Context, op, kind string) {
	if t == nil {
		return
	}
	t.inst.storeErrors.Add(ctx, 1, metric.WithAttributes(AttrStoreOperation.String(op), semconv.ErrorTypeKey.String(kind)))
}

// stepLabel names "no active step" in metric labels, where an empty value
// would read as a missing label.
func stepLabel(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
