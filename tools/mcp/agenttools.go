package mcp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// AgentTools is Toolbox for agent.Load (the Manager is its agent.MCP):
// the tools of agentID, whose template's nodes (all of them: a problem's
// path is its node's position) are nodes, judged by what
// its servers' first start showed. errs are the nodes that misspell a
// tool their ready server lists (orchestration.Slip), which stop the
// template; warnings are the nodes naming a tool their ready server does
// not list and resembling none (never offered while it does not), and the
// servers that are not running (their tools are offered once they run).
// Each problem's path names the node or the server. The Manager keeps
// the toolbox for AgentStatus.
func (m *Manager) AgentTools(builtin *tools.Registry, agentID string, nodes []string) (tb tools.Toolbox, errs, warnings mcpconfig.Problems) {
	ts := m.Toolbox(builtin, agentID, nodes)
	for _, st := range ts.Status() {
		if st.State != StateReady {
			warnings = append(warnings, mcpconfig.Problem{Path: "mcpServers." + st.Name,
				Message: fmt.Sprintf("the MCP server is %s (%s); its tools are offered once it runs", st.State, firstLine(st.Error))})
		}
		for _, n := range st.MissingTools {
			path := fmt.Sprintf("nodes[%d]", slices.Index(nodes, n))
			lists := strings.Join(st.Tools, ", ")
			if meant := orchestration.Slip(n, st.Tools); meant != "" {
				errs = append(errs, mcpconfig.Problem{Path: path,
					Message: fmt.Sprintf("%q: MCP server %q does not list this tool; did you mean %q? (it lists %s)", n, st.Name, meant, lists)})
				continue
			}
			warnings = append(warnings, mcpconfig.Problem{Path: path,
				Message: fmt.Sprintf("%q: MCP server %q does not list this tool (it lists %s); it is not offered while the server does not", n, st.Name, lists)})
		}
	}
	m.mu.Lock()
	if m.agents == nil {
		m.agents = map[string]*Toolbox{}
	}
	m.agents[agentID] = ts
	m.mu.Unlock()
	if len(ts.servers) == 0 {
		return builtin, errs, warnings // no MCP server: nothing can be unavailable
	}
	return ts, errs, warnings
}

// AgentStatus describes the MCP servers of the agent whose tools
// AgentTools made, as Toolbox.Status does; nil for an agent it did not
// make, or one without servers.
func (m *Manager) AgentStatus(agentID string) []Status {
	m.mu.Lock()
	ts := m.agents[agentID]
	m.mu.Unlock()
	if ts == nil || len(ts.servers) == 0 {
		return nil
	}
	return ts.Status()
}
