package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// DefaultMCPStartWait is Options.MCPStartWait's default.
const DefaultMCPStartWait = 15 * time.Second

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
	// servers'), given its template's nodes, with the errors (nodes that
	// misspell a tool their ready server lists) and the warnings (nodes
	// naming a tool their ready server does not list, servers not
	// running) their first start shows; a problem's path is
	// "nodes[i]", i a position in nodes, or "mcpServers.<name>".
	AgentTools(builtin *tools.Registry, agentID string, nodes []string) (tb tools.Toolbox, errs, warnings mcpconfig.Problems)
	// Close ends the servers within ctx.
	Close(ctx context.Context) error
}

// Load loads the templates at path (a template file, or a directory of
// template.json and */template.json; with Options.Shipped, those first),
// checks them against the tools of opts (the built-in tools, opts.Tools,
// the agents entries and the MCP servers), and returns their agents, with
// the MCP servers running until the Set's Close. ctx bounds the servers'
// first start.
//
// What would make an agent differ from its template by a slip is an
// error: a template that does not validate, a node that misspells a tool
// (one an MCP server lists included), an agents entry that asks an agent
// not loaded. The warnings are what runs nonetheless: show them. They
// are an unknown key, which is read as nothing; a node naming a tool that
// nobody provides and that resembles none, which is never offered (a tool
// this runtime lacks, as AgentDock's templates name); an MCP server that
// did not start, whose tools are offered once it runs. A Go tool of
// opts.Tools that no template names is logged as a warning.
//
// This is how `agentdock serve` loads its agents: the shipped templates
// (Options.Shipped) and TEMPLATES_DIR's, leaving out those with errors
// (Options.SkipInvalid).
func Load(ctx context.Context, path string, opts Options) (*Set, orchestration.Diagnostics, error) {
	var sources []source
	if opts.Shipped != nil {
		sources = append(sources, source{read: func(cfg template.Config) ([]template.Result, error) {
			return template.LoadFS(opts.Shipped, ".", cfg)
		}})
	}
	if path != "" || opts.Shipped == nil {
		sources = append(sources, source{onDisk: true, read: func(cfg template.Config) ([]template.Result, error) {
			return template.LoadPath(path, cfg)
		}})
	}
	return load(ctx, opts, sources)
}

// LoadFS is Load for the templates at root of fsys (an embed.FS, say). A
// relative path in a template's mcpServers resolves against the
// program's working directory, as there is no directory of the template
// to resolve it against.
func LoadFS(ctx context.Context, fsys fs.FS, root string, opts Options) (*Set, orchestration.Diagnostics, error) {
	var sources []source
	if opts.Shipped != nil {
		sources = append(sources, source{read: func(cfg template.Config) ([]template.Result, error) {
			return template.LoadFS(opts.Shipped, ".", cfg)
		}})
	}
	sources = append(sources, source{read: func(cfg template.Config) ([]template.Result, error) {
		return template.LoadFS(fsys, root, cfg)
	}})
	return load(ctx, opts, sources)
}

// source is where Load reads templates; a later source's template
// replaces an earlier one's of the same agent ID.
type source struct {
	read func(template.Config) ([]template.Result, error)
	// onDisk: the templates' files are on disk, and their MCP servers'
	// relative paths resolve against their directories.
	onDisk bool
}

// loading is one Load under way: the templates kept so far and what was
// found.
type loading struct {
	opts   Options
	loaded []*template.Loaded
	onDisk map[*template.Loaded]bool
	diags  orchestration.Diagnostics
}

func load(ctx context.Context, opts Options, sources []source) (_ *Set, _ orchestration.Diagnostics, err error) {
	if opts.MCP != nil {
		defer func() {
			if err != nil {
				_ = opts.MCP.Close(context.WithoutCancel(ctx))
			}
		}()
	}
	if err := opts.check(); err != nil {
		return nil, nil, err
	}
	l := &loading{opts: opts, onDisk: map[*template.Loaded]bool{}}
	var registry *tools.Registry
	var provided []string // nil: nodes are not checked (ToolsFor)
	if opts.ToolsFor == nil {
		if registry, err = opts.registry(); err != nil {
			return nil, nil, err
		}
		provided = append([]string{}, registry.Names()...)
	}
	var shared []string
	if opts.MCP != nil {
		shared = opts.MCP.Names()
	}
	if err := l.read(sources, template.Config{Provided: provided, MCPServers: shared}); err != nil {
		return nil, nil, err
	}
	if err := l.checkAgents(); err != nil {
		return nil, nil, err
	}
	var mcpTools map[string]tools.Toolbox
	if opts.ToolsFor == nil {
		if mcpTools, err = l.startMCP(ctx, registry); err != nil {
			return nil, nil, err
		}
		// The agent tools' own configuration (a remote agent's URL from
		// the environment) is checked before the Set is made.
		cfg := agentToolsConfig(opts, nil, l.loaded)
		if err := l.drop(func(t *template.Loaded) (orchestration.Diagnostics, bool) {
			if len(t.Template.Agents) == 0 {
				return nil, false
			}
			_, err := agenttool.New(cfg, t.Template)
			if err == nil {
				return nil, false
			}
			return orchestration.Diagnostics{{Severity: orchestration.SeverityError, File: t.File, Message: err.Error()}}, true
		}); err != nil {
			return nil, nil, err
		}
		if err := l.checkAgents(); err != nil {
			return nil, nil, err
		}
	}
	if len(l.loaded) == 0 {
		return nil, nil, errors.New("agent: no template loaded")
	}
	set, err := assemble(opts, l.loaded, registry, mcpTools)
	if err != nil {
		return nil, nil, err
	}
	set.mcp = opts.MCP
	return set, l.diags, nil
}

