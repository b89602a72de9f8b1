// Package tools defines the tools an agent's model can call, the registry
// that holds them, and the execution wrapper that validates arguments against
// each tool's JSON Schema, bounds each call with a timeout and turns panics and
// errors into error results the model can read.
package tools

import (
	"context"
	"encoding/json"

	"github.com/agentdock-go/agentdock/chat"
)

// Tool is something a model can call.
type Tool interface {
	// Spec describes the tool: name, description and the JSON Schema of its
	// arguments.
	Spec() chat.ToolSpec
	// Call runs the tool with arguments that already passed the schema. An
	// error becomes an error result for the model; it does not end the turn.
	Call(ctx context.Context, args json.RawMessage) (Result, error)
}

// Toolbox is the tools an agent can call: their names, what the model is
// told about them, and a way to run a call. *Registry is one; so is an MCP
// Toolbox (package tools/mcp), which adds tools from MCP servers to a
// Registry's. The runtime asks the orchestration which of them to offer
// before every model call, and runs a call only if it was offered.
type Toolbox interface {
	// Names lists the tools, sorted.
	Names() []string
	// Specs describes the named tools, in the order given, skipping names
	// it does not know.
	Specs(names []string) []chat.ToolSpec
	// Execute runs one call; every failure (unknown tool, invalid
	// arguments, the tool's own error, a timeout, a panic) comes back as
	// an error result the model can read, never as a Go error.
	Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult
}

// Idempotency is implemented by toolboxes that know which of their tools
// can run twice for one call without harm (a read, a pure computation): a
// turn taken over by another server after the one running it died runs
// such a call again when it was under way, and gives the model an
// "interrupted" result for any other, which may or may not have taken
// effect. A toolbox without it has no idempotent tools. *Registry asks
// each tool (Idempotent); an MCP Toolset asks its servers too.
type Idempotency interface {
	// Idempotent reports whether the named tool's calls may run twice.
	Idempotent(name string) bool
}

// Idempotent is implemented by a Tool that declares whether running one of
// its calls twice is harmless; New's tools declare it with
// DeclareIdempotent. A tool without the method is not idempotent.
type Idempotent interface {
	Idempotent() bool
}

// Result is what a tool returns: markdown content and a type that classifies
// it (for example "critique_result").
type Result struct {
	Content string `json:"content"`
	Type    string `json:"type"`
}

// Aliaser is implemented by tools that accept other names for some of their
// arguments (AgentDock's parameter names, for example). The registry renames
// aliased fields to their canonical names before validation.
type Aliaser interface {
	// Aliases maps an accepted alias to the canonical argument name.
	Aliases() map[string]string
}
