package llmorch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
)

// evaluating has AgentDock's Cognitive Reasoner's evaluation sequence.
const evaluating = `{
  "agentId": "t", "name": "T", "nodes": ["llm.openai", "think", "reflect", "critique", "debate"],
  "orchestration": {"steps": [
    {"name": "EvaluationMode", "conditions": [{"type": "message_contains", "value": "critique"}],
     "sequence": ["critique", "debate", "reflect"], "availableTools": {"allowed": ["critique", "debate", "reflect"]}},
    {"name": "Chat", "isDefault": true}
  ]}
}`

// TestParallelCallsAgainstASequence: one answer calling critique, debate
// and reflect while [critique] is offered runs critique only; debate and
// reflect are refused, not run and not recorded, each refusal naming the
// step, the position and the tools that model call was offered. The
// history keeps the three calls, the refused ones marked as not run, so
// that replaying it gives the session's state.
func TestParallelCallsAgainstASequence(t *testing.T) {
	model := &scripted{replies: [][]string{{"critique", "debate", "reflect"}, {"debate"}, nil}}
	f, _ := newService(t, evaluating, llmorch.ServiceConfig{Model: model})
	f.model = model
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "critique this plan")))
	results := map[string]chat.ToolResult{}
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult {
			results[ev.ToolResult.CallID] = *ev.ToolResult
		}
	}
	if r := results["c00"]; r.IsError || r.NotRun {
		t.Fatalf("critique: %+v", r)
	}
	for _, id := range []string{"c01", "c02"} {
		r := results[id]
		want := "Refused: tool \"" + r.Name + "\" is not available in step \"EvaluationMode\", which requires the sequence critique -> debate -> reflect and is at position 1; tools you may use now: critique."
		if !r.NotRun || r.Content != want {
			t.Errorf("%s: %+v\nwant content %q", r.Name, r, want)
		}
	}
	if got := offeredNames(model.reqs[1]); !slices.Equal(got, []string{"debate"}) {
		t.Fatalf("the next model call was offered %v, want [debate]", got)
	}
	sess, err := f.store.Get(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	if st := sess.State; st.SequenceIndex != 2 || !st.RecentlyUsedTools.Equal("critique", "debate") {
		t.Fatalf("state %+v: want critique then debate recorded, position 3", st)
	}
	history, _ := f.store.Messages(context.Background(), f.id, 0)
	var notRun []string
	for _, m := range history {
		if m.Role == chat.RoleTool && m.NotRun {
			notRun = append(notRun, m.ToolName)
		}
	}
	if !slices.Equal(notRun, []string{"debate", "reflect"}) {
		t.Fatalf("tool messages marked not run: %v, want [debate reflect]", notRun)
	}
	// The fixture's turn start stores the message in the state only.
	conversation := append([]chat.Message{{Role: chat.RoleUser, Content: "critique this plan"}}, history...)
	replayed := f.eng.Replay(orchestration.State{}, conversation, nil)
	if replayed.SequenceIndex != sess.State.SequenceIndex || !replayed.RecentlyUsedTools.Equal(sess.State.RecentlyUsedTools.Slice()...) {
		t.Fatalf("replaying the history gives %+v, the session has %+v", replayed, sess.State)
	}
}

// TestParallelCallsAllOffered: calls of one answer that were all offered
// run, and a sequence advances once per matching call in the answer's
// order: critique twice in one answer passes position 1 once.
func TestParallelCallsAllOffered(t *testing.T) {
	model := &scripted{replies: [][]string{{"critique", "critique"}, nil}}
	f, _ := newService(t, evaluating, llmorch.ServiceConfig{Model: model})
	collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "critique this plan")))
	sess, _ := f.store.Get(context.Background(), f.id)
	if st := sess.State; st.SequenceIndex != 1 || !st.RecentlyUsedTools.Equal("critique", "critique") {
		t.Fatalf("state %+v: want both critiques recorded, position 2", st)
	}
}

