package llmorch_test

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// scripted is a Model that plays one scripted reply per call and records
// the requests it got. A reply is a list of tool names to call (with {}
// arguments) or, when empty, a text answer.
type scripted struct {
	mu      sync.Mutex
	replies [][]string
	reqs    []llmorch.Request
	block   chan struct{} // when set, each call waits for it or ctx
	// restricts: the model says it keeps to Request.Offered itself
	// (Info.RestrictsTools); it calls its script's tools all the same.
	restricts bool
}

func (m *scripted) Info() llmorch.Info {
	return llmorch.Info{Provider: "test", Model: "scripted", RestrictsTools: m.restricts}
}

func (m *scripted) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		m.mu.Lock()
		n := len(m.reqs)
		m.reqs = append(m.reqs, req)
		var reply []string
		if n < len(m.replies) {
			reply = m.replies[n]
		}
		m.mu.Unlock()
		if !yield(chat.Event{Kind: chat.KindTextDelta, Text: "step "}, nil) {
			return
		}
		if m.block != nil {
			select {
			case <-m.block:
			case <-ctx.Done():
				yield(chat.Event{}, ctx.Err())
				return
			}
		}
		for i, name := range reply {
			call := chat.ToolCall{ID: "c" + string(rune('0'+n)) + string(rune('0'+i)), Name: name, Arguments: argsFor[name]}
			ev := chat.Event{Kind: chat.KindToolCall, ToolCall: &call}
			if bad, ok := strings.CutPrefix(name, "!"); ok {
				// An invalid call, as providers report it.
				call.Name, call.Arguments = bad, json.RawMessage(`{}`)
				ev = chat.Event{Kind: chat.KindError, ToolCall: &call, Error: &chat.Error{Code: "invalid_tool_call", Message: "arguments of " + bad + " are not a JSON object"}}
			}
			if !yield(ev, nil) {
				return
			}
		}
		if len(reply) == 0 {
			yield(chat.Event{Kind: chat.KindTextDelta, Text: "done"}, nil)
		}
		yield(chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 10, Completion: 2}}, nil)
	}
}

// argsFor holds valid arguments for the cognitive tools the tests call.
var argsFor = map[string]json.RawMessage{
	"think":    json.RawMessage(`{"topic":"t","reasoning":"r"}`),
	"reflect":  json.RawMessage(`{"topic":"t","reflection":"r"}`),
	"critique": json.RawMessage(`{"subject":"s","analysis":"a"}`),
	"debate":   json.RawMessage(`{"topic":"t","perspectives":"p"}`),
}

const orchestrated = `{
  "agentId": "t", "name": "T", "nodes": ["llm.openai", "think", "reflect", "critique", "debate"],
  "options": {"maxSteps": 3},
  "orchestration": {"steps": [
    {"name": "Eval", "description": "evaluate", "conditions": [{"type": "message_contains", "value": "evaluate"}],
     "sequence": ["critique", "debate"], "availableTools": {"allowed": ["critique", "debate", "reflect"]}},
    {"name": "After", "description": "after thinking", "conditions": [{"type": "tool_used", "value": "think"}],
     "availableTools": {"allowed": ["reflect"]}},
    {"name": "Start", "description": "default", "isDefault": true}
  ]}
}`

type fixture struct {
	svc   *llmorch.Service
	store *session.Memory
	// wrapped is the store the service writes to: store, or what
	// newServiceOver wrapped it in.
	wrapped session.Store
	model   *scripted
	eng     *orchestration.Engine
	id      string
	lease   session.Lease
}

func newFixture(t *testing.T, model *scripted) *fixture {
	t.Helper()
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model})
	f.model = model
	return f
}

// newService is a service for the template tmpl over a new memory store,
// with cfg's model and knobs. Its tools are the built-in ones, which the
// template is checked against, unless cfg.Tools gives others.
func newService(t testing.TB, tmpl string, cfg llmorch.ServiceConfig) (*fixture, *template.Loaded) {
	t.Helper()
	return newServiceWith(t, tmpl, cfg, nil)
}

