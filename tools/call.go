package tools

import (
	"context"

	"github.com/agentdock-go/agentdock/chat"
)

// Call describes what a tool runs for: the session and turn, the agent,
// the caller, the model's call and the orchestration step it was made in.
type Call struct {
	// SessionID is the session's ID as its client knows it.
	SessionID string
	// AgentID is the agent (template) the session belongs to.
	AgentID string
	// Owner identifies the caller: an API key's fingerprint, or what the
	// embedder's Owner hook returned; "" for an anonymous caller.
	Owner string
	// TurnID names the turn (its stream).
	TurnID string
	// ToolCallID is the model's ID of this call.
	ToolCallID string
	// Step is the active orchestration step when the call was made ("" for
	// none).
	Step string
	// ResultLimit is the most bytes of result the model may read from this
	// call (llmorch.Budget.MaxToolResultBytes); Registry.Execute cuts a
	// longer one (LimitResult). Zero means DefaultMaxResultBytes. A tool
	// that can stop reading early (ResultLimit(ctx)) need not hold more.
	ResultLimit int
	// Report, when set, streams the call's progress to the turn's client
	// (chat.KindToolProgress) while the call runs: a tool reports through
	// Report(ctx, ...), from any goroutine, until its Call returns. Nil
	// outside a turn.
	Report func(chat.Progress)
	// Decisions are a person's answers to the approvals that this call's
	// earlier run left pending (chat.ToolResult.Pending): the call runs
	// again to carry them out. Nil for a call's first run.
	Decisions []chat.Decision
}

type callKey struct{}

// CallFrom returns the call a tool runs for; ok is false outside a call the
// runtime made (a test calling the tool directly, say).
func CallFrom(ctx context.Context) (c Call, ok bool) {
	c, ok = ctx.Value(callKey{}).(Call)
	return c, ok
}

// WithCall returns ctx carrying c. The runtime sets it for every tool call;
// a tool's own tests can set it too.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// Report streams p, the progress of the call ctx runs for, to its turn's
// client (Call.Report); it does nothing outside a turn. The call's ID and
// name are filled in.
func Report(ctx context.Context, p chat.Progress) {
	c, ok := CallFrom(ctx)
	if !ok || c.Report == nil {
		return
	}
	c.Report(p)
}
