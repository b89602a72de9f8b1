package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
)

func drainTurn(t *testing.T, events func(func(chat.Event) bool)) []chat.Event {
	t.Helper()
	var out []chat.Event
	for ev := range events {
		out = append(out, ev)
	}
	if len(out) == 0 || out[len(out)-1].Kind != chat.KindDone {
		t.Fatalf("turn did not end with done: %v", kinds(out))
	}
	return out
}

// TestStatelessTurnMatchesSessionTurn: a stateless turn over the
// conversation a session holds takes the same steps, offers and tool calls
// as the session's own turn, for every shipped agent, and leaves nothing
// in the store.
func TestStatelessTurnMatchesSessionTurn(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, shipped(t))
	first := "Critique the argument that remote work improves productivity"
	second := "Research the history of electric cars"
	for _, n := range agents.List() {
		t.Run(n.ID(), func(t *testing.T) {
			ctx := context.Background()
			id := session.NewID()
			turn(t, n, id, first)
			history, err := store.Messages(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			sess, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			replayed := n.Engine().Replay(orchestration.State{}, history, nil)
			live := sess.State
			if replayed.ActiveStep != live.ActiveStep || replayed.SequenceIndex != live.SequenceIndex ||
				!replayed.RecentlyUsedTools.Equal(live.RecentlyUsedTools.Slice()...) ||
				replayed.UserMessages != live.UserMessages || replayed.TurnToolUses != live.TurnToolUses {
				t.Fatalf("replaying the history gives %+v, the session has %+v", replayed, live)
			}

			want := turn(t, n, id, second)
			stateless := session.NewID()
			events, err := agent.Started(n.Run(ctx, stateless, agent.Input{Text: second, Stateless: true, History: history}))
			if err != nil {
				t.Fatal(err)
			}
			got := drainTurn(t, events)
			if !slices.Equal(toolCalls(got), toolCalls(want)) {
				t.Fatalf("stateless tool calls %v, session's %v", toolCalls(got), toolCalls(want))
			}
			gs, ws := snapshots(got), snapshots(want)
			if !slices.EqualFunc(gs, ws, func(a, b chat.Snapshot) bool {
				return a.ActiveStep == b.ActiveStep && a.SequenceIndex == b.SequenceIndex && slices.Equal(a.OfferedTools, b.OfferedTools) && a.Transition == b.Transition
			}) {
				t.Fatalf("stateless snapshots %+v, session's %+v", gs, ws)
			}
			if _, err := store.Get(ctx, stateless); !errors.Is(err, session.ErrNotFound) {
				t.Fatalf("the stateless turn left a session in the store: %v", err)
			}
		})
	}
}

// TestStatelessHistoryReachesModel: the model of a stateless turn gets the
// conversation (within the template's history window) and the message.
func TestStatelessHistoryReachesModel(t *testing.T) {
	for _, tt := range []struct {
		settings string
		want     []string
	}{
		{`"historyPolicy": "all"`, []string{"one", "answer one", "two", "answer two", "three"}},
		{`"historyPolicy": "lastN", "historyLength": 2}, "options": {"context": "off"`, []string{"two", "answer two", "three"}},
		{`"historyPolicy": "lastN", "historyLength": 2`, []string{"one", "answer one", "two", "answer two", "three"}},
		{`"historyPolicy": "none"`, []string{"three"}},
	} {
		src := `{"agentId": "h", "name": "H", "nodes": ["llm.openai"], "chatSettings": {` + tt.settings + `}}`
		a, ds := template.Load("h.json", []byte(src), template.Config{})
		if a == nil {
			t.Fatal(ds.Err())
		}
		rec := &recordingModel{}
		store := session.NewMemory(session.Config{})
		agents := newAgents(t, store, func(*template.Template) (llmorch.Model, error) { return rec, nil }, []*template.Loaded{a})
		n, _ := agents.Get("h")
		history := []chat.Message{
			{Role: chat.RoleUser, Content: "one"}, {Role: chat.RoleAssistant, Content: "answer one"},
			{Role: chat.RoleUser, Content: "two"}, {Role: chat.RoleAssistant, Content: "answer two"},
		}
		events, err := agent.Started(n.Run(context.Background(), session.NewID(), agent.Input{Text: "three", Stateless: true, History: history}))
		if err != nil {
			t.Fatal(err)
		}
		drainTurn(t, events)
		var got []string
		for _, m := range rec.last.Messages {
			got = append(got, m.Content)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: the model got %q, want %q", tt.settings, got, tt.want)
		}
		if store.Len() != 0 {
			t.Errorf("%s: the stateless turn stored %d sessions", tt.settings, store.Len())
		}
		store.Close()
	}
}

