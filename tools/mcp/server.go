package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// States of a server.
const (
	// StateStarting: the process or connection is being started, or the
	// first tool list read.
	StateStarting = "starting"
	// StateReady: connected; its tools can be offered.
	StateReady = "ready"
	// StateRestarting: it failed to start or died; it is started again
	// after a backoff, and stays restarting, with the reason, while it
	// starts again.
	StateRestarting = "restarting"
	// StateFailed: its configuration cannot be used (a ${VAR} is not set);
	// it is never started.
	StateFailed = "failed"
	// StateStopped: the manager was closed.
	StateStopped = "stopped"
)

// stableAfter is how long a server must stay up for its backoff to start
// again from the minimum.
const stableAfter = time.Minute

// terminateAfter is how long a closing child process has, after its stdin
// was closed, before SIGTERM; its supervisor kills its tree termGrace after
// that, and the SDK's SIGKILL follows terminateAfter after SIGTERM (see
// Manager.Close).
const terminateAfter = 2 * time.Second

// server is one configured MCP server and its supervisor.
type server struct {
	m           *Manager
	scope, name string
	transport   string
	cfg         mcpconfig.Server // expanded
	inProcess   *sdk.Server      // the server of TransportInProcess
	cfgErr      error
	log         *slog.Logger
	client      *sdk.Client

	firstAttempt chan struct{} // closed when the first start attempt ended
	firstOnce    sync.Once
	listChanged  chan struct{} // notifications/tools/list_changed, coalesced

	mu       sync.Mutex
	state    string
	err      string
	since    time.Time
	restarts int
	proto    string
	session  *sdk.ClientSession
	reg      *tools.Registry // the current tools; nil unless ready
	skipped  []SkippedTool
	lists    int // tool lists read, for tests
	pgid     int // the stdio child's process group, 0 when none
	stderr   *tail

	// limits are the limits its tool list is over (Status.Limits).
	limits []string
	// lifeline is the writer of the stdio child's supervisor's lifeline
	// (see supervised); closing it ends the child's tree.
	lifeline *os.File
	// oversize are the tools of the tool list being read that were over
	// MaxSchemaBytes, by name, with their weight (see lightReader).
	oversize map[string]int
	// calls are the result limits of the stdio child's tools/calls whose
	// answer is awaited, by JSON-RPC id (see callConn); nil without a
	// stdio connection.
	calls map[string]int
}

func newServer(m *Manager, scope, name string, cfg mcpconfig.Server) *server {
	s := &server{
		m: m, scope: scope, name: name, transport: cfg.Transport(),
		log:          m.cfg.Logger.With(slog.String("mcp_server", name)),
		firstAttempt: make(chan struct{}),
		listChanged:  make(chan struct{}, 1),
		state:        StateStarting,
		since:        time.Now(),
	}
	if scope != "" {
		s.log = s.log.With(slog.String("agent", scope))
	}
	expanded, ps := mcpconfig.Expand(name, cfg, m.cfg.LookupEnv)
	if len(ps) > 0 {
		s.cfgErr = ps
		s.state, s.err = StateFailed, "configuration: "+ps.Error()
	}
	s.cfg = expanded
	keepAlive := m.cfg.PingInterval
	if keepAlive < 0 {
		keepAlive = 0
	}
	s.client = sdk.NewClient(&sdk.Implementation{Name: "agentdock", Version: "1"}, &sdk.ClientOptions{
		Logger: s.log,
		// No roots, sampling or elicitation: the runtime has no user to ask
		// and no file system to share. An empty value keeps the SDK from
		// advertising roots by default.
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.listChanged <- struct{}{}:
			default: // a refresh is already due
			}
		},
		KeepAlive: keepAlive,
	})
	return s
}

func (s *server) markFirst() { s.firstOnce.Do(func() { close(s.firstAttempt) }) }

// supervise runs the server until ctx ends: start, serve until it dies,
// restart after a backoff that doubles up to MaxBackoff.
func (s *server) supervise(ctx context.Context) {
	defer s.markFirst()
	if s.cfgErr != nil {
		s.log.Error("MCP server not started: its configuration cannot be used", "err", s.cfgErr)
		s.markFirst()
		<-ctx.Done()
		return
	}
	cfg := s.m.cfg
	backoff := cfg.MinBackoff
	for {
		began := time.Now()
		sess, err := s.start(ctx)
		if err == nil {
			s.markFirst()
			err = s.serve(ctx, sess)
		}
		if ctx.Err() != nil {
			s.setState(StateStopped, nil)
			return
		}
		if time.Since(began) >= stableAfter {
			backoff = cfg.MinBackoff
		}
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		s.setState(StateRestarting, err)
		// After the state: WaitStarted's callers read it.
		s.markFirst()
		s.log.Warn("MCP server unavailable; its tools are not offered until it is back", "err", err, "retry_in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			s.setState(StateStopped, nil)
			return
		}
		backoff = min(2*backoff, cfg.MaxBackoff)
	}
}

