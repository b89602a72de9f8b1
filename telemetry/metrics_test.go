package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
)

func matches(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.Emit() != v {
			return false
		}
	}
	return true
}

// sumPoints adds the values of the counter's points that carry want.
func sumPoints(t *testing.T, m map[string]metricdata.Metrics, name string, want map[string]string) int64 {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return 0
	}
	var n int64
	switch d := md.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				n += p.Value
			}
		}
	default:
		t.Fatalf("%s is a %T, not an int64 sum", name, md.Data)
	}
	return n
}

// histogram returns the count and sum of the histogram's points that carry
// want.
func histogram(t *testing.T, m map[string]metricdata.Metrics, name string, want map[string]string) (count uint64, sum float64) {
	t.Helper()
	md, ok := m[name]
	if !ok {
		return 0, 0
	}
	switch d := md.Data.(type) {
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				count += p.Count
				sum += float64(p.Sum)
			}
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if matches(p.Attributes, want) {
				count += p.Count
				sum += p.Sum
			}
		}
	default:
		t.Fatalf("%s is a %T, not a histogram", name, md.Data)
	}
	return count, sum
}

// TestTurnMetrics: after two turns of the cognitive reasoner the manual
// reader finds the token usage by type, the model-call durations, the
// step transitions each message caused, and the turn and tool metrics;
// Prometheus serves the same.
func TestTurnMetrics(t *testing.T) {
	rec := setupRecorded(t, false)
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n := node(t, store, rec.tel, offlineModels, "cognitive-reasoner")
	id := session.NewID()
	var usage chat.Usage
	var steps, tools int
	for _, msg := range []string{critiqueMessage, "Research the history of electric cars"} {
		for _, ev := range runTurn(t, n, id, msg) {
			switch ev.Kind {
			case chat.KindUsage:
				if ev.Final {
					usage = usage.Add(*ev.Usage)
				}
			case chat.KindStepStart:
				steps++
			case chat.KindToolCall:
				tools++
			}
		}
	}
	m := rec.collect(t)
	model := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "offline", "gen_ai.request.model": n.ModelInfo().Model}
	for typ, want := range map[string]int64{"input": usage.Prompt, "output": usage.Completion} {
		count, sum := histogram(t, m, "gen_ai.client.token.usage", with(model, "gen_ai.token.type", typ))
		if int(count) != steps || int64(sum) != want || want == 0 {
			t.Errorf("gen_ai.client.token.usage{%s}: %d records summing to %v, want %d summing to %d", typ, count, sum, steps, want)
		}
	}
	if count, _ := histogram(t, m, "gen_ai.client.operation.duration", model); int(count) != steps {
		t.Errorf("gen_ai.client.operation.duration has %d records, want %d", count, steps)
	}
	if count, _ := histogram(t, m, "gen_ai.client.operation.time_to_first_chunk", model); int(count) != steps {
		t.Errorf("gen_ai.client.operation.time_to_first_chunk has %d records, want %d", count, steps)
	}
	for _, tr := range []struct{ from, to string }{{"(none)", "EvaluationMode"}, {"EvaluationMode", "ResearchMode"}} {
		got := sumPoints(t, m, "agentdock.orchestration.transitions", map[string]string{
			"gen_ai.agent.id": "cognitive-reasoner", "agentdock.orchestration.from_step": tr.from,
			"agentdock.orchestration.to_step": tr.to, "agentdock.orchestration.cause": "user_message",
		})
		if got != 1 {
			t.Errorf("transitions %s -> %s = %d, want 1", tr.from, tr.to, got)
		}
	}
	agentAttrs := map[string]string{"gen_ai.agent.id": "cognitive-reasoner"}
	if count, _ := histogram(t, m, "agentdock.turn.duration", with(agentAttrs, "agentdock.turn.finish_reason", "stop")); count != 2 {
		t.Errorf("agentdock.turn.duration has %d records, want 2", count)
	}
	if count, _ := histogram(t, m, "agentdock.turn.time_to_first_token", agentAttrs); count != 2 {
		t.Errorf("agentdock.turn.time_to_first_token has %d records, want 2", count)
	}
	if count, _ := histogram(t, m, "agentdock.tool.duration", nil); int(count) != tools || tools != 6 {
		t.Errorf("agentdock.tool.duration has %d records, want %d (6 tools)", count, tools)
	}
	// Without a search backend the search tool runs and fails.
	if count, _ := histogram(t, m, "agentdock.tool.duration", map[string]string{"gen_ai.tool.name": "search", "agentdock.tool.outcome": "error"}); count != 1 {
		t.Errorf("agentdock.tool.duration{search, error} has %d records, want 1", count)
	}
	if got := sumPoints(t, m, "agentdock.tool.errors", map[string]string{"gen_ai.tool.name": "search", "agentdock.tool.outcome": "error"}); got != 1 {
		t.Errorf("agentdock.tool.errors{search} = %d, want 1", got)
	}
	if count, _ := histogram(t, m, "agentdock.tool.duration", map[string]string{"gen_ai.tool.name": "reflect"}); count != 2 {
		t.Errorf("agentdock.tool.duration{reflect} has %d records, want 2", count)
	}

	// The Prometheus handler serves the same instruments.
	w := httptest.NewRecorder()
	rec.tel.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Result().Body)
	for _, name := range []string{"gen_ai_client_token_usage", "agentdock_orchestration_transitions", "agentdock_turn_duration_seconds", "go_goroutines"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s:\n%.2000s", name, body)
		}
	}
}

