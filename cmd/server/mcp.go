package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// mcpServersFileEnv names the server-wide MCP servers file.
const mcpServersFileEnv = "MCP_SERVERS_FILE"

// mcpStartWait bounds how long serve waits for the MCP servers' first start
// before it listens; a server still starting then is offered once ready.
const mcpStartWait = 15 * time.Second

// readMCPServers reads the MCP servers file at path ("" for none). Every
// problem is reported, each naming the server and the field.
func readMCPServers(path string) (mcpconfig.Servers, error) {
	if path == "" {
		return nil, nil
	}
	servers, err := mcpconfig.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mcpServersFileEnv, err)
	}
	return servers, nil
}

// mcpRuntime is the serve command's MCP servers: the manager and each
// agent's toolset.
type mcpRuntime struct {
	manager  *mcp.Manager
	builtin  *tools.Registry
	toolsets map[string]*mcp.Toolbox
}

// newMCPRuntime registers the server-wide servers; templates' own are added
// with addAgents once the templates are loaded.
func newMCPRuntime(servers mcpconfig.Servers, builtin *tools.Registry, timeout time.Duration, log *slog.Logger) (*mcpRuntime, error) {
	cfg, err := mcp.LimitsFromEnv(mcp.Config{Timeout: timeout, Logger: log})
	if err != nil {
		return nil, err
	}
	m := mcp.NewManager(cfg)
	if err := m.Add("", servers); err != nil {
		return nil, err
	}
	return &mcpRuntime{manager: m, builtin: builtin, toolsets: map[string]*mcp.Toolbox{}}, nil
}

// addAgents registers the servers of each loaded template under its agent
// ID; a relative cwd is taken from the template's directory.
func (r *mcpRuntime) addAgents(loaded []*template.Loaded) error {
	for _, a := range loaded {
		if len(a.Template.MCPServers) == 0 {
			continue
		}
		dir := ""
		if a.File != "" {
			dir = filepath.Dir(a.File)
		}
		if err := r.manager.Add(a.ID(), a.Template.MCPServers.Resolve(dir)); err != nil {
			return fmt.Errorf("template %s: %w", a.File, err)
		}
	}
	return nil
}

// toolsFor is agent.Config.ToolsFor: the built-in tools plus the agent's MCP
// servers (the server-wide ones and its template's own).
func (r *mcpRuntime) toolsFor(a *template.Loaded) tools.Toolbox {
	ts := r.manager.Toolbox(r.builtin, a.ID(), a.Template.Tools())
	if len(ts.Status()) == 0 {
		return r.builtin // no MCP server: nothing can be unavailable
	}
	r.toolsets[a.ID()] = ts
	return ts
}

// status is server.Config.MCPServers.
func (r *mcpRuntime) status(agentID string) []server.MCPServer {
	ts, ok := r.toolsets[agentID]
	if !ok {
		return nil
	}
	sts := ts.Status()
	if len(sts) == 0 {
		return nil
	}
	out := make([]server.MCPServer, len(sts))
	for i, st := range sts {
		// Clients read it: the host's paths (the server's command, its
		// stderr) stay in the log and `agentdock mcp list`.
		out[i] = server.MCPServer{
			Name: st.Name, Scope: st.Scope, Transport: st.Transport, State: st.State, Error: tools.HidePaths(st.Error),
			Since: st.Since, Restarts: st.Restarts, ProtocolVersion: st.ProtocolVersion, Tools: st.Tools,
			MissingTools: st.MissingTools, Limits: st.Limits,
		}
		for _, sk := range st.Skipped {
			out[i].Skipped = append(out[i].Skipped, sk.Name+": "+sk.Reason)
		}
	}
	return out
}

// reportStart waits (bounded) for the servers' first start and logs, per
// agent, the nodes naming a tool their ready server does not list.
func (r *mcpRuntime) reportStart(ctx context.Context, log *slog.Logger) {
	if len(r.manager.Status()) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, mcpStartWait)
	defer cancel()
	if err := r.manager.WaitStarted(wctx); err != nil {
		log.Warn("MCP servers still starting; their tools are offered once they are ready", "waited", mcpStartWait)
	}
	for id, ts := range r.toolsets {
		for _, st := range ts.Status() {
			if len(st.MissingTools) > 0 {
				log.Warn("template names tools its MCP server does not list; they are not offered", "agent", id, "mcp_server", st.Name, "tools", st.MissingTools)
			}
		}
	}
}

// close ends every MCP server (and child process) within timeout.
func (r *mcpRuntime) close(timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := r.manager.Close(ctx); err != nil {
		log.Warn("closing MCP servers", "err", err)
	}
}

