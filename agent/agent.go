// Package agent hosts agents: each Agent runs one template, turning a user
// message into a streamed turn (Agent.Run) with the orchestration, the tools,
// the model and the session store around it.
//
// Load makes the Set of agents of a template directory in one call, with
// the Options that configure every agent: the built-in tools and the Go
// tools given, every node checked against them (a misspelt one is an
// error), the templates' MCP servers started, their agent tools made, the
// warnings returned for the caller to show. `agentdock serve` loads its
// agents through it. NewSet makes a Set of templates already read.
//
// A turn is Agent.Run with an Input, ranged over. The turn runtime
// (package turns) runs turns across replicas on top of this package; what
// only it needs is here too, since it reaches into a turn's session: the
// takeover of a turn whose replica died (Set.TakeOver, Takeover), the
// recovery of its streamed steps (Set.RecoverTurn, StreamReader,
// StreamedStep, Recovery) and the stored answer of an idempotent retry
// (AnswerTo). A program that runs its turns itself needs none of them.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/guardrail"
	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/spend"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
)

// Errors a turn (Agent.Run) yields before it starts.
var (
	// ErrInvalidMessage: the message is empty, not UTF-8, or too long.
	ErrInvalidMessage = errors.New("invalid message")
	// ErrWrongAgent: the session belongs to another agent.
	ErrWrongAgent = errors.New("the session belongs to another agent")
	// ErrNotLastMessage: Regenerate named a message that is not the
	// session's last user message; only the last answer can be replaced.
	ErrNotLastMessage = errors.New("only the answer to the session's last user message can be regenerated")
	// ErrDuplicate: the turn's idempotency key (Input.Key) already
	// started a turn on the session; a *DuplicateError names it.
	ErrDuplicate = errors.New("this request already started a turn on the session")
)

// DuplicateError is the ErrDuplicate of a turn whose idempotency key the
// session already keeps: Request names the turn it started, which a
// client's retry is to be given (its stream, or its stored answer)
// instead of a second turn.
type DuplicateError struct{ Request session.Request }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s: turn %s", ErrDuplicate, e.Request.Turn)
}

func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// ModelFactory returns the model for a template.
type ModelFactory func(t *template.Template) (llmorch.Model, error)

// Model is the ModelFactory that gives every template m, whatever model the
// template names: for tests, the offline model, or a server of one model.
func Model(m llmorch.Model) ModelFactory {
	return func(*template.Template) (llmorch.Model, error) { return m, nil }
}

// Options configure the agents of a Set: Load and LoadFS read templates
// with them, NewSet takes templates already read. The zero value runs the
// templates with the built-in tools on the offline model, in memory.
type Options struct {
	// Tools are Go tools the templates may name, beside the built-in
	// ones (package tools: think, reflect, critique, debate, brainstorm,
	// compare and search), each once; one with a built-in's name replaces
	// it. A tool that no template names is never offered, and a warning
	// naming it is logged.
	Tools []tools.Tool
	// Builtin configures the built-in tools: search's backend and the
	// timeout of every tool call (tools.BuiltinConfigFromEnv reads them
	// from the environment, as serve does). The zero value's search
	// answers each call with how to configure a backend.
	Builtin tools.BuiltinConfig
	// MCP runs the templates' MCP servers (Load only; NewSet runs none):
	// mcp.NewManager(mcp.Config{}) of package tools/mcp, with the servers
	// every agent may use added under scope "" beforehand. Nil: a
	// template with mcpServers is an error. The Set's Close closes it,
	// and so does a Load that fails.
	MCP MCP
	// MCPStartWait bounds how long Load waits for the MCP servers' first
	// start (default DefaultMCPStartWait): a server still starting then
	// is a warning, and its tools are offered once it is ready.
	MCPStartWait time.Duration
	// AgentTools configures the tools of the templates' agents entries
	// (package tools/agenttool). Its Runner runs the turns of the local
	// agents they ask: nil, the Set runs them itself, in this process
	// (Direct), not durable beyond it; a server gives its turn runtime.
	// Its Agents and Logger default to the Set's templates and Logger.
	AgentTools agenttool.Config
	// ToolsFor, when set, gives each agent its tools in place of all of
	// the above: for a harness that stands in for the tools (package
	// transcript). Load then checks the nodes against no tool.
	ToolsFor func(*template.Loaded) tools.Toolbox

	// Models makes each template's model (Model(m): m for every one);
	// nil: the offline model.
	Models ModelFactory
	// Store keeps the sessions; nil: a memory store.
	Store session.Store
	// Logger records the loading's warnings, the MCP servers' starts and
	// failures, the tool calls and the turns' troubles; nil:
	// slog.Default().
	Logger *slog.Logger
	// Telemetry records an invoke_agent span per turn (with the model and
	// tool spans under it) and the turn metrics; nil records nothing.
	Telemetry *telemetry.Telemetry

	// MaxMessageBytes bounds a user message (default 32 KiB).
	MaxMessageBytes int
	// MaxAttachmentBytes bounds one attachment of a message as sent (its
	// data: URL; 0: no bound but the request's). A session keeps each
	// attachment once, with its message.
	MaxAttachmentBytes int
	// LeaseRenewal is how often a running turn extends its session lease
	// (default a third of session.DefaultLockTTL; keep it well under the
	// store's LockTTL).
	LeaseRenewal time.Duration
	// Budget bounds every turn (llmorch.Budget); a template's options
	// override it field by field, and unset fields take
	// llmorch.DefaultBudget.
	Budget llmorch.Budget
	// StreamedSteps, when set, reads what a turn streamed, step by step
	// (the server's shared turn log): a turn whose replica died before its
	// last write is recovered from it by the session's next turn or by
	// Set.RecoverTurn. Nil: such a turn's unsaved steps are lost.
	StreamedSteps StreamReader
	// Context is the context budget of the agents whose template does not
	// set options.context, and the defaults of those that set part of it.
	Context ContextConfig
	// Fallbacks are the models that answer, in order, a call of a model
	// whose configuration names no fallbacks (nodeConfigurations' absent
	// "fallbacks") when it fails before its first token with an error
	// retrying will not cure soon (llmorch.Fallbacks): the server's
	// LLM_FALLBACK_PROVIDER.
	Fallbacks []llmorch.Candidate
	// FallbackWait is the longest a call of a model that has a fallback
	// waits for a rate limit's Retry-After; a longer one goes to the
	// fallback at once (default DefaultFallbackWait).
	FallbackWait time.Duration
	// Spend prices the models and bounds what each owner may spend on
	// them: a turn that starts when its owner spent a budget is refused
	// with a *spend.ExceededError (its running turns are never cut). The
	// store counts every model call's spending when it is a
	// session.Ledger (Set.Usage reads it), whether or not Spend is set.
	Spend *spend.Policy
	// MaxAttachmentsInContext bounds the images and files a model request
	// carries: the newest ones (llmorch.ServiceConfig.MaxAttachments;
	// default llmorch.DefaultMaxAttachments, negative: no bound).
	MaxAttachmentsInContext int
	// AttachmentURLs is where an attachment may be by URL:
	// AttachmentURLsPublic (the default), https URLs whose host resolves
	// to public addresses only, since the model's provider fetches them
	// and a self-hosted one would fetch from the machines beside it; or
	// AttachmentURLsNone, data: URLs only.
	AttachmentURLs string
	// Resolver resolves the hosts of attachment URLs (default
	// net.DefaultResolver).
	Resolver netguard.Resolver

	// Shipped, for Load, are templates read before path's, from the root
	// of the file system (a server's own: package templates' FS); one
	// whose agentId a template at path has is replaced by it. Load's path
	// "" then reads Shipped's alone.
	Shipped fs.FS
	// SkipInvalid makes Load leave out a template with errors (and one
	// whose agent tools ask an agent left out) instead of failing: its
	// errors are among the diagnostics Load returns, and Load fails only
	// when no template is left. A server serves its other agents.
	SkipInvalid bool
}

// The values of Options.AttachmentURLs.
const (
	AttachmentURLsPublic = "public"
	AttachmentURLsNone   = "none"
)

// ContextConfig is the server's context budget (llmorch.ContextPolicy);
// a template's options.context overrides it field by field.
type ContextConfig struct {
	// Off keeps the history's message cap alone for templates that do not
	// set options.context (chatSettings.historyPolicy).
	Off bool
	// MaxInputTokens and KeepTurns default to llmorch.DefaultMaxInputTokens
	// and llmorch.DefaultKeepTurns.
	MaxInputTokens int
	KeepTurns      int
	// Summarizer is the summarizer of templates that name none: "" for the
	// agent's own model, template.SummarizerOffline for the offline
	// model's extractive summary.
	Summarizer string
}

// DefaultMaxMessageBytes bounds a user message unless configured.
const DefaultMaxMessageBytes = 32 << 10

