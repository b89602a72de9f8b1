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
	"github.com/agentdock-go/agentdock/tools/agenttool"
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
// the turn's toolResults stands in for it. The agents the transcript's
// agent asks (agent tools) run in the same process, each with its own
// scripted model; a remote (A2A) agent tool cannot be played.
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
	all, err := loadAsked(tr, loaded, base.Names())
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, l := range all {
		ids[l.ID()] = true
	}
	for i, t := range tr.Turns {
		results := []map[string]StandIn{t.ToolResults}
		for id, a := range t.Agents {
			if !ids[id] || id == loaded.ID() {
				return nil, &Error{File: tr.File, Err: fmt.Errorf("turns[%d].agents: %q is not an agent that %s asks", i, id, loaded.ID())}
			}
			results = append(results, a.ToolResults)
		}
		for _, rs := range results {
			for name := range rs {
				if _, ok := base.Lookup(name); !ok {
					return nil, &Error{File: tr.File, Err: fmt.Errorf("turns[%d].toolResults: %q is not a tool of this runtime (%s); a stand-in replaces a tool's result, it cannot add a tool",
						i, name, strings.Join(base.Names(), ", "))}
				}
			}
		}
	}

	store := session.NewMemory(session.Config{})
	defer store.Close()
	// Each agent has its model and its tools (swapped for each turn's
	// stand-ins) of its own.
	models := map[string]*scripted{}
	execs := map[string]*switchable{}
	for _, l := range all {
		models[l.ID()] = &scripted{}
		execs[l.ID()] = &switchable{}
		execs[l.ID()].reg.Store(base)
	}
	runner := &recorder{direct: &agenttool.Direct{}}
	byID := map[string]*template.Loaded{}
	for _, l := range all {
		byID[l.ID()] = l
	}
	var toolErr error
	agents, err := agent.NewSet(agent.Config{
		Store: store,
		Tools: base,
		ToolsFor: func(l *template.Loaded) tools.Toolbox {
			if len(l.Template.Agents) == 0 {
				return execs[l.ID()]
			}
			tb, err := agenttool.New(agenttool.Config{Runner: runner, Logger: quiet, Agents: func(id string) (*template.Template, bool) {
				if a, ok := byID[id]; ok {
					return a.Template, true
				}
				return nil, false
			}}, l.Template)
			if err != nil {
				toolErr = errors.Join(toolErr, err)
				return execs[l.ID()]
			}
			return tools.Join(execs[l.ID()], tb)
		},
		Models: func(t *template.Template) (llmorch.Model, error) {
			return &scriptedAs{models[t.AgentID], t.ModelNode()}, nil
		},
		Logger: quiet,
	}, all)
	if err == nil {
		err = toolErr
	}
	if err != nil {
		return nil, &Error{File: tr.File, Err: err}
	}
	runner.direct.Agents = agents
	node, _ := agents.Get(loaded.ID())
	model := models[loaded.ID()]

	rep := &Report{Transcript: tr, SessionID: session.NewID()}
	for _, l := range all {
		for _, d := range l.Warnings {
			rep.Warnings = append(rep.Warnings, d.String())
		}
	}
	for i, t := range tr.Turns {
		for _, l := range all {
			id := l.ID()
			stand := t.ToolResults
			var answers []Answer
			if id != loaded.ID() {
				stand, answers = t.Agents[id].ToolResults, t.Agents[id].Model
				models[id].start(i, answers)
			}
			reg := base
			if len(stand) > 0 {
				if reg, err = standIns(builtin, stand, quiet); err != nil {
					return nil, &Error{File: tr.File, Err: fmt.Errorf("turns[%d].toolResults: %w", i, err)}
				}
			}
			execs[id].reg.Store(reg)
		}
		model.start(i, t.Model)
		runner.begin()
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
		// The asked agents' part of the turn, checked as the turn is.
		for _, l := range all {
			id := l.ID()
			if id == loaded.ID() {
				continue
			}
			at, scripted := t.Agents[id]
			ar := runner.report(id)
			ar.Index, ar.User = i, tp.User
			ar.Calls, ar.Unanswered = models[id].finish()
			if !scripted && len(ar.Calls) == 0 {
				continue
			}
			if key := runner.session(id); key != "" {
				if s, err := store.Get(ctx, key); err == nil {
					ar.State = s.State
				}
			}
			for _, m := range check(Turn{Model: at.Model, Expect: at.Expect}, ar) {
				m.Where = "agent " + id + ", " + m.Where
				tp.Mismatches = append(tp.Mismatches, m)
			}
			tp.Agents = append(tp.Agents, AgentReport{Agent: id, TurnReport: *ar})
		}
		rep.Turns = append(rep.Turns, tp)
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// loadAsked returns the transcript's agent and every agent it asks through
// its agent tools, and they through theirs: from the transcript's agents
// (template files or shipped IDs), then the shipped agents. A circle of
// agents asking one another is an error, as when a server loads them.
func loadAsked(tr *Transcript, main *template.Loaded, provided []string) ([]*template.Loaded, error) {
	cfg := template.Config{Provided: provided}
	listed := map[string]*template.Loaded{}
	for i, a := range tr.Agents {
		var l *template.Loaded
		var err error
		if strings.HasSuffix(a, ".json") || strings.ContainsAny(a, `/\`) {
			l, err = load(&Transcript{File: tr.File, Template: a}, provided)
		} else {
			l, err = load(&Transcript{File: tr.File, Agent: a}, provided)
		}
		if err != nil {
			return nil, &Error{File: tr.File, Err: fmt.Errorf("agents[%d]: %w", i, errors.Unwrap(err))}
		}
		listed[l.ID()] = l
	}
	shipped, err := template.LoadFS(templates.FS(), ".", cfg)
	if err != nil {
		return nil, &Error{File: tr.File, Err: err}
	}
	all := []*template.Loaded{main}
	have := map[string]bool{main.ID(): true}
	for k := 0; k < len(all); k++ {
		for _, name := range all[k].Template.AgentTools() {
			a := all[k].Template.Agents[name]
			if !a.Local() || have[a.Agent] {
				continue
			}
			l := listed[a.Agent]
			for _, r := range shipped {
				if l == nil && r.Loaded != nil && r.Loaded.ID() == a.Agent {
					l = r.Loaded
				}
			}
			if l == nil {
				return nil, &Error{File: tr.File, Err: fmt.Errorf("%s: agents.%s asks %q, which is neither in the transcript's agents nor shipped", all[k].ID(), name, a.Agent)}
			}
			have[l.ID()] = true
			all = append(all, l)
		}
	}
	if err := template.CheckAgents(all).Err(); err != nil {
		return nil, &Error{File: tr.File, Err: err}
	}
	return all, nil
}

// recorder is the asked agents' Runner: Direct's turns, whose events it
// also gathers into each agent's report of the current turn.
type recorder struct {
	direct   *agenttool.Direct
	mu       sync.Mutex
	reports  map[string]*TurnReport
	sessions map[string]string // agent -> the store key of its latest session
	steps    map[string]int    // agent -> its model calls so far this turn
}

// begin starts a turn of the transcript.
func (r *recorder) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports, r.steps = map[string]*TurnReport{}, map[string]int{}
	if r.sessions == nil {
		r.sessions = map[string]string{}
	}
}

func (r *recorder) report(id string) *TurnReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reports[id] == nil {
		r.reports[id] = &TurnReport{}
	}
	return r.reports[id]
}

func (r *recorder) session(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

func (r *recorder) Start(ctx context.Context, req agenttool.Request) (agenttool.Turn, error) {
	t, err := r.direct.Start(ctx, req)
	return r.tee(req, t, err)
}

func (r *recorder) Answer(ctx context.Context, req agenttool.Request, ds []chat.Decision) (agenttool.Turn, error) {
	t, err := r.direct.Answer(ctx, req, ds)
	return r.tee(req, t, err)
}

func (r *recorder) tee(req agenttool.Request, t agenttool.Turn, err error) (agenttool.Turn, error) {
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.sessions[req.Agent] = session.Key(req.Owner, req.Session)
	r.mu.Unlock()
	return teed{Turn: t, r: r, agent: req.Agent}, nil
}

// teed is an asked agent's turn whose events go to its report as they are
// read.
type teed struct {
	agenttool.Turn
	r     *recorder
	agent string
}

func (t teed) Events(ctx context.Context) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		rep := t.r.report(t.agent)
		for ev, err := range t.Turn.Events(ctx) {
			if err == nil {
				t.r.mu.Lock()
				call := t.r.steps[t.agent]
				rep.add(ev, &call)
				t.r.steps[t.agent] = call
				t.r.mu.Unlock()
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
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
		// A call of an asked agent is named by its own tool.
		k := slices.IndexFunc(waiting, func(w session.Approval) bool {
			if w.AgentCall != nil {
				return w.AgentCall.Name == a.Tool
			}
			return w.Call.Name == a.Tool
		})
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
		tp.add(ev, &call)
	}
}

// add reads one event of a turn; call counts its model calls so far.
func (tp *TurnReport) add(ev chat.Event, call *int) {
	switch ev.Kind {
	case chat.KindStepStart:
		*call++
	case chat.KindTextDelta:
		tp.Text += ev.Text
	case chat.KindApproval:
		switch {
		case ev.Approval != nil && ev.Approval.Call != nil:
			// A call of an agent the turn's call asked.
			tp.Awaiting = append(tp.Awaiting, ev.Approval.Call.Name)
		case ev.ToolCall != nil:
			tp.Awaiting = append(tp.Awaiting, ev.ToolCall.Name)
		}
	case chat.KindToolResult:
		r := *ev.ToolResult
		if r.Type == "refused" {
			tp.Refused = append(tp.Refused, Refusal{Tool: r.Name, Call: *call, Reason: r.Content})
		}
		tp.Results = append(tp.Results, ToolOutcome{Call: *call, Result: r})
	case chat.KindError:
		if ev.Error != nil && ev.ToolCall == nil {
			tp.Error = ev.Error
		}
	case chat.KindDone:
		tp.FinishReason = ev.FinishReason
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
