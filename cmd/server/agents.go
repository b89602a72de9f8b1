package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
	"github.com/agentdock-go/agentdock/turns"
)

// runtimeRunner is agenttool.Runner over the turn runtime: a local agent
// tool's child turn is a turn like one a door starts (turns.Runtime.Start),
// logged, followed and stopped from any replica, and durable like any. It
// is the one place that knows both the agent tools and the runtime.
type runtimeRunner struct {
	// rt is set once the runtime is made (the agents, and so their
	// tools, come first).
	rt    *turns.Runtime
	store session.Store
}

func (r *runtimeRunner) Start(ctx context.Context, req agenttool.Request) (agenttool.Turn, error) {
	return r.start(ctx, req, agent.Text(req.Message))
}

func (r *runtimeRunner) Answer(ctx context.Context, req agenttool.Request, decisions []chat.Decision) (agenttool.Turn, error) {
	answers := make([]agent.ApprovalAnswer, len(decisions))
	for i, d := range decisions {
		answers[i] = agent.ApprovalAnswer{ID: d.ID, Approved: d.Approved, Reason: d.Reason}
	}
	return r.start(ctx, req, agent.Input{Answers: answers})
}

func (r *runtimeRunner) start(ctx context.Context, req agenttool.Request, in agent.Input) (agenttool.Turn, error) {
	if t, ok := r.started(ctx, req); ok {
		return t, nil
	}
	in.Owner, in.Key = req.Owner, req.Key
	t, err := r.rt.Start(ctx, turns.Input{Input: in, Agent: req.Agent, Session: req.Session})
	if err != nil {
		p := turns.Describe(err)
		return nil, fmt.Errorf("%s: %s", p.Code, p.Message)
	}
	return &childTurn{r: r, req: req, t: t}, nil
}

// started is the turn the request's key started on the session already:
// a call run again after its caller was taken over follows the turn its
// first run started, before it claims the session (which that turn, its
// replica dead, may still hold), so that following it takes it over here
// once its lease expired rather than saving its partial answer.
func (r *runtimeRunner) started(ctx context.Context, req agenttool.Request) (agenttool.Turn, bool) {
	sess, err := r.rt.Session(ctx, req.Owner, req.Session)
	if err != nil {
		return nil, false // new, or unreadable: Start says
	}
	sr, ok := sess.RequestOf(req.Key)
	if !ok {
		return nil, false
	}
	t, err := r.rt.Turn(ctx, req.Owner, req.Session, sr.Turn)
	if err == nil {
		return &childTurn{r: r, req: req, t: t}, true
	}
	if a, err := agenttool.Answered(ctx, r.store, req.Owner, req.Session, req.Key); err == nil {
		return a, true
	}
	return nil, false
}

// childTurn is a child turn, wherever it runs.
type childTurn struct {
	r   *runtimeRunner
	req agenttool.Request
	t   *turns.Turn
}

func (c *childTurn) Events(ctx context.Context) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		seen := false
		for ev, err := range c.t.Events(ctx, 0) {
			var ce *chat.Error
			if !seen && errors.As(err, &ce) && turns.Over(ce) {
				// It ended and is no longer kept: its answer is the
				// session's.
				a, aerr := agenttool.Answered(ctx, c.r.store, c.req.Owner, c.req.Session, c.req.Key)
				if aerr != nil {
					yield(chat.Event{}, aerr)
					return
				}
				for ev, err := range a.Events(ctx) {
					if !yield(ev, err) || err != nil {
						return
					}
				}
				return
			}
			seen = true
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Stop stops the child turn on whichever replica runs it.
func (c *childTurn) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.t.Stop(ctx)
}

// agentTools makes each agent's agent tools (its template's agents) and
// joins them to its other tools (tools).
type agentTools struct {
	cfg    agenttool.Config
	tools  func(*template.Loaded) tools.Toolbox
	loaded map[string]*template.Loaded
	err    error
}

func newAgentTools(cfg *serveConfig, runner agenttool.Runner, loaded []*template.Loaded, base func(*template.Loaded) tools.Toolbox, log *slog.Logger) *agentTools {
	a := &agentTools{tools: base, loaded: map[string]*template.Loaded{}}
	for _, l := range loaded {
		a.loaded[l.ID()] = l
	}
	a.cfg = agenttool.Config{
		Runner:   runner,
		MaxDepth: cfg.AgentCallDepth,
		Timeout:  cfg.AgentCallTimeout,
		Logger:   log,
		Agents: func(id string) (*template.Template, bool) {
			l, ok := a.loaded[id]
			if !ok {
				return nil, false
			}
			return l.Template, true
		},
	}
	return a
}

// toolsFor is agent.Config.ToolsFor.
func (a *agentTools) toolsFor(l *template.Loaded) tools.Toolbox {
	base := a.tools(l)
	if len(l.Template.Agents) == 0 {
		return base
	}
	tb, err := agenttool.New(a.cfg, l.Template)
	if err != nil {
		a.err = errors.Join(a.err, fmt.Errorf("%s: %w", l.File, err))
		return base
	}
	return tools.Join(base, tb)
}

// checkAgentTools drops the templates whose agent tools name an agent that
// is not loaded or close a cycle (template.CheckAgents), logging why, until
// none does: a template that names a dropped one is dropped in turn.
func checkAgentTools(loaded []*template.Loaded, log *slog.Logger) []*template.Loaded {
	for {
		ds := template.CheckAgents(loaded)
		if len(ds) == 0 {
			return loaded
		}
		bad := map[string]bool{}
		for _, d := range ds {
			log.Error("template error", "problem", d.String())
			bad[d.File] = true
		}
		var keep []*template.Loaded
		for _, l := range loaded {
			if bad[l.File] {
				log.Error("template skipped", "file", l.File)
				continue
			}
			keep = append(keep, l)
		}
		loaded = keep
	}
}
