package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/telemetry"
)

var chatDone = chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop}

func spanContext(ctx context.Context) trace.SpanContext { return trace.SpanContextFromContext(ctx) }

// TestHTTPClient: the wrapped client makes a client span under the current
// span and sends its trace context to the server.
func TestHTTPClient(t *testing.T) {
	rec := setupRecorded(t, false)
	var traceparent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("traceparent")
	}))
	defer srv.Close()
	client := rec.tel.HTTPClient(&http.Client{Timeout: 5e9})
	if client.Timeout != 5e9 {
		t.Errorf("the wrapped client lost its timeout")
	}
	ctx, turn := rec.tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "planner"})
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader("{}"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	turn.End()
	parent := spanContext(ctx)
	var found bool
	for _, s := range rec.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == parent.SpanID() {
			found = true
			if !strings.Contains(traceparent, s.SpanContext().SpanID().String()) {
				t.Errorf("traceparent %q does not name the client span %s", traceparent, s.SpanContext().SpanID())
			}
		}
	}
	if !found {
		t.Fatal("no HTTP client span under the turn")
	}
}

// TestRedisTurnSpans: with a real redis-server behind the store, the store
// commands of a turn are spans inside the turn's trace, and no command
// carries chat content.
func TestRedisTurnSpans(t *testing.T) {
	srv := redistest.Start(t)
	rec := setupRecorded(t, false)
	store, err := redisstore.New(redisstore.Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := redisstore.Instrument(store.Client(), rec.tel.TracerProvider()); err != nil {
		t.Fatal(err)
	}
	n := node(t, store, rec.tel, offlineModels, "cognitive-reasoner")
	runTurn(t, n, session.NewID(), critiqueMessage)

	ts := splitTurn(t, rec.spans.Ended())
	if len(ts.other) == 0 {
		t.Fatal("no Redis spans")
	}
	ids := map[trace.SpanID]bool{ts.invoke.SpanContext().SpanID(): true}
	for _, s := range append(ts.chats, ts.tools...) {
		ids[s.SpanContext().SpanID()] = true
	}
	// The step's write, which also records the step's last tool call (so
	// no command runs under a tool span when a step calls one tool), goes
	// under the turn's span, after the tool's span.
	if len(ts.tools) == 0 {
		t.Fatal("no tool spans: the turn should call a tool")
	}
	toolEnd := ts.tools[0].EndTime()
	var recorded bool
	for _, s := range ts.other {
		if s.SpanKind() != trace.SpanKindClient || attrs(s)["db.system.name"].AsString()+attrs(s)["db.system"].AsString() == "" {
			t.Errorf("span %q (kind %v) is not a Redis client span: %v", s.Name(), s.SpanKind(), s.Attributes())
		}
		if !ids[s.Parent().SpanID()] {
			t.Errorf("Redis span %q is outside the turn", s.Name())
		}
		recorded = recorded || s.Parent().SpanID() == ts.invoke.SpanContext().SpanID() && !s.StartTime().Before(toolEnd)
		for where, v := range spanStrings(s) {
			if strings.Contains(v, "remote work") {
				t.Errorf("Redis span %q, %s holds chat content: %.80q", s.Name(), where, v)
			}
		}
	}
	if !recorded {
		t.Error("no Redis command under the turn's span after the tool's (the step's write, recording the tool)")
	}
}