// TestUnpassableSequencePosition: at a sequence position no provided tool
// can fill, the turn's orchestration event and the model's prompt say the
// sequence stops there, no warning is repeated at every model call, and a
// call of the missing tool is refused saying so.
func TestUnpassableSequencePosition(t *testing.T) {
	const tmpl = `{"agentId": "t", "name": "T", "nodes": ["llm.openai", "think", "reflect", "pubmed_search"],
  "orchestration": {"steps": [
    {"name": "Research", "conditions": [{"type": "message_contains", "value": "research"}],
     "sequence": ["think", "pubmed_search"], "availableTools": {"allowed": ["think", "reflect", "pubmed_search"]}}
  ]}}`
	model := &scripted{replies: [][]string{{"think"}, {"pubmed_search"}, {"reflect"}, nil}}
	f, a := newService(t, tmpl, llmorch.ServiceConfig{Model: model})
	if len(a.Warnings) == 0 {
		t.Fatal("no load warning for the unpassable position")
	}
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "research this")))
	var blocked []string
	var refusal string
	for _, ev := range evs {
		switch ev.Kind {
		case chat.KindOrchestration:
			blocked = append(blocked, ev.Orchestration.Blocked)
		case chat.KindWarning:
			t.Errorf("warning event %q", ev.Text)
		case chat.KindToolResult:
			if ev.ToolResult.Name == "pubmed_search" {
				refusal = ev.ToolResult.Content
			}
		}
	}
	if len(blocked) != 2 || blocked[0] != "" || blocked[1] != "the sequence cannot pass position 2 (pubmed_search): no tool of it is provided by this runtime, so the step offers its tools instead" {
		t.Fatalf("orchestration events' blocked: %q", blocked)
	}
	if want := `Refused: tool "pubmed_search" is not available in step "Research", which requires the sequence think -> pubmed_search and is at position 2, which no tool this runtime provides can fill, so the sequence stops there; tools you may use now: think, reflect.`; refusal != want {
		t.Fatalf("refusal\n  %s\nwant\n  %s", refusal, want)
	}
	if note := model.reqs[1].Note; !strings.Contains(note, "cannot pass position 2 (pubmed_search)") || !strings.Contains(note, "do not try to follow the rest of the sequence") {
		t.Fatalf("the call's note does not say the sequence stops:\n%s", note)
	}
}

// TestParallelApprovalLiveTurn: in a live turn, a call waits for approval
// when the step of its model call requires it, though an earlier call of
// the same answer left that step, and when the step it would run in
// requires it, though its model call's step did not.
func TestParallelApprovalLiveTurn(t *testing.T) {
	const tmpl = `{
  "agentId": "t", "name": "T", "nodes": ["llm.openai", "think", "debate"],
  "orchestration": {"steps": [
    {"name": "Strict", "conditions": [{"type": "tool_used", "value": "think"}, {"type": "message_contains", "value": "calm"}], "requireApproval": ["debate"]},
    {"name": "Thought", "conditions": [{"type": "tool_used", "value": "think"}]},
    {"name": "Debating", "conditions": [{"type": "message_contains", "value": "debate"}], "requireApproval": ["debate"]},
    {"name": "Calm", "conditions": [{"type": "message_contains", "value": "calm"}]}
  ]}
}`
	for _, tt := range []struct{ name, message, after string }{
		{"think leaves the step that requires approval", "debate it", "Thought"},
		{"think enters a step that requires approval", "stay calm", "Strict"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			model := &scripted{replies: [][]string{{"think", "debate"}}}
			f, _ := newService(t, tmpl, llmorch.ServiceConfig{Model: model})
			var held, ran []string
			finish := ""
			for _, ev := range collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, tt.message))) {
				switch ev.Kind {
				case chat.KindApproval:
					held = append(held, ev.ToolCall.Name)
				case chat.KindToolResult:
					if !ev.ToolResult.NotRun {
						ran = append(ran, ev.ToolResult.Name)
					}
				case chat.KindDone:
					finish = ev.FinishReason
				}
			}
			if !slices.Equal(held, []string{"debate"}) || !slices.Equal(ran, []string{"think"}) || finish != chat.FinishApproval {
				t.Fatalf("held %v, ran %v, finish %q; want debate held, think run, approval", held, ran, finish)
			}
			sess, _ := f.store.Get(context.Background(), f.id)
			if sess.State.ActiveStep != tt.after || len(sess.PendingApprovals()) != 1 {
				t.Fatalf("step %q, pending %+v", sess.State.ActiveStep, sess.PendingApprovals())
			}
			// The held call keeps the offer of its model call, which the
			// turn that carries it out judges it against.
			if o := sess.PendingApprovals()[0].Offer; o == nil || !slices.Equal(o.Tools, []string{"debate"}) {
				t.Fatalf("the approval keeps offer %+v", o)
			}
		})
	}
}