// check fills the defaults of o and checks it.
func (c *Options) check() error {
	if c.Store == nil {
		c.Store = session.NewMemory(session.Config{})
	}
	if c.Models == nil {
		c.Models = Model(offline.New(offline.Config{}))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.LeaseRenewal <= 0 {
		c.LeaseRenewal = session.DefaultLockTTL / 3
	}
	if err := c.Budget.Validate(); err != nil {
		return fmt.Errorf("agent: Options.Budget: %w", err)
	}
	if c.FallbackWait <= 0 {
		c.FallbackWait = DefaultFallbackWait
	}
	if _, ok := c.Store.(session.Ledger); !ok && c.Spend.Bounded() {
		return fmt.Errorf("agent: Options.Spend sets budgets, but the store (%T) keeps no spending (session.Ledger)", c.Store)
	}
	for i, f := range c.Fallbacks {
		if f.Model == nil {
			return fmt.Errorf("agent: Options.Fallbacks[%d] has no Model", i)
		}
	}
	switch cc := c.Context; {
	case cc.MaxInputTokens < 0, cc.MaxInputTokens > 0 && cc.MaxInputTokens < template.MinContextTokens:
		return fmt.Errorf("agent: Options.Context.MaxInputTokens: want at least %d, got %d", template.MinContextTokens, cc.MaxInputTokens)
	case cc.KeepTurns < 0:
		return fmt.Errorf("agent: Options.Context.KeepTurns: want a positive number of turns, got %d", cc.KeepTurns)
	case cc.Summarizer != "" && cc.Summarizer != template.SummarizerOffline:
		return fmt.Errorf("agent: Options.Context.Summarizer: want \"\" (the agent's model) or %q, got %q", template.SummarizerOffline, cc.Summarizer)
	}
	switch c.AttachmentURLs {
	case "":
		c.AttachmentURLs = AttachmentURLsPublic
	case AttachmentURLsPublic, AttachmentURLsNone:
	default:
		return fmt.Errorf("agent: Options.AttachmentURLs: want %q or %q, got %q", AttachmentURLsPublic, AttachmentURLsNone, c.AttachmentURLs)
	}
	return nil
}

// Set is the set of agents a server hosts.
type Set struct {
	cfg  Options
	list []*Agent
	byID map[string]*Agent
	// mcp runs the MCP servers of a Set that Load made (nil otherwise).
	mcp MCP
}

// NewSet makes the agents of templates already read (template.Load,
// template.LoadPath...), with their tools as Options says: the built-in
// tools and Options.Tools, and their agent tools; it runs no MCP servers
// (Load does), so a template with mcpServers needs Options.ToolsFor. The
// templates' nodes are as checked as the template.Config they were read
// with; Load reads and checks them with Options. Agent IDs must be unique.
func NewSet(opts Options, loaded []*template.Loaded) (*Set, error) {
	var registry *tools.Registry
	if opts.ToolsFor == nil {
		for _, l := range loaded {
			if len(l.Template.MCPServers) > 0 {
				return nil, fmt.Errorf("agent: %s: mcpServers: NewSet runs no MCP servers (Load runs them, with Options.MCP)", l.File)
			}
		}
		var err error
		if registry, err = opts.registry(); err != nil {
			return nil, err
		}
	}
	// The agents the templates' agent tools ask are among them, and do not
	// ask one another in a circle.
	if err := template.CheckAgents(loaded).Err(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return assemble(opts, loaded, registry, nil)
}

// registry is the built-in tools and o.Tools, which replace the built-ins
// of the same name.
func (o Options) registry() (*tools.Registry, error) {
	builtin, err := tools.BuiltinTools(o.Builtin)
	if err != nil {
		return nil, fmt.Errorf("agent: Options.Builtin: %w", err)
	}
	all := slices.DeleteFunc(builtin, func(b tools.Tool) bool {
		return slices.ContainsFunc(o.Tools, func(t tools.Tool) bool { return t.Spec().Name == b.Spec().Name })
	})
	log := cmp.Or(o.Builtin.Logger, o.Logger, slog.Default())
	reg, err := tools.NewRegistryWithConfig(tools.Config{Timeout: o.Builtin.Timeout, Logger: log}, append(all, o.Tools...)...)
	if err != nil {
		return nil, fmt.Errorf("agent: Options.Tools: %w", err)
	}
	return reg, nil
}

// assemble makes the Set of loaded, whose CheckAgents passed: each
// agent's tools are opts.ToolsFor's, or registry's (its MCP servers' when
// mcpTools has the agent) with its agent tools beside them.
func assemble(opts Options, loaded []*template.Loaded, registry *tools.Registry, mcpTools map[string]tools.Toolbox) (*Set, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	set := &Set{cfg: opts, byID: make(map[string]*Agent)}
	toolsFor := opts.ToolsFor
	if toolsFor == nil {
		warnUnnamed(opts, loaded)
		delegates, err := agentTools(opts, set, loaded)
		if err != nil {
			return nil, err
		}
		toolsFor = func(l *template.Loaded) tools.Toolbox {
			var base tools.Toolbox = registry
			if tb, ok := mcpTools[l.ID()]; ok {
				base = tb
			}
			if tb, ok := delegates[l.ID()]; ok {
				return tools.Join(base, tb)
			}
			return base
		}
	}
	for _, l := range loaded {
		if _, dup := set.byID[l.ID()]; dup {
			return nil, fmt.Errorf("agent %q is defined twice (%s)", l.ID(), l.File)
		}
		n, err := newAgent(opts, l, toolsFor(l))
		if err != nil {
			return nil, err
		}
		set.byID[n.ID()] = n
		set.list = append(set.list, n)
	}
	sort.SliceStable(set.list, func(i, j int) bool {
		ti, tj := set.list[i].Template(), set.list[j].Template()
		if ti.Priority != tj.Priority {
			return ti.Priority > tj.Priority
		}
		return ti.Name < tj.Name
	})
	return set, nil
}

// agentTools makes the agent tools of each template that has some, by
// agent ID; their local agents' turns run on opts.AgentTools.Runner, or on
// set's agents in this process.
func agentTools(opts Options, set *Set, loaded []*template.Loaded) (map[string]tools.Toolbox, error) {
	cfg := agentToolsConfig(opts, set, loaded)
	out := map[string]tools.Toolbox{}
	var errs []error
	for _, l := range loaded {
		if len(l.Template.Agents) == 0 {
			continue
		}
		tb, err := agenttool.New(cfg, l.Template)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.File, err))
			continue
		}
		out[l.ID()] = tb
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return out, nil
}

// agentToolsConfig is opts.AgentTools with its defaults: set's agents run
// the local agents' turns (set may be nil when only the configuration's
// errors are asked for), loaded's templates describe them.
func agentToolsConfig(opts Options, set *Set, loaded []*template.Loaded) agenttool.Config {
	cfg := opts.AgentTools
	if cfg.Runner == nil {
		cfg.Runner = &Direct{Agents: set}
	}
	if cfg.Agents == nil {
		byID := map[string]*template.Template{}
		for _, l := range loaded {
			byID[l.ID()] = l.Template
		}
		cfg.Agents = func(id string) (*template.Template, bool) {
			t, ok := byID[id]
			return t, ok
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = opts.Logger
	}
	return cfg
}

// warnUnnamed logs each of opts.Tools that no template names: it is
// never offered, which is likely a node missing from a template.
func warnUnnamed(opts Options, loaded []*template.Loaded) {
	for _, t := range opts.Tools {
		name := t.Spec().Name
		if !slices.ContainsFunc(loaded, func(l *template.Loaded) bool { return slices.Contains(l.Template.Nodes, name) }) {
			opts.Logger.Warn("a tool given to the agents is named by no template's nodes, so no agent is offered it", "tool", name)
		}
	}
}

// List returns the agents, highest template priority first, then by name.
func (a *Set) List() []*Agent { return a.list }

// Get returns the agent with the given ID.
func (a *Set) Get(id string) (*Agent, bool) {
	n, ok := a.byID[id]
	return n, ok
}

// Store returns the session store the agents share.
func (a *Set) Store() session.Store { return a.cfg.Store }

// Agent runs one agent.
type Agent struct {
	cfg     Options
	agent   *template.Loaded
	model   llmorch.Model
	service *llmorch.Service
	// svcCfg is service's configuration, for the services of stateless
	// turns, which differ only in their store.
	svcCfg llmorch.ServiceConfig
}

func newAgent(cfg Options, l *template.Loaded, tools tools.Toolbox) (*Agent, error) {
	b := newModels(cfg, l.Template, newMeter(cfg))
	model, err := b.of("")
	if err != nil {
		return nil, fmt.Errorf("agent %q: model: %w", l.ID(), err)
	}
	steps, err := b.steps()
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", l.ID(), err)
	}
	policy, err := contextPolicy(cfg, l.Template, model, b)
	if err != nil {
		return nil, fmt.Errorf("agent %q: options.context: %w", l.ID(), err)
	}
	judges, err := judgeModels(cfg, l.Template)
	if err != nil {
		return nil, fmt.Errorf("agent %q: guardrails: %w", l.ID(), err)
	}
	svcCfg := llmorch.ServiceConfig{
		Template:   l.Template,
		Engine:     l.Engine,
		Store:      cfg.Store,
		Model:      model,
		Tools:      tools,
		Telemetry:  cfg.Telemetry,
		Budget:     cfg.Budget,
		Context:    policy,
		Judges:     judges,
		StepModels: steps,

		MaxAttachments: cfg.MaxAttachmentsInContext,
	}
	svc, err := llmorch.NewService(svcCfg)
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", l.ID(), err)
	}
	return &Agent{cfg: cfg, agent: l, model: model, service: svc, svcCfg: svcCfg}, nil
}

