package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// scriptedModel answers each model call with the next entry of its
// script: tool calls, or text. It keeps every request.
type scriptedModel struct {
	mu       sync.Mutex
	script   [][]chat.Event
	requests []llmorch.Request
	// block, when set, makes a call with no script left stream "partial"
	// and then wait for the context.
	block bool
}

func (m *scriptedModel) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "scripted"} }

func (m *scriptedModel) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	var evs []chat.Event
	if len(m.script) > 0 {
		evs, m.script = m.script[0], m.script[1:]
	}
	block := m.block && evs == nil
	m.mu.Unlock()
	return func(yield func(chat.Event, error) bool) {
		if block {
			if !yield(chat.Event{Kind: chat.KindTextDelta, Text: "partial "}, nil) {
				return
			}
			<-ctx.Done()
			yield(chat.Event{}, ctx.Err())
			return
		}
		if evs == nil {
			evs = []chat.Event{{Kind: chat.KindTextDelta, Text: "done"}}
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (m *scriptedModel) last() llmorch.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[len(m.requests)-1]
}

func call(id, name string) chat.Event {
	return chat.Event{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(`{"x":1}`)}}
}

// deniedByNewMessage is the reason docs/api.md gives a call denied by a
// new user message.
const deniedByNewMessage = "the user sent a new message"

// toolbox gives every agent tb (Options.ToolsFor).
func toolbox(tb tools.Toolbox) func(*template.Loaded) tools.Toolbox {
	return func(*template.Loaded) tools.Toolbox { return tb }
}

// countingTools runs any call of its names and counts the runs.
type countingTools struct {
	names []string
	mu    sync.Mutex
	ran   []string
	// hold, when set, blocks a run (of holdName only, when that is set)
	// until the context ends.
	hold     chan struct{}
	holdName string
}

func (c *countingTools) Names() []string { return c.names }
func (c *countingTools) Specs(names []string) []chat.ToolSpec {
	var out []chat.ToolSpec
	for _, n := range names {
		out = append(out, chat.ToolSpec{Name: n, Description: n, Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	return out
}
func (c *countingTools) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	c.mu.Lock()
	c.ran = append(c.ran, call.Name)
	hold := c.hold
	if c.holdName != "" && call.Name != c.holdName {
		hold = nil
	}
	c.mu.Unlock()
	if hold != nil {
		close(hold)
		<-ctx.Done()
		return chat.ToolResult{Content: "cancelled: " + context.Cause(ctx).Error(), IsError: true}
	}
	return chat.ToolResult{Content: "result of " + call.Name}
}
func (c *countingTools) runs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ran)
}

type approvalRig struct {
	t     *testing.T
	node  *agent.Agent
	store session.Store
	model *scriptedModel
	tools *countingTools
	id    string
}