// TestWithHistoryOnSession: messages given with WithHistory join the
// session's history before the message, and the orchestration counts them.
func TestWithHistoryOnSession(t *testing.T) {
	rec := &recordingModel{}
	a, ds := template.Load("h.json", []byte(`{"agentId": "h", "name": "H", "nodes": ["llm.openai"]}`), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, func(*template.Template) (llmorch.Model, error) { return rec, nil }, []*template.Loaded{a})
	n, _ := agents.Get("h")
	ctx := context.Background()
	id := session.NewID()
	turn(t, n, id, "one")
	events, err := agent.Started(n.Run(ctx, id, agent.Input{Text: "three", History: []chat.Message{{Role: chat.RoleUser, Content: "two"}, {Role: chat.RoleAssistant, Content: "answer two"}}}))
	if err != nil {
		t.Fatal(err)
	}
	drainTurn(t, events)
	stored, _ := store.Messages(ctx, id, 0)
	var got []string
	for _, m := range stored {
		got = append(got, m.Content)
	}
	if want := []string{"one", "ok", "two", "answer two", "three", "ok"}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if len(rec.last.Messages) != 5 {
		t.Fatalf("the model got %+v", rec.last.Messages)
	}
	sess, _ := store.Get(ctx, id)
	if sess.State.UserMessages != 3 || sess.State.LastUserMessage != "three" {
		t.Fatalf("state %+v", sess.State)
	}
}

