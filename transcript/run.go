package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
)

// Run plays tr through a fresh session of the real turn loop (agent.Agent
// with its llmorch.Service, the built-in tools, a memory store) with the
// scripted model, and checks every expectation. The error is for a
// transcript that cannot run (its template does not load, a stand-in names
// a tool the runtime lacks); mismatches are in the Report.
//
// The built-in tools run as `serve` runs them, except that web search has
// no backend (whatever the environment says), so that a transcript gives
// the same result everywhere: a search call fails, and is recorded, unless
// the turn's toolResults stands in for it.
func Run(ctx context.Context, tr *Transcript) (*Report, error) {
	quiet := slog.New(slog.DiscardHandler)
	builtin, err := tools.BuiltinTools(tools.BuiltinConfig{})
	if err != nil {
		return nil, &Error{File: tr.File, Err: err}
	}
	base, err := tools.NewRegistryWithConfig(tools.Config{Logger: quiet}, builtin...)
	if err != nil {
		return nil, &Error{File: tr.File, Err: err}
	}
	loaded, err := load(tr, base.Names())
	if err != nil {
		return nil, err
	}
	for i, t := range tr.Turns {
		for name := range t.ToolResults {
			if _, ok := base.Lookup(name); !ok {
				return nil, &Error{File: tr.File, Err: fmt.Errorf("turns[%d].toolResults: %q is not a tool of this runtime (%s); a stand-in replaces a tool's result, it cannot add a tool",
					i, name, strings.Join(base.Names(), ", "))}
			}
		}
	}

	store := session.NewMemory(session.Config{})
	defer store.Close()
	exec := &switchable{}
	exec.reg.Store(base)
	model := &scripted{}
	agents, err := agent.NewSet(agent.Config{
		Store: store,
		Tools: exec,
		// One scripted model answers every configuration, and records
		// which one each call went to.
		Models: func(t *template.Template) (llmorch.Model, error) { return &scriptedAs{model, t.ModelNode()}, nil },
		Logger: quiet,
	}, []*template.Loaded{loaded})
	if err != nil {
		return nil, &Error{File: tr.File, Err: err}
	}
	node, _ := agents.Get(loaded.ID())

	rep := &Report{Transcript: tr, SessionID: session.NewID()}
	for _, d := range loaded.Warnings {
		rep.Warnings = append(rep.Warnings, d.String())
	}
	for i, t := range tr.Turns {
		reg := base
		if len(t.ToolResults) > 0 {
			if reg, err = standIns(builtin, t.ToolResults, quiet); err != nil {
				return nil, &Error{File: tr.File, Err: fmt.Errorf("turns[%d].toolResults: %w", i, err)}
			}
		}
		exec.reg.Store(reg)
		model.start(i, t.Model)
		tp := TurnReport{Index: i, User: t.User}
		var events iter.Seq[chat.Event]
		if t.Approvals != nil {
			tp.User = describeApprovals(t.Approvals)
			var answers []agent.ApprovalAnswer
			if answers, err = approvalAnswers(ctx, store, rep.SessionID, t.Approvals); err == nil {
				events, err = agent.Started(node.Run(ctx, rep.SessionID, agent.Input{Answers: answers}))
			}
			if err != nil {
				tp.Failure = "the answers were not accepted: " + err.Error()
			}
		} else if events, err = agent.Started(node.Run(ctx, rep.SessionID, agent.Text(t.User))); err != nil {
			tp.Failure = "the message was not accepted: " + err.Error()
		}
		if events != nil {
			tp.collect(events)
		}
		tp.Calls, tp.Unanswered = model.finish()
		sess, err := store.Get(ctx, rep.SessionID)
		if err != nil && !errors.Is(err, session.ErrNotFound) {
			return rep, &Error{File: tr.File, Err: fmt.Errorf("turns[%d]: reading the session: %w", i, err)}
		}
		tp.State = sess.State
		tp.Mismatches = check(t, &tp)
		rep.Turns = append(rep.Turns, tp)
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// approvalAnswers names the session's waiting calls that the transcript's
// answers answer: each answer takes the next waiting call of its tool.
func approvalAnswers(ctx context.Context, store session.Store, sessionID string, list []Approval) ([]agent.ApprovalAnswer, error) {
	sess, err := store.Get(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading the session: %w", err)
	}
	waiting := sess.PendingApprovals()
	var out []agent.ApprovalAnswer
	for _, a := range list {
		k := slices.IndexFunc(waiting, func(w session.Approval) bool { return w.Call.Name == a.Tool })
		if k < 0 {
			return nil, fmt.Errorf("no call of %q waits for approval", a.Tool)
		}
		out = append(out, agent.ApprovalAnswer{ID: waiting[k].ID, Approved: a.Approved, Reason: a.Reason})
		waiting = slices.Delete(waiting, k, k+1)
	}
	return out, nil
}

func describeApprovals(list []Approval) string {
	var parts []string
	for _, a := range list {
		verb := "deny"
		if a.Approved {
			verb = "approve"
		}
		parts = append(parts, verb+" "+a.Tool)
	}
	return "(answers: " + strings.Join(parts, ", ") + ")"
}

// load loads the transcript's agent: its template file, or a shipped agent.
func load(tr *Transcript, provided []string) (*template.Loaded, error) {
	cfg := template.Config{Provided: provided}
	var results []template.Result
	var err error
	what := "template " + tr.Template
	if tr.Template != "" {
		path := tr.Template
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(tr.File), path)
		}
		results, err = template.LoadPath(path, cfg)
		if err == nil && len(results) != 1 {
			err = fmt.Errorf("%s holds %d templates; name one template.json", path, len(results))
		}
	} else {
		what = "agent " + tr.Agent
		results, err = template.LoadFS(templates.FS(), ".", cfg)
		if err == nil {
			var ids []string
			for _, r := range results {
				if r.Loaded != nil && r.Loaded.ID() == tr.Agent {
					results = []template.Result{r}
					break
				}
				if r.Loaded != nil {
					ids = append(ids, r.Loaded.ID())
				}
			}
			if len(results) != 1 || results[0].Loaded == nil || results[0].Loaded.ID() != tr.Agent {
				err = fmt.Errorf("no shipped agent %q (shipped: %s)", tr.Agent, strings.Join(ids, ", "))
			}
		}
	}
	if err != nil {
		return nil, &Error{File: tr.File, Err: fmt.Errorf("%s: %w", what, err)}
	}
	if r := results[0]; r.Loaded == nil {
		return nil, &Error{File: tr.File, Err: fmt.Errorf("%s: %w", what, r.Diagnostics.Err())}
	}
	return results[0].Loaded, nil
}

