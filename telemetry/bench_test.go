package telemetry_test

import (
	"context"
	"testing"

	"github.com/agentdock-go/agentdock/telemetry/internal/otelenv"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
)

// BenchmarkTurnTelemetry runs a 3-tool turn of the cognitive reasoner (offline
// model, memory store) with no Telemetry, with the default one (tracing off,
// metrics on), and with tracing on into an exporter that drops the spans:
// the differences are the instrumentation's cost per turn.
func BenchmarkTurnTelemetry(b *testing.B) {
	for _, bc := range []struct {
		name  string
		setup func(b *testing.B) *telemetry.Telemetry
	}{
		{"nil", func(*testing.B) *telemetry.Telemetry { return nil }},
		{"tracing-off", func(b *testing.B) *telemetry.Telemetry {
			otelenv.Clean(b)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{})
			if err != nil {
				b.Fatal(err)
			}
			return tel
		}},
		{"tracing-on", func(b *testing.B) *telemetry.Telemetry {
			otelenv.Clean(b)
			tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{
				SpanProcessors: []sdktrace.SpanProcessor{sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())},
				MetricReaders:  []sdkmetric.Reader{sdkmetric.NewManualReader()},
			})
			if err != nil {
				b.Fatal(err)
			}
			return tel
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tel := bc.setup(b)
			defer tel.Shutdown(context.Background())
			store := session.NewMemory(session.Config{})
			defer store.Close()
			n := node(b, store, tel, offlineModels, "cognitive-reasoner")
			b.ReportAllocs()
			for b.Loop() {
				runTurn(b, n, session.NewID(), critiqueMessage)
			}
		})
	}
}