func newApprovalRig(t *testing.T, src string) *approvalRig {
	t.Helper()
	a, ds := template.Load("a.json", []byte(src), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	store := session.NewMemory(session.Config{})
	t.Cleanup(func() { store.Close() })
	r := &approvalRig{t: t, store: store, model: &scriptedModel{}, tools: &countingTools{names: a.Template.Tools()}, id: session.NewID()}
	agents, err := agent.NewSet(agent.Options{Store: store, ToolsFor: toolbox(r.tools), Models: func(*template.Template) (llmorch.Model, error) { return r.model, nil }}, []*template.Loaded{a})
	if err != nil {
		t.Fatal(err)
	}
	r.node = agents.List()[0]
	return r
}

// drain(t)(events, err) runs a turn to its end.
func drain(t *testing.T) func(iter.Seq[chat.Event], error) []chat.Event {
	return func(events iter.Seq[chat.Event], err error) []chat.Event {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []chat.Event
		for ev := range events {
			out = append(out, ev)
		}
		return out
	}
}

func (r *approvalRig) approvals() []session.Approval {
	s, err := r.store.Get(context.Background(), r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	return s.Approvals
}

func (r *approvalRig) recorded() []string {
	s, err := r.store.Get(context.Background(), r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	return s.State.RecentlyUsedTools.Slice()
}

const approvalTemplate = `{"agentId": "ap", "name": "Ap", "nodes": ["llm.openai", "think", "critique", "brainstorm"],
  "options": {"requireApproval": ["critique"]}}`

// TestApprovalHeldThenApproved: of one answer's three calls, the two that
// need no approval run; the third is held (not run, not recorded) and the
// turn ends waiting; approving it runs and records it in the next turn,
// whose model call sees its result.
func TestApprovalHeldThenApproved(t *testing.T) {
	r := newApprovalRig(t, approvalTemplate)
	r.model.script = [][]chat.Event{{call("c1", "think"), call("c2", "critique"), call("c3", "brainstorm")}}
	evs := drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("go"))))
	done := evs[len(evs)-1]
	if done.FinishReason != chat.FinishApproval {
		t.Fatalf("finish %q, want %q; events %v", done.FinishReason, chat.FinishApproval, kinds(evs))
	}
	var req *chat.Event
	for i, ev := range evs {
		if ev.Kind == chat.KindApproval {
			req = &evs[i]
			if prev := evs[i-1]; prev.Kind != chat.KindToolCall || prev.ToolCall.ID != "c2" {
				t.Fatalf("the approval request does not follow its call: %v", kinds(evs))
			}
		}
	}
	if req == nil || req.Approval.ToolCallID != "c2" || req.ToolCall.Name != "critique" || req.Approval.ID == "" {
		t.Fatalf("approval event %+v", req)
	}
	if got := r.tools.runs(); !slices.Equal(got, []string{"think", "brainstorm"}) {
		t.Fatalf("ran %v, want think and brainstorm", got)
	}
	if got := r.recorded(); !slices.Equal(got, []string{"think", "brainstorm"}) {
		t.Fatalf("recorded %v", got)
	}
	// The model was told which offered tool waits for approval.
	if got := r.model.requests[0].ApprovalTools; !slices.Equal(got, []string{"critique"}) {
		t.Fatalf("the request's approval tools %v, want critique", got)
	}
	ap := r.approvals()
	if len(ap) != 1 || ap[0].ID != req.Approval.ID || ap[0].Status != session.ApprovalPending || ap[0].Call.ID != "c2" {
		t.Fatalf("stored approvals %+v", ap)
	}
	// The session is free: a wrong answer is refused before any turn.
	_, err := agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: "nope", Approved: true}}}))
	if !errors.Is(err, agent.ErrUnknownApproval) {
		t.Fatalf("unknown approval: %v", err)
	}
	_, err = agent.Started(r.node.Run(context.Background(), session.NewID(), agent.Input{Answers: []agent.ApprovalAnswer{{ID: req.Approval.ID, Approved: true}}}))
	if !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("answer on an unknown session: %v", err)
	}

	evs = drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: req.Approval.ID, Approved: true}}})))
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStop {
		t.Fatalf("the answering turn finished %q: %v", done.FinishReason, kinds(evs))
	}
	if evs[0].Kind != chat.KindStart || evs[0].Start.Message == evs[0].Start.Turn {
		// The answering turn writes into the answer that asked.
		t.Fatalf("the answering turn starts with %+v", evs[0])
	}
	if evs[1].Kind != chat.KindToolResult || evs[1].ToolResult.CallID != "c2" || evs[1].ToolResult.Denied || evs[1].ToolResult.IsError {
		t.Fatalf("first event of the answering turn: %+v", evs[1])
	}
	if got := r.tools.runs(); !slices.Equal(got, []string{"think", "brainstorm", "critique"}) {
		t.Fatalf("ran %v", got)
	}
	if got := r.recorded(); !slices.Equal(got, []string{"think", "brainstorm", "critique"}) {
		t.Fatalf("recorded %v", got)
	}
	// The model saw every call of its answer with its result.
	msgs := r.model.last().Messages
	asst := msgs[1]
	if asst.Role != chat.RoleAssistant || len(asst.ToolCalls) != 3 || len(msgs) != 5 {
		t.Fatalf("the model got %+v", msgs)
	}
	for _, m := range msgs[2:] {
		if m.Role != chat.RoleTool || m.Content != "result of "+m.ToolName {
			t.Fatalf("tool message %+v", m)
		}
	}
	if ap := r.approvals(); ap[0].Status != session.ApprovalApproved {
		t.Fatalf("stored approvals after the answer %+v", ap)
	}
	_, err = agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: req.Approval.ID, Approved: true}}}))
	if !errors.Is(err, agent.ErrApprovalAnswered) {
		t.Fatalf("a second answer: %v", err)
	}
}