// TestCallTrail: with Turn.CallTrail, a call of a client tool gets an ID
// that carries the agent's calls that ran in the turn before it, model
// call by model call and in its own answer, and is shown once its answer
// is carried out; the client's messages alone, with that ID, replay to
// the state the session reaches once the client's result is recorded.
func TestCallTrail(t *testing.T) {
	const tmpl = `{
  "agentId": "t", "name": "T", "nodes": ["llm.openai", "think", "reflect"],
  "options": {"clientTools": ["client_*"]},
  "orchestration": {"steps": [
    {"name": "Edit", "conditions": [{"type": "message_contains", "value": "edit"}], "sequence": ["think", "client_edit", "reflect"]},
    {"name": "Chat", "isDefault": true}
  ]}
}`
	client := []chat.ToolSpec{{Name: "client_edit"}}
	tests := []struct {
		name, message string
		replies       [][]string
		before        [][]string
		own           []string
		seq           int
	}{
		{"a sequence of the agent's tool, then the client's", "edit it", [][]string{{"think"}, {"client_edit"}}, [][]string{{"think"}}, nil, 2},
		{"the agent's call after the client's in one answer", "hello", [][]string{{"client_edit", "think", "!reflect"}}, nil, []string{"think"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &scripted{replies: tt.replies}
			f, _ := newService(t, tmpl, llmorch.ServiceConfig{Model: model})
			turn := f.start(t, tt.message)
			turn.ClientTools, turn.CallTrail = client, true
			var shown *chat.ToolCall
			var order []string
			for _, ev := range collect(f.svc.StreamWithOrchestration(context.Background(), turn)) {
				switch ev.Kind {
				case chat.KindClientCall:
					shown = ev.ToolCall
					order = append(order, "client:"+ev.ToolCall.Name)
				case chat.KindToolResult:
					order = append(order, "result:"+ev.ToolResult.Name)
				}
			}
			modelID := fmt.Sprintf("c%d0", len(tt.replies)-1)
			if shown == nil || shown.ID != orchestration.TrailID(modelID, tt.before, tt.own) {
				t.Fatalf("client call %+v, want the ID %q with its trail", shown, orchestration.TrailID(modelID, tt.before, tt.own))
			}
			if order[len(order)-1] != "client:client_edit" {
				t.Fatalf("events %v: the client call comes once its answer is carried out", order)
			}
			sess, _ := f.store.Get(context.Background(), f.id)
			if p := sess.PendingApprovals(); len(p) != 1 || p[0].Call.ID != shown.ID {
				t.Fatalf("the session keeps %+v, the client was shown %q", p, shown.ID)
			}
			history, _ := f.store.Messages(context.Background(), f.id, 0)
			if !slices.ContainsFunc(history, func(m chat.Message) bool {
				return m.Role == chat.RoleAssistant && slices.ContainsFunc(m.ToolCalls, func(c chat.ToolCall) bool { return c.ID == shown.ID })
			}) {
				t.Fatalf("the history does not hold the call under its ID: %+v", history)
			}
			// What an OpenAI client keeps: its message, the call, its result.
			kept := []chat.Message{{Role: chat.RoleUser, Content: tt.message},
				{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{*shown}},
				{Role: chat.RoleTool, ToolCallID: shown.ID, Content: "edited"}}
			replayed := f.eng.Replay(orchestration.State{}, kept, []string{"client_edit"})
			want := slices.Concat(slices.Concat(tt.before...), tt.own, []string{"client_edit"})
			if replayed.SequenceIndex != tt.seq || !replayed.RecentlyUsedTools.Equal(want...) {
				t.Fatalf("the client's conversation replays to %s at %d with %v, want position %d with %v", replayed.ActiveStep, replayed.SequenceIndex, replayed.RecentlyUsedTools, tt.seq, want)
			}
		})
	}
}