// contextPolicy is the agent's context budget: the template's
// options.context, then cfg's, then the defaults; nil when it is off, or
// when the model sees no history to compact.
func contextPolicy(cfg Options, t *template.Template, model llmorch.Model, b *models) (*llmorch.ContextPolicy, error) {
	tc := t.Options.Context
	if tc == nil {
		if cfg.Context.Off {
			return nil, nil
		}
		tc = &template.Context{}
	}
	if tc.Off || t.ChatSettings.HistoryPolicy == template.HistoryNone {
		return nil, nil
	}
	p := &llmorch.ContextPolicy{MaxInputTokens: tc.MaxInputTokens, KeepTurns: tc.KeepTurns, Logger: cfg.Logger}
	p.MaxInputTokens = cmp.Or(p.MaxInputTokens, cfg.Context.MaxInputTokens, llmorch.DefaultMaxInputTokens)
	p.KeepTurns = cmp.Or(p.KeepTurns, cfg.Context.KeepTurns, llmorch.DefaultKeepTurns)
	summarizer := cfg.Context.Summarizer
	if s := tc.Summarizer; s != nil {
		summarizer = cmp.Or(s.Model, summarizer)
		p.Prompt = s.Prompt
	}
	switch summarizer {
	case "":
		p.Summarizer = model
	case template.SummarizerOffline:
		p.Summarizer = offline.New(offline.Config{Name: "offline-summary"})
	default:
		// A model node of the template, with its fallbacks.
		m, err := b.of(summarizer)
		if err != nil {
			return nil, fmt.Errorf("summarizer %q: %w", summarizer, err)
		}
		p.Summarizer = m
	}
	return p, nil
}

// judgeModels makes the models of the template's model checks
// (guardrails with check "model"), by the model each names: the offline
// model, or a model node of the template, which the factory makes as it
// makes the agent's model.
func judgeModels(cfg Options, t *template.Template) (map[string]llmorch.Model, error) {
	specs := slices.Clone(t.Options.Guardrails)
	for _, st := range t.Steps() {
		specs = append(specs, st.Guardrails...)
	}
	judges := map[string]llmorch.Model{}
	for _, g := range specs {
		if g.Check != guardrail.CheckModel || judges[g.Model] != nil {
			continue
		}
		if g.Model == template.GuardrailOffline {
			judges[g.Model] = offline.New(offline.Config{Name: "offline-judge"})
			continue
		}
		node := *t
		node.Nodes = []string{g.Model}
		m, err := cfg.Models(&node)
		if err != nil {
			return nil, fmt.Errorf("guardrail %q: model %q: %w", g.Name, g.Model, err)
		}
		judges[g.Model] = m
	}
	return judges, nil
}

// ID returns the agent's ID.
func (n *Agent) ID() string { return n.agent.ID() }

// Template returns the agent's template.
func (n *Agent) Template() *template.Template { return n.agent.Template }

// Engine returns the agent's orchestration engine.
func (n *Agent) Engine() *orchestration.Engine { return n.agent.Engine }

// ModelInfo names the agent's model; Provider is "offline" for the offline
// model.
func (n *Agent) ModelInfo() llmorch.Info { return n.model.Info() }

// Budget returns the budget the agent's turns run under.
func (n *Agent) Budget() llmorch.Budget { return n.service.Budget() }

// Warnings returns the template's load warnings.
func (n *Agent) Warnings() []string {
	out := make([]string, len(n.agent.Warnings))
	for i, d := range n.agent.Warnings {
		out[i] = d.String()
	}
	return out
}

// Input is everything one turn starts from, for Run: what it answers (a
// user message, answers to the calls that wait for approval, results of
// client tools' calls) and the settings the request that asks for it
// brings. The zero value of every field means "none" or "the default".
//
// A turn answers a message (Text or Attachments: with Results, the
// client's results are recorded before it), or Answers (with Results, or
// Results alone: the client's results of the session's calls of its
// tools), or, with none of these, goes on from the conversation as it
// stands (History ending with the results of the client's tools, on a
// Stateless turn or added to the session).
type Input struct {
	// Text is the user's message; Attachments the images and files it
	// carries (a message may be attachments alone). Each attachment must
	// be of a kind the agent's model takes and within
	// Options.MaxAttachmentBytes (ErrAttachment).
	Text        string
	Attachments []chat.Attachment
	// Answers answer the session's calls that wait for approval: every
	// pending call must be answered, each once. A denied call is recorded
	// with its reason as its result and not run; an approved one runs in
	// the turn (its model call was offered it; a tool that cannot run now
	// is refused) and is recorded like any call; then the model goes on.
	Answers []ApprovalAnswer
	// Results are the client's results of the session's calls of client
	// tools that wait for them (ToolResult.CallID names the call;
	// Content, IsError and NotRun are the client's). Each is recorded as
	// the call's result, and the call in the orchestration as a tool that
	// ran (unless the result is NotRun, or its content says it did not
	// run), in the turn's first write. A turn without a message must
	// answer every waiting call; a new message gives the ones left out a
	// result saying the client sent none. A result for a call the session
	// already has one for is a resent copy and is ignored.
	Results []chat.ToolResult

	// History is messages that come before the turn's message, as a
	// client holds its conversation: they are added to the session's
	// history ahead of the message, and replayed through the
	// orchestration (orchestration.Engine.Replay), so that the turn starts in the
	// step, sequence position and offer those messages lead to. They must
	// pass Agent.CheckHistory. Compacted is messages that came before
	// History's and that a compaction left out (a Responses API
	// compaction item): the orchestration replays them, and neither the
	// model nor the session's history has them.
	History, Compacted []chat.Message
	// Stateless runs the turn on a session of its own that is dropped
	// when the turn ends (an in-memory store made for the turn): nothing
	// of it is stored, and no other turn can see or busy it. The session
	// ID only names the turn in logs and traces. With History, the
	// history is the whole conversation.
	Stateless bool
	// Regenerate answers the session's last user message again instead
	// of adding the message: its previous answer (every message after it
	// in the history) is dropped in the write that starts the turn, and
	// Text must equal that last user message (ErrNotLastMessage
	// otherwise). The orchestration goes back to the state the dropped
	// answer started from (orchestration.Regenerate). Token usage keeps
	// what the dropped answer spent, and the session's RegeneratedUsage
	// says how much that was. Edit is Regenerate with a new text: Text
	// replaces the session's last user message, which is dropped with its
	// answer. On a session with no user message yet either is an ordinary
	// turn. Neither goes with History or Stateless.
	Regenerate, Edit bool

	// ClientTools are the tools the request's client brings and runs
	// itself. The orchestration offers them by its rules
	// (orchestration.Engine.OfferWith); a call of one ends the turn with
	// the call (chat.KindClientCall, chat.FinishToolCalls), and the
	// client's next request carries its result (Results). A name must be
	// set, used once and not be one of the agent's tools.
	ClientTools []chat.ToolSpec
	// ToolChoice is the client's tool_choice: it narrows what the
	// orchestration offers in the turn, and a choice that requires a call
	// the active step does not offer refuses the turn (ErrToolChoice).
	ToolChoice orchestration.ToolChoice
	// Format asks for the turn's answer in a format (llmorch.Format).
	Format *llmorch.Format
	// Instructions are the client's own instructions (its system and
	// developer messages): the model reads them after the template's,
	// marked as the client's, unless the template refuses them
	// (ErrInstructions). They belong to the turn and are not stored.
	Instructions string
	// OneCallPerAnswer runs at most one tool call of each model answer
	// (OpenAI's parallel_tool_calls: false): the model is asked for one,
	// and the calls an answer makes after its first get a refusal it
	// reads (llmorch.Turn.OneCallPerAnswer).
	OneCallPerAnswer bool
	// CallTrail says that the client keeps only OpenAI's chat messages of
	// the conversation (a chat completion without a session), which hold
	// the calls of its own tools and none of the agent's: each call of a
	// client tool then gets an ID that carries the calls of the agent's
	// tools that ran in the turn before it (llmorch.Turn.CallTrail), so
	// that the client's next request, which sends the ID back with the
	// call's result, replays them.
	CallTrail bool

	// Owner names the caller (an API key's fingerprint). Sessions live in
	// their owner's keyspace (session.Key): the same ID names another
	// session under another owner.
	Owner string
	// TurnID names the turn (its stream's ID, for example), so that a
	// turn that dies can be recovered from what it streamed under that
	// name (Options.StreamedSteps). Empty: a random ID.
	TurnID string
	// Key is the turn's idempotency key (a client's Idempotency-Key, the
	// AI SDK's user message ID): the turn's first write records it in the
	// session with the message, atomically (session.WithRequest), with a
	// digest of what the turn is asked (the message, its attachments, the
	// conversation, results, tools, tool choice, format and instructions
	// sent with it, regenerate or edit). A turn with a key the session
	// already keeps does not start: Run yields a *DuplicateError naming
	// the turn the key started, or a *KeyReusedError when that turn was
	// asked something else, also while that turn still runs (rather than
	// session.ErrBusy) or its replica died before it ended (the turn is
	// then left for a replica to take over: see Set.TakeOver). A client
	// retrying a request whose reply it lost (its connection, or the
	// replica serving it, died) thus never runs the turn, nor stores its
	// message, twice. Keys are kept for the session's lifetime, the latest
	// session.MaxRequests of them.
	Key string
	// Position is the position of the turn's stream (the seq of the last
	// event the server logged of it so far), so that, when the store is
	// shared by replicas (Options.StreamedSteps), each write records how
	// far the saved answer reaches in the stream: a replica that finds the
	// turn interrupted takes it over, or rebuilds what is missing, from
	// exactly there (session.Journal.Frame).
	Position func() int64
}