// read reads every source with cfg, keeping each template that loads: one
// of a later source replaces the template of an earlier one with the same
// agent ID.
func (l *loading) read(sources []source, cfg template.Config) error {
	for _, src := range sources {
		results, err := src.read(cfg)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		first := len(l.loaded) // this source's first template
		for _, r := range results {
			l.diags = append(l.diags, r.Diagnostics...)
			if r.Loaded == nil {
				continue
			}
			// template.LoadPath and LoadFS report two templates of one
			// source with the same ID.
			if at := slices.IndexFunc(l.loaded[:first], func(t *template.Loaded) bool { return t.ID() == r.Loaded.ID() }); at >= 0 {
				l.opts.Logger.Info("template replaces a shipped one", "agent", r.Loaded.ID(), "file", r.File, "replaced", l.loaded[at].File)
				delete(l.onDisk, l.loaded[at])
				l.loaded[at] = r.Loaded
			} else {
				l.loaded = append(l.loaded, r.Loaded)
			}
			l.onDisk[r.Loaded] = src.onDisk
		}
	}
	if err := l.diags.Err(); err != nil && !l.opts.SkipInvalid {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// drop leaves out the templates bad finds at fault, adding its
// diagnostics: under SkipInvalid, or it fails with them.
func (l *loading) drop(bad func(*template.Loaded) (orchestration.Diagnostics, bool)) error {
	var ds orchestration.Diagnostics
	l.loaded = slices.DeleteFunc(l.loaded, func(t *template.Loaded) bool {
		d, out := bad(t)
		ds = append(ds, d...)
		return out
	})
	l.diags = append(l.diags, ds...)
	if err := ds.Err(); err != nil && !l.opts.SkipInvalid {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// checkAgents leaves out, until none is left to, the templates whose
// agent tools ask an agent that is not loaded or close a circle
// (template.CheckAgents): a template that asks a left-out one goes in
// turn.
func (l *loading) checkAgents() error {
	for {
		ds := template.CheckAgents(l.loaded)
		if len(ds) == 0 {
			return nil
		}
		files := map[string]orchestration.Diagnostics{}
		for _, d := range ds {
			files[d.File] = append(files[d.File], d)
		}
		if err := l.drop(func(t *template.Loaded) (orchestration.Diagnostics, bool) {
			d, ok := files[t.File]
			return d, ok
		}); err != nil {
			return err
		}
	}
}

// startMCP registers the templates' MCP servers with the MCP runtime,
// starts them and waits for their first start, and returns each agent's
// tools: a node misspelling a tool its ready server lists leaves its
// template out (or fails), and the rest of what the start shows is
// warnings.
func (l *loading) startMCP(ctx context.Context, registry *tools.Registry) (map[string]tools.Toolbox, error) {
	m := l.opts.MCP
	if m == nil {
		return nil, l.drop(func(t *template.Loaded) (orchestration.Diagnostics, bool) {
			if len(t.Template.MCPServers) == 0 {
				return nil, false
			}
			return orchestration.Diagnostics{{Severity: orchestration.SeverityError, File: t.File, Path: "mcpServers",
				Message: "no Options.MCP to run them (give mcp.NewManager(mcp.Config{}) of package tools/mcp)"}}, true
		})
	}
	for _, t := range l.loaded {
		servers := t.Template.MCPServers
		if len(servers) == 0 {
			continue
		}
		if l.onDisk[t] && t.File != "" {
			// Absolute: a relative path joined to "." would lose its "./"
			// and name a command's package, not the template's directory.
			dir, err := filepath.Abs(filepath.Dir(t.File))
			if err != nil {
				return nil, err
			}
			servers = servers.Resolve(dir)
		}
		if err := m.Add(t.ID(), servers); err != nil {
			return nil, fmt.Errorf("agent: %s: %w", t.File, err)
		}
	}
	// The servers outlive ctx, which bounds their first start only; a
	// server still starting after MCPStartWait is a warning.
	m.Start(context.WithoutCancel(ctx))
	wait := l.opts.MCPStartWait
	if wait <= 0 {
		wait = DefaultMCPStartWait
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := m.WaitStarted(wctx); err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("agent: waiting for the MCP servers to start: %w", err)
	}
	toolsets := map[string]tools.Toolbox{}
	err := l.drop(func(t *template.Loaded) (orchestration.Diagnostics, bool) {
		tb, errs, warnings := m.AgentTools(registry, t.ID(), t.Template.Nodes)
		toolsets[t.ID()] = tb
		for _, p := range warnings {
			d := orchestration.Diagnostic{Severity: orchestration.SeverityWarning, File: t.File, Path: p.Path, Message: p.Message}
			if !slices.Contains(l.diags, d) {
				l.diags = append(l.diags, d)
			}
		}
		var ds orchestration.Diagnostics
		for _, p := range errs {
			ds = append(ds, orchestration.Diagnostic{Severity: orchestration.SeverityError, File: t.File, Path: p.Path, Message: p.Message})
		}
		return ds, len(ds) > 0
	})
	maps.DeleteFunc(toolsets, func(id string, _ tools.Toolbox) bool {
		return !slices.ContainsFunc(l.loaded, func(t *template.Loaded) bool { return t.ID() == id })
	})
	return toolsets, err
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