// runMCP is `agentdock mcp list` and `agentdock mcp serve`.
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve" {
		return serveCommand(ctx, "mcp serve", args[1:], stderr)
	}
	const mcpUsage = "usage: agentdock mcp list [--config FILE] [--templates DIR]\n       agentdock mcp serve [serve's flags]   # the agents as MCP tools over stdio\n" +
		"Run 'agentdock mcp list -h' or 'agentdock mcp serve -h' for their flags."
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(stderr, mcpUsage)
		return 0
	}
	if len(args) == 0 || args[0] != "list" {
		fmt.Fprintln(stderr, mcpUsage)
		return 2
	}
	fs := flag.NewFlagSet("mcp list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", os.Getenv(mcpServersFileEnv), "MCP servers file ({\"mcpServers\": {...}}; env "+mcpServersFileEnv+")")
	tdir := fs.String("templates", "", "also list the mcpServers of the templates at this path (a template file or a directory of */template.json)")
	wait := fs.Duration("timeout", 30*time.Second, "how long to wait for each server to start")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	if *file == "" && *tdir == "" {
		fmt.Fprintln(stderr, "agentdock mcp list: no servers: give --config FILE (or set "+mcpServersFileEnv+") or --templates DIR")
		return 2
	}
	servers, err := readMCPServers(*file)
	if err != nil {
		fmt.Fprintln(stderr, "agentdock mcp list:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mcfg, err := mcp.LimitsFromEnv(mcp.Config{Logger: log, StartTimeout: *wait, PingInterval: -1})
	if err != nil {
		fmt.Fprintln(stderr, "agentdock mcp list:", err)
		return 2
	}
	m := mcp.NewManager(mcfg)
	if err := m.Add("", servers); err != nil {
		fmt.Fprintln(stderr, "agentdock mcp list:", err)
		return 1
	}
	if *tdir != "" {
		results, err := template.LoadPath(*tdir, template.Config{})
		if err != nil {
			fmt.Fprintln(stderr, "agentdock mcp list:", err)
			return 1
		}
		for _, res := range results {
			if res.Loaded == nil {
				fmt.Fprintf(stderr, "agentdock mcp list: %s: skipped: %v\n", res.File, res.Diagnostics.Err())
				continue
			}
			if err := m.Add(res.Loaded.ID(), res.Loaded.Template.MCPServers.Resolve(filepath.Dir(res.File))); err != nil {
				fmt.Fprintln(stderr, "agentdock mcp list:", err)
				return 1
			}
		}
	}
	m.Start(ctx)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(cctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, *wait+time.Second)
	defer cancel()
	_ = m.WaitStarted(wctx)
	return printMCPStatus(stdout, m.Status())
}

// printMCPStatus prints each server, its state and its tools under their
// final names; exit code 1 when a server is not ready.
func printMCPStatus(w io.Writer, sts []mcp.Status) int {
	code := 0
	for i, st := range sts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		scope := "server-wide"
		if st.Scope != "server" {
			scope = "template " + st.Scope
		}
		fmt.Fprintf(w, "%s (%s, %s): %s", st.Name, st.Transport, scope, st.State)
		if st.State != mcp.StateReady {
			code = 1
			fmt.Fprintf(w, ": %s\n", st.Error)
			continue
		}
		fmt.Fprintf(w, ", protocol %s, %d tools\n", st.ProtocolVersion, len(st.Tools))
		for _, t := range st.Tools {
			fmt.Fprintf(w, "  %s\n", t)
		}
		for _, sk := range st.Skipped {
			fmt.Fprintf(w, "  skipped %s: %s\n", sk.Name, strings.TrimSpace(sk.Reason))
		}
		for _, l := range st.Limits {
			fmt.Fprintf(w, "  over a limit: %s\n", l)
		}
	}
	return code
}

// checkMCPServers starts the MCP servers of the file and of the loaded
// templates and reports, as warnings (the templates are valid; the servers
// are the machine's), each server that does not start and each node naming
// a tool its server does not list. It returns the counts of errors and
// warnings printed.
func checkMCPServers(ctx context.Context, w io.Writer, servers mcpconfig.Servers, loaded []*template.Loaded) (errs, warns int) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mcfg, err := mcp.LimitsFromEnv(mcp.Config{Logger: log, PingInterval: -1})
	if err != nil {
		fmt.Fprintf(w, "error: %s\n", err)
		return 1, 0
	}
	m := mcp.NewManager(mcfg)
	if err := m.Add("", servers); err != nil {
		fmt.Fprintf(w, "error: %s\n", err)
		return 1, 0
	}
	// Scoped by file, not agent ID: validate may be given two templates
	// with the same ID.
	for _, a := range loaded {
		if len(a.Template.MCPServers) > 0 {
			if err := m.Add(a.File, a.Template.MCPServers.Resolve(filepath.Dir(a.File))); err != nil {
				fmt.Fprintf(w, "error: %s: %s\n", a.File, err)
				errs++
			}
		}
	}
	if len(m.Status()) == 0 {
		return errs, 0
	}
	m.Start(ctx)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(cctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	_ = m.WaitStarted(wctx)
	for _, st := range m.Status() {
		if st.State == mcp.StateReady {
			continue
		}
		where := mcpServersFileEnv
		if st.Scope != "server" {
			where = st.Scope
		}
		fmt.Fprintf(w, "warning: %s: mcpServers.%s: the MCP server is not running (%s), so its tools are not offered: %s\n", where, st.Name, st.State, firstLine(st.Error))
		warns++
	}
	builtin, _ := tools.NewRegistry()
	for _, a := range loaded {
		for _, st := range m.Toolbox(builtin, a.File, a.Template.Tools()).Status() {
			for _, n := range st.MissingTools {
				fmt.Fprintf(w, "warning: %s: nodes: %q: MCP server %q does not list this tool; it lists %s\n", a.File, n, st.Name, strings.Join(st.Tools, ", "))
				warns++
			}
		}
	}
	return errs, warns
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