// TestApprovalDenied: a denied call is neither run nor recorded, and the
// model hears the reason.
func TestApprovalDenied(t *testing.T) {
	r := newApprovalRig(t, approvalTemplate)
	r.model.script = [][]chat.Event{{call("c1", "critique")}}
	evs := drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("go"))))
	id := evs[slices.IndexFunc(evs, func(e chat.Event) bool { return e.Kind == chat.KindApproval })].Approval.ID
	evs = drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: id, Approved: false, Reason: "too costly"}}})))
	if evs[1].Kind != chat.KindToolResult || !evs[1].ToolResult.Denied || !strings.Contains(evs[1].ToolResult.Content, "too costly") {
		t.Fatalf("first event %+v", evs[1])
	}
	if got := r.tools.runs(); len(got) != 0 {
		t.Fatalf("ran %v", got)
	}
	if got := r.recorded(); len(got) != 0 {
		t.Fatalf("recorded %v", got)
	}
	msgs := r.model.last().Messages
	if tm := msgs[len(msgs)-1]; tm.Role != chat.RoleTool || !tm.IsError || !strings.Contains(tm.Content, "declined") || !strings.Contains(tm.Content, "too costly") {
		t.Fatalf("the model got %+v", msgs)
	}
}

// TestApprovalParallelAndIncomplete: two calls held by one answer must be
// answered together; one approved and one denied then run and refuse in
// call order.
func TestApprovalParallelAndIncomplete(t *testing.T) {
	r := newApprovalRig(t, `{"agentId": "ap", "name": "Ap", "nodes": ["llm.openai", "think", "critique"], "options": {"requireApproval": ["*"]}}`)
	r.model.script = [][]chat.Event{{call("c1", "critique"), call("c2", "think")}}
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("go"))))
	ap := r.approvals()
	if len(ap) != 2 {
		t.Fatalf("approvals %+v", ap)
	}
	_, err := agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: ap[1].ID, Approved: true}}}))
	var ae *agent.ApprovalError
	if !errors.Is(err, agent.ErrApprovalsIncomplete) || !errors.As(err, &ae) || ae.ID != ap[0].ID {
		t.Fatalf("a partial answer: %v", err)
	}
	_, err = agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: ap[1].ID, Approved: true}, {ID: ap[1].ID, Approved: false}}}))
	if !errors.Is(err, agent.ErrApprovalAnswered) {
		t.Fatalf("one ID twice: %v", err)
	}
	evs := drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: ap[1].ID, Approved: true}, {ID: ap[0].ID, Approved: false}}})))
	if evs[1].ToolResult == nil || evs[1].ToolResult.CallID != "c1" || !evs[1].ToolResult.Denied || evs[2].ToolResult == nil || evs[2].ToolResult.CallID != "c2" || evs[2].ToolResult.IsError {
		t.Fatalf("events %v", kinds(evs))
	}
	if got := r.tools.runs(); !slices.Equal(got, []string{"think"}) {
		t.Fatalf("ran %v", got)
	}
}