// TestFirstTokenMeasuredAtTheToken: the times to first chunk and first
// token are recorded when the model call and the turn end (off the first
// token's way), but measure the time to the first chunk: the wait after it
// is in the durations only.
func TestFirstTokenMeasuredAtTheToken(t *testing.T) {
	rec := setupRecorded(t, false)
	const after = 50 * time.Millisecond
	ctx, turn := rec.tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "a", Provider: "p", Model: "m"})
	_, call := rec.tel.StartChat(ctx, telemetry.ChatInfo{AgentID: "a", Provider: "p", Model: "m", Call: 1})
	delta := chat.Event{Kind: chat.KindTextDelta, Text: "a"}
	call.Observe(delta, nil)
	turn.Observe(delta)
	time.Sleep(after)
	call.End()
	turn.Observe(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop})
	turn.End()

	m := rec.collect(t)
	for _, c := range []struct{ first, whole string }{
		{"gen_ai.client.operation.time_to_first_chunk", "gen_ai.client.operation.duration"},
		{"agentdock.turn.time_to_first_token", "agentdock.turn.duration"},
	} {
		n, first := histogram(t, m, c.first, nil)
		_, whole := histogram(t, m, c.whole, nil)
		if n != 1 || first > whole-after.Seconds() {
			t.Errorf("%s: %d records, %vs; want 1, at least %v under %s's %vs", c.first, n, first, after, c.whole, whole)
		}
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for kk, vv := range m {
		out[kk] = vv
	}
	return out
}