// switchable is the agent's tool registry, swapped between turns for one
// with the turn's stand-ins.
type switchable struct {
	reg atomic.Pointer[tools.Registry]
}

func (s *switchable) Names() []string                      { return s.reg.Load().Names() }
func (s *switchable) Specs(names []string) []chat.ToolSpec { return s.reg.Load().Specs(names) }
func (s *switchable) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	return s.reg.Load().Execute(ctx, call)
}

// standIns returns a registry of the built-in tools in which the named ones
// answer with the transcript's result. They keep their spec and aliases, so
// the registry still validates the model's arguments.
func standIns(builtin []tools.Tool, results map[string]StandIn, log *slog.Logger) (*tools.Registry, error) {
	ts := make([]tools.Tool, len(builtin))
	for i, t := range builtin {
		ts[i] = t
		if r, ok := results[t.Spec().Name]; ok {
			ts[i] = &standIn{Tool: t, result: r}
		}
	}
	return tools.NewRegistryWithConfig(tools.Config{Logger: log}, ts...)
}

type standIn struct {
	tools.Tool
	result StandIn
}

func (s *standIn) Call(context.Context, json.RawMessage) (tools.Result, error) {
	if s.result.Error != "" {
		return tools.Result{}, errors.New(s.result.Error)
	}
	return tools.Result{Content: s.result.Content}, nil
}

// Aliases keeps the wrapped tool's argument aliases.
func (s *standIn) Aliases() map[string]string {
	if a, ok := s.Tool.(tools.Aliaser); ok {
		return a.Aliases()
	}
	return nil
}

// scripted is the model: it answers the calls of the current turn with the
// transcript's answers, in order, and records what each call offered.
type scripted struct {
	mu      sync.Mutex
	turn    int
	answers []Answer
	calls   []Call
}

// errNoAnswer ends a model call the transcript has no answer for; the
// report says so in its own words.
var errNoAnswer = &chat.Error{Code: "transcript_no_answer", Message: "the transcript has no answer for this model call"}

