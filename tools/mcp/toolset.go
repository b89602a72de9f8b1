package mcp

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Toolset is one agent's tools: the built-in registry and the tools of the
// MCP servers the agent may use (the server-wide ones and its template's
// own). It satisfies the agent's and llmorch's tool interfaces, routing a
// name "<server>__<tool>" to the server's current tool list, and reports
// which tools cannot run now (Unavailable), so that the turn never offers
// them. It is safe for concurrent use.
type Toolset struct {
	builtin *tools.Registry
	servers map[string]*server
	agentID string
	nodes   []string
}

// Toolset returns the tools of agentID, whose template's tools are nodes:
// its own servers, and the server-wide servers a node names a tool of (nil
// nodes: every server-wide server).
func (m *Manager) Toolset(builtin *tools.Registry, agentID string, nodes []string) *Toolset {
	servers := m.serversFor(agentID)
	if nodes != nil {
		for name, s := range servers {
			named := slices.ContainsFunc(nodes, func(n string) bool { return strings.HasPrefix(n, name+mcpconfig.Separator) })
			if s.scope == "" && !named {
				delete(servers, name)
			}
		}
	}
	return &Toolset{builtin: builtin, servers: servers, agentID: agentID, nodes: slices.Clone(nodes)}
}

// route returns the server a tool name belongs to, if any.
func (ts *Toolset) route(name string) (*server, bool) {
	srv, _, ok := mcpconfig.SplitToolName(name)
	if !ok {
		return nil, false
	}
	s, ok := ts.servers[srv]
	return s, ok
}

// Names lists the built-in tools and the MCP tools that can be offered now.
func (ts *Toolset) Names() []string {
	names := ts.builtin.Names()
	for _, s := range ts.servers {
		if _, reg, _ := s.current(); reg != nil {
			names = append(names, reg.Names()...)
		}
	}
	sort.Strings(names)
	return names
}

// Specs describes the named tools in order, skipping those that do not
// exist now.
func (ts *Toolset) Specs(names []string) []chat.ToolSpec {
	out := make([]chat.ToolSpec, 0, len(names))
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			continue
		}
		if s, ok := ts.route(n); ok {
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
func (ts *Toolset) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
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
func (ts *Toolset) Idempotent(name string) bool {
	s, ok := ts.route(name)
	if !ok {
		return ts.builtin.Idempotent(name)
	}
	_, reg, _ := s.current()
	return reg != nil && reg.Idempotent(name)
}

// Unavailable reports why the named tool cannot run now: its MCP server is
// not running, or no longer lists it. Built-in tools are always available.
func (ts *Toolset) Unavailable(name string) (string, bool) {
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
	return "", false
}

// Status describes the agent's MCP servers, with MissingTools set to the
// agent's nodes that name a tool its ready server does not list.
func (ts *Toolset) Status() []Status {
	names := make([]string, 0, len(ts.servers))
	for n := range ts.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]Status, 0, len(names))
	for _, n := range names {
		st := ts.servers[n].status()
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
	// MissingTools are nodes of the agent's template that name a tool of
	// this server which the server does not list (Toolset.Status only).
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
		Skipped: slices.Clone(s.skipped),
	}
	if s.reg != nil && s.state == StateReady {
		st.Tools = s.reg.Names()
	}
	return st
}