// TestServerAndStoreMetrics: the helpers the server and the store call move
// their instruments; a stream's done function counts down once.
func TestServerAndStoreMetrics(t *testing.T) {
	rec := setupRecorded(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	done1 := rec.tel.TrackStream(ctx, "chat")
	done2 := rec.tel.TrackStream(ctx, "chat")
	rec.tel.TrackStream(ctx, "resume")
	cancel() // a cancelled stream context still counts down
	done1()
	done1()
	rec.tel.RecordStoreError(ctx, "update", "unavailable")
	m := rec.collect(t)
	if got := sumPoints(t, m, "agentdock.streams.active", map[string]string{"agentdock.stream.kind": "chat"}); got != 1 {
		t.Errorf("active chat streams = %d, want 1", got)
	}
	if got := sumPoints(t, m, "agentdock.streams.active", map[string]string{"agentdock.stream.kind": "resume"}); got != 1 {
		t.Errorf("active resume streams = %d, want 1", got)
	}
	done2()
	m = rec.collect(t)
	if got := sumPoints(t, m, "agentdock.streams.active", map[string]string{"agentdock.stream.kind": "chat"}); got != 0 {
		t.Errorf("active chat streams = %d after both ended, want 0", got)
	}
	if got := sumPoints(t, m, "agentdock.store.errors", map[string]string{"agentdock.store.operation": "update", "error.type": "unavailable"}); got != 1 {
		t.Errorf("store errors = %d, want 1", got)
	}
}

// downStore is a memory store whose sessions cannot be opened, as when
// Redis is down.
type downStore struct{ session.Store }

func (downStore) Claim(ctx context.Context, id string, opts ...session.UpdateOption) (session.Session, session.Lease, error) {
	return session.Session{}, nil, fmt.Errorf("dialing redis: %w", session.ErrUnavailable)
}

// TestStoreErrorOfRejectedTurn: a turn refused because the store is down
// counts a store error and leaves an error span, and no turn metrics.
func TestStoreErrorOfRejectedTurn(t *testing.T) {
	rec := setupRecorded(t, false)
	mem := session.NewMemory(session.Config{})
	defer mem.Close()
	n := node(t, downStore{mem}, rec.tel, offlineModels, "planner")
	if _, err := agent.Started(n.Run(context.Background(), session.NewID(), agent.Text("hello"))); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Run: %v, want ErrUnavailable", err)
	}
	m := rec.collect(t)
	if got := sumPoints(t, m, "agentdock.store.errors", map[string]string{"agentdock.store.operation": "start_turn", "error.type": "unavailable"}); got != 1 {
		t.Errorf("store errors = %d, want 1", got)
	}
	if count, _ := histogram(t, m, "agentdock.turn.duration", nil); count != 0 {
		t.Errorf("a rejected turn recorded a turn duration")
	}
	spans := rec.spans.Ended()
	if len(spans) != 1 || spans[0].Status().Code != codes.Error || attrs(spans[0])["error.type"].AsString() != "_OTHER" {
		t.Fatalf("spans %v", spans)
	}
}

// TestCachedUsageAttributes: a chat span and its turn carry the cache
// counts the model reported as the GenAI cache attributes, beside input
// tokens that include them; a call without cached input sets neither.
func TestCachedUsageAttributes(t *testing.T) {
	rec := setupRecorded(t, false)
	ctx, turn := rec.tel.StartTurn(context.Background(), telemetry.TurnInfo{AgentID: "a", Provider: "p", Model: "m"})
	usages := []chat.Usage{{Prompt: 2000, Completion: 10, CacheRead: 1536, CacheWrite: 300}, {Prompt: 100, Completion: 5}}
	var sum chat.Usage
	for i, u := range usages {
		_, call := rec.tel.StartChat(ctx, telemetry.ChatInfo{AgentID: "a", Provider: "p", Model: "m", Call: i + 1})
		call.Observe(chat.Event{Kind: chat.KindUsage, Usage: &u}, nil)
		call.End()
		sum = sum.Add(u)
	}
	turn.Observe(chat.Event{Kind: chat.KindUsage, Usage: &sum, Final: true})
	turn.Observe(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop})
	turn.End()

	var chats []map[string]int64
	var inv map[string]int64
	for _, s := range rec.spans.Ended() {
		a := map[string]int64{}
		for _, kv := range s.Attributes() {
			if strings.HasPrefix(string(kv.Key), "gen_ai.usage.") {
				a[string(kv.Key)] = kv.Value.AsInt64()
			}
		}
		if strings.HasPrefix(s.Name(), "chat ") {
			chats = append(chats, a)
		} else {
			inv = a
		}
	}
	want := []map[string]int64{
		{"gen_ai.usage.input_tokens": 2000, "gen_ai.usage.output_tokens": 10, "gen_ai.usage.cache_read.input_tokens": 1536, "gen_ai.usage.cache_creation.input_tokens": 300},
		{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 5},
	}
	if !reflect.DeepEqual(chats, want) {
		t.Errorf("chat spans' usage = %v, want %v", chats, want)
	}
	if w := map[string]int64{"gen_ai.usage.input_tokens": 2100, "gen_ai.usage.output_tokens": 15, "gen_ai.usage.cache_read.input_tokens": 1536, "gen_ai.usage.cache_creation.input_tokens": 300}; !reflect.DeepEqual(inv, w) {
		t.Errorf("turn span's usage = %v, want %v", inv, w)
	}
}
