package llmorch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
)

const plainTemplate = `{"agentId": "p", "name": "P", "nodes": ["llm.openai", "think", "reflect"], "options": {"maxSteps": 3}}`

// hostile is a model that misbehaves on purpose: its first answer makes
// calls tool calls (think, with the given arguments), or streams text
// deltas of chunk bytes until it is stopped when calls is 0. Later answers
// are a short text. It counts the deltas it managed to send.
type hostile struct {
	calls int
	args  string
	chunk int
	block bool // the first answer waits for ctx after its first delta

	n    atomic.Int32
	sent atomic.Int64
	reqs []llmorch.Request
}

func (m *hostile) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "hostile"} }

func (m *hostile) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		m.reqs = append(m.reqs, req)
		if m.n.Add(1) > 1 {
			yield(chat.Event{Kind: chat.KindTextDelta, Text: "fine."}, nil)
			return
		}
		if m.calls > 0 {
			for i := range m.calls {
				call := chat.ToolCall{ID: fmt.Sprintf("call%d", i), Name: "think", Arguments: json.RawMessage(m.args)}
				if !yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &call}, nil) {
					return
				}
			}
			yield(chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 5, Completion: 5}}, nil)
			return
		}
		delta := strings.Repeat("é", m.chunk/2) // two bytes a rune: cuts must not split one
		for {
			if !yield(chat.Event{Kind: chat.KindTextDelta, Text: delta}, nil) {
				return
			}
			m.sent.Add(1)
			if m.block {
				<-ctx.Done()
				yield(chat.Event{}, ctx.Err())
				return
			}
			if ctx.Err() != nil {
				yield(chat.Event{}, ctx.Err())
				return
			}
		}
	}
}

func newBudgetFixture(t *testing.T, tmpl string, model llmorch.Model, budget llmorch.Budget) (*llmorch.Service, *session.Memory, *template.Loaded) {
	t.Helper()
	f, a := newService(t, tmpl, llmorch.ServiceConfig{Model: model, Budget: budget})
	return f.svc, f.store, a
}

func startTurn(t *testing.T, store *session.Memory, a *template.Loaded, id, msg string) llmorch.Turn {
	t.Helper()
	_, lease, err := store.Claim(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	st, hist, err := store.UpdateAppend(context.Background(), id, func(s *orchestration.State) error {
		*s, _ = a.Engine.Apply(*s, orchestration.UserMessage(msg))
		return nil
	}, []chat.Message{{Role: chat.RoleUser, Content: msg}}, -1, session.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	return llmorch.Turn{SessionID: id, Lease: lease, State: st.State, History: append(hist, chat.Message{Role: chat.RoleUser, Content: msg})}
}

func limits(evs []chat.Event) []chat.Limit {
	var out []chat.Limit
	for _, ev := range evs {
		if ev.Kind == chat.KindLimit {
			out = append(out, *ev.Limit)
		}
	}
	return out
}

// TestToolCallsPerAnswer: an answer with 1,000 tool calls runs the first
// MaxToolCalls, refuses the next one with a result naming the limit, drops
// the rest, records only what ran, and keeps the history within the
// turn's bound; the model continues.
func TestToolCallsPerAnswer(t *testing.T) {
	model := &hostile{calls: 1000, args: `{"topic":"t","reasoning":"r"}`}
	svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{MaxToolCalls: 4})
	evs := collect(svc.StreamWithOrchestration(context.Background(), startTurn(t, store, a, "calls-session", "go")))

	if l := limits(evs); len(l) != 1 || l[0].Name != chat.LimitToolCalls || l[0].Value != "4" || !strings.Contains(l[0].Message, "1000 tool calls") {
		t.Fatalf("limits %+v", l)
	}
	var results []chat.ToolResult
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			results = append(results, *ev.ToolResult)
		}
	}
	if len(results) != 5 {
		t.Fatalf("%d tool results, want 4 run and 1 refused", len(results))
	}
	for _, r := range results[:4] {
		if r.IsError {
			t.Fatalf("call %s failed: %s", r.CallID, r.Content)
		}
	}
	if r := results[4]; !r.IsError || !strings.Contains(r.Content, "at most 4 tool calls run per answer; this answer made 1000") {
		t.Fatalf("refusal %+v", r)
	}
	sess, _ := store.Get(context.Background(), "calls-session")
	if n := sess.State.RecentlyUsedTools.Len(); n != 4 {
		t.Fatalf("recorded %d tools, want 4", n)
	}
	msgs, _ := store.Messages(context.Background(), "calls-session", 0)
	if len(msgs) != 1+1+5+1 || msgs[0].Role != chat.RoleUser || len(msgs[1].ToolCalls) != 5 {
		t.Fatalf("history of %d messages: %+v", len(msgs), msgs[:2])
	}
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStop {
		t.Fatalf("finish %q: the model goes on after the refusal", done.FinishReason)
	}
	if got := llmorch.DefaultBudget.MessagesPerTurn(); got >= session.DefaultMaxMessages {
		t.Fatalf("a turn under the default budget may add %d messages, over the store's cap %d", got, session.DefaultMaxMessages)
	}
}