// TestRegenerate: the last answer is replaced, the message is not stored
// twice, the model sees the conversation without the dropped answer, and
// only the last user message can be regenerated.
func TestRegenerate(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, shipped(t))
	n, _ := agents.Get("cognitive-reasoner")
	ctx := context.Background()
	id := session.NewID()
	turn(t, n, id, "Hello there")
	turn(t, n, id, "Critique the argument that remote work improves productivity")
	before, _ := store.Messages(ctx, id, 0)
	answered, _ := store.Get(ctx, id)

	if _, err := agent.Started(n.Run(ctx, id, agent.Input{Text: "Hello there", Regenerate: true})); !errors.Is(err, agent.ErrNotLastMessage) {
		t.Fatalf("regenerating an earlier message: %v, want ErrNotLastMessage", err)
	}
	events, err := agent.Started(n.Run(ctx, id, agent.Input{Text: "Critique the argument that remote work improves productivity", Regenerate: true}))
	if err != nil {
		t.Fatal(err)
	}
	evs := drainTurn(t, events)
	if got := toolCalls(evs); !slices.Equal(got, []string{"critique", "debate", "reflect"}) {
		t.Fatalf("regenerated turn's tool calls %v", got)
	}
	after, _ := store.Messages(ctx, id, 0)
	users := 0
	for _, m := range after {
		if m.Role == chat.RoleUser {
			users++
		}
	}
	if users != 2 || after[len(after)-1].Role != chat.RoleAssistant {
		t.Fatalf("after regenerate the history has %d user messages: %+v", users, after)
	}
	// The first turn is untouched and the second's answer is the new one.
	firstTurn := slices.IndexFunc(before[1:], func(m chat.Message) bool { return m.Role == chat.RoleUser }) + 1
	if !slices.EqualFunc(after[:firstTurn+1], before[:firstTurn+1], func(a, b chat.Message) bool { return a.Content == b.Content && a.Role == b.Role }) {
		t.Fatalf("regenerate changed the earlier turn:\n%+v\n%+v", before, after)
	}
	if len(after) != len(before) {
		t.Fatalf("the regenerated turn has %d messages, the old one %d", len(after), len(before))
	}
	// The orchestration went back to where the dropped answer started:
	// the same answer again leaves the same state, its message counted
	// once, and the dropped answer's spend stays counted as regenerated.
	regenerated, _ := store.Get(ctx, id)
	st, was := regenerated.State, answered.State
	if st.ActiveStep != was.ActiveStep || st.SequenceIndex != was.SequenceIndex || !st.RecentlyUsedTools.Equal(was.RecentlyUsedTools.Slice()...) || st.UserMessages != 2 {
		t.Fatalf("after regenerate %+v, after the first answer %+v", st, was)
	}
	if st.RegeneratedUsage.IsZero() || st.TokenUsage.Total <= was.TokenUsage.Total {
		t.Fatalf("usage %+v, regenerated %+v: both answers' spend must be kept, the dropped one's reported", st.TokenUsage, st.RegeneratedUsage)
	}
	if replayed := n.Engine().Replay(orchestration.State{}, after, nil); !replayed.RecentlyUsedTools.Equal(st.RecentlyUsedTools.Slice()...) || replayed.ActiveStep != st.ActiveStep || replayed.SequenceIndex != st.SequenceIndex {
		t.Fatalf("replaying the history gives %+v, the session has %+v", replayed, st)
	}

	// On a session with no message yet, Regenerate is an ordinary turn.
	fresh := session.NewID()
	events, err = agent.Started(n.Run(ctx, fresh, agent.Input{Text: "Hello there", Regenerate: true}))
	if err != nil {
		t.Fatal(err)
	}
	drainTurn(t, events)
	if msgs, _ := store.Messages(ctx, fresh, 0); len(msgs) != 2 || msgs[0].Content != "Hello there" {
		t.Fatalf("regenerate on a new session stored %+v", msgs)
	}
	if _, err := agent.Started(n.Run(ctx, fresh, agent.Input{Text: "x", Regenerate: true, Stateless: true})); err == nil {
		t.Fatal("Regenerate with Stateless was accepted")
	}
}

// TestEdit: an edited last message replaces the old one and its answer;
// the earlier turn is untouched, the message is answered in its place and
// the orchestration reads the new text.
func TestEdit(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, shipped(t))
	n, _ := agents.Get("cognitive-reasoner")
	ctx := context.Background()
	id := session.NewID()
	turn(t, n, id, "Hello there")
	turn(t, n, id, "Critique the argument that remote work improves productivity")
	before, _ := store.Messages(ctx, id, 0)
	firstTurn := slices.IndexFunc(before[1:], func(m chat.Message) bool { return m.Role == chat.RoleUser }) + 1

	const edited = "[offline:echo] the edited question's answer"
	events, err := agent.Started(n.Run(ctx, id, agent.Input{Text: edited, Edit: true}))
	if err != nil {
		t.Fatal(err)
	}
	drainTurn(t, events)
	after, _ := store.Messages(ctx, id, 0)
	var users []string
	for _, m := range after {
		if m.Role == chat.RoleUser {
			users = append(users, m.Content)
		}
	}
	if !slices.Equal(users, []string{"Hello there", edited}) || len(after) != firstTurn+2 || after[len(after)-1].Content != "the edited question's answer" {
		t.Fatalf("after the edit: %+v", after)
	}
	if !slices.EqualFunc(after[:firstTurn], before[:firstTurn], func(a, b chat.Message) bool { return a.Content == b.Content && a.Role == b.Role }) {
		t.Fatalf("the edit changed the earlier turn:\n%+v\n%+v", before, after)
	}
	if sess, _ := store.Get(ctx, id); sess.State.LastUserMessage != edited {
		t.Fatalf("the orchestration read %q", sess.State.LastUserMessage)
	}

	// On a session with no message yet, Edit is an ordinary turn.
	fresh := session.NewID()
	events, err = agent.Started(n.Run(ctx, fresh, agent.Input{Text: "[offline:echo] hi", Edit: true}))
	if err != nil {
		t.Fatal(err)
	}
	drainTurn(t, events)
	if msgs, _ := store.Messages(ctx, fresh, 0); len(msgs) != 2 || msgs[0].Content != "[offline:echo] hi" {
		t.Fatalf("an edit on a new session stored %+v", msgs)
	}
}