func (m *scripted) start(turn int, answers []Answer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.turn, m.answers, m.calls = turn, answers, nil
}

// finish returns the turn's calls and how many answers were left unused.
func (m *scripted) finish() ([]Call, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls, max(0, len(m.answers)-len(m.calls))
}

func (m *scripted) Info() llmorch.Info {
	return llmorch.Info{Provider: "transcript", Model: "scripted"}
}

// scriptedAs is the scripted model as the configuration key names it.
type scriptedAs struct {
	*scripted
	key string
}

func (m *scriptedAs) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return m.stream(ctx, req, m.key)
}

func (m *scripted) stream(ctx context.Context, req llmorch.Request, key string) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		m.mu.Lock()
		n := len(m.calls)
		callable := req.Callable()
		call := Call{Offered: make([]string, len(callable)), Model: key, Request: req}
		for i, t := range callable {
			call.Offered[i] = t.Name
		}
		if snap := req.Orchestration; snap != nil {
			call.Step, call.SequenceIndex = snap.ActiveStep, snap.SequenceIndex
		}
		var answer *Answer
		if n < len(m.answers) {
			answer = &m.answers[n]
			call.Answered = true
		}
		m.calls = append(m.calls, call)
		turn := m.turn
		m.mu.Unlock()
		if answer == nil {
			yield(chat.Event{}, errNoAnswer)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(chat.Event{}, err)
			return
		}
		if answer.Text != "" && !yield(chat.Event{Kind: chat.KindTextDelta, Text: answer.Text}, nil) {
			return
		}
		for i, c := range answer.ToolCalls {
			tc := chat.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d_%d", turn+1, n+1, i+1)
			}
			if len(tc.Arguments) == 0 {
				tc.Arguments = json.RawMessage(`{}`)
			}
			if !yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &tc}, nil) {
				return
			}
		}
		u := estimate(req, answer)
		yield(chat.Event{Kind: chat.KindUsage, Usage: &u}, nil)
	}
}

// estimate is the answer's usage, or roughly four characters per token of
// what was sent and answered, so that usage is reported as a provider
// would.
func estimate(req llmorch.Request, a *Answer) chat.Usage {
	if a.Usage != nil {
		return chat.Usage{Prompt: a.Usage.Prompt, Completion: a.Usage.Completion, Total: a.Usage.Prompt + a.Usage.Completion}
	}
	in := len(req.System) + len(req.Note)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	out := len(a.Text)
	for _, c := range a.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	p, c := int64(in/4+1), int64(out/4+1)
	return chat.Usage{Prompt: p, Completion: c, Total: p + c}
}

// collect reads a turn's events.
func (tp *TurnReport) collect(events iter.Seq[chat.Event]) {
	call := 0
	for ev := range events {
		switch ev.Kind {
		case chat.KindStepStart:
			call++
		case chat.KindTextDelta:
			tp.Text += ev.Text
		case chat.KindApproval:
			if ev.ToolCall != nil {
				tp.Awaiting = append(tp.Awaiting, ev.ToolCall.Name)
			}
		case chat.KindToolResult:
			r := *ev.ToolResult
			if r.Type == "refused" {
				tp.Refused = append(tp.Refused, Refusal{Tool: r.Name, Call: call, Reason: r.Content})
			}
			tp.Results = append(tp.Results, ToolOutcome{Call: call, Result: r})
		case chat.KindError:
			if ev.Error != nil && ev.ToolCall == nil {
				tp.Error = ev.Error
			}
		case chat.KindDone:
			tp.FinishReason = ev.FinishReason
		}
	}
}