// Text is the Input of a plain user message.
func Text(message string) Input { return Input{Text: message} }

// options are an Input's settings as the turn's code reads them.
type options struct {
	owner      string
	turnID     string
	position   func() int64
	history    []chat.Message
	stateless  bool
	regenerate bool
	// edit: the regenerated answer is to a new text (Edit).
	edit bool
	// What the request's client brought (client.go).
	clientTools  []chat.ToolSpec
	choice       orchestration.ToolChoice
	format       *llmorch.Format
	instructions string
	attachments  []chat.Attachment
	results      []chat.ToolResult
	compacted    []chat.Message
	// callTrail: the client keeps only OpenAI's chat messages
	// (Input.CallTrail).
	callTrail bool
	// oneCall: one tool call per answer (Input.OneCallPerAnswer).
	oneCall bool
	// request is the turn's idempotency key (Input.Key), and digest
	// what the request asks (requestDigest).
	request, digest string
	// inputs are the input guardrails' verdicts on the turn's message,
	// by step (Agent.checkInput).
	inputs map[string]llmorch.Input
	// brings is the Weight of the user message the turn stores, charged
	// against its owner's bytes quota before it starts.
	brings int64
}

func (in Input) options() options {
	o := options{
		owner: in.Owner, turnID: in.TurnID, position: in.Position, history: in.History, stateless: in.Stateless,
		regenerate: in.Regenerate || in.Edit, edit: in.Edit, clientTools: in.ClientTools, choice: in.ToolChoice,
		format: in.Format, instructions: in.Instructions, attachments: in.Attachments, results: in.Results,
		compacted: in.Compacted, request: in.Key, callTrail: in.CallTrail, oneCall: in.OneCallPerAnswer,
	}
	if o.turnID == "" {
		o.turnID = session.NewID()
	}
	return o
}

// Run runs one turn of the agent on the session (created when new, in the
// owner's keyspace: Input.Owner) and yields its events, numbered from 1 and
// ending with Done.
//
// Nothing happens until the sequence is iterated: the session's lease is
// taken then, and held until the turn's Done (or until the iteration is
// broken off, which stops the turn, saves its partial answer and frees the
// session), so that a sequence never ranged over holds nothing. A turn
// that cannot start yields one error and no event: ErrInvalidSessionID,
// ErrInvalidMessage (a *HistoryError for a History conversation),
// ErrWrongAgent, ErrNotLastMessage (Regenerate), session.ErrNotFound,
// session.ErrBusy (a turn is running), a store failure wrapping
// session.ErrUnavailable, the client's errors (ErrClientTools,
// ErrToolChoice, ErrToolResults, ErrInstructions, ErrAttachment) and, for
// Answers, ErrUnknownApproval, ErrApprovalAnswered, ErrApprovalsIncomplete
// or ErrInvalidApproval as an *ApprovalError. Once the turn started, its
// failures are events (chat.KindError), never errors of the sequence.
// Started turns this into what an HTTP server needs: the error before any
// event, then the events.
//
// The turn runs under ctx: its values reach the tools (tools.CallFrom
// adds the session and the call), and its cancellation stops the turn;
// a cancellation cause that is a *chat.Error, *chat.Limit or *chat.Stop
// says why in the turn's last events.
func (n *Agent) Run(ctx context.Context, sessionID string, in Input) iter.Seq2[chat.Event, error] {
	return n.turn(ctx, sessionID, in.Text, func(ctx context.Context) (iter.Seq[chat.Event], error) {
		o := in.options()
		switch {
		case len(in.Answers) > 0 && (in.Text != "" || len(in.Attachments) > 0):
			return nil, &ApprovalError{Err: ErrInvalidApproval, Index: -1, Msg: "a turn answers the calls that wait for approval or a new message, not both: send the answers first"}
		case len(in.Answers) > 0:
			return n.handleApprovals(ctx, sessionID, in.Answers, o)
		case in.Text != "" || len(in.Attachments) > 0:
			return n.handleMessage(ctx, sessionID, in.Text, o)
		case in.Stateless || len(in.History) > 0:
			return n.handleConversation(ctx, sessionID, o)
		case len(in.Results) > 0:
			return n.handleApprovals(ctx, sessionID, nil, o)
		}
		// An empty message is refused as such.
		return n.handleMessage(ctx, sessionID, "", o)
	})
}

// Started pulls a turn's first item: it returns the error of a turn that
// could not start, or the turn's events (the first included), for callers
// that must know whether the turn started before they consume it (an HTTP
// status to send first, say). The returned sequence must be iterated, to
// the end or broken off, to release what the turn holds. It runs the turn
// on a coroutine (iter.Pull2): one more goroutine for the turn's life; a
// server that runs each turn in a goroutine of its own can read the first
// item there instead, as package server does.
func Started(turn iter.Seq2[chat.Event, error]) (iter.Seq[chat.Event], error) {
	next, stop := iter.Pull2(turn)
	first, err, ok := next()
	switch {
	case !ok:
		stop()
		return nil, errors.New("agent: the turn yielded nothing")
	case err != nil:
		stop()
		return nil, err
	}
	return func(yield func(chat.Event) bool) {
		defer stop()
		if !yield(first) {
			return
		}
		for {
			ev, err, ok := next()
			if !ok || err != nil || !yield(ev) {
				return
			}
		}
	}, nil
}

// ErrInvalidSessionID: a session ID is 8 to 128 letters, digits, '-' or
// '_' (session.ValidID).
var ErrInvalidSessionID = errors.New("invalid session ID: want 8 to 128 letters, digits, '-' or '_'")