func TestCheckHistory(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, shipped(t))
	n, _ := agents.Get("cognitive-reasoner")
	args := json.RawMessage(`{}`)
	user := chat.Message{Role: chat.RoleUser, Content: "hi"}
	call := func(id, name string) chat.Message {
		return chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: name, Arguments: args}}}
	}
	result := func(id string) chat.Message { return chat.Message{Role: chat.RoleTool, ToolCallID: id, Content: "r"} }
	tests := []struct {
		name      string
		msgs      []chat.Message
		wantIndex int // -1: valid
		want      string
	}{
		{"empty", nil, -1, ""},
		{"a whole conversation", []chat.Message{user, call("c1", "critique"), result("c1"), {Role: chat.RoleAssistant, Content: "done"}, user}, -1, ""},
		{"a tool the agent lacks (an earlier agent's, a made-up name): history like any", []chat.Message{user, call("c1", "get_weather"), result("c1")}, -1, ""},
		{"a call without a tool name", []chat.Message{user, call("c1", ""), result("c1")}, 1, "has no tool name"},
		{"a tool name no provider takes", []chat.Message{user, call("c1", strings.Repeat("x", 300)), result("c1")}, 1, "longer than 256 bytes"},
		{"a call without its result", []chat.Message{user, call("c1", "critique"), user}, 1, "has no tool message"},
		{"a call without its result at the end", []chat.Message{user, call("c1", "critique")}, 1, "has no tool message"},
		{"a result without its call", []chat.Message{user, result("c9")}, 1, "does not follow"},
		{"a result after other text", []chat.Message{user, call("c1", "critique"), result("c1"), result("c1")}, 3, "does not follow"},
		{"a call ID used twice", []chat.Message{user, call("c1", "critique"), result("c1"), call("c1", "debate"), result("c1")}, 3, "used twice"},
		{"an empty assistant message", []chat.Message{user, {Role: chat.RoleAssistant}}, 1, "needs text or tool calls"},
		{"an empty user message", []chat.Message{{Role: chat.RoleUser, Content: " "}}, 0, "empty"},
		{"a system message", []chat.Message{{Role: chat.RoleSystem, Content: "be nice"}}, 0, `role "system"`},
	}
	for _, tt := range tests {
		err := n.CheckHistory(tt.msgs, nil)
		var he *agent.HistoryError
		switch {
		case tt.wantIndex < 0 && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantIndex < 0:
		case !errors.As(err, &he) || !errors.Is(err, agent.ErrInvalidMessage):
			t.Errorf("%s: %v, want a HistoryError", tt.name, err)
		case he.Index != tt.wantIndex || !strings.Contains(he.Reason, tt.want):
			t.Errorf("%s: index %d reason %q, want %d and %q", tt.name, he.Index, he.Reason, tt.wantIndex, tt.want)
		}
	}
	// Run refuses such a history before anything is stored.
	id := session.NewID()
	_, err := agent.Started(n.Run(context.Background(), id, agent.Input{Text: "hi", History: []chat.Message{user, call("c1", "critique")}}))
	if !errors.Is(err, agent.ErrInvalidMessage) {
		t.Fatalf("Run with a bad history: %v", err)
	}
	if _, err := store.Get(context.Background(), id); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a refused history left a session: %v", err)
	}
}
