package agenttool

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

// Runner runs the turns that local agent tools ask: the server's turn
// runtime (cmd/server adapts *server.Server to it), or Direct's agents
// for a program without a server. Whatever runs them, a child turn is a
// turn like a person's: its session is its own, and it can be followed
// and stopped.
type Runner interface {
	// Start starts a turn of r.Agent on the owner's session r.Session
	// with r.Message (the session is created on its first turn), and
	// returns once it started. When the session already has the turn
	// that r.Key started (a call run again after a takeover), it returns
	// that turn, running or ended, whose events come from its first.
	Start(ctx context.Context, r Request) (Turn, error)
	// Answer starts the turn that carries out decisions on the approvals
	// the session waits for, with r.Key as Start's (r.Message is unused).
	Answer(ctx context.Context, r Request, decisions []chat.Decision) (Turn, error)
}

// Request is a turn a local agent tool asks for.
type Request struct {
	// Owner owns the session (the caller's owner); Agent is the agent
	// asked, Session its session (session.ChildID).
	Owner, Agent, Session string
	Message               string
	// Key is the turn's idempotency key: one per call of the caller.
	Key string
}

// Turn is a turn a Runner started or found.
type Turn interface {
	// Events yields the turn's events from its first until Done, or an
	// error when they cannot be read (ctx ended).
	Events(ctx context.Context) iter.Seq2[chat.Event, error]
	// Stop stops the turn (a person's stop: its partial answer is
	// saved, and it ends with KindAbort and Done), wherever it runs; it
	// does nothing to a turn that ended.
	Stop()
}

// Answered is the turn that a request key started on a session, once
// that turn ended and is no longer kept: its answer as the session's
// history has it (the text after the request's user message), as one
// text event and Done. It is what a Runner whose turns are kept only a
// while gives for such a key.
func Answered(ctx context.Context, store session.Store, owner, sessionID, key string) (Turn, error) {
	k := session.Key(owner, sessionID)
	sess, err := store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	r, ok := sess.RequestOf(key)
	if !ok {
		return nil, fmt.Errorf("the session keeps no turn of request %s", key)
	}
	msgs, err := store.Messages(ctx, k, 0)
	if err != nil {
		return nil, err
	}
	users, text := 0, ""
	for _, m := range msgs {
		if m.Role == chat.RoleUser {
			users++
			continue
		}
		if users == r.UserMessages && m.Role == chat.RoleAssistant {
			text += m.Content
		}
	}
	// Numbered as the history counts them; a history cut to its cap
	// has lost the answer.
	if users < r.UserMessages {
		return nil, errors.New("the session no longer keeps the answer")
	}
	e := ended{text: text}
	// A turn that ended waiting for approvals waits for them still when it
	// is the session's latest: a later turn would have denied them.
	if n := len(sess.Requests); n > 0 && sess.Requests[n-1].Key == key {
		for _, a := range sess.PendingApprovals() {
			if !a.Client {
				e.pending = append(e.pending, a)
			}
		}
	}
	return e, nil
}

// ended is a turn that ended before it was asked for: its answer, and the
// approvals it waits for.
type ended struct {
	text    string
	pending []session.Approval
}

func (e ended) Events(context.Context) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		if e.text != "" && !yield(chat.Event{Kind: chat.KindTextDelta, Text: e.text}, nil) {
			return
		}
		for _, a := range e.pending {
			call := a.Call
			ap := &chat.Approval{ID: a.ID, ToolCallID: call.ID, Agent: a.Agent, Call: a.AgentCall}
			if !yield(chat.Event{Kind: chat.KindApproval, ToolCall: &call, Approval: ap}, nil) {
				return
			}
		}
		finish := chat.FinishStop
		if len(e.pending) > 0 {
			finish = chat.FinishApproval
		}
		yield(chat.Event{Kind: chat.KindDone, FinishReason: finish}, nil)
	}
}

func (ended) Stop() {}

