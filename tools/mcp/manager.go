// Package mcp gives agents the tools of MCP servers. It is the runtime's MCP
// client, built on the official Go SDK (github.com/modelcontextprotocol/go-sdk):
// a Manager starts and supervises each configured server (a child process
// over stdio, or a streamable HTTP endpoint), keeps its tool list current
// (notifications/tools/list_changed), restarts it with backoff when it fails
// or dies, and ends every child process on Close.
//
// On Linux a stdio server runs under a supervisor, the same executable
// started again (see supervise_linux.go: a program that links this package
// becomes the supervisor when started with AGENTDOCK_MCP_SUPERVISOR set,
// before its main runs). It ends every process descended from the server,
// setsid daemons included, when the server exits, when it is closed or
// restarted, and when the runtime dies, SIGKILL included. Elsewhere a
// server runs in a process group of its own, which Close kills.
//
// Each MCP tool becomes a tools.Tool named "<server>__<tool>" (a name that
// breaks the providers' rule ^[a-zA-Z0-9_-]{1,64}$ is reported and skipped),
// with the server's description and inputSchema unchanged; the tools
// registry validates the model's arguments against that schema before the
// call and bounds the call with the tool timeout. A Toolbox is one agent's
// view: the built-in tools plus the MCP servers it may use, and it reports
// which of them cannot run now, so that the orchestration never offers them.
//
// A program that embeds agents gives a Manager to agent.Load
// (agent.Options.MCP: NewManager(Config{}), with servers for every agent
// added under scope ""), which adds and starts the templates' own servers
// and fails when a template names a tool its ready server does not list.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Config tunes a Manager. The zero value is usable.
type Config struct {
	// Timeout bounds each tool call (default tools.DefaultTimeout).
	Timeout time.Duration
	// Logger records server starts, failures, restarts and tool list
	// changes; tool calls are logged by the tools registry. Nil means
	// slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds one start: the process start or the HTTP
	// connection, the protocol handshake and the first tool list (default
	// 30s).
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the pause before a restart, which
	// doubles after each failure and starts again from MinBackoff once a
	// server stayed up for a minute (defaults 1s and 30s).
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often an idle streamable HTTP server is pinged, so
	// that a server that went away is noticed before a model is offered its
	// tools (default 15s; negative: never). A stdio server's exit is
	// noticed at once.
	PingInterval time.Duration
	// LookupEnv expands ${VAR} in the configuration and Environ is the
	// environment a child process inherits from (only PATH, HOME and a few
	// more; see childEnv). Nil means the process environment.
	LookupEnv func(string) (string, bool)
	Environ   func() []string

	// MaxTools bounds the tools read from one server's tools/list
	// (MCP_MAX_TOOLS, default 1,000), and MaxToolPages the pages read to
	// get them (MCP_MAX_TOOL_PAGES, default 100): a server that lists more,
	// or pages without end, keeps the tools read so far and is reported
	// (Status.Limits, the log).
	MaxTools, MaxToolPages int
	// MaxSchemaBytes bounds one tool's inputSchema and description
	// together (MCP_MAX_SCHEMA_BYTES, default 64 KiB); MaxAgentSchemaBytes
	// bounds those of all the MCP tools one agent may be offered
	// (MCP_MAX_AGENT_SCHEMA_BYTES, default 256 KiB). Both are sent with
	// every model request of the agent. A tool over either is skipped
	// with the reason (Status.Skipped).
	MaxSchemaBytes, MaxAgentSchemaBytes int
}

// The defaults of the limits of Config.
const (
	DefaultMaxTools            = 1000
	DefaultMaxToolPages        = 100
	DefaultMaxSchemaBytes      = 64 << 10
	DefaultMaxAgentSchemaBytes = 256 << 10
)

