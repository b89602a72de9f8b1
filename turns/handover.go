package turns

import (
	"context"
	"time"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/turnlog"
)

// A replica that shuts down hands its running turns to the others
// instead of cutting them, when the shared log's turns can be taken over
// (a turnlog.Taker, Redis): a deploy then cuts no answer.
//
// Shutdown asks each running turn to stop at its next safe point
// (llmorch.WithHandOver: before its next model call, or during one,
// which the taker makes again; the tool calls of a step run to their end
// first). Such a turn stops as if its replica died between two of its
// writes: it writes nothing more, its session keeps its turn marker and
// journal, and the agent releases its lease at once. The mirror then
// copies the events logged so far to the shared log and marks the turn
// handed over there (turnlog.Taker.HandOver), which every replica hears
// (WatchHandOvers): the first to take the session's lease takes the turn
// over (takeover.go) and goes on from the journal, whether or not a
// client reads the turn. A reader elsewhere that finds the turn handed
// over takes it over itself, without waiting for its writer to look dead.
// The readers of this replica get the events it logged, then, once the
// shared log has the hand-over (so that a replica they resume on takes
// the turn over at once), the end of their stream without its last
// events (ErrHandedOver): a client resumes on another replica with its
// Last-Event-ID. The shutdown waits for that.
//
// A turn still running when the shutdown's time is nearly up (a tool call
// of minutes) is handed over at once: cut, as a crash would cut it (the
// taker runs the call under way again only when its tool is idempotent).
// A turn that cannot be handed over (without a shared log that can take
// turns over, or a stateless conversation, whose session is the
// request's) is waited for, then cancelled: it saves its partial answer
// and ends with ErrShutdown.

// ErrHandedOver ends the stream of a reader of a turn this replica handed
// over as it shut down (or that it stops serving as it shuts down, when
// its turns go on elsewhere): the turn goes on on another replica, and
// the client resumes there (its Last-Event-ID). It is not the turn's end.
var ErrHandedOver = llmorch.ErrHandedOver

// handsOver reports whether this replica's turns can be handed over to
// other replicas: the shared log's turns can be taken over.
func (r *Runtime) handsOver() bool {
	_, ok := r.cfg.Log.(turnlog.Taker)
	return ok
}

// shutdownMargin is how long before the end of the shutdown's context the
// turns still running are cut (handed over at once, or cancelled), so
// that they can end, and their streams with them, within it: half the
// time left, at most 5 s.
func shutdownMargin(left time.Duration) time.Duration { return min(5*time.Second, left/2) }

// handOverAll refuses new turns and ends the running ones (see above),
// within ctx.
func (r *Runtime) handOverAll(ctx context.Context) {
	for _, t := range r.turns.shutdown() {
		t.handOver()
	}
	wait := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, deadline.Add(-shutdownMargin(time.Until(deadline))))
		defer cancel()
	}
	if r.turns.wait(wait) == nil {
		return
	}
	for _, t := range r.turns.runningTurns() {
		t.cut()
	}
	if err := r.turns.wait(ctx); err != nil {
		r.log.Warn("shutdown: turns still running", "err", err)
	}
}

// watchHandOvers takes over the turns other replicas hand over, when the
// shared log's turns can be taken over; several replicas may try, the
// session's lease lets one.
func (r *Runtime) watchHandOvers() (cancel func()) {
	taker, ok := r.cfg.Log.(turnlog.Taker)
	if !ok {
		return func() {}
	}
	return taker.WatchHandOvers(func(ref turnlog.Ref) {
		if !r.turns.isClosing() {
			// Its lease is free: another replica that took it first
			// holds it, and this one gives up at once.
			r.takeOver(ref.Session, ref.Turn, 0)
		}
	})
}
