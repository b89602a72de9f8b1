package agent_test

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
)

// shipped loads the embedded templates.
func shipped(t *testing.T) []*template.Loaded {
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

func newAgents(t testing.TB, store session.Store, models agent.ModelFactory, loaded []*template.Loaded) *agent.Set {
	t.Helper()
	a, err := agent.NewSet(agent.Options{Store: store, Models: models}, loaded)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func offlineModels(*template.Template) (llmorch.Model, error) {
	return offline.New(offline.Config{}), nil
}

// turn runs one turn to the end and returns its events.
func turn(t *testing.T, n *agent.Agent, sessionID, msg string) []chat.Event {
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
		t.Fatalf("turn did not end with done: %v", kinds(out))
	}
	for i, ev := range out {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	return out
}

func kinds(evs []chat.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Kind))
	}
	return out
}

func toolCalls(evs []chat.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == chat.KindToolCall {
			out = append(out, e.ToolCall.Name)
		}
	}
	return out
}

func snapshots(evs []chat.Event) []chat.Snapshot {
	var out []chat.Snapshot
	for _, e := range evs {
		if e.Kind == chat.KindOrchestration {
			out = append(out, *e.Orchestration)
		}
	}
	return out
}

func text(evs []chat.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Kind == chat.KindTextDelta {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

// TestCognitiveReasonerModePerTurn: with the opt-in, one session runs the
// evaluation sequence in one turn and the research sequence in the next.
func TestCognitiveReasonerModePerTurn(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, shipped(t))
	n, ok := agents.Get("cognitive-reasoner")
	if !ok {
		t.Fatal("cognitive-reasoner is not loaded")
	}
	id := session.NewID()

	evs := turn(t, n, id, "Critique the argument that remote work improves productivity")
	if got, want := toolCalls(evs), []string{"critique", "debate", "reflect"}; !slices.Equal(got, want) {
		t.Fatalf("turn 1 tool calls = %v, want %v (events %v)", got, want, kinds(evs))
	}
	snaps := snapshots(evs)
	if snaps[0].ActiveStep != "EvaluationMode" || !slices.Equal(snaps[0].OfferedTools, []string{"critique"}) {
		t.Fatalf("turn 1 starts in %+v, want EvaluationMode offering critique", snaps[0])
	}
	var offered [][]string
	for _, s := range snaps {
		offered = append(offered, s.OfferedTools)
	}
	if want := [][]string{{"critique"}, {"debate"}, {"reflect"}, {"search", "reflect", "critique", "debate"}}; !slices.EqualFunc(offered, want, slices.Equal) {
		t.Fatalf("offered tools per model call = %v, want %v", offered, want)
	}
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult && ev.ToolResult.IsError {
			t.Fatalf("tool %s failed: %s", ev.ToolResult.Name, ev.ToolResult.Content)
		}
	}
	answer := text(evs)
	if !strings.Contains(answer, "critique") && !strings.Contains(answer, "Critique") {
		t.Fatalf("the final answer does not use the tool results:\n%s", answer)
	}
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStop {
		t.Fatalf("turn 1 finished with %q", done.FinishReason)
	}

	evs = turn(t, n, id, "Research the history of electric cars")
	snaps = snapshots(evs)
	if snaps[0].ActiveStep != "ResearchMode" || !slices.Equal(snaps[0].OfferedTools, []string{"search"}) {
		t.Fatalf("turn 2 starts in %+v, want ResearchMode offering search", snaps[0])
	}
	if got, want := toolCalls(evs), []string{"search", "think", "reflect"}; !slices.Equal(got, want) {
		t.Fatalf("turn 2 tool calls = %v, want %v", got, want)
	}

	sess, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"critique", "debate", "reflect", "search", "think", "reflect"}; !sess.State.RecentlyUsedTools.Equal(want...) {
		t.Fatalf("recorded tools = %v, want %v", sess.State.RecentlyUsedTools, want)
	}
	if sess.State.TokenUsage.Total == 0 {
		t.Fatal("no token usage recorded")
	}
	history, err := store.Messages(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var roles []chat.Role
	calls := 0
	for _, m := range history {
		roles = append(roles, m.Role)
		calls += len(m.ToolCalls)
	}
	if calls != 6 || roles[0] != chat.RoleUser || roles[len(roles)-1] != chat.RoleAssistant {
		t.Fatalf("history keeps %d tool calls (want 6), roles %v", calls, roles)
	}
}