// TestNewMessageDeniesPending: a user message while calls wait denies them,
// and the model hears why.
func TestNewMessageDeniesPending(t *testing.T) {
	r := newApprovalRig(t, approvalTemplate)
	r.model.script = [][]chat.Event{{call("c1", "critique")}}
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("go"))))
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("never mind"))))
	if got := r.tools.runs(); len(got) != 0 {
		t.Fatalf("ran %v", got)
	}
	ap := r.approvals()
	if ap[0].Status != session.ApprovalDenied || ap[0].Reason != deniedByNewMessage {
		t.Fatalf("approvals %+v", ap)
	}
	msgs := r.model.last().Messages
	n := len(msgs)
	if msgs[n-1].Content != "never mind" || msgs[n-2].Role != chat.RoleTool || !strings.Contains(msgs[n-2].Content, deniedByNewMessage) || len(msgs[n-3].ToolCalls) != 1 {
		t.Fatalf("the model got %+v", msgs)
	}
	_, err := agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: ap[0].ID, Approved: true}}}))
	if !errors.Is(err, agent.ErrApprovalAnswered) {
		t.Fatalf("answering a call the new message denied: %v", err)
	}
}

// TestStopCause: a turn cancelled with chat.StoppedByUser ends with an
// abort and FinishStopped, not an error; the partial answer is saved and
// the session takes the next turn at once.
func TestStopCause(t *testing.T) {
	r := newApprovalRig(t, approvalTemplate)
	r.model.block = true
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	events, err := agent.Started(r.node.Run(ctx, r.id, agent.Text("go")))
	if err != nil {
		t.Fatal(err)
	}
	var evs []chat.Event
	for ev := range events {
		evs = append(evs, ev)
		if ev.Kind == chat.KindTextDelta {
			cancel(chat.StoppedByUser)
		}
	}
	n := len(evs)
	if evs[n-1].FinishReason != chat.FinishStopped || evs[n-2].Kind != chat.KindAbort || evs[n-2].Text != chat.StoppedByUser.Reason {
		t.Fatalf("events %v", kinds(evs))
	}
	for _, ev := range evs {
		if ev.Kind == chat.KindError {
			t.Fatalf("an error event: %+v", ev.Error)
		}
	}
	msgs, _ := r.store.Messages(context.Background(), r.id, 0)
	if len(msgs) != 2 || msgs[1].Content != "partial " {
		t.Fatalf("history %+v", msgs)
	}
	r.model.block = false
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("again"))))
}

// TestStopDuringTool: a stop while a tool runs cancels the tool's context
// and no later call of the answer starts.
func TestStopDuringTool(t *testing.T) {
	r := newApprovalRig(t, `{"agentId": "ap", "name": "Ap", "nodes": ["llm.openai", "think", "brainstorm"]}`)
	r.tools.hold = make(chan struct{})
	r.model.script = [][]chat.Event{{call("c1", "think"), call("c2", "brainstorm")}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		<-r.tools.hold
		time.Sleep(10 * time.Millisecond)
		cancel(chat.StoppedByUser)
	}()
	evs := drain(t)(agent.Started(r.node.Run(ctx, r.id, agent.Text("go"))))
	if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStopped {
		t.Fatalf("events %v", kinds(evs))
	}
	if got := r.tools.runs(); !slices.Equal(got, []string{"think"}) {
		t.Fatalf("ran %v, want only the first call", got)
	}
	// The call the client was shown stays in the history, its result
	// saying it did not run; the one it never saw is not there.
	msgs, _ := r.store.Messages(context.Background(), r.id, 0)
	if len(msgs) != 3 || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != "c1" || msgs[2].ToolCallID != "c1" || !msgs[2].NotRun {
		t.Fatalf("history %+v: want the message, the shown call and its not-run result", msgs)
	}
	var stopped *chat.ToolResult
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult && ev.ToolResult.CallID == "c1" {
			stopped = ev.ToolResult
		}
	}
	if stopped == nil || !stopped.NotRun {
		t.Fatalf("the client was not told the shown call did not run: %+v", stopped)
	}
	if got := r.recorded(); len(got) != 0 {
		t.Fatalf("recorded %v, want nothing", got)
	}
}

