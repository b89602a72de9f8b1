package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Options are what Load gives the agents it loads. The zero value runs
// templates without tools on the offline model, in memory.
type Options struct {
	// Tools are the Go tools the templates may name, each once. A node
	// naming neither one of them nor a tool of an MCP server is an error.
	Tools []tools.Tool
	// Model is every agent's model; nil: the offline model.
	Model llmorch.Model
	// Store keeps the sessions; nil: a memory store.
	Store session.Store
	// MCP runs the templates' MCP servers: mcp.NewManager(mcp.Config{})
	// of package tools/mcp, with the servers every agent may use added
	// under scope "" beforehand. Nil: a template with mcpServers is an
	// error. The Set's Close closes it, and so does a Load that fails.
	MCP MCP
	// Logger records the MCP servers' starts and failures and the tool
	// calls; nil: slog.Default().
	Logger *slog.Logger
}

// MCP runs MCP servers for Load; *mcp.Manager of package tools/mcp is
// one. It is an interface so that a program without MCP servers links
// none of the MCP SDK.
type MCP interface {
	// Names names the servers every agent may use (scope "").
	Names() []string
	// Add registers the servers of a template (scope: its agent ID).
	Add(scope string, servers mcpconfig.Servers) error
	// Start starts the servers under ctx and returns; WaitStarted waits
	// for their first start attempts.
	Start(ctx context.Context)
	WaitStarted(ctx context.Context) error
	// AgentTools returns the tools of an agent (builtin's and its
	// servers'), the nodes naming a tool a ready server does not list,
	// and the servers that are not running.
	AgentTools(builtin *tools.Registry, agentID string, nodes []string) (tb tools.Toolbox, missing, down mcpconfig.Problems)
	// Close ends the servers within ctx.
	Close(ctx context.Context) error
}

// Load loads the templates at path (a template file, or a directory of
// template.json and */template.json), checks them against opts.Tools and
// the MCP servers, and returns their agents, with the MCP servers running
// until the Set's Close. ctx bounds the servers' first start.
//
// Anything that would make an agent differ from its template is an error:
// a template that does not validate, a node naming a tool nobody provides
// or a tool its MCP server does not list. The warnings are what runs
// nonetheless (an unknown key, which is read as nothing; an MCP server
// that did not start, whose tools are offered once it runs): show them.
func Load(ctx context.Context, path string, opts Options) (*Set, orchestration.Diagnostics, error) {
	return load(ctx, opts, func(cfg template.Config) ([]template.Result, error) {
		return template.LoadPath(path, cfg)
	}, true)
}

// LoadFS is Load for the templates at root of fsys (an embed.FS, say). A
// relative path in a template's mcpServers resolves against the
// program's working directory, as there is no directory of the template
// to resolve it against.
func LoadFS(ctx context.Context, fsys fs.FS, root string, opts Options) (*Set, orchestration.Diagnostics, error) {
	return load(ctx, opts, func(cfg template.Config) ([]template.Result, error) {
		return template.LoadFS(fsys, root, cfg)
	}, false)
}

