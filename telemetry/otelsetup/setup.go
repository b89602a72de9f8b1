// Package otelsetup builds the runtime's telemetry from the standard OTEL_*
// environment: the OTLP (HTTP or gRPC) and console exporters of traces and
// metrics, and the Prometheus registry served at /metrics. It is a package
// of its own so that a program that only embeds an agent links none of the
// exporters; cmd/server wires it.
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agentdock-go/agentdock/telemetry"
	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName names the service when neither Config.ServiceName nor
// OTEL_SERVICE_NAME does.
const DefaultServiceName = telemetry.DefaultServiceName

// Config configures Setup. The OTEL_* environment chooses the exporters;
// the fields add what the environment cannot express.
type Config struct {
	// ServiceName is used when OTEL_SERVICE_NAME is not set (default
	// DefaultServiceName).
	ServiceName    string
	ServiceVersion string
	// CaptureContent records chat content in spans: the messages sent to
	// and received from the model, tool arguments and tool results. Off by
	// default because chat content is private; LOG_CONTENT=true or
	// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true turn it on too.
	CaptureContent bool
	// SpanProcessors are added to the tracer provider beside the exporters
	// the environment names. Any processor turns tracing on; tests pass a
	// tracetest.SpanRecorder.
	SpanProcessors []sdktrace.SpanProcessor
	// MetricReaders are added to the meter provider beside Prometheus and
	// the environment's exporters; tests pass sdkmetric.NewManualReader().
	MetricReaders []sdkmetric.Reader
	// Console receives the output of the console exporters (default
	// os.Stdout).
	Console io.Writer
}

// The values OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER accept.
const (
	exporterOTLP       = "otlp"
	exporterConsole    = "console"
	exporterNone       = "none"
	exporterPrometheus = "prometheus" // metrics only; always on anyway
)

// The values OTEL_EXPORTER_OTLP_PROTOCOL accepts.
const (
	protocolHTTP = "http/protobuf"
	protocolGRPC = "grpc"
)

// envConfig is what Setup reads from the environment.
type envConfig struct {
	traces, metrics []string
	traceProtocol   string
	metricProtocol  string
	content         bool
}

// readEnv reads and checks the environment, reporting every bad variable at
// once.
func readEnv() (envConfig, error) {
	var (
		ec    envConfig
		probs []string
	)
	disabled, err := envBool("OTEL_SDK_DISABLED")
	if err != nil {
		probs = append(probs, err.Error())
	}
	ec.traces, err = exporters("OTEL_TRACES_EXPORTER", exporterOTLP, exporterConsole, exporterNone)
	if err != nil {
		probs = append(probs, err.Error())
	}
	ec.metrics, err = exporters("OTEL_METRICS_EXPORTER", exporterOTLP, exporterConsole, exporterPrometheus, exporterNone)
	if err != nil {
		probs = append(probs, err.Error())
	}
	if disabled {
		ec.traces, ec.metrics = nil, nil
	}
	if slices.Contains(ec.traces, exporterOTLP) {
		if ec.traceProtocol, err = protocol("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); err != nil {
			probs = append(probs, err.Error())
		}
	}
	if slices.Contains(ec.metrics, exporterOTLP) {
		if ec.metricProtocol, err = protocol("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"); err != nil {
			probs = append(probs, err.Error())
		}
	}
	for _, name := range []string{"LOG_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"} {
		on, err := envBool(name)
		if err != nil {
			probs = append(probs, err.Error())
		}
		ec.content = ec.content || on
	}
	if len(probs) > 0 {
		return ec, errors.New(strings.Join(probs, "; "))
	}
	return ec, nil
}

// exporters parses a comma-separated exporter list; "none" and an unset
// variable both mean no exporter.
func exporters(name string, allowed ...string) ([]string, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return nil, nil
	}
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		p := strings.ToLower(strings.TrimSpace(part))
		if !slices.Contains(allowed, p) {
			return nil, fmt.Errorf("%s=%q: %q is not one of %s", name, v, p, strings.Join(allowed, ", "))
		}
		if p != exporterNone && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// protocol reads the signal's OTLP protocol, falling back to
// OTEL_EXPORTER_OTLP_PROTOCOL and then to http/protobuf (the spec's
// default).
func protocol(signalVar string) (string, error) {
	name := signalVar
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		v = strings.TrimSpace(os.Getenv(name))
	}
	switch v {
	case "":
		return protocolHTTP, nil
	case protocolHTTP, protocolGRPC:
		return v, nil
	}
	return "", fmt.Errorf("%s=%q: want %s or %s", name, v, protocolHTTP, protocolGRPC)
}