// turn is Run and Answer's common frame: the session ID checked, the
// turn's telemetry, and start called when iteration begins.
func (n *Agent) turn(ctx context.Context, sessionID, message string, start func(context.Context) (iter.Seq[chat.Event], error)) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		if !session.ValidID(sessionID) {
			yield(chat.Event{}, ErrInvalidSessionID)
			return
		}
		info := n.model.Info()
		// The turn's log records (lease warnings, tool calls) name the
		// agent and the session through the context.
		ctx := telemetry.WithLogAttrs(ctx, slog.String("agent", n.ID()), slog.String("session", sessionID))
		ctx, obs := n.cfg.Telemetry.StartTurn(ctx, telemetry.TurnInfo{
			AgentID: n.ID(), AgentName: n.Template().Name, SessionID: sessionID,
			Provider: info.Provider, Model: info.Model, Message: message,
		})
		events, err := start(ctx)
		if err != nil {
			if errors.Is(err, session.ErrUnavailable) {
				n.cfg.Telemetry.RecordStoreError(ctx, "start_turn", "unavailable")
			}
			obs.Reject(err)
			yield(chat.Event{}, err)
			return
		}
		defer obs.End()
		for ev := range events {
			obs.Observe(ev)
			if ev.Kind == chat.KindError {
				n.recordStoreError(ctx, ev.Error)
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// recordStoreError counts a turn that ended on a store failure (the codes
// llmorch gives them).
func (n *Agent) recordStoreError(ctx context.Context, e *chat.Error) {
	switch {
	case e == nil:
	case e.Code == llmorch.CodeStoreUnavailable:
		n.cfg.Telemetry.RecordStoreError(ctx, "turn", "unavailable")
	case e.Code == llmorch.CodeLeaseLost:
		n.cfg.Telemetry.RecordStoreError(ctx, "turn", "fenced")
	}
}

func (n *Agent) handleMessage(ctx context.Context, sessionID, message string, o options) (iter.Seq[chat.Event], error) {
	o.inputs = map[string]llmorch.Input{}
	// A message may be attachments alone.
	if message != "" || len(o.attachments) == 0 {
		if err := n.checkMessage(message); err != nil {
			return nil, err
		}
	}
	if err := n.checkOptions(ctx, o); err != nil {
		return nil, err
	}
	if o.request != "" {
		o.digest = requestDigest(message, nil, o)
	}
	o.brings = session.MessageWeight(chat.Message{Role: chat.RoleUser, Content: message, Attachments: o.attachments})
	return n.begin(ctx, sessionID, o, func(key string, sess session.Session) (turnStart, error) {
		return n.startTurn(ctx, key, message, sess, o)
	})
}

// turnStart is how a turn starts: the write that records what starts it,
// made under the turn's lease, and the turn assembled from what it stored.
type turnStart struct {
	write session.Write
	// what the write records, for its error ("recording the message").
	what string
	turn func(stored session.Session, history []chat.Message, lease session.Lease) llmorch.Turn
}

// begin claims the session and starts a turn on it: plan, given the
// session as claimed (key is its store key), says what the turn's first
// write records. A store that is a session.Starter makes that write with
// the claim when it can (one Redis round trip instead of two).
func (n *Agent) begin(ctx context.Context, sessionID string, o options, plan func(key string, sess session.Session) (turnStart, error)) (iter.Seq[chat.Event], error) {
	// A turn does not start past its owner's budget; one that started
	// runs to its end.
	if err := n.checkBudget(ctx, o.owner); err != nil {
		return nil, err
	}
	// Tools learn what they run for (tools.CallFrom), and the models'
	// meter whom to charge.
	ctx = tools.WithCall(ctx, tools.Call{SessionID: sessionID, AgentID: n.ID(), Owner: o.owner, TurnID: o.turnID})
	store, service, closeStore := n.cfg.Store, n.service, func() {}
	if o.stateless {
		var err error
		if store, service, err = n.turnStore(); err != nil {
			return nil, err
		}
		closeStore = func() { _ = store.Close() }
	}
	// One step (one Redis round trip): the session, created when new, and
	// its lease; another owner's or agent's session is not locked.
	// The session lives in its owner's keyspace: another owner using the
	// same ID has a session of its own.
	key := session.Key(o.owner, sessionID)
	// A turn adds to its owner's bytes: refused when its message would
	// take the owner past its quota.
	claimOpts := []session.UpdateOption{session.WithOwner(o.owner), session.WithAgent(n.ID()), session.Charged(o.brings)}
	// A turn another replica can take over keeps a journal, which its
	// first write starts.
	journals := n.cfg.StreamedSteps != nil && !o.stateless
	if journals {
		plan = withJournal(plan)
	}
	var (
		sess    session.Session
		lease   session.Lease
		started *session.Started
		ts      turnStart
		err     error
	)
	if starter, ok := store.(session.Starter); ok {
		// The turn's first write goes with the claim when the store
		// knows the session; a session whose last turn was interrupted
		// is recovered first, and a plan that fails fails below, on the
		// session as claimed.
		sess, lease, started, err = starter.ClaimStart(ctx, key, func(s session.Session) (session.Write, bool) {
			if s.Turn != "" {
				return session.Write{}, false
			}
			p, err := plan(key, s)
			if err != nil {
				return session.Write{}, false
			}
			ts = p
			return p.write, true
		}, claimOpts...)
	} else {
		sess, lease, err = store.Claim(ctx, key, claimOpts...)
	}
	switch {
	case errors.Is(err, session.ErrForeign) && sess.Owner != o.owner:
		err = session.ErrNotFound
	case errors.Is(err, session.ErrForeign):
		err = fmt.Errorf("%w %q", ErrWrongAgent, sess.Agent)
	case errors.Is(err, session.ErrBusy):
		// The turn that holds the session may be this request's own
		// (a client retrying while its first attempt runs).
		err = n.busyRequest(ctx, store, key, o, err)
	case err != nil:
		err = fmt.Errorf("opening session: %w", err)
	}
	if err != nil {
		closeStore()
		return nil, err
	}
	release := func() { n.release(ctx, lease) }
	if err := o.duplicate(sess); started == nil && err != nil {
		// Before the session's interrupted turn is recovered: when it is
		// the request's own, a replica takes it over instead.
		release()
		closeStore()
		return nil, err
	}
	if started == nil {
		if started, ts, err = n.firstWrite(ctx, store, key, sess, lease, plan); err != nil {
			release()
			closeStore()
			return nil, err
		}
	}
	turn := ts.turn(started.Session, started.History, lease)
	turn.Journal, turn.Position = journals, o.position
	return n.stream(ctx, service, turn, closeStore), nil
}

// stream runs turn under its lease, renewed while it runs and released by
// its last write or, at the latest, when the iteration ends; closeStore
// runs then too.
func (n *Agent) stream(ctx context.Context, service *llmorch.Service, turn llmorch.Turn, closeStore func()) iter.Seq[chat.Event] {
	lease := turn.Lease
	release := func() { n.release(ctx, lease) }
	return func(yield func(chat.Event) bool) {
		ctx, cancel := context.WithCancelCause(ctx)
		stopRenewal := n.renewLease(ctx, lease, cancel)
		released := false
		defer func() {
			stopRenewal()
			if !released {
				release()
			}
			closeStore()
		}()
		var seq int64
		if turn.Resume == nil {
			// A turn taken over goes on with a restart instead.
			seq++
			message := cmp.Or(turn.MessageID, turn.ID)
			if !yield(chat.Event{Kind: chat.KindStart, Seq: seq, Start: &chat.Start{Turn: turn.ID, Message: message}}) {
				return
			}
		}
		for ev := range service.StreamWithOrchestration(ctx, turn) {
			seq++
			ev.Seq = seq
			if ev.Kind == chat.KindDone {
				// Done is the turn's last event and comes after its last
				// write: free the session before the client learns the
				// turn is over, so that its next message is not refused
				// as busy. Renewal stops first, so nothing touches the
				// lease after the release.
				stopRenewal()
				release()
				released = true
			}
			if !yield(ev) {
				return
			}
		}
	}
}

// withJournal makes plan's write start the turn's journal, counting it as
// the turn's first write.
func withJournal(plan func(key string, sess session.Session) (turnStart, error)) func(key string, sess session.Session) (turnStart, error) {
	return func(key string, sess session.Session) (turnStart, error) {
		ts, err := plan(key, sess)
		ts.write.Options = append(ts.write.Options, session.WithJournal(func(j *session.Journal) error {
			j.Writes = 1
			return nil
		}))
		return ts, err
	}
}

// firstWrite makes a turn's first write under lease after a claim that did
// not make it.
func (n *Agent) firstWrite(ctx context.Context, store session.Store, key string, sess session.Session, lease session.Lease, plan func(key string, sess session.Session) (turnStart, error)) (*session.Started, turnStart, error) {
	if sess.Turn != "" {
		// The session's last turn ended without its last write: its
		// replica died, or the store stopped answering. Save what it
		// streamed before this turn starts.
		if _, err := recoverTurn(ctx, n.cfg, key, sess, lease); err != nil {
			n.cfg.Logger.WarnContext(ctx, "recovering the partial answer of an interrupted turn failed", "turn", sess.Turn, "err", err)
		}
	}
	ts, err := plan(key, sess)
	if err != nil {
		return nil, ts, err
	}
	w := ts.write
	stored, history, err := store.UpdateAppend(ctx, key, w.Update, w.Messages, w.Window, append(w.Options, session.WithLease(lease))...)
	if err != nil {
		return nil, ts, fmt.Errorf("%s: %w", ts.what, err)
	}
	return &session.Started{Session: stored, History: history}, ts, nil
}

func (n *Agent) checkMessage(message string) error {
	switch {
	case strings.TrimSpace(message) == "":
		return fmt.Errorf("%w: the message is empty", ErrInvalidMessage)
	case len(message) > n.cfg.MaxMessageBytes:
		return fmt.Errorf("%w: the message is %d bytes; the limit is %d", ErrInvalidMessage, len(message), n.cfg.MaxMessageBytes)
	case !utf8.ValidString(message):
		return fmt.Errorf("%w: the message is not valid UTF-8", ErrInvalidMessage)
	}
	return nil
}

// startTurn plans the write that records the user message, and how the
// turn's history is assembled from what it stored (key is the session's
// store key): one store write records the orchestration's view of the
// message (after the replay of o.history) and the message itself, and
// reads the history window before it. sess is the session the write will
// be made on: current under the lease, or what the store expects to claim
// (session.Starter).
//
// Calls still waiting for approval are denied by the new message: their
// results ("the user sent a new message") are recorded before it, in the
// same write, so the model hears why they did not run.
func (n *Agent) startTurn(ctx context.Context, key, message string, sess session.Session, o options) (turnStart, error) {
	if err := o.duplicate(sess); err != nil {
		return turnStart{}, err
	}
	engine := n.Engine()
	window := n.historyWindow()
	compacts := n.compacts()
	st := sess.State
	// The input guardrails of the step the message comes to: what the
	// session keeps, and answers, is the message as they leave it.
	input := n.checkInput(ctx, st.ActiveStep, chat.Message{Role: chat.RoleUser, Content: message, Attachments: o.attachments}, o)
	user := input.Message
	message, o.history = user.Content, input.History
	guards := slices.Clone(input.Events)
	pending := sess.PendingApprovals()
	client := o.clientNames()
	// The client's results of its tools' calls, and a result saying it
	// sent none for the others, in the calls' order; the calls waiting
	// for approval are denied by the new message.
	results, records, decided, err := clientResults(pending, sess.Approvals, o.results, false, n.Budget().MaxToolResultBytes, n.guardResults(ctx, st.ActiveStep, &guards))
	if err != nil {
		return turnStart{}, err
	}
	var denials []chat.Message
	for i, a := range pending {
		// The approvals of one agent's calls share the call that asked
		// it, which gets one result.
		shared := slices.ContainsFunc(pending[:i], func(b session.Approval) bool { return b.Call.ID == a.Call.ID })
		if !a.Client && !shared {
			denials = append(denials, llmorch.ToolMessage(llmorch.DeniedResult(a.Call, deniedByNewMessage)))
		}
	}
	denials = append(results, denials...)
	opts := []session.UpdateOption{session.WithTurn(o.turnID)}
	if o.request != "" {
		opts = append(opts, session.WithRequest(o.request, o.turnID, o.digest))
	}
	if compacts {
		// The summary and the turns after it: the model's view, whatever
		// the session's length.
		window = -1
		opts = append(opts, session.SinceSummary())
	}
	if len(pending) > 0 {
		opts = append(opts, session.WithApprovals(func(cur []session.Approval) ([]session.Approval, error) {
			if !samePending(cur, pending) {
				return nil, errApprovalsMoved
			}
			cur = markClient(cur, decided)
			for i := range cur {
				if cur[i].Status == session.ApprovalPending {
					cur[i].Status, cur[i].Reason = session.ApprovalDenied, deniedByNewMessage
				}
			}
			return llmorch.KeepAnswered(cur), nil
		}))
	}
	msgs := append(append(slices.Clone(denials), o.history...), user)
	regenerate := o.regenerate && st.UserMessages > 0
	switch {
	case regenerate && o.edit:
		// The new message takes the old one's place: the window read
		// after the turn is dropped ends before it (and any call that
		// waited goes with it, whose denial has nothing left to answer).
		msgs, denials = []chat.Message{user}, nil
		opts = append(opts, session.DropLastTurn())
	case regenerate:
		if st.LastUserMessage != message {
			return turnStart{}, ErrNotLastMessage
		}
		// The message stays where it is; the window read after the
		// answer is dropped ends with it (and with it any call that
		// waited, whose denial has nothing left to answer).
		msgs, denials = nil, nil
		opts = append(opts, session.DropLastAnswer())
		if window > 0 {
			window++
		}
	}
	var dec orchestration.Decision
	update := func(s *orchestration.State) error {
		if regenerate {
			// The answer is dropped: the state goes back to where it
			// was before the message, which is applied again.
			*s, dec = engine.Apply(*s, orchestration.Regenerate(message))
			return nil
		}
		*s, _ = recordResults(engine, *s, records)
		*s = n.Engine().Replay(*s, o.compacted, client)
		*s = n.Engine().Replay(*s, o.history, client)
		*s, dec = engine.Apply(*s, orchestration.UserMessage(message))
		return nil
	}
	if o.choice.Required {
		// The step the turn starts in decides whether the choice can be
		// honoured: the same update, on the session as claimed.
		predicted := st
		if err := update(&predicted); err != nil {
			return turnStart{}, err
		}
		if err := n.checkChoice(predicted, o); err != nil {
			return turnStart{}, err
		}
	}
	return turnStart{
		write: session.Write{Update: update, Messages: msgs, Window: window, Options: opts},
		what:  "recording the message",
		turn: func(stored session.Session, history []chat.Message, lease session.Lease) llmorch.Turn {
			if dec.Transition {
				n.cfg.Telemetry.RecordTransition(ctx, n.ID(), dec.PreviousStep, stored.State.ActiveStep, telemetry.CauseUserMessage)
			}
			var summary *chat.Message
			if compacts {
				summary, history = splitSummary(history)
			}
			if regenerate && !o.edit {
				if k := len(history); k > 0 && history[k-1].Role == chat.RoleUser {
					history = history[:k-1]
				}
			} else if window != 0 && len(denials)+len(o.history) > 0 {
				history = append(append(history, denials...), o.history...)
				if window > 0 && len(history) > window {
					history = history[len(history)-window:]
				}
			} else if window > 0 {
				history = steadyStart(trimToUserStart(history), stored.State.UserMessages)
			}
			history = wellFormed(trimToUserStart(history), nil)
			t := llmorch.Turn{ID: o.turnID, SessionID: key, Lease: lease, State: stored.State, PreviousStep: dec.PreviousStep, History: append(history, user),
				Guardrails: guards, Blocked: input.Blocked}
			if compacts {
				t.Summary, t.Fallback = summary, n.fallback
			}
			return o.extend(t)
		},
	}, nil
}

// checkInput is the service's CheckInput of a turn's message, once per
// step for a turn whose plan runs twice (session.Starter): a model check
// asks its model once.
func (n *Agent) checkInput(ctx context.Context, step string, msg chat.Message, o options) llmorch.Input {
	if in, ok := o.inputs[step]; ok {
		return in
	}
	in := n.service.CheckInput(ctx, step, msg, o.history)
	if o.inputs != nil {
		o.inputs[step] = in
	}
	return in
}

// guardResults checks the results a client sends of its tools' calls
// with the tool_result guardrails of step, adding their events to events.
func (n *Agent) guardResults(ctx context.Context, step string, events *[]chat.Event) func(chat.ToolCall, chat.ToolResult) chat.ToolResult {
	return func(call chat.ToolCall, r chat.ToolResult) chat.ToolResult {
		r, evs := n.service.CheckToolResult(ctx, step, call, r)
		*events = append(*events, evs...)
		return r
	}
}

// compacts reports whether the agent's turns keep to a context budget
// (llmorch.ContextPolicy): they read the latest summary and the turns
// after it, instead of the history window.
func (n *Agent) compacts() bool { return n.svcCfg.Context != nil }

// splitSummary takes the summary entries out of a history read since the
// latest one (session.SinceSummary): that one is what the model reads
// before the turns.
func splitSummary(h []chat.Message) (*chat.Message, []chat.Message) {
	var summary *chat.Message
	out := h[:0:0]
	for i := range h {
		if h[i].Role == chat.RoleSummary {
			summary = &h[i]
			continue
		}
		out = append(out, h[i])
	}
	return summary, out
}

// fallback is the history window of a turn whose context budget could not
// be kept (its summary failed): today's message cap, the running turn
// whole.
func (n *Agent) fallback(h []chat.Message) []chat.Message {
	return wellFormed(trimToUserStart(continuationWindow(h, n.historyWindow())), nil)
}

// historyWindow is how much history the model sees (0 none, -1 all).
func (n *Agent) historyWindow() int {
	cs := n.Template().ChatSettings
	switch {
	case cs.HistoryPolicy == template.HistoryNone:
		return 0
	case cs.HistoryPolicy == template.HistoryLastN && cs.HistoryLength > 0:
		return cs.HistoryLength
	}
	return -1 // all
}

// deniedByNewMessage is the reason of a call denied because the user sent
// a new message while it waited for approval.
const deniedByNewMessage = "the user sent a new message"

// errApprovalsMoved: the session's pending approvals changed under the
// lease, which only a store edited by hand does.
var errApprovalsMoved = errors.New("the session's pending approvals changed while the turn held it")

func samePending(cur, seen []session.Approval) bool {
	var ids []string
	for _, a := range cur {
		if a.Status == session.ApprovalPending {
			ids = append(ids, a.ID)
		}
	}
	return slices.EqualFunc(ids, seen, func(id string, a session.Approval) bool { return id == a.ID })
}

// ApprovalAnswer is a person's answer to one approval request.
type ApprovalAnswer struct {
	// ID is the request's ID (chat.Approval.ID, the AI SDK's approvalId).
	ID       string
	Approved bool
	// Reason, optional, is told to the model with a denial.
	Reason string
}

// Errors of Answer, before a turn starts. Each wraps
// ErrInvalidApproval.
var (
	// ErrInvalidApproval is the class of a bad answer.
	ErrInvalidApproval = errors.New("invalid approval answer")
	// ErrUnknownApproval: no approval of the session has the ID.
	ErrUnknownApproval = fmt.Errorf("%w: unknown approval", ErrInvalidApproval)
	// ErrApprovalAnswered: the approval was answered already.
	ErrApprovalAnswered = fmt.Errorf("%w: approval already answered", ErrInvalidApproval)
	// ErrApprovalsIncomplete: the answer leaves calls of the same model
	// answer unanswered (the model can go on only when all are).
	ErrApprovalsIncomplete = fmt.Errorf("%w: calls left unanswered", ErrInvalidApproval)
)

// ApprovalError locates an invalid answer: Index is its position in the
// answers (-1 when it concerns none, like a missing one).
type ApprovalError struct {
	Err   error
	Index int
	ID    string
	Msg   string
}

func (e *ApprovalError) Error() string { return e.Msg }
func (e *ApprovalError) Unwrap() error { return e.Err }

// maxApprovalReasonBytes bounds the reason of an answer.
const maxApprovalReasonBytes = 2000

func (n *Agent) handleApprovals(ctx context.Context, sessionID string, answers []ApprovalAnswer, o options) (iter.Seq[chat.Event], error) {
	if len(answers) == 0 && o.results == nil {
		return nil, &ApprovalError{Err: ErrInvalidApproval, Index: -1, Msg: "no answers: approvals must list at least one {id, approved}"}
	}
	if err := n.checkOptions(ctx, o); err != nil {
		return nil, err
	}
	if o.request != "" {
		o.digest = requestDigest("", answers, o)
	}
	for i, a := range answers {
		switch {
		case len(a.Reason) > maxApprovalReasonBytes:
			return nil, &ApprovalError{Err: ErrInvalidApproval, Index: i, ID: a.ID, Msg: fmt.Sprintf("the reason is %d bytes; the limit is %d", len(a.Reason), maxApprovalReasonBytes)}
		case !utf8.ValidString(a.Reason):
			return nil, &ApprovalError{Err: ErrInvalidApproval, Index: i, ID: a.ID, Msg: "the reason is not valid UTF-8"}
		}
		for j := range i {
			if answers[j].ID == a.ID {
				return nil, &ApprovalError{Err: ErrApprovalAnswered, Index: i, ID: a.ID, Msg: fmt.Sprintf("approval %q is answered twice in this request", clip(a.ID))}
			}
		}
	}
	// The session must exist: answering approvals never creates one.
	key := session.Key(o.owner, sessionID)
	if _, err := n.cfg.Store.Get(ctx, key); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return nil, session.ErrNotFound
		}
		return nil, fmt.Errorf("opening session: %w", err)
	}
	return n.begin(ctx, sessionID, o, func(key string, sess session.Session) (turnStart, error) {
		if o.request != "" {
			if r, ok := sess.RequestOf(o.request); ok {
				return turnStart{}, &DuplicateError{Request: r}
			}
		}
		plan, err := planAnswers(sess.Approvals, answers)
		if err != nil {
			return turnStart{}, err
		}
		// The turn goes on in the answer that made the calls: the one of
		// the first call that waits (an approval or a client tool's).
		messageID := ""
		if p := sess.PendingApprovals(); len(p) > 0 {
			messageID = messageOf(sess.Approvals, p[0].ID)
		}
		return n.answerTurn(ctx, key, sess, plan, messageID, o)
	})
}