// newServiceOver is newFixture with the service writing through the store
// wrap returns.
func newServiceOver(t *testing.T, model *scripted, wrap func(session.Store) session.Store) (*fixture, *template.Loaded) {
	t.Helper()
	f, a := newServiceWith(t, orchestrated, llmorch.ServiceConfig{Model: model}, wrap)
	f.model = model
	return f, a
}

func newServiceWith(t testing.TB, tmpl string, cfg llmorch.ServiceConfig, wrap func(session.Store) session.Store) (*fixture, *template.Loaded) {
	t.Helper()
	var tc template.Config
	if cfg.Tools == nil {
		reg, err := tools.Builtin(tools.BuiltinConfig{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Tools, tc.Provided = reg, tools.BuiltinNames()
	}
	a, ds := template.Load("t.json", []byte(tmpl), tc)
	if a == nil {
		t.Fatal(ds.Err())
	}
	store := session.NewMemory(session.Config{})
	t.Cleanup(func() { store.Close() })
	var wrapped session.Store = store
	if wrap != nil {
		wrapped = wrap(store)
	}
	cfg.Template, cfg.Engine, cfg.Store = a.Template, a.Engine, wrapped
	svc, err := llmorch.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, store: store, wrapped: wrapped, eng: a.Engine, id: session.NewID()}, a
}

// start records the user message and returns the turn, as the agent does.
func (f *fixture) start(t testing.TB, msg string) llmorch.Turn {
	t.Helper()
	_, lease, err := f.store.Claim(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	f.lease = lease
	var dec orchestration.Decision
	sess, err := session.Update(context.Background(), f.store, f.id, func(s *orchestration.State) error {
		*s, dec = f.eng.Apply(*s, orchestration.UserMessage(msg))
		return nil
	}, session.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	return llmorch.Turn{SessionID: f.id, Lease: lease, State: sess.State, PreviousStep: dec.PreviousStep,
		History: []chat.Message{{Role: chat.RoleUser, Content: msg}}}
}

func collect(seq iter.Seq[chat.Event]) []chat.Event {
	var out []chat.Event
	for ev := range seq {
		out = append(out, ev)
	}
	return out
}

func offeredNames(req llmorch.Request) []string {
	var out []string
	for _, s := range req.Callable() {
		out = append(out, s.Name)
	}
	return out
}

// TestRefusedToolIsNotExecuted: a call for a tool that is not offered gets an
// error result naming the step and the usable tools, and changes nothing.
func TestRefusedToolIsNotExecuted(t *testing.T) {
	f := newFixture(t, &scripted{replies: [][]string{{"debate"}, {"critique"}}})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "please evaluate this")))
	var results []chat.ToolResult
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			results = append(results, *ev.ToolResult)
		}
	}
	if len(results) != 2 {
		t.Fatalf("want 2 tool results, got %d: %+v", len(results), results)
	}
	r := results[0]
	if !r.IsError || !r.NotRun || !strings.Contains(r.Content, `tool "debate" is not available in step "Eval"`) || !strings.Contains(r.Content, "tools you may use now: critique") {
		t.Fatalf("refusal result = %+v", r)
	}
	if results[1].IsError {
		t.Fatalf("the offered tool failed: %+v", results[1])
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if !sess.State.RecentlyUsedTools.Equal("critique") || sess.State.SequenceIndex != 1 {
		t.Fatalf("state after refusal + critique: %+v", sess.State)
	}
	// The model's second call saw the refusal and the same offer.
	if got := offeredNames(f.model.reqs[1]); !slices.Equal(got, []string{"critique"}) {
		t.Fatalf("second call offered %v", got)
	}
	last := f.model.reqs[1].Messages
	if m := last[len(last)-1]; m.Role != chat.RoleTool || !m.IsError || m.ToolName != "debate" {
		t.Fatalf("the refusal did not reach the model: %+v", m)
	}
}

