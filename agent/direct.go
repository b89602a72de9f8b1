package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/tools/agenttool"
)

// Direct is a Runner over a Set of agents in this process, for programs
// that run agents without the server (transcripts, an embedder's own
// loop): each turn runs in a goroutine of its own and keeps its events
// while it runs and after, for the calls that follow it. Its turns are
// not durable beyond the process. Set Agents before the first call.
type Direct struct {
	Agents *Set

	mu    sync.Mutex
	turns map[string]*directTurn // by session key and request key
}

// Start implements agenttool.Runner.
func (d *Direct) Start(ctx context.Context, r agenttool.Request) (agenttool.Turn, error) {
	node, ok := d.Agents.Get(r.Agent)
	if !ok {
		return nil, fmt.Errorf("no agent %q", r.Agent)
	}
	return d.run(ctx, r, node, Text(r.Message))
}

// Answer implements agenttool.Runner.
func (d *Direct) Answer(ctx context.Context, r agenttool.Request, decisions []chat.Decision) (agenttool.Turn, error) {
	node, ok := d.Agents.Get(r.Agent)
	if !ok {
		return nil, fmt.Errorf("no agent %q", r.Agent)
	}
	answers := make([]ApprovalAnswer, len(decisions))
	for i, dc := range decisions {
		answers[i] = ApprovalAnswer{ID: dc.ID, Approved: dc.Approved, Reason: dc.Reason}
	}
	return d.run(ctx, r, node, Input{Answers: answers})
}

func (d *Direct) run(ctx context.Context, r agenttool.Request, node *Agent, in Input) (agenttool.Turn, error) {
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
			return agenttool.Answered(ctx, d.Agents.Store(), r.Owner, r.Session, r.Key)
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
	var dup *DuplicateError
	switch {
	case errors.As(err, &dup):
		return agenttool.Answered(ctx, d.Agents.Store(), r.Owner, r.Session, r.Key)
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
