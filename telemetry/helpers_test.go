package telemetry_test

import (
	"context"
	"iter"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/telemetry/internal/otelenv"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
)

// recorded is a Telemetry whose spans and metrics the test can read.
type recorded struct {
	tel     *telemetry.Telemetry
	spans   *tracetest.SpanRecorder
	metrics *sdkmetric.ManualReader
}

func setupRecorded(t testing.TB, content bool) recorded {
	t.Helper()
	otelenv.Clean(t)
	r := recorded{spans: tracetest.NewSpanRecorder(), metrics: sdkmetric.NewManualReader()}
	tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{
		CaptureContent: content,
		SpanProcessors: []sdktrace.SpanProcessor{r.spans},
		MetricReaders:  []sdkmetric.Reader{r.metrics},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	r.tel = tel
	return r
}

// collect reads the metrics as they are now.
func (r recorded) collect(t testing.TB) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func shipped(t testing.TB) []*template.Loaded {
	t.Helper()
	results, err := template.LoadFS(templates.FS(), ".", template.Config{Provided: tools.BuiltinNames()})
	if err != nil {
		t.Fatal(err)
	}
	var out []*template.Loaded
	for _, r := range results {
		if r.Loaded == nil {
			t.Fatalf("%s does not load: %v", r.File, r.Diagnostics.Err())
		}
		out = append(out, r.Loaded)
	}
	return out
}

func offlineModels(*template.Template) (llmorch.Model, error) {
	return offline.New(offline.Config{}), nil
}

// node builds the agents over store with the real tools and returns one.
func node(t testing.TB, store session.Store, tel *telemetry.Telemetry, models agent.ModelFactory, id string) *agent.Agent {
	t.Helper()
	agents, err := agent.NewSet(agent.Options{Store: store, Models: models, Telemetry: tel}, shipped(t))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := agents.Get(id)
	if !ok {
		t.Fatalf("agent %q is not loaded", id)
	}
	return n
}

// runTurn runs one turn to its end and returns its events.
func runTurn(t testing.TB, n *agent.Agent, sessionID, msg string) []chat.Event {
	t.Helper()
	events, err := agent.Started(n.Run(context.Background(), sessionID, agent.Text(msg)))
	if err != nil {
		t.Fatalf("Run(%q): %v", msg, err)
	}
	var out []chat.Event
	for ev := range events {
		out = append(out, ev)
	}
	if len(out) == 0 || out[len(out)-1].Kind != chat.KindDone {
		t.Fatal("the turn did not end with done")
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// spanStrings yields every string the span exports: name, attributes,
// events, links' attributes and status.
func spanStrings(s sdktrace.ReadOnlySpan) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !yield("name", s.Name()) || !yield("status", s.Status().Description) {
			return
		}
		kvs := func(where string, list []attribute.KeyValue) bool {
			for _, kv := range list {
				if !yield(where+" "+string(kv.Key), kv.Value.Emit()) {
					return false
				}
			}
			return true
		}
		if !kvs("attribute", s.Attributes()) {
			return
		}
		for _, ev := range s.Events() {
			if !yield("event", ev.Name) || !kvs("event "+ev.Name, ev.Attributes) {
				return
			}
		}
		for _, l := range s.Links() {
			if !kvs("link", l.Attributes) {
				return
			}
		}
	}
}

// scripted is a model that plays one reply per call: a list of tool calls
// (a name starting with "!" makes an invalid call) or, when empty, text.
type scripted struct {
	replies [][]string
	n       int
}

func (m *scripted) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "scripted"} }

func (m *scripted) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		var reply []string
		if m.n < len(m.replies) {
			reply = m.replies[m.n]
		}
		m.n++
		for i, name := range reply {
			args := `{"topic":"secret topic","reasoning":"secret reasoning"}`
			if name == "search" {
				args = `{"query":"secret query"}`
			}
			call := chat.ToolCall{ID: "call-" + string(rune('a'+m.n)) + string(rune('0'+i)), Name: name, Arguments: []byte(args)}
			ev := chat.Event{Kind: chat.KindToolCall, ToolCall: &call}
			if bad, ok := strings.CutPrefix(name, "!"); ok {
				call.Name = bad
				ev = chat.Event{Kind: chat.KindError, ToolCall: &call, Error: &chat.Error{Code: "invalid_tool_call", Message: "arguments of " + bad + " do not match its schema"}}
			}
			if !yield(ev, nil) {
				return
			}
		}
		if len(reply) == 0 && !yield(chat.Event{Kind: chat.KindTextDelta, Text: "the answer"}, nil) {
			return
		}
		yield(chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 7, Completion: 3}}, nil)
	}
}
