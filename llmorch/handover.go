package llmorch

import (
	"context"
	"errors"

	"github.com/agentdock-go/agentdock/chat"
)

// A turn that keeps a journal (Turn.Journal) can be handed to another
// process, which takes it over (agent.Set.TakeOver) and goes on from its
// last completed step, as when its process dies: a replica that shuts down
// hands its running turns over instead of cutting them. Handed over, a
// turn stops as if its process died between two of its writes: it writes
// nothing more (the session keeps its turn marker and journal, for the
// process that takes it over) and yields no event more, not even Done, so
// that its stream ends open.
//
// The hand-over is asked for in two ways. Gently (WithHandOver): the turn
// stops at its next safe point, where nothing it started is cut: before
// its next model call, or at once during a model call (the model call is
// made again by the process that takes the turn over, which drops what it
// had streamed); the tool calls of a step all run to their end, and the
// step is saved, first. At once (the turn's context cancelled with
// ErrHandedOver as its cause): whatever runs is cut, a tool call included,
// exactly as by a crash; the process that takes the turn over runs that
// call again only when its tool is idempotent, else reports it
// interrupted.

// CodeHandedOver is the code of ErrHandedOver.
const CodeHandedOver = "turn_handed_over"

// ErrHandedOver is the cancellation cause that hands a turn over at once
// (see WithHandOver), and the error of a turn that stopped handed over.
var ErrHandedOver = &chat.Error{Code: CodeHandedOver,
	Message: "the server running this turn is shutting down and handed the turn to another server, which goes on with it: resume the stream to follow it there"}

type handOverKey struct{}

// WithHandOver returns ctx with signal: once signal is done, a turn run
// under the returned context (StreamWithOrchestration) that keeps a
// journal stops at its next safe point, handed over (see above). A turn
// without a journal cannot be handed over and ignores it.
func WithHandOver(ctx context.Context, signal context.Context) context.Context {
	return context.WithValue(ctx, handOverKey{}, signal)
}

// handOverSignal is the signal WithHandOver put in ctx, nil when none.
func handOverSignal(ctx context.Context) context.Context {
	s, _ := ctx.Value(handOverKey{}).(context.Context)
	return s
}

// handOverDue reports whether the turn is asked to stop at this safe
// point, and marks it handed over when it is.
func (r *run) handOverDue() bool {
	if r.handOver == nil || r.handOver.Err() == nil || !r.turn.Journal {
		return false
	}
	r.handedOver = true
	return true
}

// handingOver reports whether the turn stops handed over: asked to at a
// safe point, or cut at once (ctx's cause is ErrHandedOver; ctx may be
// the context of the model call under way, which the gentle signal
// cancels with that cause too). A turn handed over writes nothing more.
func (r *run) handingOver(ctx context.Context) bool {
	if r.handedOver {
		return true
	}
	if !r.turn.Journal || ctx.Err() == nil || !errors.Is(context.Cause(ctx), ErrHandedOver) {
		return false
	}
	r.handedOver = true
	return true
}

// modelContext is the context of one model call (and the compaction before
// it): cut when the turn is asked to stop at its next safe point, with
// ErrHandedOver as its cause. stop must be called once the call is over.
func (r *run) modelContext(ctx context.Context) (mctx context.Context, stop func()) {
	if r.handOver == nil || !r.turn.Journal {
		return ctx, func() {}
	}
	mctx, cancel := context.WithCancelCause(ctx)
	unwatch := context.AfterFunc(r.handOver, func() { cancel(ErrHandedOver) })
	return mctx, func() {
		unwatch()
		cancel(nil)
	}
}
