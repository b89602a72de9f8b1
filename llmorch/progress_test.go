package llmorch_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/tools"
)

// reporting is a toolbox whose one tool, think, reports progress while it
// runs and spends tokens (as an agent tool does), or holds the call for
// an agent's approvals (pending).
type reporting struct {
	pending   []chat.Approval
	decisions [][]chat.Decision
}

func (r *reporting) Names() []string { return []string{"think"} }
func (r *reporting) Specs(names []string) []chat.ToolSpec {
	return []chat.ToolSpec{{Name: "think", Description: "think", Parameters: json.RawMessage(`{"type":"object"}`)}}
}

func (r *reporting) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	c, _ := tools.CallFrom(ctx)
	r.decisions = append(r.decisions, c.Decisions)
	for _, w := range []string{"one ", "two ", "three"} {
		tools.Report(ctx, chat.Progress{Agent: "helper", Event: &chat.Event{Kind: chat.KindTextDelta, Text: w}})
	}
	if len(r.pending) > 0 && c.Decisions == nil {
		return chat.ToolResult{Pending: r.pending, Usage: &chat.Usage{Prompt: 100, Completion: 50, Total: 150}}
	}
	return chat.ToolResult{Content: "one two three", Usage: &chat.Usage{Prompt: 100, Completion: 50, Total: 150}}
}

// TestToolProgress: what a tool reports while it runs streams as the
// call's progress, in order, between its call and its result; what it
// spent is added to the step's usage and the session's.
func TestToolProgress(t *testing.T) {
	model := &scripted{replies: [][]string{{"think"}, nil}}
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model, Tools: &reporting{}})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "hello")))
	var kinds []chat.Kind
	var text string
	for _, ev := range evs {
		switch ev.Kind {
		case chat.KindToolCall, chat.KindToolProgress, chat.KindToolResult:
			kinds = append(kinds, ev.Kind)
		}
		if p := ev.Progress; p != nil {
			if p.CallID != "c00" || p.Name != "think" || p.Agent != "helper" {
				t.Fatalf("progress %+v: want it under the call", p)
			}
			text += p.Event.Text
		}
	}
	want := []chat.Kind{chat.KindToolCall, chat.KindToolProgress, chat.KindToolProgress, chat.KindToolProgress, chat.KindToolResult}
	if !slices.Equal(kinds, want) || text != "one two three" {
		t.Fatalf("events %v (%q), want %v", kinds, text, want)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	// Two model calls of 10+2, and the tool's 150.
	if u := sess.State.TokenUsage; u.Total != 174 {
		t.Fatalf("the session's usage %+v, want the model's 24 and the tool's 150", u)
	}
	final := evs[len(evs)-2]
	if final.Kind != chat.KindUsage || !final.Final || final.Usage.Total != 174 {
		t.Fatalf("the turn's usage %+v", final)
	}
}

// TestToolHeldForAgentApprovals: a call whose asked agent waits for
// approvals is held like a call that asks first, one approval per call of
// the agent, unrecorded; the answer runs it again with the decisions.
func TestToolHeldForAgentApprovals(t *testing.T) {
	model := &scripted{replies: [][]string{{"think"}, nil}}
	search := &chat.ToolCall{ID: "s1", Name: "search", Arguments: json.RawMessage(`{}`)}
	tb := &reporting{pending: []chat.Approval{{ID: "approval-a", Agent: "helper", Call: search}, {ID: "approval-b", Agent: "helper", Call: search}}}
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model, Tools: tb})
	evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "hello")))
	var asked []string
	for _, ev := range evs {
		if ev.Kind == chat.KindApproval {
			if ev.ToolCall.ID != "c00" || ev.Approval.Agent != "helper" || ev.Approval.Call.Name != "search" {
				t.Fatalf("approval %+v %+v", ev.ToolCall, ev.Approval)
			}
			asked = append(asked, ev.Approval.ID)
		}
	}
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishApproval || !slices.Equal(asked, []string{"approval-a", "approval-b"}) {
		t.Fatalf("finish %q, approvals %v", done.FinishReason, asked)
	}
	sess, _ := f.store.Get(context.Background(), f.id)
	if p := sess.PendingApprovals(); len(p) != 2 || p[0].Call.ID != "c00" || p[0].Agent != "helper" || p[1].AgentCall.Name != "search" ||
		sess.State.RecentlyUsedTools.Len() != 0 || sess.State.TokenUsage.Total != 162 {
		t.Fatalf("the session: approvals %+v, recent %v, usage %+v", p, sess.State.RecentlyUsedTools.Slice(), sess.State.TokenUsage)
	}
}