// TestOutputBudgetCutsText: a model that streams without end is cut at the
// output budget, at a character boundary: the answer saved is exactly the
// budget, the model is stopped, and the turn ends with finish "length".
func TestOutputBudgetCutsText(t *testing.T) {
	model := &hostile{chunk: 100}
	svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{MaxOutputBytes: 1001})
	evs := collect(svc.StreamWithOrchestration(context.Background(), startTurn(t, store, a, "endless-session", "go")))
	text := 0
	for _, ev := range evs {
		if ev.Kind == chat.KindTextDelta {
			text += len(ev.Text)
		}
	}
	if text != 1000 {
		t.Fatalf("streamed %d bytes, want the budget 1001 cut to a whole character", text)
	}
	if model.sent.Load() > 12 {
		t.Fatalf("the model went on for %d deltas after the cut", model.sent.Load())
	}
	if l := limits(evs); len(l) != 1 || l[0].Name != chat.LimitOutput {
		t.Fatalf("limits %+v", l)
	}
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishLength {
		t.Fatalf("finish %q", done.FinishReason)
	}
	msgs, _ := store.Messages(context.Background(), "endless-session", 0)
	if len(msgs) != 2 || len(msgs[1].Content) != 1000 {
		t.Fatalf("history %d messages", len(msgs))
	}
	if req := model.reqs[0]; req.MaxOutputBytes != 1001 || req.MaxTokens != 250 {
		t.Fatalf("request budget: MaxOutputBytes %d, MaxTokens %d", req.MaxOutputBytes, req.MaxTokens)
	}
}

// TestOutputBudgetToolArguments: tool arguments count too; a call whose
// arguments go over the budget is not run.
func TestOutputBudgetToolArguments(t *testing.T) {
	big := `{"topic":"t","reasoning":"` + strings.Repeat("x", 2000) + `"}`
	model := &hostile{calls: 3, args: big}
	svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{MaxOutputBytes: 5000})
	evs := collect(svc.StreamWithOrchestration(context.Background(), startTurn(t, store, a, "args-session", "go")))
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			t.Fatalf("a call ran: %+v", ev.ToolResult)
		}
	}
	if l := limits(evs); len(l) != 1 || l[0].Name != chat.LimitOutput {
		t.Fatalf("limits %+v", l)
	}
	sess, _ := store.Get(context.Background(), "args-session")
	if sess.State.RecentlyUsedTools.Len() != 0 {
		t.Fatalf("recorded %v", sess.State.RecentlyUsedTools)
	}
}

// TestTurnTimeoutSavesPartialAnswer: the time budget ends the turn with
// finish "timeout", the text so far saved.
func TestTurnTimeoutSavesPartialAnswer(t *testing.T) {
	model := &hostile{chunk: 10, block: true}
	svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{TurnTimeout: 50 * time.Millisecond})
	evs := collect(svc.StreamWithOrchestration(context.Background(), startTurn(t, store, a, "slow-session", "go")))
	if l := limits(evs); len(l) != 1 || l[0].Name != chat.LimitTime || l[0].Value != "50ms" {
		t.Fatalf("limits %+v", l)
	}
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishTimeout {
		t.Fatalf("finish %q", done.FinishReason)
	}
	msgs, _ := store.Messages(context.Background(), "slow-session", 0)
	if len(msgs) != 2 || msgs[1].Content != strings.Repeat("é", 5) {
		t.Fatalf("history %+v", msgs)
	}
}