// start connects (starting the process for stdio), negotiates the protocol
// and reads the tool list, within StartTimeout.
func (s *server) start(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	retry := s.state == StateRestarting
	s.mu.Unlock()
	if !retry {
		// A retry stays restarting, with the reason of its last failure,
		// until it is ready or fails again.
		s.setState(StateStarting, nil)
	}
	ctx, cancel := context.WithTimeout(ctx, s.m.cfg.StartTimeout)
	defer cancel()
	t, err := s.newTransport()
	if err != nil {
		return nil, err
	}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		s.killGroup()
		return nil, s.describe(fmt.Errorf("connecting: %w", err))
	}
	if err := s.refresh(ctx, sess); err != nil {
		s.closeSession(sess)
		return nil, s.describe(fmt.Errorf("listing tools: %w", err))
	}
	s.mu.Lock()
	s.session, s.proto = sess, sess.InitializeResult().ProtocolVersion
	s.state, s.err, s.since = StateReady, "", time.Now()
	n := len(s.reg.Names())
	s.mu.Unlock()
	s.log.Info("MCP server ready", "transport", s.transport, "protocol", s.proto, "tools", n)
	return sess, nil
}

// serve waits until the session ends (the process exited, the connection
// broke, pings went unanswered) or ctx does, re-reading the tool list on
// every list_changed notification.
func (s *server) serve(ctx context.Context, sess *sdk.ClientSession) error {
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	for {
		select {
		case <-ctx.Done():
			s.closeSession(sess)
			<-done
			return ctx.Err()
		case err := <-done:
			s.closeSession(sess)
			if err == nil || errors.Is(err, sdk.ErrConnectionClosed) {
				err = errors.New("the server closed the connection")
			}
			return s.describe(err)
		case <-s.listChanged:
			rctx, cancel := context.WithTimeout(ctx, s.m.cfg.StartTimeout)
			err := s.refresh(rctx, sess)
			cancel()
			if err != nil && ctx.Err() == nil {
				s.log.Warn("MCP server's tool list could not be read after it changed; keeping the previous one", "err", err)
			}
		}
	}
}

// refresh reads the tool list and installs it. It reads at most
// MaxToolPages pages and MaxTools tools, and stops at a cursor it was
// given before: a server that lists more, or pages without end, keeps the
// tools read so far and is reported (Status.Limits and the log).
func (s *server) refresh(ctx context.Context, sess *sdk.ClientSession) error {
	cfg := s.m.cfg
	s.mu.Lock()
	s.oversize = nil
	s.mu.Unlock()
	list := s.newToolList()
	var (
		limits  []string
		listed  int
		cursors = map[string]bool{}
		params  = &sdk.ListToolsParams{}
	)
	for pages := 1; ; pages++ {
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			return err
		}
		over := false
		for _, t := range res.Tools {
			if listed == cfg.MaxTools {
				over = true
				break
			}
			listed++
			list.add(t)
		}
		next := res.NextCursor
		if over || next != "" && listed == cfg.MaxTools {
			limits = append(limits, fmt.Sprintf("it lists more than %d tools (MCP_MAX_TOOLS): the first %d were read, the rest are skipped", cfg.MaxTools, cfg.MaxTools))
			break
		}
		if next == "" {
			break
		}
		if pages == cfg.MaxToolPages {
			limits = append(limits, fmt.Sprintf("its tool list goes on past %d pages (MCP_MAX_TOOL_PAGES): the %d tools of those pages were read, the rest are skipped", cfg.MaxToolPages, listed))
			break
		}
		if cursors[next] {
			limits = append(limits, fmt.Sprintf("its tool list pages in a loop (a cursor came back after %d pages): the %d tools read until then are kept", pages, listed))
			break
		}
		cursors[next] = true
		params = &sdk.ListToolsParams{Cursor: next}
	}
	reg := list.registry()
	s.mu.Lock()
	old := s.reg
	s.reg, s.skipped, s.limits = reg, list.skipped, limits
	s.lists++
	s.mu.Unlock()
	for _, l := range limits {
		s.log.Warn("MCP server over a limit", "limit", l)
	}
	for _, sk := range list.skipped {
		s.log.Warn("MCP tool skipped", "tool", sk.Name, "reason", sk.Reason)
	}
	if old != nil {
		if added, removed := diff(old.Names(), reg.Names()); len(added)+len(removed) > 0 {
			s.log.Info("MCP server's tool list changed", "added", added, "removed", removed)
		}
	}
	return nil
}