// Direct is a Runner over a Set of agents in this process, for programs
// that run agents without the server (transcripts, an embedder's own
// loop): each turn runs in a goroutine of its own and keeps its events
// while it runs and after, for the calls that follow it. Its turns are
// not durable beyond the process. Set Agents before the first call.
type Direct struct {
	Agents *agent.Set

	mu    sync.Mutex
	turns map[string]*directTurn // by session key and request key
}

// Start implements Runner.
func (d *Direct) Start(ctx context.Context, r Request) (Turn, error) {
	node, ok := d.Agents.Get(r.Agent)
	if !ok {
		return nil, fmt.Errorf("no agent %q", r.Agent)
	}
	return d.run(ctx, r, node, agent.Text(r.Message))
}

// Answer implements Runner.
func (d *Direct) Answer(ctx context.Context, r Request, decisions []chat.Decision) (Turn, error) {
	node, ok := d.Agents.Get(r.Agent)
	if !ok {
		return nil, fmt.Errorf("no agent %q", r.Agent)
	}
	answers := make([]agent.ApprovalAnswer, len(decisions))
	for i, dc := range decisions {
		answers[i] = agent.ApprovalAnswer{ID: dc.ID, Approved: dc.Approved, Reason: dc.Reason}
	}
	return d.run(ctx, r, node, agent.Input{Answers: answers})
}

func (d *Direct) run(ctx context.Context, r Request, node *agent.Agent, in agent.Input) (Turn, error) {
	id := session.Key(r.Owner, r.Session) + "\x00" + r.Key
	d.mu.Lock()
	if t, ok := d.turns[id]; ok {
		d.mu.Unlock()
		return t, nil
	}
	d.mu.Unlock()
	// The key's turn ended already (the call runs again): its answer.
	if sess, err := d.Agents.Store().Get(ctx, session.Key(r.Owner, r.Session)); err == nil {
		if _, ok := sess.RequestOf(r.Key); ok {
			return Answered(ctx, d.Agents.Store(), r.Owner, r.Session, r.Key)
		}
	}
	// The turn outlives the call that starts it (its context's values go
	// on, not its end): it is stopped by Stop.
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	t := &directTurn{cancel: cancel, changed: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		defer cancel(nil)
		first := true
		in.Owner, in.Key = r.Owner, r.Key
		for ev, err := range node.Run(tctx, r.Session, in) {
			if first {
				first = false
				if err != nil {
					started <- err
					return
				}
				d.mu.Lock()
				if d.turns == nil {
					d.turns = map[string]*directTurn{}
				}
				d.turns[id] = t
				d.mu.Unlock()
				started <- nil
			}
			t.add(ev, ev.Kind == chat.KindDone)
		}
		if first {
			started <- errors.New("the turn yielded nothing")
			return
		}
		t.add(chat.Event{}, true)
		d.mu.Lock()
		delete(d.turns, id) // ended: Answered finds its answer
		d.mu.Unlock()
	}()
	err := <-started
	var dup *agent.DuplicateError
	switch {
	case errors.As(err, &dup):
		return Answered(ctx, d.Agents.Store(), r.Owner, r.Session, r.Key)
	case err != nil:
		return nil, err
	}
	return t, nil
}

// directTurn is a turn of Direct: its events so far.
type directTurn struct {
	cancel  context.CancelCauseFunc
	mu      sync.Mutex
	events  []chat.Event
	done    bool
	changed chan struct{}
}

func (t *directTurn) add(ev chat.Event, last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	if ev.Kind != "" {
		t.events = append(t.events, ev)
	}
	t.done = last
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *directTurn) Events(ctx context.Context) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		for i := 0; ; {
			t.mu.Lock()
			evs, done, changed := t.events[i:], t.done, t.changed
			t.mu.Unlock()
			for _, ev := range evs {
				i++
				if !yield(ev, nil) || ev.Kind == chat.KindDone {
					return
				}
			}
			if done {
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				yield(chat.Event{}, ctx.Err())
				return
			}
		}
	}
}

func (t *directTurn) Stop() { t.cancel(chat.StoppedByUser) }
