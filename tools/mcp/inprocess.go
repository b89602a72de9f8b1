package mcp

import (
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// TransportInProcess is the transport of a server added with AddInProcess.
const TransportInProcess = "in-process"

// AddInProcess registers srv, an MCP server of the official Go SDK that
// runs in this program, as the server name of scope (see Add). The client
// reaches it through an in-memory connection (no process, no network); its
// tools are named, offered, called and supervised like those of any other
// server, and a lost connection is made again.
func (m *Manager) AddInProcess(scope, name string, srv *sdk.Server) error {
	if p := mcpconfig.CheckName(name); p != "" {
		return fmt.Errorf("mcp: server %q: %s", name, p)
	}
	if srv == nil {
		return errors.New("mcp: AddInProcess: no server")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	s := newServer(m, scope, name, mcpconfig.Server{})
	s.transport, s.inProcess = TransportInProcess, srv
	return m.register(s)
}
