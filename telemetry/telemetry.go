// Package telemetry gives the agent runtime its traces, metrics and
// privacy-safe logs.
//
// A Telemetry (New, from the tracer and meter providers of one's choice, or
// otelsetup.Setup, from the standard OTEL_* environment) is what the agent
// (agent.Options.Telemetry) and the orchestration service
// (llmorch.ServiceConfig.Telemetry) use to record one span tree per turn
// following the OpenTelemetry GenAI semantic conventions:
//
//	invoke_agent {agent}          (internal; one per turn)
//	├── chat {model}              (client; one per model call)
//	│   └── HTTP POST             (otelhttp, when the provider's client is wrapped)
//	├── execute_tool {tool}       (internal; one per tool call, refused ones included)
//	└── chat {model} ...
//
// Tool spans are children of invoke_agent, not of the chat span that asked
// for them: the chat span ends when the model's stream ends, and the agent,
// not the model client, runs the tools afterwards. Store commands (redisotel)
// are children of whichever span is current.
//
// Tracing is off unless a tracer provider is given: the tracer is then a
// no-op and the instrumentation builds no attributes. The exporters (OTLP,
// console, Prometheus) live in package telemetry/otelsetup, so that a
// program that only embeds an agent links none of them.
//
// Chat content (messages, tool arguments, tool results) is never recorded
// unless content capture is explicitly on (Config.CaptureContent, or
// LOG_CONTENT=true). A nil *Telemetry is valid and records nothing.
package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the runtime's own spans and
// metrics.
const ScopeName = "github.com/agentdock-go/agentdock/telemetry"

// DefaultServiceName names the service when none is given.
const DefaultServiceName = "agentdock"

// Options configures New.
type Options struct {
	// TracerProvider records the spans; nil turns tracing off.
	TracerProvider trace.TracerProvider
	// MeterProvider records the metrics; nil records none.
	MeterProvider metric.MeterProvider
	// Propagator carries trace context across HTTP (default W3C trace
	// context and baggage).
	Propagator propagation.TextMapPropagator
	// ServiceName names the service in the HTTP server spans (default
	// DefaultServiceName).
	ServiceName string
	// CaptureContent records chat content in spans: the messages sent to
	// and received from the model, tool arguments and tool results. Off by
	// default because chat content is private.
	CaptureContent bool
	// MetricsHandler serves the metrics (at /metrics); nil serves 404.
	MetricsHandler http.Handler
	// Shutdown flushes and stops what exports the spans and metrics; it is
	// called once by Telemetry.Shutdown.
	Shutdown func(context.Context) error
}

// Telemetry holds the tracer and meter providers and the runtime's
// instruments. Its methods are safe for concurrent use, and all of them
// accept a nil receiver, which records nothing.
type Telemetry struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	service string
	tracing bool
	content bool
	inst    instruments
	metrics http.Handler

	mu       sync.Mutex // guards shutdown
	shutdown func(context.Context) error
}

// New returns a Telemetry recording to the given providers.
func New(o Options) (*Telemetry, error) {
	t := &Telemetry{
		tp: o.TracerProvider, mp: o.MeterProvider, prop: o.Propagator, service: o.ServiceName,
		content: o.CaptureContent, metrics: o.MetricsHandler, shutdown: o.Shutdown,
	}
	if t.prop == nil {
		t.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	if t.service == "" {
		t.service = DefaultServiceName
	}
	if t.tp == nil {
		t.tp = noop.NewTracerProvider()
	} else {
		t.tracing = true
	}
	t.tracer = t.tp.Tracer(ScopeName)
	if t.mp == nil {
		t.mp = metricnoop.NewMeterProvider()
	}
	inst, err := newInstruments(t.mp.Meter(ScopeName))
	if err != nil {
		return nil, fmt.Errorf("telemetry: instruments: %w", err)
	}
	t.inst = inst
	return t, nil
}

// Shutdown flushes and stops the exporters. It is safe to call more than
// once and on a nil Telemetry.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shutdown == nil {
		return nil
	}
	err := t.shutdown(ctx)
	t.shutdown = nil
	if err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// MetricsHandler serves the metrics (mount it at /metrics). With a nil
// Telemetry, or none given, it answers 404.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t == nil || t.metrics == nil {
		return http.NotFoundHandler()
	}
	return t.metrics
}

// ServiceName names the service.
func (t *Telemetry) ServiceName() string {
	if t == nil {
		return DefaultServiceName
	}
	return t.service
}

// Tracing reports whether spans are recorded (an exporter or span
// processor is configured).
func (t *Telemetry) Tracing() bool { return t != nil && t.tracing }

// CaptureContent reports whether chat content may be recorded; pass it to
// NewLogger so logs and traces follow the same switch.
func (t *Telemetry) CaptureContent() bool { return t != nil && t.content }

// TracerProvider returns the tracer provider (a no-op one when tracing is
// off), for instrumentation this package does not wrap.
func (t *Telemetry) TracerProvider() trace.TracerProvider {
	if t == nil {
		return noop.NewTracerProvider()
	}
	return t.tp
}

// MeterProvider returns the meter provider.
func (t *Telemetry) MeterProvider() metric.MeterProvider {
	if t == nil || t.mp == nil {
		return metricnoop.NewMeterProvider()
	}
	return t.mp
}

// Propagator returns the propagator (W3C trace context and baggage) used for
// incoming and outgoing HTTP requests.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	if t == nil {
		return propagation.NewCompositeTextMapPropagator()
	}
	return t.prop
}