// check compares a turn's outcome with its expectations.
func check(t Turn, tp *TurnReport) []Mismatch {
	var out []Mismatch
	last := len(tp.Calls)
	call := func(k int) string { return fmt.Sprintf("model call %d of %d", k, last) }
	after := "after model call " + fmt.Sprint(last) + " of " + fmt.Sprint(last)
	if last == 0 {
		after = "before any model call"
	}
	add := func(where, key string, want, got any) {
		out = append(out, Mismatch{Turn: tp.Index, User: tp.User, Where: where, Key: key, Expected: fmt.Sprint(want), Got: fmt.Sprint(got)})
	}
	// The answers and the calls must pair up, whatever is expected.
	for k, c := range tp.Calls {
		if !c.Answered {
			add(call(k+1), "model", fmt.Sprintf("no model call %d (the transcript scripts %s)", k+1, answers(len(t.Model))),
				fmt.Sprintf("model call %d, offered %s", k+1, list(sorted(c.Offered))))
		}
	}
	if tp.Unanswered > 0 {
		add(after, "model", fmt.Sprintf("%d model calls (the transcript scripts %s)", len(t.Model), answers(len(t.Model))),
			fmt.Sprintf("%d: the turn ended (%s) and %s", last, finish(tp), unused(tp.Unanswered)))
	}
	if tp.Failure != "" {
		add(after, "turn", "the message to start a turn", tp.Failure)
	}
	x := t.Expect
	if e := tp.Error; e != nil && e.Code != errNoAnswer.Code && (x.FinishReason == nil || *x.FinishReason != chat.FinishError) {
		add(after, "turn", "a turn without errors", fmt.Sprintf("error %s: %s", e.Code, e.Message))
	}
	if x.Offered != nil {
		want := *x.Offered
		for k := 0; k < max(len(want), last); k++ {
			switch {
			case k >= last:
				add(call(k+1), "offered", list(sorted(want[k])), fmt.Sprintf("no model call %d", k+1))
			case k >= len(want):
				add(call(k+1), "offered", fmt.Sprintf("no model call %d", k+1), list(sorted(tp.Calls[k].Offered)))
			case !sameSet(want[k], tp.Calls[k].Offered):
				add(call(k+1), "offered", list(sorted(want[k])), list(sorted(tp.Calls[k].Offered)))
			}
		}
	}
	if x.Models != nil {
		want := *x.Models
		for k := 0; k < max(len(want), last); k++ {
			switch {
			case k >= last:
				add(call(k+1), "models", want[k], fmt.Sprintf("no model call %d", k+1))
			case k >= len(want):
				add(call(k+1), "models", fmt.Sprintf("no model call %d", k+1), tp.Calls[k].Model)
			case want[k] != tp.Calls[k].Model:
				add(call(k+1), "models", want[k], tp.Calls[k].Model)
			}
		}
	}
	if x.Refused != nil {
		var got, where []string
		for _, r := range tp.Refused {
			got = append(got, r.Tool)
			where = append(where, fmt.Sprintf("%s (model call %d)", r.Tool, r.Call))
		}
		if !slices.Equal(*x.Refused, got) {
			add(fmt.Sprintf("model calls 1-%d", last), "refused", list(*x.Refused), list(where))
		}
	}
	if x.ActiveStep.Set {
		want := x.ActiveStep.Value
		if x.ActiveStep.Null {
			want = ""
		}
		if tp.State.ActiveStep != want {
			add(after, "activeStep", stepName(want), stepName(tp.State.ActiveStep))
		}
	}
	if x.SequenceIndex != nil && *x.SequenceIndex != tp.State.SequenceIndex {
		add(after, "sequenceIndex", *x.SequenceIndex, tp.State.SequenceIndex)
	}
	if x.RecentlyUsedTools != nil && !tp.State.RecentlyUsedTools.Equal(*x.RecentlyUsedTools...) {
		add(after, "recentlyUsedTools", list(*x.RecentlyUsedTools), list(tp.State.RecentlyUsedTools.Slice()))
	}
	if x.AwaitingApproval != nil && !slices.Equal(*x.AwaitingApproval, tp.Awaiting) && (len(*x.AwaitingApproval) > 0 || len(tp.Awaiting) > 0) {
		add(after, "awaitingApproval", list(*x.AwaitingApproval), list(tp.Awaiting))
	}
	if x.FinishReason != nil && *x.FinishReason != tp.FinishReason {
		add(after, "finishReason", *x.FinishReason, finish(tp))
	}
	return out
}

func answers(n int) string {
	if n == 1 {
		return "1 answer"
	}
	return fmt.Sprintf("%d answers", n)
}

func unused(n int) string {
	if n == 1 {
		return "the last answer was not used"
	}
	return fmt.Sprintf("the last %d answers were not used", n)
}

func finish(tp *TurnReport) string {
	if tp.FinishReason == "" {
		return "(no finish)"
	}
	return tp.FinishReason
}

func stepName(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func list(l []string) string { return "[" + strings.Join(l, ", ") + "]" }

func sorted(l []string) []string {
	c := slices.Clone(l)
	slices.Sort(c)
	return c
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Compact(sorted(a)), slices.Compact(sorted(b)))
}
