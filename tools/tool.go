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
