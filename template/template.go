// Package template reads agent templates: AgentDock's template.json format,
// which names an agent's model, tools, personality, chat settings and
// orchestration.
//
// Parsing keeps every field, known or not, so a template survives a round
// trip. Validation reports every problem in one pass, each located by file,
// field path and step name, and a template with errors never loads.
//
// The functions go from bytes to a loaded template one stage at a time or
// all at once: Parse reads a template (a *Template); Compile validates it
// and builds its orchestration engine; Load does both for one file's bytes
// (a *Loaded: the template and its engine, which package agent runs). LoadFS and LoadPath load a
// template file, or a directory of template.json and */template.json
// files, from a file system or from the disk, one Result per file.
package template

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/guardrail"
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
	// Agents are the agents this agent may ask, each a tool the model
	// sees under its key: another agent of the server, or a remote A2A
	// agent. Like any tool, a node names it, and the orchestration
	// offers, refuses, sequences and records it.
	Agents map[string]AgentTool `json:"agents,omitempty"`

	// Extra keeps the fields this runtime does not know.
	Extra map[string]json.RawMessage `json:"-"`
}

// AgentTool is one entry of a template's agents: the agent a tool asks.
// Exactly one of Agent and A2A is set.
type AgentTool struct {
	// Agent is the ID of another agent of the same server.
	Agent string `json:"agent,omitempty"`
	// A2A is a remote agent's A2A URL: its card's address
	// (".../.well-known/agent-card.json") or the base it is served under
	// (the card is read at <base>/.well-known/agent-card.json). ${VAR}
	// and ${VAR:-default} are read from the server's environment.
	A2A string `json:"a2a,omitempty"`
	// Headers are sent with every request to an A2A agent (its
	// credentials); values may use ${VAR} as A2A does.
	Headers map[string]string `json:"headers,omitempty"`
	// Description tells the model what the agent is for; default: the
	// agent's own description (its template's, or its card's).
	Description string `json:"description,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

func (a *AgentTool) UnmarshalJSON(b []byte) error { return orchestration.UnmarshalKeep(b, a, &a.Extra) }
func (a AgentTool) MarshalJSON() ([]byte, error)  { return orchestration.MarshalKeep(a, a.Extra) }

// Local reports whether the tool asks an agent of the same server.
func (a AgentTool) Local() bool { return a.Agent != "" }

// AgentTools returns the template's agent tools' names, sorted.
func (t *Template) AgentTools() []string {
	names := make([]string, 0, len(t.Agents))
	for n := range t.Agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NodeConfig configures one node; for llm.* nodes, the model.
type NodeConfig struct {
	// Provider names the model's provider ("openai", "anthropic", ...);
	// empty, the provider the key names ("llm.openai": openai). A key
	// that names no provider ("llm.cheap") needs it.
	Provider        string   `json:"provider,omitempty"`
	Model           string   `json:"model,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxTokens       int      `json:"maxTokens,omitempty"`
	UseCustomAPIKey bool     `json:"useCustomApiKey,omitempty"`
	// Fallbacks are the llm.* keys of nodeConfigurations whose models
	// answer, in order, a call of this model that fails before its first
	// token with an error retrying will not cure soon (an outage, a long
	// rate limit, a request longer than its context when theirs is
	// larger). Absent: the server's fallback (LLM_FALLBACK_PROVIDER), if
	// any; an empty list: none. A fallback's own fallbacks are not
	// followed: the list is the whole chain.
	Fallbacks []string `json:"fallbacks,omitzero"`
	// ContextWindow is the model's context in input tokens (0: unknown):
	// a request too long for a model goes to a fallback only when both
	// windows are known and the fallback's is larger.
	ContextWindow int `json:"contextWindow,omitempty"`

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
	// ToolFiltering says how the tools the orchestration offers reach the
	// model: ToolFilteringStable or ToolFilteringFilter; empty takes
	// stable where the model restricts its calls to the offered tools
	// itself (OpenAI's allowed_tools, the offline model) and filter
	// elsewhere (docs/orchestration.md, "Tool filtering and the prompt
	// cache").
	ToolFiltering string `json:"toolFiltering,omitempty"`
	// Context is the agent's context budget: when the model's next request
	// would pass its input tokens, the oldest turns are summarized for the
	// model (docs/orchestration.md, "Long conversations"). Nil: the
	// server's defaults.
	Context *Context `json:"context,omitempty"`
	// ClientTools lists the names or patterns ("shell", "client_*") of
	// the client tools the template orchestrates: tools a request's
	// client brings (OpenAI's tools, the AI SDK's client-side tools) and
	// runs itself. A step's sequence may name them like the agent's own
	// tools. Client tools the template does not declare are offered too,
	// wherever a step's availableTools admits them (docs/orchestration.md,
	// "Client tools").
	ClientTools []string `json:"clientTools,omitempty"`
	// ClientInstructions says what becomes of a client's own instructions
	// (system and developer messages, the Responses API's instructions):
	// ClientInstructionsAllow (the default) gives them to the model after
	// the template's, marked as the client's; ClientInstructionsRefuse
	// answers a request that carries them with a 400.
	ClientInstructions string `json:"clientInstructions,omitempty"`
	// Busy is what a message sent while a turn runs on its session gets:
	// BusyReject, BusyEnqueue or BusyInterrupt; empty takes the
	// endpoint's default (enqueue on the chat API, reject on /v1). A
	// request may ask for another (docs/api.md, "Busy sessions").
	Busy string `json:"busy,omitempty"`
	// Guardrails check the user's input, the model's output as it
	// streams, tool calls' arguments and tools' results (docs/
	// guardrails.md); a step's own guardrails add to them while the step
	// is active.
	Guardrails []guardrail.Spec `json:"guardrails,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Context is options.context: "off", or an object whose unset fields take
// the server's defaults.
type Context struct {
	// Off ("context": "off") keeps the history's message cap alone
	// (chatSettings.historyPolicy): nothing is summarized.
	Off bool `json:"-"`
	// MaxInputTokens is the input tokens a model request may reach (the
	// tools, the system prompt and the messages) before older turns are
	// summarized.
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
	// KeepTurns is how many of the newest turns, the running one included,
	// the model reads verbatim after a summary.
	KeepTurns int `json:"keepTurns,omitempty"`
	// Summarizer writes the summaries.
	Summarizer *Summarizer `json:"summarizer,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Summarizer is options.context.summarizer.
type Summarizer struct {
	// Model is SummarizerOffline, or an llm.* key of nodeConfigurations
	// naming the model that summarizes (another model of the agent's
	// provider, a cheaper one say); empty, the server's default.
	Model string `json:"model,omitempty"`
	// Prompt replaces the instructions the summarizer is given.
	Prompt string `json:"prompt,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// SummarizerOffline names the deterministic summarizer, which keeps the
// user's statements and the first lines of tool results.
const SummarizerOffline = "offline"

// ContextOff is options.context's value that turns compaction off.
const ContextOff = "off"

// Bounds of options.context.
const (
	MinContextTokens    = 1000
	MaxContextTokens    = 10_000_000
	MaxKeepTurns        = 100
	MaxSummarizerPrompt = 8 << 10
)

func (c *Context) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s != ContextOff {
			return fmt.Errorf("options.context: want %q or an object such as {\"maxInputTokens\": 32000}, got %q", ContextOff, s)
		}
		*c = Context{Off: true}
		return nil
	}
	return orchestration.UnmarshalKeep(b, c, &c.Extra)
}

func (c Context) MarshalJSON() ([]byte, error) {
	if c.Off {
		return json.Marshal(ContextOff)
	}
	return orchestration.MarshalKeep(c, c.Extra)
}

func (s *Summarizer) UnmarshalJSON(b []byte) error {
	return orchestration.UnmarshalKeep(b, s, &s.Extra)
}
func (s Summarizer) MarshalJSON() ([]byte, error) { return orchestration.MarshalKeep(s, s.Extra) }

// The values of options.clientInstructions.
const (
	ClientInstructionsAllow  = "allow"
	ClientInstructionsRefuse = "refuse"
)

// The values of options.toolFiltering. Either way the runtime refuses a
// call of a tool that is not offered.
const (
	// ToolFilteringStable sends every tool of the agent, in one order, on
	// every model call, and names the offered ones apart (a provider's own
	// restriction, and the note after the history): the request's prefix
	// stays byte-identical, so the provider's prompt cache keeps it.
	ToolFilteringStable = "stable"
	// ToolFilteringFilter sends only the offered tools, so the tools
	// array changes with the step and the sequence position, and every
	// change starts the provider's prompt cache afresh.
	ToolFilteringFilter = "filter"
)

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

// Provider returns the provider of the template's llm.* node (for
// example "anthropic": its configuration's "provider", else the name
// after "llm.") and that node's configuration, or "" when there is none.
func (t *Template) Provider() (string, NodeConfig) {
	for _, n := range t.Nodes {
		if p, ok := strings.CutPrefix(n, "llm."); ok {
			nc := t.NodeConfigurations[n]
			if nc.Provider != "" {
				p = nc.Provider
			}
			return p, nc
		}
	}
	return "", NodeConfig{}
}

// ModelNode returns the key of the llm.* node of the agent's own model
// ("llm.openai"), "" when there is none.
func (t *Template) ModelNode() string {
	for _, n := range t.Nodes {
		if strings.HasPrefix(n, "llm.") {
			return n
		}
	}
	return ""
}

// StepModels returns the llm.* keys the steps name (step.model), each
// once, in step order.
func (t *Template) StepModels() []string {
	var out []string
	for _, s := range t.Steps() {
		if s.Model != "" && !slices.Contains(out, s.Model) {
			out = append(out, s.Model)
		}
	}
	return out
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

// Busy policies (Options.Busy).
const (
	// BusyReject refuses the message (409 session_busy).
	BusyReject = "reject"
	// BusyEnqueue queues the message, to be answered once the turns
	// before it ended, in the order they came.
	BusyEnqueue = "enqueue"
	// BusyInterrupt stops the running turn, which keeps its partial
	// answer, and answers the message at once.
	BusyInterrupt = "interrupt"
)

// ValidBusy reports whether p is a busy policy ("" is not).
func ValidBusy(p string) bool { return p == BusyReject || p == BusyEnqueue || p == BusyInterrupt }