// TestStopAfterARunningCall: a stop during the second call of an answer
// keeps both calls the client saw: the first ran and is recorded, the
// second did not; replaying the history gives the session's state.
func TestStopAfterARunningCall(t *testing.T) {
	r := newApprovalRig(t, `{"agentId": "ap", "name": "Ap", "nodes": ["llm.openai", "think", "brainstorm", "critique"]}`)
	r.tools.hold, r.tools.holdName = make(chan struct{}), "brainstorm"
	r.model.script = [][]chat.Event{{call("c1", "think"), call("c2", "brainstorm"), call("c3", "critique")}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		<-r.tools.hold
		time.Sleep(10 * time.Millisecond)
		cancel(chat.StoppedByUser)
	}()
	drain(t)(agent.Started(r.node.Run(ctx, r.id, agent.Text("go"))))
	msgs, _ := r.store.Messages(context.Background(), r.id, 0)
	if len(msgs) != 4 || len(msgs[1].ToolCalls) != 2 || msgs[2].ToolCallID != "c1" || msgs[2].NotRun || msgs[3].ToolCallID != "c2" || !msgs[3].NotRun {
		t.Fatalf("history %+v: want the message, both shown calls, think's result and brainstorm's not-run one", msgs)
	}
	sess, err := r.store.Get(context.Background(), r.id)
	if err != nil {
		t.Fatal(err)
	}
	if !sess.State.RecentlyUsedTools.Equal("think") {
		t.Fatalf("recorded %v, want [think]", sess.State.RecentlyUsedTools)
	}
	if replayed := r.node.Engine().Replay(orchestration.State{}, msgs, nil); !replayed.RecentlyUsedTools.Equal("think") || replayed.UserMessages != sess.State.UserMessages {
		t.Fatalf("replayed %+v, session %+v", replayed, sess.State)
	}
}

// TestApprovalWithoutHistory: under historyPolicy "none" the turn that
// answers approvals still shows the model its own turn (the user message,
// the calls and their results), not a result without its call.
func TestApprovalWithoutHistory(t *testing.T) {
	r := newApprovalRig(t, `{"agentId": "ap", "name": "Ap", "nodes": ["llm.openai", "critique"], "chatSettings": {"historyPolicy": "none"},
  "options": {"requireApproval": ["critique"]}}`)
	r.model.script = [][]chat.Event{{call("c1", "critique")}}
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("earlier")))) // held, then denied by the next message
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("go"))))
	r.model.script = [][]chat.Event{{call("c2", "critique")}}
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Text("now"))))
	ap := r.approvals()
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: ap[len(ap)-1].ID, Approved: true}}})))
	msgs := r.model.last().Messages
	if len(msgs) != 3 || msgs[0].Content != "now" || len(msgs[1].ToolCalls) != 1 || msgs[2].ToolCallID != "c2" {
		t.Fatalf("the model got %+v, want the user message, the call and its result", msgs)
	}
}

// TestApprovalMessageChain: approvals record the answer that asked for
// them, and a turn that answers them and asks again keeps it, so that
// every continuation streams under the first answer's message.
func TestApprovalMessageChain(t *testing.T) {
	r := newApprovalRig(t, approvalTemplate)
	r.model.script = [][]chat.Event{{call("c1", "critique")}, {call("c2", "critique")}}
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Text: "go", TurnID: "turn-1"})))
	first := r.approvals()
	if len(first) != 1 || first[0].MessageID != "turn-1" {
		t.Fatalf("approvals of the first turn %+v, want message turn-1", first)
	}
	drain(t)(agent.Started(r.node.Run(context.Background(), r.id, agent.Input{Answers: []agent.ApprovalAnswer{{ID: first[0].ID, Approved: true}}, TurnID: "turn-2"})))
	var pending []session.Approval
	for _, a := range r.approvals() {
		if a.Status == session.ApprovalPending {
			pending = append(pending, a)
		}
	}
	if len(pending) != 1 || pending[0].Call.ID != "c2" || pending[0].MessageID != "turn-1" {
		t.Fatalf("approvals asked by the continuation %+v, want message turn-1", pending)
	}
}
