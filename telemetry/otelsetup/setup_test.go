package otelsetup_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/telemetry/internal/otelenv"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
	"go.opentelemetry.io/otel/trace"
)

// TestSetupWithoutEnvIsNoop: with no OTEL_* variables tracing is off (the
// tracer hands out non-recording, invalid spans), content capture is off,
// and Prometheus metrics are still served; a turn runs through it.
func TestSetupWithoutEnvIsNoop(t *testing.T) {
	otelenv.Clean(t)
	tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Tracing() || tel.CaptureContent() {
		t.Fatalf("Tracing() = %v, CaptureContent() = %v; want both off", tel.Tracing(), tel.CaptureContent())
	}
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("the default tracer records spans")
	}
	ctx, turn := tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "a"})
	if turn == nil {
		t.Fatal("StartTurn returned no Turn with metrics on")
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		t.Fatal("StartTurn made a valid span with tracing off")
	}
	turn.End()

	_, turn = tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "a", Provider: "offline", Model: "m"})
	turn.Observe(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop})
	turn.End()
	w := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `agentdock_turn_duration_seconds_count{`) {
		t.Fatalf("/metrics after a turn: %d\n%.1500s", w.Code, body)
	}
	if tel.HTTPClient(http.DefaultClient) != http.DefaultClient {
		t.Error("HTTPClient wrapped the client with tracing off")
	}
}

// TestSetupEnv: the OTEL_* variables choose the exporters; bad values are
// reported with the variable's name.
func TestSetupEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		tracing bool
		content bool
		err     string
	}{
		{name: "none", env: []string{"OTEL_TRACES_EXPORTER", "none", "OTEL_METRICS_EXPORTER", "none"}},
		{name: "console", env: []string{"OTEL_TRACES_EXPORTER", "console"}, tracing: true},
		{name: "otlp http", env: []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_METRICS_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"}, tracing: true},
		{name: "otlp grpc", env: []string{"OTEL_TRACES_EXPORTER", "otlp,console", "OTEL_METRICS_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"}, tracing: true},
		{name: "sdk disabled", env: []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_SDK_DISABLED", "true"}},
		{name: "content", env: []string{"LOG_CONTENT", "true"}, content: true},
		{name: "genai content", env: []string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"}, content: true},
		{name: "unknown exporter", env: []string{"OTEL_TRACES_EXPORTER", "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "json protocol", env: []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"}, err: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json"`},
		{name: "bad bool", env: []string{"LOG_CONTENT", "yes please"}, err: `LOG_CONTENT="yes please"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			otelenv.Clean(t, tc.env...)
			var console bytes.Buffer
			tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{Console: &console})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Setup error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tel.Tracing() != tc.tracing || tel.CaptureContent() != tc.content {
				t.Errorf("Tracing() = %v, CaptureContent() = %v; want %v, %v", tel.Tracing(), tel.CaptureContent(), tc.tracing, tc.content)
			}
			// Exporters aimed at a closed port must not hold Shutdown
			// past its context.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_ = tel.Shutdown(ctx)
		})
	}
	t.Run("bad bool and metrics exporter together", func(t *testing.T) {
		otelenv.Clean(t, "LOG_CONTENT", "maybe", "OTEL_METRICS_EXPORTER", "statsd")
		_, err := otelsetup.Setup(context.Background(), otelsetup.Config{})
		if err == nil || !strings.Contains(err.Error(), "LOG_CONTENT") || !strings.Contains(err.Error(), "OTEL_METRICS_EXPORTER") {
			t.Fatalf("error %v does not name both variables", err)
		}
	})
}

// TestConsoleExporter: console spans are written as they end, with the
// service name from OTEL_SERVICE_NAME.
func TestConsoleExporter(t *testing.T) {
	otelenv.Clean(t, "OTEL_TRACES_EXPORTER", "console", "OTEL_SERVICE_NAME", "dock-test")
	var console bytes.Buffer
	tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{Console: &console, ServiceName: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	_, turn := tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "planner"})
	turn.End()
	out := console.String()
	if !strings.Contains(out, `"invoke_agent planner"`) || !strings.Contains(out, "dock-test") || strings.Contains(out, "ignored") {
		t.Fatalf("console output:\n%s", out)
	}
}

// TestOTLPHTTPExport: with OTEL_*_EXPORTER=otlp, spans and metrics reach an
// OTLP/HTTP receiver over loopback, at the latest when Shutdown flushes.
func TestOTLPHTTPExport(t *testing.T) {
	var (
		mu   sync.Mutex
		hits = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if r.Header.Get("Content-Type") == "application/x-protobuf" && len(body) > 0 {
			hits[r.URL.Path]++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	otelenv.Clean(t, "OTEL_TRACES_EXPORTER", "otlp", "OTEL_METRICS_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, turn := tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "planner"})
	turn.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/v1/traces"] == 0 || hits["/v1/metrics"] == 0 {
		t.Fatalf("the receiver got %v, want /v1/traces and /v1/metrics", hits)
	}
}