func envBool(name string) (bool, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// Setup builds the providers the environment asks for:
//
//   - OTEL_TRACES_EXPORTER: otlp, console, none (default none: tracing off)
//   - OTEL_METRICS_EXPORTER: otlp, console, prometheus, none (default none;
//     Prometheus is always served by MetricsHandler)
//   - OTEL_EXPORTER_OTLP_PROTOCOL (and the _TRACES_/_METRICS_ variants):
//     http/protobuf (default) or grpc
//   - OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, ... as read by the
//     OTLP exporters themselves
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
//   - OTEL_TRACES_SAMPLER(_ARG), OTEL_METRIC_EXPORT_INTERVAL, as read by the SDK
//   - OTEL_SDK_DISABLED=true: no exporters (Prometheus stays)
//   - LOG_CONTENT=true: record chat content (see Config.CaptureContent)
//
// Nothing connects during Setup; exporters connect when they first export.
// Call Shutdown to flush.
func Setup(ctx context.Context, cfg Config) (*telemetry.Telemetry, error) {
	ec, err := readEnv()
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = telemetry.DefaultServiceName
	}
	if cfg.Console == nil {
		cfg.Console = os.Stdout
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(cfg.ServiceName))}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.ServiceVersion)))
	}
	// Detectors later in the list win, so OTEL_SERVICE_NAME overrides
	// cfg.ServiceName.
	res, err := resource.New(ctx, append(attrs, resource.WithTelemetrySDK(), resource.WithFromEnv())...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource from OTEL_RESOURCE_ATTRIBUTES/OTEL_SERVICE_NAME: %w", err)
	}
	service := cfg.ServiceName
	if v, ok := res.Set().Value(semconv.ServiceNameKey); ok {
		service = v.AsString()
	}
	var b built
	shutdown := func(ctx context.Context) error {
		var errs []error
		for _, f := range b.shutdown {
			if err := f(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	if err := b.tracing(ctx, cfg, ec, res); err != nil {
		_ = shutdown(ctx)
		return nil, err
	}
	if err := b.metering(ctx, cfg, ec, res); err != nil {
		_ = shutdown(ctx)
		return nil, err
	}
	t, err := telemetry.New(telemetry.Options{
		TracerProvider: b.tp, MeterProvider: b.mp, ServiceName: service,
		CaptureContent: cfg.CaptureContent || ec.content, MetricsHandler: b.metrics, Shutdown: shutdown,
	})
	if err != nil {
		_ = shutdown(ctx)
		return nil, err
	}
	return t, nil
}

// built is what Setup makes: the providers, the Prometheus handler and
// what stops them.
type built struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	metrics  http.Handler
	shutdown []func(context.Context) error
}

func (t *built) tracing(ctx context.Context, cfg Config, ec envConfig, res *resource.Resource) error {
	if len(ec.traces) == 0 && len(cfg.SpanProcessors) == 0 {
		return nil // no tracer provider: tracing off
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, name := range ec.traces {
		switch name {
		case exporterOTLP:
			var (
				exp sdktrace.SpanExporter
				err error
			)
			if ec.traceProtocol == protocolGRPC {
				exp, err = otlptracegrpc.New(ctx)
			} else {
				exp, err = otlptracehttp.New(ctx)
			}
			if err != nil {
				return fmt.Errorf("telemetry: OTLP trace exporter (%s): %w", ec.traceProtocol, err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		case exporterConsole:
			exp, err := stdouttrace.New(stdouttrace.WithWriter(cfg.Console))
			if err != nil {
				return fmt.Errorf("telemetry: console trace exporter: %w", err)
			}
			// Synchronous, so that a span shows as soon as it ends:
			// the console exporter is for watching a server locally.
			opts = append(opts, sdktrace.WithSyncer(exp))
		}
	}
	for _, p := range cfg.SpanProcessors {
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t.shutdown = append(t.shutdown, tp.Shutdown)
	t.tp = tp
	return nil
}

func (t *built) metering(ctx context.Context, cfg Config, ec envConfig, res *resource.Resource) error {
	// A registry of our own, not prometheus.DefaultRegisterer, so that
	// several Telemetry values (tests) do not collide.
	registry := promclient.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prom, err := prometheus.New(prometheus.WithRegisterer(registry))
	if err != nil {
		return fmt.Errorf("telemetry: Prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom)}
	for _, name := range ec.metrics {
		switch name {
		case exporterOTLP:
			var (
				exp sdkmetric.Exporter
				err error
			)
			if ec.metricProtocol == protocolGRPC {
				exp, err = otlpmetricgrpc.New(ctx)
			} else {
				exp, err = otlpmetrichttp.New(ctx)
			}
			if err != nil {
				return fmt.Errorf("telemetry: OTLP metric exporter (%s): %w", ec.metricProtocol, err)
			}
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		case exporterConsole:
			exp, err := stdoutmetric.New(stdoutmetric.WithWriter(cfg.Console))
			if err != nil {
				return fmt.Errorf("telemetry: console metric exporter: %w", err)
			}
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		}
	}
	for _, r := range cfg.MetricReaders {
		opts = append(opts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	t.shutdown = append(t.shutdown, mp.Shutdown)
	t.mp = mp
	t.metrics = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	return nil
}