// planAnswers checks the answers against the session's approvals and
// returns them in the order the model made the calls.
func planAnswers(stored []session.Approval, answers []ApprovalAnswer) ([]llmorch.Answer, error) {
	byID := map[string]int{}
	for i, a := range answers {
		byID[a.ID] = i
	}
	for i, a := range answers {
		k := slices.IndexFunc(stored, func(s session.Approval) bool { return s.ID == a.ID })
		switch {
		case k < 0:
			return nil, &ApprovalError{Err: ErrUnknownApproval, Index: i, ID: a.ID, Msg: fmt.Sprintf("no approval %q waits in this session", clip(a.ID))}
		case stored[k].Status != session.ApprovalPending:
			return nil, &ApprovalError{Err: ErrApprovalAnswered, Index: i, ID: a.ID, Msg: fmt.Sprintf("approval %q was already answered (%s)", clip(a.ID), stored[k].Status)}
		}
	}
	var plan []llmorch.Answer
	var missing []string
	for _, s := range stored {
		if s.Status != session.ApprovalPending || s.Client {
			continue
		}
		i, ok := byID[s.ID]
		if !ok {
			missing = append(missing, s.ID)
			continue
		}
		if s.Agent != "" {
			// A call of an agent the session's call asked: the call runs
			// again with the decisions on all of its agent's calls.
			d := chat.Decision{ID: s.ID, Approved: answers[i].Approved, Reason: answers[i].Reason}
			if k := slices.IndexFunc(plan, func(a llmorch.Answer) bool { return a.Call.ID == s.Call.ID && a.Decisions != nil }); k >= 0 {
				plan[k].Decisions = append(plan[k].Decisions, d)
				continue
			}
			plan = append(plan, llmorch.Answer{Call: s.Call, Approved: true, Decisions: []chat.Decision{d}, Offer: s.Offer})
			continue
		}
		plan = append(plan, llmorch.Answer{Call: s.Call, Approved: answers[i].Approved, Reason: answers[i].Reason, Offer: s.Offer})
	}
	if len(missing) > 0 {
		return nil, &ApprovalError{Err: ErrApprovalsIncomplete, Index: -1, ID: missing[0],
			Msg: fmt.Sprintf("every call waiting for approval must be answered at once; unanswered: %s", strings.Join(missing, ", "))}
	}
	return plan, nil
}