// TestSameTurnTransition: the tool of the first model call changes the step,
// and the second call of the same turn is offered the new step's tools.
func TestSameTurnTransition(t *testing.T) {
	f := newFixture(t, &scripted{replies: [][]string{{"think"}, {"reflect"}, nil}})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "hello")))
	if got := offeredNames(f.model.reqs[0]); !slices.Equal(got, []string{"think", "reflect", "critique", "debate"}) {
		t.Fatalf("first call offered %v", got)
	}
	if got := offeredNames(f.model.reqs[1]); !slices.Equal(got, []string{"reflect"}) {
		t.Fatalf("second call offered %v, want the After step's [reflect]", got)
	}
	if !strings.Contains(f.model.reqs[1].Note, "Active step: After") {
		t.Fatalf("second call's note does not name the new step:\n%s", f.model.reqs[1].Note)
	}
	var trans []chat.Snapshot
	for _, ev := range evs {
		if ev.Kind == chat.KindOrchestration && ev.Orchestration.Transition {
			trans = append(trans, *ev.Orchestration)
		}
	}
	if len(trans) != 2 || trans[1].PreviousStep != "Start" || trans[1].ActiveStep != "After" {
		t.Fatalf("transitions = %+v", trans)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if want := (chat.Usage{Prompt: 30, Completion: 6, Total: 36}); sess.State.TokenUsage != want {
		t.Fatalf("session usage = %+v, want %+v (3 calls)", sess.State.TokenUsage, want)
	}
	var final *chat.Usage
	steps := 0
	for _, ev := range evs {
		if ev.Kind == chat.KindUsage {
			if ev.Final {
				final = ev.Usage
			} else {
				steps++
			}
		}
	}
	if steps != 3 || final == nil || final.Total != 36 {
		t.Fatalf("usage events: %d per step, final %+v", steps, final)
	}
}

// TestMaxStepsEndsWithAnswer: a model that keeps calling tools gets a last
// call without tools and the turn ends with max-steps.
func TestMaxStepsEndsWithAnswer(t *testing.T) {
	f := newFixture(t, &scripted{replies: [][]string{{"think"}, {"reflect"}, {"reflect"}, nil}})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "hello")))
	if len(f.model.reqs) != 4 {
		t.Fatalf("model called %d times, want maxSteps 3 + a final answer", len(f.model.reqs))
	}
	if last := f.model.reqs[3]; len(last.Callable()) != 0 || !strings.Contains(last.Note, "answer now, without tools") {
		t.Fatalf("the final call offered %v", offeredNames(last))
	}
	if done := evs[len(evs)-1]; done.Kind != chat.KindDone || done.FinishReason != chat.FinishMaxSteps {
		t.Fatalf("last event %+v", done)
	}
}

// TestCancelledTurnLeavesConsistentState: cancelling mid-call ends the turn
// with done/cancelled; every recorded event is whole and the history has no
// dangling tool call.
func TestCancelledTurnLeavesConsistentState(t *testing.T) {
	model := &scripted{replies: [][]string{{"think"}, {"reflect"}}, block: make(chan struct{})}
	f := newFixture(t, model)
	ctx, cancel := context.WithCancel(context.Background())
	turn := f.start(t, "hello")
	done := make(chan []chat.Event)
	go func() { done <- collect(f.svc.StreamWithOrchestration(ctx, turn)) }()
	model.block <- struct{}{} // let the first call finish: think runs
	for {
		model.mu.Lock()
		n := len(model.reqs)
		model.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel() // the second call is blocked: cancel it
	evs := <-done
	if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishCancelled {
		t.Fatalf("last event %+v", last)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if !sess.State.RecentlyUsedTools.Equal("think") || sess.State.ActiveStep != "After" {
		t.Fatalf("state after cancel: %+v", sess.State)
	}
	history, _ := f.store.Messages(context.Background(), f.id, 0)
	open := map[string]bool{}
	for _, m := range history {
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
		delete(open, m.ToolCallID)
	}
	if len(open) > 0 {
		t.Fatalf("history has tool calls without results: %v\n%+v", open, history)
	}
}

// TestFencedWritesStopTheTurn: when the lease is taken over mid-turn, the
// old turn's writes are refused and it ends with an error event.
func TestFencedWritesStopTheTurn(t *testing.T) {
	model := &scripted{replies: [][]string{{"think"}}, block: make(chan struct{})}
	f := newFixture(t, model)
	turn := f.start(t, "hello")
	done := make(chan []chat.Event)
	go func() { done <- collect(f.svc.StreamWithOrchestration(context.Background(), turn)) }()
	// Another turn takes the session over (the first lease is released as
	// if it had expired).
	f.lease.Release(context.Background())
	if _, _, err := f.store.Claim(context.Background(), f.id); err != nil {
		t.Fatal(err)
	}
	close(model.block)
	evs := <-done
	var errEv *chat.Error
	for _, ev := range evs {
		if ev.Kind == chat.KindError {
			errEv = ev.Error
		}
	}
	if errEv == nil || errEv.Code != "session_lease_lost" {
		t.Fatalf("no lease-lost error: %v", evs)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if sess.State.RecentlyUsedTools.Len() != 0 {
		t.Fatalf("a fenced turn's tool was recorded: %v", sess.State.RecentlyUsedTools)
	}
}

// TestInvalidToolCallIsAnswered: a call the provider reports as invalid is
// answered with an error result for the model, and not recorded.
func TestInvalidToolCallIsAnswered(t *testing.T) {
	f := newFixture(t, &scripted{replies: [][]string{{"!think"}, {"think"}, nil}})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "hello")))
	var first *chat.ToolResult
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			first = ev.ToolResult
			break
		}
	}
	if first == nil || !first.IsError || !first.NotRun || !strings.Contains(first.Content, "not a JSON object") {
		t.Fatalf("first result = %+v", first)
	}
	msgs := f.model.reqs[1].Messages
	if m := msgs[len(msgs)-1]; m.Role != chat.RoleTool || m.ToolCallID != first.CallID {
		t.Fatalf("the model did not get the answer to its invalid call: %+v", m)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if !sess.State.RecentlyUsedTools.Equal("think") {
		t.Fatalf("recorded %v; the invalid call must not count", sess.State.RecentlyUsedTools)
	}
}

