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
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
)

// serverRunner is agenttool.Runner over the server's turn runtime: a local
// agent tool's child turn is a turn like one an edge starts
// (server.Server.Start), logged, followed and stopped from any replica,
// and durable like any. It is the one place that knows both the agent
// tools and the runtime; pointing agent tools at another runtime changes
// it alone.
type serverRunner struct {
	// srv is set once the server is made (the agents, and so their
	// tools, come first).
	srv   *server.Server
	store session.Store
}

func (r *serverRunner) Start(ctx context.Context, req agenttool.Request) (agenttool.Turn, error) {
	if t, ok := r.started(ctx, req); ok {
		return t, nil
	}
	t, err := r.srv.Start(ctx, req.Owner, req.Agent, req.Session, req.Message, agent.WithRequest(req.Key))
	return r.turn(ctx, req, t, err)
}

func (r *serverRunner) Answer(ctx context.Context, req agenttool.Request, decisions []chat.Decision) (agenttool.Turn, error) {
	if t, ok := r.started(ctx, req); ok {
		return t, nil
	}
	answers := make([]agent.ApprovalAnswer, len(decisions))
	for i, d := range decisions {
		answers[i] = agent.ApprovalAnswer{ID: d.ID, Approved: d.Approved, Reason: d.Reason}
	}
	t, err := r.srv.Answer(ctx, req.Owner, req.Agent, req.Session, answers, agent.WithRequest(req.Key))
	return r.turn(ctx, req, t, err)
}

// started is the turn the request's key started on the session already:
// a call run again after its caller was taken over follows the turn its
// first run started, before it claims the session (which that turn, its
// replica dead, may still hold), so that following it takes it over here
// once its lease expired rather than saving its partial answer.
func (r *serverRunner) started(ctx context.Context, req agenttool.Request) (agenttool.Turn, bool) {
	sess, err := r.srv.Session(ctx, req.Owner, req.Session)
	if err != nil {
		return nil, false // new, or unreadable: Start says
	}
	if sr, ok := sess.RequestOf(req.Key); ok {
		return r.existing(ctx, req, sr.Turn), true
	}
	return nil, false
}

// existing follows turn id, which the request's key started: wherever it
// runs or ran, or from the session once no replica keeps it.
func (r *serverRunner) existing(ctx context.Context, req agenttool.Request, id string) agenttool.Turn {
	if found, _, err := r.srv.TurnStatus(ctx, req.Owner, req.Session, id); err == nil && !found {
		if t, err := agenttool.Answered(ctx, r.store, req.Owner, req.Session, req.Key); err == nil {
			return t
		}
	}
	return &followedTurn{r: r, req: req, id: id}
}

// turn is what Start and Answer give: the turn started, or the one the
// request's key started before.
func (r *serverRunner) turn(ctx context.Context, req agenttool.Request, t *server.Turn, err error) (agenttool.Turn, error) {
	var dup *agent.DuplicateError
	switch {
	case errors.As(err, &dup):
		return r.existing(ctx, req, dup.Request.Turn), nil
	case err != nil:
		_, code, msg := server.ErrorStatus(err)
		return nil, fmt.Errorf("%s: %s", code, msg)
	}
	return &followedTurn{r: r, req: req, id: t.ID(), local: t}, nil
}

// followedTurn is a child turn: this replica's (local), or one that the
// shared turn log follows.
type followedTurn struct {
	r     *serverRunner
	req   agenttool.Request
	id    string
	local *server.Turn
}

func (t *followedTurn) Events(ctx context.Context) iter.Seq2[chat.Event, error] {
	if t.local != nil {
		return t.local.Events(ctx)
	}
	return func(yield func(chat.Event, error) bool) {
		events, err := t.r.srv.Follow(ctx, t.req.Owner, t.req.Session, t.id)
		if errors.Is(err, server.ErrTurnNotFound) {
			// It ended and is no longer kept: its answer is the session's.
			var a agenttool.Turn
			if a, err = agenttool.Answered(ctx, t.r.store, t.req.Owner, t.req.Session, t.req.Key); err == nil {
				events = a.Events(ctx)
			}
		}
		if err != nil {
			yield(chat.Event{}, err)
			return
		}
		for ev, err := range events {
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Stop stops the child session's running turn on whichever replica runs
// it.
func (t *followedTurn) Stop() {
	if t.local != nil {
		t.local.Stop()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = t.r.srv.Stop(ctx, t.req.Owner, t.req.Session)
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