// answerTurn plans the write that records the answers, the results of the
// denied calls with them, and the turn that carries them out.
func (n *Agent) answerTurn(ctx context.Context, key string, sess session.Session, plan []llmorch.Answer, messageID string, o options) (turnStart, error) {
	decided := map[string]llmorch.Answer{}
	var denials []chat.Message
	approved := map[string]bool{}
	// The client's results of its tools' calls, all of them, recorded in
	// the first write, before the approved calls run.
	var guards []chat.Event
	results, records, clientDecided, err := clientResults(sess.PendingApprovals(), sess.Approvals, o.results, true, n.Budget().MaxToolResultBytes, n.guardResults(ctx, sess.State.ActiveStep, &guards))
	if err != nil {
		return turnStart{}, err
	}
	// byID are the decisions on the calls of agents the session's calls
	// asked (session.Approval.Agent), recorded approval by approval.
	byID := map[string]chat.Decision{}
	for _, a := range plan {
		for _, d := range a.Decisions {
			byID[d.ID] = d
		}
		if a.Decisions != nil {
			approved[a.Call.ID] = true
			continue
		}
		decided[a.Call.ID] = a
		if a.Approved {
			approved[a.Call.ID] = true
		} else {
			denials = append(denials, llmorch.ToolMessage(llmorch.DeniedResult(a.Call, a.Reason)))
		}
	}
	denials = append(results, denials...)
	// The whole history is read: the model must see at least this turn's
	// user message and the calls being answered, whatever the policy's
	// window (continuationWindow).
	engine := n.Engine()
	// A session saved under an earlier version of the template may name a
	// step the template no longer has: the turn goes on from the step the
	// rules choose now, as a user message would.
	update := func(s *orchestration.State) error {
		*s = engine.Current(*s)
		*s, _ = recordResults(engine, *s, records)
		return nil
	}
	if o.choice.Required {
		predicted := sess.State
		_ = update(&predicted)
		if err := n.checkChoice(predicted, o); err != nil {
			return turnStart{}, err
		}
	}
	compacts := n.compacts()
	var request []session.UpdateOption
	if o.request != "" {
		request = append(request, session.WithRequest(o.request, o.turnID, o.digest))
	}
	write := session.Write{Update: update, Messages: denials, Window: -1, Options: append(request,
		session.WithTurn(o.turnID),
		session.WithApprovals(func(cur []session.Approval) ([]session.Approval, error) {
			cur = markClient(cur, clientDecided)
			for i := range cur {
				if d, ok := byID[cur[i].ID]; ok && cur[i].Agent != "" && cur[i].Status == session.ApprovalPending {
					cur[i].Status, cur[i].Reason = session.ApprovalDenied, d.Reason
					if d.Approved {
						cur[i].Status = session.ApprovalApproved
					}
					continue
				}
				a, ok := decided[cur[i].Call.ID]
				if !ok || cur[i].Status != session.ApprovalPending || cur[i].Agent != "" {
					continue
				}
				cur[i].Status, cur[i].Reason = session.ApprovalDenied, a.Reason
				if a.Approved {
					cur[i].Status = session.ApprovalApproved
				}
			}
			if len(slices.DeleteFunc(slices.Clone(cur), func(a session.Approval) bool { return a.Status != session.ApprovalPending })) > 0 {
				return nil, errApprovalsMoved
			}
			return llmorch.KeepAnswered(cur), nil
		}),
	)}
	window := n.historyWindow()
	if compacts {
		window = -1
		write.Options = append(write.Options, session.SinceSummary())
	}
	return turnStart{write: write, what: "recording the answers", turn: func(st session.Session, history []chat.Message, lease session.Lease) llmorch.Turn {
		var summary *chat.Message
		if compacts {
			summary, history = splitSummary(history)
		}
		history = continuationWindow(append(history, denials...), window)
		// The approved calls get their results in the turn, before the
		// model is called: keep them in the history the model will see.
		history = wellFormed(trimToUserStart(history), approved)
		t := llmorch.Turn{ID: o.turnID, SessionID: key, Lease: lease, State: st.State, PreviousStep: st.State.ActiveStep, History: history, Answers: plan, MessageID: messageID, Guardrails: guards}
		if compacts {
			t.Summary, t.Fallback = summary, n.fallback
		}
		return o.extend(t)
	}}, nil
}

