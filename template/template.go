// Package template reads agent templates: AgentDock's template.json format,
// which names an agent's model, tools, personality, chat settings and
// orchestration.
//
// Parsing keeps every field, known or not, so a template survives a round
// trip. Validation reports every problem in one pass, each located by file,
// field path and step name, and a template with errors never loads.
//
// The functions go from bytes to an agent one stage at a time or all at
// once: Parse reads a template (a *Template); Compile validates it and
// builds its orchestration engine; Load does both for one file's bytes (an
// *Agent: the template and its engine). LoadFS and LoadPath load a
// template file, or a directory of template.json and */template.json
// files, from a file system or from the disk, one Result per file.
package template

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Template is one agent template.
type Template struct {
	Version     string   `json:"version,omitempty"`
	AgentID     string   `json:"agentId"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Priority    float64  `json:"priority,omitempty"`
	// Personality is the system prompt's opening; a string or a list of
	// lines in JSON.
	Personality orchestration.Lines `json:"personality,omitempty"`
	// Nodes are the agent's tools plus one "llm.<provider>" entry naming its
	// model provider.
	Nodes              []string              `json:"nodes,omitempty"`
	NodeConfigurations map[string]NodeConfig `json:"nodeConfigurations,omitempty"`
	ChatSettings       ChatSettings          `json:"chatSettings,omitzero"`
	Options            Options               `json:"options,omitzero"`
	Orchestration      *orchestration.Spec   `json:"orchestration,omitempty"`
	// MCPServers are MCP servers for this agent only, in the shape of an
	// MCP client configuration (see package mcpconfig). Their tools are
	// named "<server>__<tool>" and, like any tool, belong to the agent when
	// its nodes name them.
	MCPServers mcpconfig.Servers `json:"mcpServers,omitempty"`

	// Extra keeps the fields this runtime does not know.
	Extra map[string]json.RawMessage `json:"-"`
}

// NodeConfig configures one node; for llm.* nodes, the model.
type NodeConfig struct {
	Model           string   `json:"model,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxTokens       int      `json:"maxTokens,omitempty"`
	UseCustomAPIKey bool     `json:"useCustomApiKey,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// ChatSettings configures the conversation.
type ChatSettings struct {
	// HistoryPolicy is "all", "lastN" or "none".
	HistoryPolicy string `json:"historyPolicy,omitempty"`
	// HistoryLength is N for "lastN": how many messages are sent to the model.
	HistoryLength   int                 `json:"historyLength,omitempty"`
	InitialMessages orchestration.Lines `json:"initialMessages,omitempty"`
	ChatPrompts     []string            `json:"chatPrompts,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// History policies.
const (
	HistoryAll   = "all"
	HistoryLastN = "lastN"
	HistoryNone  = "none"
)

// Options holds the template's run options. The budgets (maxSteps,
// maxToolCalls, maxOutputBytes, turnTimeout, maxToolResultBytes) override
// the server's settings for this agent; unset, the server's apply (see
// llmorch.Budget).
type Options struct {
	// MaxSteps bounds the model calls of one turn (default 10).
	MaxSteps int `json:"maxSteps,omitempty"`
	// MaxToolCalls bounds the tool calls that run per model answer
	// (default 16).
	MaxToolCalls int `json:"maxToolCalls,omitempty"`
	// MaxOutputBytes bounds the bytes of text and tool arguments the model
	// streams in one turn (default 256 KiB).
	MaxOutputBytes int `json:"maxOutputBytes,omitempty"`
	// TurnTimeout bounds one turn's duration, as a Go duration such as
	// "5m" (default 10m).
	TurnTimeout string `json:"turnTimeout,omitempty"`
	// MaxToolResultBytes bounds what the model reads of one tool result
	// (default 64 KiB); a longer result is cut with a note.
	MaxToolResultBytes int `json:"maxToolResultBytes,omitempty"`
	// HistoryLimit is how many tool uses a session remembers for the
	// orchestration's conditions (recentlyUsedTools; default 100, at most
	// MaxHistoryLimit). Nil when absent, so that an explicit 0 is an error.
	HistoryLimit *int `json:"historyLimit,omitempty"`
	// RequireApproval lists tool patterns (the syntax of a step's
	// availableTools) whose calls wait for a person's approval in every
	// step; a step's own requireApproval adds to it for that step.
	RequireApproval []string `json:"requireApproval,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// MaxHistoryLimit bounds options.historyLimit: the tool history is stored
// with the session and read and written at every turn and tool use, so a
// longer one costs every turn of every session of the agent.
const MaxHistoryLimit = 10000

// DefaultMaxSteps is the number of model calls a turn may make when the
// template does not say.
const DefaultMaxSteps = 10

func (t *Template) UnmarshalJSON(b []byte) error { return orchestration.UnmarshalKeep(b, t, &t.Extra) }
func (t Template) MarshalJSON() ([]byte, error)  { return orchestration.MarshalKeep(t, t.Extra) }
func (n *NodeConfig) UnmarshalJSON(b []byte) error {
	return orchestration.UnmarshalKeep(b, n, &n.Extra)
}
func (n NodeConfig) MarshalJSON() ([]byte, error) { return orchestration.MarshalKeep(n, n.Extra) }
func (c *ChatSettings) UnmarshalJSON(b []byte) error {
	return orchestration.UnmarshalKeep(b, c, &c.Extra)
}
func (c ChatSettings) MarshalJSON() ([]byte, error) { return orchestration.MarshalKeep(c, c.Extra) }
func (o *Options) UnmarshalJSON(b []byte) error     { return orchestration.UnmarshalKeep(b, o, &o.Extra) }
func (o Options) MarshalJSON() ([]byte, error)      { return orchestration.MarshalKeep(o, o.Extra) }

// Tools returns the agent's tools: the nodes without llm.* entries, in
// template order, without repeats.
func (t *Template) Tools() []string {
	var out []string
	for _, n := range t.Nodes {
		if !strings.HasPrefix(n, "llm.") && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Provider returns the provider named by the template's llm.* node (for
// example "anthropic") and that node's configuration, or "" when there is
// none.
func (t *Template) Provider() (string, NodeConfig) {
	for _, n := range t.Nodes {
		if p, ok := strings.CutPrefix(n, "llm."); ok {
			return p, t.NodeConfigurations[n]
		}
	}
	return "", NodeConfig{}
}

// MaxSteps returns options.maxSteps or the default.
func (t *Template) MaxSteps() int {
	if t.Options.MaxSteps > 0 {
		return t.Options.MaxSteps
	}
	return DefaultMaxSteps
}

// Bounds of the budget options, so that a typo cannot disable a budget.
const (
	MaxMaxSteps       = 100
	MaxMaxToolCalls   = 256
	MaxMaxOutputBytes = 16 << 20
	MinTurnTimeout    = time.Second
	MaxTurnTimeout    = 24 * time.Hour
)

// MinMaxToolResultBytes and MaxMaxToolResultBytes bound
// options.maxToolResultBytes (the first is tools.MinMaxResultBytes).
const (
	MinMaxToolResultBytes = 1 << 10
	MaxMaxToolResultBytes = 16 << 20
)

// TurnTimeoutDuration returns options.turnTimeout, or 0 when it is unset or
// not a valid duration (which validation reports).
func (o Options) TurnTimeoutDuration() time.Duration {
	d, err := time.ParseDuration(o.TurnTimeout)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// Steps returns the orchestration's steps (none without orchestration).
func (t *Template) Steps() []orchestration.Step {
	if t.Orchestration == nil {
		return nil
	}
	return t.Orchestration.Steps
}
