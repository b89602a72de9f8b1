package tools

import "context"

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
