package llmorch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
	"github.com/agentdock-go/agentdock/tools"
)

// TestRefusalOnTheWire: whoever notices that a call names a tool the request
// did not offer, the refusal the model reads in its next request is the
// orchestration's: it names the step, the sequence and the position, and
// the tools it may use. The model is an OpenAI-compatible server over
// loopback, the adapter the real provider, so this is the text on the wire.
func TestRefusalOnTheWire(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "wire-test", APIKey: "k", BaseURL: srv.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(
		// Step Eval, sequence critique -> debate, position 1: debate is
		// not offered, and rm_rf is no tool at all.
		mockllm.Script{ToolCalls: []mockllm.ToolCall{
			{ID: "call_debate", Name: "debate", Arguments: `{"topic":"t","perspectives":"p"}`},
			{ID: "call_rm", Name: "rm_rf", Arguments: `{"path":"/"}`},
		}, Usage: &mockllm.Usage{Input: 10, Output: 5}},
		mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: "call_critique", Name: "critique", Arguments: `{"subject":"s","analysis":"a"}`}}},
		// Now at position 2 (debate); the model tries reflect.
		mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: "call_reflect", Name: "reflect", Arguments: `{"topic":"t","reflection":"r"}`}}},
		// The turn's last call (maxSteps 3) offers nothing; a call is refused.
		mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: "call_late", Name: "debate", Arguments: `{"topic":"t","perspectives":"p"}`}}},
	)
	f := newFixtureModel(t, model)
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "please evaluate this")))
	if done := evs[len(evs)-1]; done.Kind != chat.KindDone || done.FinishReason != chat.FinishMaxSteps {
		t.Fatalf("last event %+v", done)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("the model was called %d times, want 4", len(reqs))
	}
	// What the model read, request by request, as the mock decoded it from
	// the body the provider sent.
	results := func(i int) map[string]string {
		out := map[string]string{}
		for _, m := range reqs[i].Messages {
			for _, r := range m.ToolResults {
				out[r.CallID] = r.Content
			}
		}
		return out
	}
	want := map[string]string{
		"call_debate": `Refused: tool "debate" is not available in step "Eval", which requires the sequence critique -> debate and is at position 1; tools you may use now: critique.`,
		"call_rm":     `Refused: tool "rm_rf" is not available in step "Eval", which requires the sequence critique -> debate and is at position 1; tools you may use now: critique.`,
	}
	for id, text := range want {
		if got := results(1)[id]; got != text {
			t.Errorf("second request: result of %s =\n  %s\nwant\n  %s", id, got, text)
		}
		// The same text in the raw body (JSON-escaped; parts without the
		// ">" that encoders may escape as \u003e or not).
		for _, part := range strings.Split(strings.ReplaceAll(text, `"`, `\"`), "->") {
			if !strings.Contains(string(reqs[1].Body), part) {
				t.Errorf("the raw body of the second request does not carry %s", part)
			}
		}
	}
	if got, want := results(3)["call_reflect"], `Refused: tool "reflect" is not available in step "Eval", which requires the sequence critique -> debate and is at position 2; tools you may use now: debate.`; got != want {
		t.Errorf("fourth request: result of call_reflect =\n  %s\nwant\n  %s", got, want)
	}
	if got := reqs[3].ToolNames(); len(got) != 0 {
		t.Errorf("the final call offered %v", got)
	}
	// The late call was refused by the orchestration too, and nothing that
	// was refused ran or was recorded.
	var late *chat.ToolResult
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult && ev.ToolResult.CallID == "call_late" {
			late = ev.ToolResult
		}
	}
	if late == nil || late.Type != "refused" || !late.NotRun ||
		!strings.Contains(late.Content, `tool "debate" is not available in step "Eval", which requires the sequence critique -> debate and is at position 2; no tools may be used now`) {
		t.Fatalf("the call in the final answer: %+v", late)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if !sess.State.RecentlyUsedTools.Equal("critique") || sess.State.SequenceIndex != 1 {
		t.Fatalf("state: %+v; only critique ran", sess.State)
	}
}

// failing is a tool that runs and fails, as a backend error does.
type failing struct{}

