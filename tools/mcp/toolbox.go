package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Toolbox is one agent's tools: the built-in registry and the tools of the
// MCP servers the agent may use (the server-wide ones and its template's
// own). It satisfies the agent's and llmorch's tool interfaces, routing a
// name "<server>__<tool>" to the server's current tool list, and reports
// which tools cannot run now (Unavailable), so that the turn never offers
// them. It is safe for concurrent use.
type Toolbox struct {
	builtin *tools.Registry
	servers map[string]*server
	agentID string
	nodes   []string
	// maxSchema is Config.MaxAgentSchemaBytes.
	maxSchema int
	log       *slog.Logger

	mu     sync.Mutex
	budget *schemaBudget // the last one computed; see fit
}

// schemaBudget is which of an agent's MCP tools do not fit within
// Config.MaxAgentSchemaBytes, for the server registries it was computed
// from.
type schemaBudget struct {
	regs map[string]*tools.Registry // by server name; nil for a server not ready
	over map[string]string          // tool name -> why it is not offered
}

// Toolbox returns the tools of agentID, whose template's tools are nodes:
// its own servers, and the server-wide servers a node names a tool of (nil
// nodes: every server-wide server).
func (m *Manager) Toolbox(builtin *tools.Registry, agentID string, nodes []string) *Toolbox {
	servers := m.serversFor(agentID)
	if nodes != nil {
		for name, s := range servers {
			named := slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(n, name+mcpconfig.Separator) })
			if s.scope == "" && !named {
				delete(servers, name)
			}
		}
	}
	return &Toolbox{builtin: builtin, servers: servers, agentID: agentID, nodes: slices.Clone(nodes),
		maxSchema: m.cfg.MaxAgentSchemaBytes, log: m.cfg.Logger.With(slog.String("agent", agentID))}
}