func load(ctx context.Context, opts Options, read func(template.Config) ([]template.Result, error), onDisk bool) (_ *Set, _ orchestration.Diagnostics, err error) {
	if opts.MCP != nil {
		defer func() {
			if err != nil {
				_ = opts.MCP.Close(context.WithoutCancel(ctx))
			}
		}()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	registry, err := tools.NewRegistryWithConfig(tools.Config{Logger: log}, opts.Tools...)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: Options.Tools: %w", err)
	}
	var shared []string
	if opts.MCP != nil {
		shared = opts.MCP.Names()
	}
	provided := append([]string{}, registry.Names()...) // not nil: checked
	results, err := read(template.Config{Provided: provided, Strict: true, MCPServers: shared})
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	var all orchestration.Diagnostics
	var loaded []*template.Loaded
	for _, r := range results {
		all = append(all, r.Diagnostics...)
		if r.Loaded != nil {
			loaded = append(loaded, r.Loaded)
		}
	}
	if err := all.Err(); err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	for _, a := range loaded {
		if len(a.Template.Agents) > 0 {
			// Agent tools need a runner of turns, which Load does not make.
			return nil, nil, fmt.Errorf("agent: %s: agents: Load does not run agent tools; make the Set with NewSet, giving Config.ToolsFor the tools of package tools/agenttool (agenttool.Direct runs their turns)", a.File)
		}
	}
	warnings := all.Warnings()

	toolsets, down, err := startMCP(ctx, opts.MCP, registry, loaded, onDisk)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	warnings = append(warnings, down...)
	cfg := Config{Store: opts.Store, Tools: registry, Models: Model(opts.Model), Logger: log}
	if cfg.Store == nil {
		cfg.Store = session.NewMemory(session.Config{})
	}
	if opts.Model == nil {
		cfg.Models = Model(offline.New(offline.Config{}))
	}
	if toolsets != nil {
		cfg.ToolsFor = func(a *template.Loaded) tools.Toolbox { return toolsets[a.ID()] }
	}
	set, err := NewSet(cfg, loaded)
	if err != nil {
		return nil, nil, err
	}
	set.mcp = opts.MCP
	return set, warnings, nil
}

// startMCP registers the templates' MCP servers with m, starts them and
// waits for their first start: each agent's tools, and the servers not
// running as warnings. A node naming a tool its ready server does not
// list is an error.
func startMCP(ctx context.Context, m MCP, registry *tools.Registry, loaded []*template.Loaded, onDisk bool) (map[string]tools.Toolbox, orchestration.Diagnostics, error) {
	if m == nil {
		for _, a := range loaded {
			if len(a.Template.MCPServers) > 0 {
				return nil, nil, fmt.Errorf("%s: mcpServers: no Options.MCP to run them (give mcp.NewManager(mcp.Config{}) of package tools/mcp)", a.File)
			}
		}
		return nil, nil, nil
	}
	fail := func(err error) (map[string]tools.Toolbox, orchestration.Diagnostics, error) { return nil, nil, err }
	for _, a := range loaded {
		servers := a.Template.MCPServers
		if len(servers) == 0 {
			continue
		}
		if onDisk && a.File != "" {
			// Absolute: a relative path joined to "." would lose its "./"
			// and name a command's package, not the template's directory.
			dir, err := filepath.Abs(filepath.Dir(a.File))
			if err != nil {
				return fail(err)
			}
			servers = servers.Resolve(dir)
		}
		if err := m.Add(a.ID(), servers); err != nil {
			return fail(fmt.Errorf("%s: %w", a.File, err))
		}
	}
	// The servers outlive ctx, which bounds their first start only.
	m.Start(context.WithoutCancel(ctx))
	if err := m.WaitStarted(ctx); err != nil {
		return fail(fmt.Errorf("waiting for the MCP servers to start: %w", err))
	}
	toolsets := map[string]tools.Toolbox{}
	var warnings orchestration.Diagnostics
	var missing []error
	for _, a := range loaded {
		tb, miss, down := m.AgentTools(registry, a.ID(), a.Template.Tools())
		toolsets[a.ID()] = tb
		for _, p := range miss {
			missing = append(missing, fmt.Errorf("%s: %s", a.File, p))
		}
		for _, p := range down {
			d := orchestration.Diagnostic{Severity: orchestration.SeverityWarning, File: a.File, Path: p.Path, Message: p.Message}
			if !slices.Contains(warnings, d) {
				warnings = append(warnings, d)
			}
		}
	}
	if len(missing) > 0 {
		return fail(errors.Join(missing...))
	}
	return toolsets, warnings, nil
}

// Close ends the MCP servers Load started, child processes included,
// within ctx; a Set made by NewSet has none. The agents must not run
// turns after it.
func (a *Set) Close(ctx context.Context) error {
	if a.mcp == nil {
		return nil
	}
	return a.mcp.Close(ctx)
}
