package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
)

// mockEnv is an env whose agents (from templates, "" for the default
// ones) answer with what mock is given, over real HTTP in OpenAI's format.
func mockEnv(t *testing.T, templates string, store session.Store) (*env, *mockllm.Server) {
	t.Helper()
	mock := mockllm.New()
	t.Cleanup(mock.Close)
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOptions{model: model, templates: templates, store: store}), mock
}

func calls(cs ...mockllm.ToolCall) mockllm.Script {
	return mockllm.Script{ToolCalls: cs, Usage: &mockllm.Usage{Input: 100, Output: 10}}
}

func answer(text string) mockllm.Script {
	return mockllm.Script{Text: []string{text}, Usage: &mockllm.Usage{Input: 100, Output: 10}}
}

const (
	brainstormArgs = `{"challenge": "an offsite", "ideas": "**Reframing** ..."}`
	compareArgs    = `{"topic": "two venues", "comparison": "**Options** ..."}`
)

// orchestrationFrames decodes a turn's data-orchestration frames.
func orchestrationFrames(t *testing.T, evs []sseEvent) []uiOrchestration {
	t.Helper()
	var out []uiOrchestration
	for _, ev := range evs {
		if chunkType(t, ev.Data) != "data-orchestration" {
			continue
		}
		var c struct {
			Data uiOrchestration `json:"data"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Data)
	}
	return out
}

type viewedSession struct {
	State struct {
		ActiveStep        string   `json:"activeStep"`
		SequenceIndex     int      `json:"sequenceIndex"`
		RecentlyUsedTools []string `json:"recentlyUsedTools"`
		UserMessages      int      `json:"userMessages"`
		TurnStart         any      `json:"turnStart"`
	} `json:"state"`
	Orchestration *chat.Snapshot `json:"orchestration"`
	Usage         wire.Totals    `json:"usage"`
	Messages      []chat.Message `json:"messages"`
}

func (e *env) session(id string) viewedSession {
	e.t.Helper()
	var v viewedSession
	getJSON(e.t, e.do(http.MethodGet, "/api/sessions/"+id, ""), http.StatusOK, &v)
	return v
}

// TestRegenerateRestoresTheStateOverHTTP: the AI SDK's regenerate of an
// answer that ran brainstorm and compare starts from the state that
// answer started from: the same step, position and offer, and the tool
// history of before it; the usage keeps both answers' spend and shows the
// dropped one's as regenerated.
func TestRegenerateRestoresTheStateOverHTTP(t *testing.T) {
	e, mock := mockEnv(t, "", nil)
	chatID := "regen-state-" + session.NewID()
	first, second := "hello there", "Please explore options for a team offsite"
	mock.Enqueue(answer("hi"))
	e.streamChat("explorer", uiBody(chatID, "submit-message", "", first))
	before := e.session(chatID)

	mock.Enqueue(calls(mockllm.ToolCall{Name: "brainstorm", Arguments: brainstormArgs}), calls(mockllm.ToolCall{Name: "compare", Arguments: compareArgs}), answer("Pick the lake."))
	res, evs := e.streamChat("explorer", uiBody(chatID, "submit-message", "", first, "hi", second))
	oldTurn := res.Header.Get("X-Turn-Id")
	startedAt := orchestrationFrames(t, evs)[0]
	answered := e.session(chatID)
	if answered.State.SequenceIndex != 2 || !slices.Equal(answered.State.RecentlyUsedTools, []string{"brainstorm", "compare"}) {
		t.Fatalf("after the answer: %+v", answered.State)
	}

	mock.Enqueue(answer("Pick the mountains."))
	_, evs = e.streamChat("explorer", uiBody(chatID, "regenerate-message", oldTurn, first, "hi", second))
	restartedAt := orchestrationFrames(t, evs)[0]
	if restartedAt.ActiveStep != startedAt.ActiveStep || restartedAt.SequenceIndex != startedAt.SequenceIndex || !slices.Equal(restartedAt.OfferedTools, startedAt.OfferedTools) {
		t.Fatalf("the regenerated answer started at %+v, the replaced one at %+v", restartedAt, startedAt)
	}
	after := e.session(chatID)
	st := after.State
	if st.ActiveStep != startedAt.ActiveStep || st.SequenceIndex != startedAt.SequenceIndex ||
		!slices.Equal(st.RecentlyUsedTools, before.State.RecentlyUsedTools) || st.UserMessages != 2 {
		t.Fatalf("after regenerate %+v; the replaced answer started at step %q position %d with tools %v after 2 messages",
			st, startedAt.ActiveStep, startedAt.SequenceIndex, before.State.RecentlyUsedTools)
	}
	if st.TurnStart != nil {
		t.Errorf("the session view shows the turn-start bookkeeping: %v", st.TurnStart)
	}
	if r := after.Usage.Regenerated; r == nil || r.Total != 330 || after.Usage.Total != answered.Usage.Total+110 {
		t.Fatalf("usage %+v (was %+v): want both answers' spend, 330 tokens of it regenerated", after.Usage, answered.Usage)
	}
}

// openAIMessages writes a conversation in OpenAI's chat format, as a
// client that keeps it does: a tool result is its text, nothing more.
func openAIMessages(msgs []chat.Message) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		switch m.Role {
		case chat.RoleUser:
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		case chat.RoleAssistant:
			am := map[string]any{"role": "assistant", "content": m.Content}
			var tcs []map[string]any
			for _, c := range m.ToolCalls {
				tcs = append(tcs, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}})
			}
			if len(tcs) > 0 {
				am["tool_calls"] = tcs
			}
			out = append(out, am)
		case chat.RoleTool:
			out = append(out, map[string]any{"role": "tool", "tool_call_id": m.ToolCallID, "content": m.Content})
		}
	}
	return out
}

// responsesInput writes a conversation as Responses API input items.
func responsesInput(msgs []chat.Message) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		switch m.Role {
		case chat.RoleUser:
			out = append(out, map[string]any{"role": "user", "content": m.Content})
		case chat.RoleAssistant:
			if m.Content != "" {
				out = append(out, map[string]any{"role": "assistant", "content": m.Content})
			}
			for _, c := range m.ToolCalls {
				out = append(out, map[string]any{"type": "function_call", "call_id": c.ID, "name": c.Name, "arguments": string(c.Arguments)})
			}
		case chat.RoleTool:
			out = append(out, map[string]any{"type": "function_call_output", "call_id": m.ToolCallID, "output": m.Content})
		}
	}
	return out
}

// TestStatelessReplayMatchesTheSession: a conversation with a call refused
// for invalid arguments and a call the user declined, replayed by a
// stateless chat completion and by a response without a stored chain,
// starts where the session that had it is: neither call moves the
// sequence there, so neither moves it in the replay.
func TestStatelessReplayMatchesTheSession(t *testing.T) {
	e, mock := mockEnv(t, "testdata/contract", nil)
	id := "parity-" + session.NewID()
	post := func(body map[string]any, headers ...string) map[string]any {
		t.Helper()
		var v map[string]any
		getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", jsonBody(body), headers...), http.StatusOK, &v)
		return v
	}
	snapshotOf := func(v map[string]any) chat.Snapshot {
		t.Helper()
		ext, _ := v["agentdock"].(map[string]any)
		b, _ := json.Marshal(ext["orchestration"])
		var s chat.Snapshot
		if err := json.Unmarshal(b, &s); err != nil || s.ActiveStep == "" {
			t.Fatalf("no orchestration in %v", v)
		}
		return s
	}
	// Live: brainstorm with invalid arguments (not run), then a valid one
	// (position 2), then compare, which waits for approval; the next
	// message declines it.
	mock.Enqueue(
		calls(mockllm.ToolCall{Name: "brainstorm", Arguments: `{}`}),
		calls(mockllm.ToolCall{Name: "brainstorm", Arguments: brainstormArgs}),
		calls(mockllm.ToolCall{Name: "compare", Arguments: compareArgs}),
	)
	post(map[string]any{"model": "approver", "messages": []any{map[string]any{"role": "user", "content": "explore venues"}}}, "X-Session-Id", id)
	mock.Enqueue(answer("Fine, no comparison."))
	live := snapshotOf(post(map[string]any{"model": "approver", "messages": []any{map[string]any{"role": "user", "content": "explore further"}}}, "X-Session-Id", id))
	if live.ActiveStep != "Explore" || live.SequenceIndex != 1 || !slices.Equal(live.OfferedTools, []string{"compare"}) {
		t.Fatalf("the live session's turn started at %+v, want Explore at position 2 offering compare", live)
	}
	history := e.session(id).Messages
	var notRun []string
	for _, m := range history {
		if m.Role == chat.RoleTool && m.NotRun {
			notRun = append(notRun, m.Content)
		}
	}
	if len(notRun) != 2 || !strings.HasPrefix(notRun[0], chat.NotRunPrefix+"invalid arguments") || !strings.HasPrefix(notRun[1], chat.NotRunPrefix+"the user declined") {
		t.Fatalf("results of calls that did not run: %q", notRun)
	}
	// The conversation up to the message the live turn answered.
	last := slices.IndexFunc(history, func(m chat.Message) bool { return m.Role == chat.RoleUser && m.Content == "explore further" })
	conversation := history[:last+1]

	mock.Enqueue(answer("Fine, no comparison."))
	replayed := snapshotOf(post(map[string]any{"model": "approver", "messages": openAIMessages(conversation)}))
	if replayed.ActiveStep != live.ActiveStep || replayed.SequenceIndex != live.SequenceIndex || !slices.Equal(replayed.OfferedTools, live.OfferedTools) {
		t.Fatalf("/v1/chat/completions replayed to %+v, the live session was at %+v", replayed, live)
	}

	mock.Enqueue(answer("Fine, no comparison."))
	var resp map[string]any
	getJSON(t, e.do(http.MethodPost, "/v1/responses", jsonBody(map[string]any{"model": "approver", "store": false, "input": responsesInput(conversation)})), http.StatusOK, &resp)
	if replayed := snapshotOf(resp); replayed.ActiveStep != live.ActiveStep || replayed.SequenceIndex != live.SequenceIndex || !slices.Equal(replayed.OfferedTools, live.OfferedTools) {
		t.Fatalf("/v1/responses replayed to %+v, the live session was at %+v", replayed, live)
	}
}

// TestTemplateWarningsShown: /api/agents/{id} shows a template's load
// warnings, a misspelt key with the key meant among them.
func TestTemplateWarningsShown(t *testing.T) {
	e, _ := mockEnv(t, "testdata/contract", nil)
	var d struct {
		Warnings []string `json:"warnings"`
	}
	getJSON(t, e.do(http.MethodGet, "/api/agents/approver", ""), http.StatusOK, &d)
	want := `descripton: unknown key; did you mean "description"?`
	if !slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.HasSuffix(w, want) }) {
		t.Fatalf("warnings %q lack %q", d.Warnings, want)
	}
}

// TestSessionViewAfterAStepIsRemoved: a session whose active step the
// template no longer has (the server restarted with a new version of it)
// is shown in the step the rules choose now, not in the vanished one, and
// its next turn that answers approvals starts there.
func TestSessionViewAfterAStepIsRemoved(t *testing.T) {
	store := session.NewMemory(session.Config{})
	e, mock := mockEnv(t, "testdata/contract", store)
	id := "restart-" + session.NewID()
	mock.Enqueue(calls(mockllm.ToolCall{Name: "brainstorm", Arguments: brainstormArgs}), calls(mockllm.ToolCall{Name: "compare", Arguments: compareArgs}))
	var v map[string]any
	getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", jsonBody(map[string]any{"model": "approver", "messages": []any{map[string]any{"role": "user", "content": "explore venues"}}}), "X-Session-Id", id), http.StatusOK, &v)
	if st := e.session(id).State; st.ActiveStep != "Explore" {
		t.Fatalf("before the restart: %+v", st)
	}

	restarted, mock2 := mockEnv(t, "testdata/contract-v2", store)
	view := restarted.session(id)
	if view.State.ActiveStep != "General" || view.Orchestration == nil || view.Orchestration.ActiveStep != "General" {
		t.Fatalf("after the restart the session shows step %q (snapshot %+v), want General", view.State.ActiveStep, view.Orchestration)
	}
	// Answering the held compare goes on in General too.
	sess, err := store.Get(t.Context(), id)
	if err != nil || len(sess.PendingApprovals()) != 1 {
		t.Fatalf("pending approvals %+v, %v", sess.Approvals, err)
	}
	mock2.Enqueue(answer("Compared."))
	body := map[string]any{"id": id, "messages": []any{map[string]any{"id": "a1", "role": "assistant", "parts": []any{map[string]any{
		"type": "tool-compare", "toolCallId": sess.PendingApprovals()[0].Call.ID, "state": "approval-responded",
		"approval": map[string]any{"id": sess.PendingApprovals()[0].ID, "approved": true},
	}}}}}
	_, evs := restarted.streamChat("approver", jsonBody(body))
	if frames := orchestrationFrames(t, evs); len(frames) == 0 || frames[0].ActiveStep != "General" {
		t.Fatalf("the turn answering the approval started at %+v, want General", frames)
	}
}
