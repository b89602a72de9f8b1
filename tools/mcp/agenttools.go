package mcp

import (
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// AgentTools is Toolbox for agent.Load (the Manager is its agent.MCP): the
// tools of agentID, with what its servers' first start showed. missing
// are the nodes naming a tool that a ready server does not list, which
// would never be offered; down are the servers that are not running, whose
// tools are offered once they are. Each problem's path names the field.
func (m *Manager) AgentTools(builtin *tools.Registry, agentID string, nodes []string) (tb tools.Toolbox, missing, down mcpconfig.Problems) {
	ts := m.Toolbox(builtin, agentID, nodes)
	for _, st := range ts.Status() {
		if st.State != StateReady {
			down = append(down, mcpconfig.Problem{Path: "mcpServers." + st.Name,
				Message: fmt.Sprintf("the MCP server is %s (%s); its tools are offered once it runs", st.State, firstLine(st.Error))})
		}
		for _, n := range st.MissingTools {
			missing = append(missing, mcpconfig.Problem{Path: "nodes",
				Message: fmt.Sprintf("%q: MCP server %q does not list this tool (it lists %s); check its spelling", n, st.Name, strings.Join(st.Tools, ", "))})
		}
	}
	if len(ts.servers) == 0 {
		return builtin, missing, down // no MCP server: nothing can be unavailable
	}
	return ts, missing, down
}