// TestCancelCauseIsReported: a cancellation whose cause is a *chat.Error
// (the server's shutdown, a lost lease) ends with that error, and one whose
// cause is a *chat.Limit with the limit.
func TestCancelCauseIsReported(t *testing.T) {
	for _, tc := range []struct {
		cause  error
		kind   chat.Kind
		finish string
	}{
		{&chat.Error{Code: "server_shutdown", Message: "bye"}, chat.KindError, chat.FinishCancelled},
		{&chat.Limit{Name: chat.LimitEvents, Value: "100", Message: "full"}, chat.KindLimit, chat.FinishLength},
	} {
		model := &hostile{chunk: 10, block: true}
		svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{})
		ctx, cancel := context.WithCancelCause(context.Background())
		go func() {
			for model.sent.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancel(tc.cause)
		}()
		evs := collect(svc.StreamWithOrchestration(ctx, startTurn(t, store, a, "cause-session", "go")))
		n := len(evs)
		if evs[n-2].Kind != tc.kind || evs[n-1].FinishReason != tc.finish {
			t.Fatalf("%v: ends %+v %+v", tc.cause, evs[n-2], evs[n-1])
		}
	}
}

// TestTemplateBudgetOverrides: a template's options win over the service's
// budget, which wins over the defaults.
func TestTemplateBudgetOverrides(t *testing.T) {
	tmpl := `{"agentId": "p", "name": "P", "nodes": ["llm.openai", "think"], "options": {"maxSteps": 2, "maxToolCalls": 3, "turnTimeout": "90s", "maxToolResultBytes": 2048}}`
	svc, _, _ := newBudgetFixture(t, tmpl, &hostile{}, llmorch.Budget{MaxToolCalls: 9, MaxOutputBytes: 777, MaxToolResultBytes: 4096})
	want := llmorch.Budget{MaxSteps: 2, MaxToolCalls: 3, MaxOutputBytes: 777, TurnTimeout: 90 * time.Second, MaxToolResultBytes: 2048}
	if got := svc.Budget(); got != want {
		t.Fatalf("budget %+v, want %+v", got, want)
	}
}

// TestToolResultBudget: a tool result over MaxToolResultBytes is cut, with
// the note, in what the turn streams, what the session keeps and what the
// next model request carries: the whole result goes nowhere.
func TestToolResultBudget(t *testing.T) {
	reasoning := strings.Repeat("long thought ", 7000) // 91,000 bytes, echoed by think
	args, _ := json.Marshal(map[string]string{"topic": "t", "reasoning": reasoning})
	model := &hostile{calls: 1, args: string(args)}
	svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{MaxOutputBytes: 1 << 20, MaxToolResultBytes: 4096})
	evs := collect(svc.StreamWithOrchestration(context.Background(), startTurn(t, store, a, "result-session", "go")))

	var streamed []string
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			streamed = append(streamed, ev.ToolResult.Content)
		}
	}
	msgs, err := store.Messages(context.Background(), "result-session", 0)
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, m := range msgs {
		if m.Role == chat.RoleTool {
			stored = append(stored, m.Content)
		}
	}
	if len(model.reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(model.reqs))
	}
	var sent []string
	for _, m := range model.reqs[1].Messages {
		if m.Role == chat.RoleTool {
			sent = append(sent, m.Content)
		}
	}
	for where, contents := range map[string][]string{"streamed": streamed, "stored": stored, "sent to the model": sent} {
		if len(contents) != 1 {
			t.Errorf("%s: %d tool results, want 1", where, len(contents))
			continue
		}
		if c := contents[0]; len(c) > 4096 || !strings.HasPrefix(c, "## Thinking") && !strings.Contains(c, "long thought") || !strings.Contains(c, "cut to 4 KiB") {
			t.Errorf("%s: %d bytes ending %q; want at most 4096 with the note", where, len(c), c[max(0, len(c)-150):])
		}
	}
}
