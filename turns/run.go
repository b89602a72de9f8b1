package turns

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// A turn runs in a goroutine of its own (runTurn), which pulls the agent's
// events and logs each in the turn's log, from which every reader is fed;
// run starts it and returns once the turn started or could not.

// run runs node's turn on the session with in (its Owner, TurnID and
// Position are set here) in a goroutine of its own, and returns once the
// turn started (its session claimed, its first event out), or with the
// error that kept it from starting. The turn's context keeps ctx's values
// (an embedder's middleware may put its user there, for tools to read)
// but not its cancellation: the request that started the turn may go
// away; the runtime's shutdown still ends it.
func (r *Runtime) run(ctx context.Context, node *agent.Agent, sessionID string, in agent.Input) (*turn, error) {
	if r.turns.isClosing() {
		return nil, ErrShuttingDown
	}
	tctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(ctx))
	stopWithRuntime := context.AfterFunc(r.base, func() { cancelCtx(ErrShutdown) })
	cancel := func(cause error) { stopWithRuntime(); cancelCtx(cause) }
	in.TurnID = session.NewID()
	t := newTurn(in.TurnID, sessionID, node.ID(), in.Owner, cancel, r.cfg.MaxEvents, r.cfg.DisconnectGrace)
	if r.handsOver() && !in.Stateless {
		// A stateless conversation's session is the request's own: it
		// cannot go on elsewhere.
		tctx = t.makeHandable(tctx)
	}
	started := make(chan error, 1)
	// The turn's writes record how far its log reaches (an event of this
	// replica's log, numbered as in the shared one).
	in.Position = func() int64 { last, _ := t.state(); return last }
	go r.runTurn(t, node.Run(tctx, sessionID, in), started)
	if err := <-started; err != nil {
		return nil, err
	}
	return t, nil
}

// runTurn runs a turn in its goroutine. The turn starts when its sequence
// is first pulled (the agent claims the session then): started gets the
// outcome, and only a turn that started is registered, copied to the
// shared log and drained into its own log. A panic of the agent becomes
// an error event, so that readers always get Done; a cancellation the
// runtime caused (shutdown, disconnect grace, a full log) is reported by
// the turn itself, from its context's cause. A turn taken over
// (turn.continued) goes on after the events it holds.
func (r *Runtime) runTurn(t *turn, events iter.Seq2[chat.Event, error], started chan<- error) {
	defer t.cancel(nil)
	answered := false
	answer := func(err error) {
		if !answered {
			answered = true
			started <- err
		}
	}
	var (
		registered bool
		draining   bool // the runtime began shutting down as the turn started
		finished   bool
		mirrored   <-chan struct{}
	)
	defer func() {
		v := recover()
		if v != nil {
			r.log.Error("panic in turn", "agent", t.agentID, "session", t.sessionID, "turn", t.id, "panic", fmt.Sprint(v))
		}
		answer(ErrStartFailed)
		if !registered {
			return
		}
		if !finished && v == nil && t.handingOff.Load() {
			// Handed over (handover.go): this replica's readers get the
			// end of their stream once the mirror marked the turn handed
			// over in the shared log, where it goes on, and only then
			// does the turn stop counting as running here (the shutdown
			// waits for it).
			t.finishHandedOver()
			if mirrored != nil {
				<-mirrored
			}
			t.announceHandedOver()
			r.turns.handedOver(t)
			return
		}
		if !finished {
			t.add(chat.Event{Kind: chat.KindError, Error: &chat.Error{Code: "internal_error", Message: "the turn failed"}})
			t.addLast(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishError})
		}
		t.finish()
		if mirrored != nil {
			<-mirrored
		}
		r.turns.ended(t)
	}()
	for ev, err := range events {
		if draining {
			continue // cancelled: the turn ends and frees its session
		}
		if !registered {
			if err != nil {
				answer(err)
				return
			}
			if !r.turns.register(t) {
				if t.handable {
					// It started as this replica began shutting down
					// (its message is stored): handed over at once,
					// before it wrote anything more, like a turn whose
					// replica died then; a retry of its request (its
					// idempotency key) takes it over elsewhere, and so
					// does a takeover that was under way here.
					t.cut()
				} else {
					t.cancel(ErrShutdown)
				}
				draining = true
				answer(ErrShuttingDown)
				continue
			}
			registered = true
			if r.cfg.Log != nil {
				mirrored = r.mirror(t)
			}
			answer(nil)
		}
		if finished = ev.Kind == chat.KindDone; finished {
			t.addLast(ev)
			return
		}
		t.add(ev)
	}
}

// goOnTaken runs a turn taken over on this replica: a turn of its own,
// holding the events the shared log had, whose new events follow them and
// are copied there by this replica's mirror.
func (r *Runtime) goOnTaken(h *agent.Takeover, key string, st turnlog.Status, events []chat.Event) {
	sessionID := key
	if _, id, scoped := strings.Cut(key, "."); scoped {
		sessionID = id // as the client knows it (session.Key)
	}
	ctx, cancelCtx := context.WithCancelCause(context.WithoutCancel(r.base))
	stopWithRuntime := context.AfterFunc(r.base, func() { cancelCtx(ErrShutdown) })
	cancel := func(cause error) { stopWithRuntime(); cancelCtx(cause) }
	// A turn taken over can be handed over again (handover.go).
	signal, handOverNow := context.WithCancel(context.Background())
	ctx = llmorch.WithHandOver(ctx, signal)
	t := newTurn(h.Turn(), sessionID, h.Agent(), h.Owner(), cancel, r.cfg.MaxEvents, r.cfg.DisconnectGrace)
	t.continued, t.restarts = true, st.Restarts
	t.events, t.nextSeq, t.loaded = events, st.Last+1, st.Last
	if st.Last == 0 {
		// Its replica died before any event reached the shared log: the
		// turn begins here, as every turn does.
		t.add(chat.Event{Kind: chat.KindStart, Start: &chat.Start{Turn: t.id, Message: t.id}})
	}
	evs := h.Run(ctx, func() int64 { last, _ := t.state(); return last })
	t.handable, t.signal, t.signalNow = true, signal, handOverNow
	started := make(chan error, 1)
	r.runTurn(t, func(yield func(chat.Event, error) bool) {
		for ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}, started)
	if err := <-started; err != nil {
		r.log.Warn("taking over an interrupted turn", "session", key, "turn", t.id, "err", err)
	}
}