func TestRunErrors(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, shipped(t))
	cr, _ := agents.Get("cognitive-reasoner")
	planner, _ := agents.Get("planner")
	ctx := context.Background()

	if _, err := agent.Started(cr.Run(ctx, session.NewID(), agent.Text("   "))); !errors.Is(err, agent.ErrInvalidMessage) {
		t.Errorf("empty message: %v", err)
	}
	if _, err := agent.Started(cr.Run(ctx, session.NewID(), agent.Text(strings.Repeat("x", agent.DefaultMaxMessageBytes+1)))); !errors.Is(err, agent.ErrInvalidMessage) {
		t.Errorf("long message: %v", err)
	}
	if _, err := agent.Started(cr.Run(ctx, session.NewID(), agent.Text("bad \xff utf-8"))); !errors.Is(err, agent.ErrInvalidMessage) {
		t.Errorf("invalid UTF-8: %v", err)
	}

	id := session.NewID()
	events, err := agent.Started(cr.Run(ctx, id, agent.Input{Text: "Critique this plan", Owner: "alice"}))
	if err != nil {
		t.Fatal(err)
	}
	// While the first turn holds the session, a second one is refused.
	if _, err := agent.Started(cr.Run(ctx, id, agent.Input{Text: "hello", Owner: "alice"})); !errors.Is(err, session.ErrBusy) {
		t.Errorf("second turn on a busy session: %v, want ErrBusy", err)
	}
	for range events {
	}
	if _, err := agent.Started(planner.Run(ctx, id, agent.Input{Text: "plan it", Owner: "alice"})); !errors.Is(err, agent.ErrWrongAgent) {
		t.Errorf("another agent on the session: %v, want ErrWrongAgent", err)
	}
	// Another owner using the same ID gets a session of its own.
	other, err := agent.Started(cr.Run(ctx, id, agent.Input{Text: "hello", Owner: "mallory"}))
	if err != nil {
		t.Errorf("another owner's turn on the same ID: %v", err)
	} else {
		for range other {
		}
		mine, _ := store.Messages(ctx, session.Key("alice", id), 0)
		theirs, _ := store.Messages(ctx, session.Key("mallory", id), 0)
		if len(mine) == 0 || len(theirs) == 0 || mine[0].Content != "Critique this plan" || theirs[0].Content != "hello" {
			t.Errorf("alice's history %+v, mallory's %+v", mine, theirs)
		}
	}
	// After the turn the session is free again.
	events, err = agent.Started(cr.Run(ctx, id, agent.Input{Text: "thanks", Owner: "alice"}))
	if err != nil {
		t.Fatalf("turn after the first finished: %v", err)
	}
	for range events {
	}
}

// TestHistoryPolicy: the model sees the history the template's chatSettings
// allow, cut so that it starts with a user message, tool calls and results
// included from earlier turns. With a context budget (the default) lastN
// does not cut: older turns are summarized instead, past the budget.
func TestHistoryPolicy(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		// wantLen is the number of messages the model gets on the third
		// turn (two earlier turns of user + assistant each, then the new
		// user message).
		wantLen int
	}{
		{"all", `"historyPolicy": "all"`, 5},
		{"lastN cut to a user message", `"historyPolicy": "lastN", "historyLength": 3}, "options": {"context": "off"`, 3},
		{"lastN keeps a whole last turn", `"historyPolicy": "lastN", "historyLength": 2}, "options": {"context": "off"`, 3},
		{"lastN drops a lone assistant message", `"historyPolicy": "lastN", "historyLength": 1}, "options": {"context": "off"`, 1},
		{"lastN under a context budget", `"historyPolicy": "lastN", "historyLength": 1`, 5},
		{"none", `"historyPolicy": "none"`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := `{"agentId": "h", "name": "H", "nodes": ["llm.openai"], "chatSettings": {` + tt.settings + `}}`
			a, ds := template.Load("h.json", []byte(src), template.Config{})
			if a == nil {
				t.Fatal(ds.Err())
			}
			rec := &recordingModel{}
			store := session.NewMemory(session.Config{})
			defer store.Close()
			agents := newAgents(t, store, func(*template.Template) (llmorch.Model, error) { return rec, nil }, []*template.Loaded{a})
			n, _ := agents.Get("h")
			id := session.NewID()
			for _, m := range []string{"one", "two", "three"} {
				turn(t, n, id, m)
			}
			got := rec.last.Messages
			if len(got) != tt.wantLen || got[0].Role != chat.RoleUser || got[len(got)-1].Content != "three" {
				t.Fatalf("the model got %d messages %+v, want %d starting with a user message and ending with \"three\"", len(got), got, tt.wantLen)
			}
		})
	}
}

// recordingModel answers "ok" and keeps the last request.
type recordingModel struct{ last llmorch.Request }

func (m *recordingModel) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "rec"} }

func (m *recordingModel) Stream(_ context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	m.last = req
	return func(yield func(chat.Event, error) bool) {
		yield(chat.Event{Kind: chat.KindTextDelta, Text: "ok"}, nil)
	}
}

// TestRunIsLazy: Run takes nothing until its sequence is iterated: a turn
// never ranged over leaves its session free; a bad session ID is the
// sequence's only item.
func TestRunIsLazy(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n := gatedNode(t, store, agent.Options{}, newGatedModel())
	id := session.NewID()
	_ = n.Run(context.Background(), id, agent.Text("never ranged"))
	if _, _, err := store.Claim(context.Background(), id); err != nil {
		t.Fatalf("a turn never ranged over holds the session: %v", err)
	}
	for _, bad := range []string{"", "short", "bad:id/with spaces", strings.Repeat("x", 129)} {
		items := 0
		for ev, err := range n.Run(context.Background(), bad, agent.Text("hi")) {
			items++
			if !errors.Is(err, agent.ErrInvalidSessionID) || ev.Kind != "" {
				t.Errorf("session ID %q: %+v, %v", bad, ev, err)
			}
		}
		if items != 1 {
			t.Errorf("session ID %q: %d items, want the error alone", bad, items)
		}
	}
}