// downToolbox is a registry some of whose tools cannot run now, as an MCP
// server's tools while it restarts.
type downToolbox struct {
	*tools.Registry
	down []string
}

func (d downToolbox) Unavailable(name string) (string, bool) {
	if slices.Contains(d.down, name) {
		return "tool " + name + " is not available now: its server is restarting", true
	}
	return "", false
}

// TestUnavailableToolsNeverOffered: before every model call the tools the
// executor cannot run now are left out of the offer and the snapshot; a
// sequence position without a runnable tool falls back to the step's other
// tools with a warning, and a call to the missing tool is refused with the
// executor's reason.
func TestUnavailableToolsNeverOffered(t *testing.T) {
	reg, err := tools.Builtin(tools.BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	model := &scripted{replies: [][]string{{"critique"}, {"reflect"}, nil}}
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model, Tools: downToolbox{reg, []string{"critique"}}})
	f.model = model
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "please evaluate this")))
	for i, req := range f.model.reqs {
		if slices.Contains(offeredNames(req), "critique") || slices.Contains(req.Orchestration.OfferedTools, "critique") {
			t.Errorf("call %d offered critique: %v / %v", i, offeredNames(req), req.Orchestration.OfferedTools)
		}
	}
	if got := offeredNames(f.model.reqs[0]); !slices.Equal(got, []string{"reflect", "debate"}) && !slices.Equal(got, []string{"debate", "reflect"}) {
		t.Errorf("first call offered %v, want the step's runnable tools", got)
	}
	var warned bool
	var results []chat.ToolResult
	for _, ev := range evs {
		switch ev.Kind {
		case chat.KindWarning:
			warned = warned || strings.Contains(ev.Text, `sequence position 1 (critique) can run now`)
		case chat.KindToolResult:
			results = append(results, *ev.ToolResult)
		case chat.KindOrchestration:
			if slices.Contains(ev.Orchestration.OfferedTools, "critique") {
				t.Errorf("snapshot offers critique: %+v", ev.Orchestration)
			}
		}
	}
	if !warned {
		t.Error("no warning about the sequence position")
	}
	if len(results) != 2 || !results[0].NotRun || results[0].Content != "Refused: tool critique is not available now: its server is restarting." || results[1].IsError {
		t.Fatalf("results %+v", results)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if !sess.State.RecentlyUsedTools.Equal("reflect") || sess.State.SequenceIndex != 0 {
		t.Errorf("state %+v", sess.State)
	}
}