func (failing) Spec() chat.ToolSpec {
	return chat.ToolSpec{Name: "flaky", Description: "fails", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
}
func (failing) Call(context.Context, json.RawMessage) (tools.Result, error) {
	return tools.Result{}, errors.New("the backend is down")
}

// TestFailedToolIsRecorded is the contract's "an executed tool is
// appended": a tool that ran and failed was executed, so it is recorded and
// advances its sequence (the model reads the error); a call that never
// reached its tool (arguments the schema refuses) is not.
func TestFailedToolIsRecorded(t *testing.T) {
	const tmpl = `{"agentId": "f", "name": "F", "nodes": ["llm.openai", "flaky", "search", "think"], "options": {"maxSteps": 5},
	  "orchestration": {"steps": [{"name": "Work", "isDefault": true, "sequence": ["flaky", "search", "think"]}]}}`
	reg, err := tools.NewRegistry(failing{}, tools.NewSearch(nil), tools.Think())
	if err != nil {
		t.Fatal(err)
	}
	call := func(name, args string) chat.ToolCall {
		return chat.ToolCall{ID: "c_" + name + args, Name: name, Arguments: json.RawMessage(args)}
	}
	model := &callsModel{replies: [][]chat.ToolCall{
		{call("flaky", `{"n":"not a number"}`)},
		{call("flaky", `{"n":1}`)},
		{call("search", `{"query":"anything"}`)},
		nil,
	}}
	f, _ := newService(t, tmpl, llmorch.ServiceConfig{Model: model, Tools: reg})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "go")))
	var res []chat.ToolResult
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			res = append(res, *ev.ToolResult)
		}
	}
	if len(res) != 3 {
		t.Fatalf("results: %+v", res)
	}
	if !res[0].NotRun || !strings.Contains(res[0].Content, "invalid arguments") {
		t.Errorf("bad arguments: %+v", res[0])
	}
	if !res[1].IsError || res[1].NotRun || !strings.Contains(res[1].Content, "the backend is down") {
		t.Errorf("failing tool: %+v", res[1])
	}
	if !res[2].IsError || res[2].NotRun {
		t.Errorf("search without a backend: %+v", res[2])
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if want := []string{"flaky", "search"}; !sess.State.RecentlyUsedTools.Equal(want...) || sess.State.SequenceIndex != 2 {
		t.Fatalf("state %+v: want recentlyUsedTools %v and the sequence at think (2)", sess.State, want)
	}
	if got := offeredNames(model.reqs[3]); !slices.Equal(got, []string{"think"}) {
		t.Fatalf("after the failed tools the model was offered %v, want [think]", got)
	}
}

// callsModel plays one list of tool calls per model call (none: a text
// answer) and records the requests.
type callsModel struct {
	replies [][]chat.ToolCall
	reqs    []llmorch.Request
}

func (m *callsModel) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "calls"} }

func (m *callsModel) Stream(_ context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		n := len(m.reqs)
		m.reqs = append(m.reqs, req)
		if n >= len(m.replies) || len(m.replies[n]) == 0 {
			yield(chat.Event{Kind: chat.KindTextDelta, Text: "done"}, nil)
			return
		}
		for _, c := range m.replies[n] {
			if !yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &c}, nil) {
				return
			}
		}
	}
}

func newFixtureModel(t *testing.T, model llmorch.Model) *fixture {
	t.Helper()
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model})
	return f
}

// TestInventedToolStaysOutOfMetrics: a call the provider no longer refuses
// on its own (a tool the model invented) is refused by the orchestration,
// and its name is kept out of the metrics' labels, as before.
func TestInventedToolStaysOutOfMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := otelsetup.Setup(context.Background(), otelsetup.Config{ServiceName: "test", MetricReaders: []sdkmetric.Reader{reader}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	model := &callsModel{replies: [][]chat.ToolCall{{
		{ID: "c1", Name: "rm_rf_everything_now", Arguments: json.RawMessage(`{}`)},
		{ID: "c2", Name: "debate", Arguments: json.RawMessage(`{"topic":"t","perspectives":"p"}`)},
	}}}
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model, Telemetry: tel})
	collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "please evaluate this")))
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var counts []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "agentdock.tool.refused" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				name, _ := dp.Attributes.Value("gen_ai.tool.name")
				counts = append(counts, fmt.Sprintf("%s=%d", name.AsString(), dp.Value))
			}
		}
	}
	slices.Sort(counts)
	if want := []string{"_OTHER=1", "debate=1"}; !slices.Equal(counts, want) {
		t.Fatalf("refused-tool counts %v, want %v", counts, want)
	}
}