// over returns the agent's MCP tools that do not fit within
// MaxAgentSchemaBytes, with the reason. The tools the agent may be offered
// (its nodes in their order; without nodes every tool, sorted) are taken
// while their inputSchemas and descriptions fit; a tool that does not is
// skipped and the next ones still tried. It is computed again only when a
// server's tool list changed.
func (ts *Toolbox) over() map[string]string {
	regs := make(map[string]*tools.Registry, len(ts.servers))
	for name, s := range ts.servers {
		_, reg, _ := s.current()
		regs[name] = reg
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if b := ts.budget; b != nil && maps.Equal(b.regs, regs) {
		return b.over
	}
	var candidates []string
	if ts.nodes != nil {
		candidates = ts.nodes
	} else {
		for _, reg := range regs {
			if reg != nil {
				candidates = append(candidates, reg.Names()...)
			}
		}
		sort.Strings(candidates)
	}
	over := map[string]string{}
	used := 0
	for i, name := range candidates {
		srv, _, ok := mcpconfig.SplitToolName(name)
		reg := regs[srv]
		if !ok || reg == nil || slices.Contains(candidates[:i], name) {
			continue
		}
		specs := reg.Specs([]string{name})
		if len(specs) == 0 {
			continue
		}
		n := len(specs[0].Parameters) + len(specs[0].Description)
		if used+n > ts.maxSchema {
			over[name] = fmt.Sprintf("the inputSchemas and descriptions of this agent's MCP tools would be over %s with this one's %s (MCP_MAX_AGENT_SCHEMA_BYTES): they are sent with every model request",
				tools.FormatBytes(ts.maxSchema), tools.FormatBytes(n))
			continue
		}
		used += n
	}
	if prev := ts.budget; prev == nil || !maps.Equal(prev.over, over) {
		for _, name := range slices.Sorted(maps.Keys(over)) {
			ts.log.Warn("MCP tool skipped for this agent", "tool", name, "reason", over[name])
		}
	}
	ts.budget = &schemaBudget{regs: regs, over: over}
	return over
}

// route returns the server a tool name belongs to, if any.
func (ts *Toolbox) route(name string) (*server, bool) {
	srv, _, ok := mcpconfig.SplitToolName(name)
	if !ok {
		return nil, false
	}
	s, ok := ts.servers[srv]
	return s, ok
}

// Names lists the built-in tools and the MCP tools that can be offered now.
func (ts *Toolbox) Names() []string {
	names := ts.builtin.Names()
	over := ts.over()
	for _, s := range ts.servers {
		if _, reg, _ := s.current(); reg != nil {
			for _, n := range reg.Names() {
				if _, skip := over[n]; !skip {
					names = append(names, n)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// Specs describes the named tools in order, skipping those that do not
// exist now.
func (ts *Toolbox) Specs(names []string) []chat.ToolSpec {
	out := make([]chat.ToolSpec, 0, len(names))
	var over map[string]string
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			continue
		}
		if s, ok := ts.route(n); ok {
			if over == nil {
				over = ts.over()
			}
			if _, skip := over[n]; skip {
				continue
			}
			if _, reg, _ := s.current(); reg != nil {
				out = append(out, reg.Specs([]string{n})...)
			}
			continue
		}
		out = append(out, ts.builtin.Specs([]string{n})...)
	}
	return out
}

// Execute runs one call. An MCP tool whose server is not running, or that
// its server no longer lists, is answered with an error result that says
// so and is not run.
func (ts *Toolbox) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	s, ok := ts.route(call.Name)
	if !ok {
		return ts.builtin.Execute(ctx, call)
	}
	if why, unavailable := ts.Unavailable(call.Name); unavailable {
		return chat.ToolResult{CallID: call.ID, Name: call.Name, Content: why, Type: tools.ErrorType, IsError: true, NotRun: true}
	}
	_, reg, _ := s.current()
	if reg == nil {
		// It went away since Unavailable looked.
		_, _, why := s.current()
		return chat.ToolResult{CallID: call.ID, Name: call.Name, Content: fmt.Sprintf("tool %q is not available now: %s", call.Name, why), Type: tools.ErrorType, IsError: true, NotRun: true}
	}
	return reg.Execute(ctx, call)
}

// Idempotent implements tools.Idempotency: a built-in tool that declares
// it, or an MCP tool whose server annotates it read-only or idempotent.
func (ts *Toolbox) Idempotent(name string) bool {
	s, ok := ts.route(name)
	if !ok {
		return ts.builtin.Idempotent(name)
	}
	_, reg, _ := s.current()
	return reg != nil && reg.Idempotent(name)
}

// Unavailable reports why the named tool cannot run now: its MCP server is
// not running, or no longer lists it. Built-in tools are always available.
func (ts *Toolbox) Unavailable(name string) (string, bool) {
	s, ok := ts.route(name)
	if !ok {
		if _, known := ts.builtin.Lookup(name); known {
			return "", false
		}
		return fmt.Sprintf("tool %q is not provided by this runtime", name), true
	}
	_, reg, why := s.current()
	if reg == nil {
		return fmt.Sprintf("tool %q is not available now: %s; it is offered again once the server is back", name, why), true
	}
	if _, ok := reg.Lookup(name); !ok {
		_, tool, _ := mcpconfig.SplitToolName(name)
		return fmt.Sprintf("tool %q is not available now: MCP server %q no longer lists a tool %q", name, s.name, tool), true
	}
	if why, skip := ts.over()[name]; skip {
		return fmt.Sprintf("tool %q is not offered to this agent: %s", name, why), true
	}
	return "", false
}

// Status describes the agent's MCP servers, with MissingTools set to the
// agent's nodes that name a tool its ready server does not list.
func (ts *Toolbox) Status() []Status {
	names := make([]string, 0, len(ts.servers))
	for n := range ts.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Status, 0, len(names))
	over := ts.over()
	for _, n := range names {
		st := ts.servers[n].status()
		for _, tool := range slices.Sorted(maps.Keys(over)) {
			if srv, name, _ := mcpconfig.SplitToolName(tool); srv == n {
				st.Skipped = append(st.Skipped, SkippedTool{Name: name, Reason: over[tool]})
			}
		}
		st.Tools = slices.DeleteFunc(st.Tools, func(t string) bool { _, skip := over[t]; return skip })
		if st.State == StateReady {
			for _, node := range ts.nodes {
				if srv, _, ok := mcpconfig.SplitToolName(node); ok && srv == n && !slices.Contains(st.Tools, node) {
					st.MissingTools = append(st.MissingTools, node)
				}
			}
		}
		out = append(out, st)
	}
	return out
}

// Status describes one MCP server.
type Status struct {
	Name string `json:"name"`
	// Scope is "server" for the servers of every agent (MCP_SERVERS_FILE),
	// or the agent ID of the template that declares it.
	Scope     string `json:"scope"`
	Transport string `json:"transport"`
	State     string `json:"state"`
	// Error says why the server is not ready (empty when ready).
	Error string `json:"error,omitempty"`
	// Since is when the server entered its state.
	Since time.Time `json:"since"`
	// Restarts counts the failures since the runtime started.
	Restarts int `json:"restarts"`
	// ProtocolVersion is the MCP revision negotiated with the server.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Tools are the server's tools the model may be offered, under their
	// final names ("<server>__<tool>"), sorted; empty unless ready.
	Tools []string `json:"tools"`
	// Skipped are its tools that are never offered, with the reason.
	Skipped []SkippedTool `json:"skipped,omitempty"`
	// Limits are the limits of Config its tool list is over (too many
	// tools or pages), each saying what was skipped.
	Limits []string `json:"limits,omitempty"`
	// MissingTools are nodes of the agent's template that name a tool of
	// this server which the server does not list (Toolbox.Status only).
	MissingTools []string `json:"missingTools,omitempty"`
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	scope := s.scope
	if scope == "" {
		scope = "server"
	}
	st := Status{
		Name: s.name, Scope: scope, Transport: s.transport, State: s.state, Error: s.err,
		Since: s.since, Restarts: s.restarts, ProtocolVersion: s.proto, Tools: []string{},
		Skipped: slices.Clone(s.skipped), Limits: slices.Clone(s.limits),
	}
	if s.reg != nil && s.state == StateReady {
		st.Tools = s.reg.Names()
	}
	return st
}