func diff(before, after []string) (added, removed []string) {
	for _, n := range after {
		if !slices.Contains(before, n) {
			added = append(added, n)
		}
	}
	for _, n := range before {
		if !slices.Contains(after, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}

// closeSession ends a session: the SDK closes the child's stdin, then
// signals it; whatever is left of its process group is killed.
func (s *server) closeSession(sess *sdk.ClientSession) {
	_ = sess.Close()
	s.killGroup()
	s.mu.Lock()
	if s.session == sess {
		s.session, s.reg = nil, nil
	}
	s.mu.Unlock()
}

// lost is called when a call found the connection broken, so that the
// tools stop being offered at once instead of at the next ping.
func (s *server) lost(sess *sdk.ClientSession) {
	s.mu.Lock()
	current := s.session == sess
	s.mu.Unlock()
	if current {
		go func() { _ = sess.Close() }()
	}
}

func (s *server) setState(state string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state != StateReady {
		s.reg, s.session = nil, nil
	}
	s.state, s.since = state, time.Now()
	s.err = ""
	if err != nil {
		s.err = err.Error()
	}
}

// current returns the live session and tools, or why there are none. The
// reason reaches the model and the client, so the host's paths in the
// server's error (its command, its stderr) are hidden.
func (s *server) current() (*sdk.ClientSession, *tools.Registry, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateReady && s.session != nil {
		return s.session, s.reg, ""
	}
	why := fmt.Sprintf("MCP server %q is not running (%s", s.name, s.state)
	if s.err != "" {
		why += ": " + tools.HidePaths(firstLine(s.err))
	}
	return nil, nil, why + ")"
}

// describe adds what the child process said last on stderr, and how it
// exited, to err.
func (s *server) describe(err error) error {
	s.mu.Lock()
	st := s.stderr
	s.mu.Unlock()
	if st == nil {
		return err
	}
	if msg := st.String(); msg != "" {
		return fmt.Errorf("%w; its stderr ended with: %s", err, msg)
	}
	return err
}

func (s *server) newTransport() (sdk.Transport, error) {
	switch s.transport {
	case mcpconfig.TransportStdio:
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		if cmd.Err != nil {
			return nil, cmd.Err // not found in PATH
		}
		cmd.Dir = s.cfg.Cwd
		cmd.Env = childEnv(s.m.cfg.Environ(), s.cfg.Env)
		st := newTail(2048)
		cmd.Stderr = st
		t := &stdioTransport{s: s, cmd: cmd}
		if sup, lifeline, childEnd, err := supervised(cmd); err == nil {
			t.cmd, t.lifeline, t.childEnd = sup, lifeline, childEnd
		} else {
			if !errors.Is(err, errNoSupervisor) {
				s.log.Warn("MCP server started without its supervisor: processes it starts in sessions of their own may outlive it", "err", err)
			}
			setProcAttr(cmd)
		}
		s.mu.Lock()
		s.stderr = st
		s.mu.Unlock()
		return t, nil
	case TransportInProcess:
		client, srv := sdk.NewInMemoryTransports()
		// The server's session ends when the client closes the pipe.
		if _, err := s.inProcess.Connect(context.Background(), srv, nil); err != nil {
			return nil, err
		}
		return client, nil
	case mcpconfig.TransportHTTP:
		return &sdk.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: s.cfg.Headers}},
			MaxRetries: 2,
		}, nil
	}
	return nil, fmt.Errorf("server %q has no transport", s.name)
}

// errNoSupervisor: the platform has no supervisor for stdio servers.
var errNoSupervisor = errors.New("no supervisor on this platform")

// killGroup ends what is left of the stdio child: its supervisor, told by
// its lifeline closing, ends every process descended from the server, and
// whatever is still in the child's process group a moment later is
// killed.
func (s *server) killGroup() {
	s.mu.Lock()
	pgid, lifeline := s.pgid, s.lifeline
	s.pgid, s.lifeline = 0, nil
	s.mu.Unlock()
	if lifeline != nil {
		lifeline.Close()
		// Killing the group at once could kill the supervisor before it
		// ended the processes outside the group.
		waitGroupGone(pgid, time.Second)
	}
	if pgid > 0 {
		killGroup(pgid)
	}
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// inherited are the variables a child process gets from the runtime's
// environment, as the reference MCP clients do: enough to find programs and
// a home, and none of the runtime's secrets (provider keys, Redis URLs).
// Everything else comes from the server's "env".
var inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "TZ", "NODE_PATH", "SYSTEMROOT"}

func childEnv(environ []string, extra map[string]string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(inherited, k) {
			if _, override := extra[k]; !override {
				env = append(env, kv)
			}
		}
	}
	for _, k := range sortedKeys(extra) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// tail keeps the last bytes written to it (a child's stderr), for error
// messages. It is never logged as it comes: a server may print what it was
// asked, and chat content stays out of logs.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the last few lines, on one line.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	lines = lines[max(0, len(lines)-3):]
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return l == "" }), " | ")
}