// messageOf is the answer that asked for the approval with this ID ("" when
// it is unknown or recorded none).
func messageOf(stored []session.Approval, approvalID string) string {
	if k := slices.IndexFunc(stored, func(a session.Approval) bool { return a.ID == approvalID }); k >= 0 {
		return stored[k].MessageID
	}
	return ""
}

// continuationWindow cuts the history of a turn that answers approvals to
// the policy's window (0 none, < 0 all), but never past the latest user
// message: the model goes on with the turn that made the calls, which it
// must see whole.
func continuationWindow(h []chat.Message, window int) []chat.Message {
	start := 0
	switch {
	case window == 0:
		start = len(h)
	case window > 0 && len(h) > window:
		start = len(h) - window
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == chat.RoleUser {
			start = min(start, i)
			break
		}
	}
	return h[start:]
}

// clip bounds an ID echoed in an error message.
func clip(s string) string {
	if len(s) > 80 {
		for n := 80; n > 0; n-- {
			if utf8.RuneStart(s[n]) {
				return s[:n] + "…"
			}
		}
	}
	return s
}

// trimToUserStart drops messages from the front until the history starts
// with a user message: a window cut by lastN must not begin with tool results
// or tool calls whose other half was cut off.
// steadyStart cuts a history window (whole turns, the oldest first, the
// current turn's message not among them) that dropped older turns, so that
// its first turn moves in steps of about half the turns it holds instead
// of at every turn: a provider caches a request's start, and a window
// whose first message changes at every turn starts every turn's first
// model call uncached. It gives up at most half the window for that.
// turn is the current turn's number (the session's user messages, its
// own included); a window that still starts at the first turn is kept
// whole.
func steadyStart(h []chat.Message, turn int) []chat.Message {
	var starts []int // where each turn of h starts
	for i, m := range h {
		if m.Role == chat.RoleUser {
			starts = append(starts, i)
		}
	}
	k := len(starts)
	first := turn - k // the number of h's first turn
	if k == 0 || first <= 1 {
		return h
	}
	step := max(1, (k+1)/2)
	keep := (first+step-2)/step*step + 1 // the first turn numbered 1 + a multiple of step, from first on
	return h[starts[keep-first]:]
}

func trimToUserStart(h []chat.Message) []chat.Message {
	for i, m := range h {
		if m.Role == chat.RoleUser {
			return h[i:]
		}
	}
	return nil
}

// wellFormed drops what a provider would refuse from a history: a tool
// result whose call is not in the assistant message before it, and a call
// with no result after it (the assistant message keeps its text). The
// store never keeps either, but a history edited by hand or saved by an
// older version may.
//
// The calls in keep stay even without a result: the turn adds their
// results before the model sees the history (approved calls).
func wellFormed(h []chat.Message, keep map[string]bool) []chat.Message {
	var out []chat.Message
	for i := 0; i < len(h); i++ {
		m := h[i]
		if m.Role == chat.RoleTool {
			continue // answered calls are copied with their call below
		}
		if m.Role != chat.RoleAssistant || len(m.ToolCalls) == 0 {
			out = append(out, m)
			continue
		}
		results := map[string]chat.Message{}
		j := i + 1
		for ; j < len(h) && h[j].Role == chat.RoleTool; j++ {
			results[h[j].ToolCallID] = h[j]
		}
		answered := m.ToolCalls[:0:0]
		for _, c := range m.ToolCalls {
			if _, ok := results[c.ID]; ok || keep[c.ID] {
				answered = append(answered, c)
			}
		}
		m.ToolCalls = answered
		if m.Content != "" || len(answered) > 0 {
			out = append(out, m)
		}
		for _, c := range answered {
			if r, ok := results[c.ID]; ok {
				out = append(out, r)
				delete(results, c.ID)
			}
		}
		i = j - 1
	}
	return out
}

// Bounds of releasing a lease: each attempt, and the pause between attempts
// when the store cannot be reached.
const (
	releaseTimeout    = 5 * time.Second
	releaseFirstRetry = 100 * time.Millisecond
	releaseMaxBackoff = 2 * time.Second
)

// release frees the turn's lease. When the store cannot be reached (Redis
// down at the end of the turn), the lease would refuse the session's next
// turn until it expires, LockTTL later, and a persisted lease survives a
// Redis restart; so the release is retried in the background until it
// succeeds or the lease has surely expired.
func (n *Agent) release(ctx context.Context, lease session.Lease) {
	ctx = context.WithoutCancel(ctx)
	err := tryRelease(ctx, lease)
	if err == nil {
		return
	}
	n.cfg.Logger.WarnContext(ctx, "releasing session lease failed; retrying in the background until it expires",
		"err", err, "lease_expiry", lease.Expiry())
	go n.retryRelease(ctx, lease)
}

func tryRelease(ctx context.Context, lease session.Lease) error {
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	err := lease.Release(ctx)
	if errors.Is(err, session.ErrFenced) {
		return nil // held by a newer turn: nothing of ours to free
	}
	return err
}

// retryRelease retries Release with exponential backoff until it succeeds,
// or until the lease's expiry, after which the store frees the session by
// itself and nothing is left to do.
func (n *Agent) retryRelease(ctx context.Context, lease session.Lease) {
	backoff, wait := releaseFirstRetry, releaseFirstRetry
	for attempt := 2; ; attempt++ {
		time.Sleep(wait)
		if !time.Now().Before(lease.Expiry()) {
			n.cfg.Logger.WarnContext(ctx, "session lease expired before it could be released", "attempts", attempt-1)
			return
		}
		err := tryRelease(ctx, lease)
		if err == nil {
			n.cfg.Logger.WarnContext(ctx, "session lease released after the store came back", "attempts", attempt)
			return
		}
		backoff = min(2*backoff, releaseMaxBackoff)
		// Wake at the expiry at the latest, to stop there.
		wait = min(backoff, time.Until(lease.Expiry()))
	}
}

// renewLease extends a running turn's lease every LeaseRenewal, in a
// goroutine of its own, until ctx ends. When the lease is lost the turn is
// cancelled (cancel is ctx's), since its writes would be refused anyway.
// stop cancels ctx and returns once no Extend runs or will run: nothing
// touches the lease after it. stop may be called more than once.
func (n *Agent) renewLease(ctx context.Context, lease session.Lease, cancel context.CancelCauseFunc) (stop func()) {
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(n.cfg.LeaseRenewal)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := lease.Extend(ctx)
			switch {
			case ctx.Err() != nil:
				return // the turn ended meanwhile
			case errors.Is(err, session.ErrFenced):
				n.cfg.Logger.WarnContext(ctx, "session lease lost; cancelling the turn")
				cancel(llmorch.ErrLeaseLost)
				return
			case err != nil:
				n.cfg.Logger.WarnContext(ctx, "extending session lease", "err", err)
			}
		}
	}()
	return func() {
		cancel(nil)
		<-exited
	}
}