// LimitsFromEnv returns cfg with its limits read from MCP_MAX_TOOLS,
// MCP_MAX_TOOL_PAGES, MCP_MAX_SCHEMA_BYTES and MCP_MAX_AGENT_SCHEMA_BYTES
// (positive whole numbers; unset ones keep cfg's). Every bad value is
// reported.
func LimitsFromEnv(cfg Config) (Config, error) {
	var errs []error
	for _, v := range []struct {
		name string
		dst  *int
	}{
		{"MCP_MAX_TOOLS", &cfg.MaxTools},
		{"MCP_MAX_TOOL_PAGES", &cfg.MaxToolPages},
		{"MCP_MAX_SCHEMA_BYTES", &cfg.MaxSchemaBytes},
		{"MCP_MAX_AGENT_SCHEMA_BYTES", &cfg.MaxAgentSchemaBytes},
	} {
		raw := strings.TrimSpace(os.Getenv(v.name))
		if raw == "" {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s: want a positive whole number, got %q", v.name, raw))
			continue
		}
		*v.dst = n
	}
	return cfg, errors.Join(errs...)
}

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = tools.DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(30*time.Second, c.MinBackoff)
	}
	if c.PingInterval == 0 {
		c.PingInterval = 15 * time.Second
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	if c.Environ == nil {
		c.Environ = os.Environ
	}
	if c.MaxTools <= 0 {
		c.MaxTools = DefaultMaxTools
	}
	if c.MaxToolPages <= 0 {
		c.MaxToolPages = DefaultMaxToolPages
	}
	if c.MaxSchemaBytes <= 0 {
		c.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if c.MaxAgentSchemaBytes <= 0 {
		c.MaxAgentSchemaBytes = DefaultMaxAgentSchemaBytes
	}
}

// Manager runs MCP servers. Add servers, then Start; Close ends them.
type Manager struct {
	cfg     Config
	mu      sync.Mutex
	servers []*server // in the order added
	byKey   map[key]*server
	started bool
	closed  bool
	stop    context.CancelFunc
	baseCtx context.Context // the servers' context, from Start
	wg      sync.WaitGroup
	// agents are the toolboxes AgentTools made, by agent ID.
	agents map[string]*Toolbox
}

// key identifies a server: its name within a scope ("" for the servers of
// every agent, else the agent ID of the template that declares it).
type key struct{ scope, name string }

// NewManager returns a Manager with no servers.
func NewManager(cfg Config) *Manager {
	cfg.defaults()
	return &Manager{cfg: cfg, byKey: map[key]*server{}}
}

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("mcp: manager closed")

// Add registers servers for scope: "" for the servers every agent may use
// (MCP_SERVERS_FILE), an agent ID for the servers of that agent's template.
// Their ${VAR} references are expanded now; a server whose expansion fails
// is kept in state failed with the reason and never started. A server is
// started at once when the manager already runs. The configuration must
// have passed mcpconfig.Check.
func (m *Manager) Add(scope string, servers mcpconfig.Servers) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for _, name := range servers.Names() {
		if err := m.register(newServer(m, scope, name, servers[name])); err != nil {
			return err
		}
	}
	return nil
}

// register adds s, and starts it when the manager runs; m.mu is held.
func (m *Manager) register(s *server) error {
	k := key{s.scope, s.name}
	if _, dup := m.byKey[k]; dup {
		return fmt.Errorf("mcp: server %q is added twice", s.name)
	}
	if s.scope != "" {
		if _, global := m.byKey[key{"", s.name}]; global {
			return fmt.Errorf("mcp: server %q of agent %q has the name of a server-wide MCP server", s.name, s.scope)
		}
	}
	m.byKey[k] = s
	m.servers = append(m.servers, s)
	if m.started {
		m.launch(s)
	}
	return nil
}

// Start starts every server in the background under ctx and returns at once;
// WaitStarted waits for their first attempts.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	ctx, m.stop = context.WithCancel(context.WithoutCancel(ctx))
	m.baseCtx = ctx
	for _, s := range m.servers {
		m.launch(s)
	}
}

// launch starts s's supervisor; m.mu is held.
func (m *Manager) launch(s *server) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		s.supervise(m.baseCtx)
	}()
}

// WaitStarted waits until every server's first start attempt ended (ready
// or failed), or ctx is done.
func (m *Manager) WaitStarted(ctx context.Context) error {
	m.mu.Lock()
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	for _, s := range servers {
		select {
		case <-s.firstAttempt:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close stops every server and waits for them: each child process has its
// stdin closed, then gets SIGTERM after two seconds; a second later its
// supervisor kills every process descended from it (without a supervisor,
// its process group gets SIGKILL two seconds after SIGTERM), and whatever
// is left when ctx ends is killed, so that no process outlives the
// runtime.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	stop := m.stop
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// The supervisors are stuck closing their sessions: kill what is
		// left, then give them a moment to notice.
		for _, s := range servers {
			s.killGroup()
		}
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		return fmt.Errorf("mcp: closing the servers: %w", ctx.Err())
	}
}

// Status describes the servers of scope "" and of the given scopes, in the
// order added; with no scopes, every server.
func (m *Manager) Status(scopes ...string) []Status {
	m.mu.Lock()
	servers := slices.Clone(m.servers)
	m.mu.Unlock()
	var out []Status
	for _, s := range servers {
		if len(scopes) == 0 || s.scope == "" || slices.Contains(scopes, s.scope) {
			out = append(out, s.status())
		}
	}
	return out
}

// Names returns the names of the servers of scope "" (server-wide), sorted.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, s := range m.servers {
		if s.scope == "" {
			out = append(out, s.name)
		}
	}
	sort.Strings(out)
	return out
}

// servers returns the servers an agent may use: the server-wide ones and
// those of its own template.
func (m *Manager) serversFor(agentID string) map[string]*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]*server{}
	for _, s := range m.servers {
		if s.scope == "" || s.scope == agentID {
			out[s.name] = s
		}
	}
	return out
}
