package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
)

// runValidate prints every error and warning of the templates under the
// given paths. Exit code 0 when there are no errors (warnings allowed), 1
// otherwise.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.Bool("q", false, "print only errors and warnings, no summary")
	mcpFile := fs.String("mcp-config", os.Getenv(mcpServersFileEnv), "MCP servers file (env "+mcpServersFileEnv+"); its servers and the templates' own are started to check them")
	noMCP := fs.Bool("no-mcp", false, "check the MCP configuration without starting any MCP server")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentdock validate [-q] PATH...\n\nPATH is a template file or a directory of */template.json.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var files, errs, warns int
	servers, err := readMCPServers(*mcpFile)
	if err != nil {
		fmt.Fprintf(stdout, "error: %s\n", err)
		errs++
	}
	cfg := template.Config{Provided: tools.BuiltinNames(), MCPServers: servers.Names()}
	var loaded []*template.Loaded
	for _, p := range fs.Args() {
		results, err := template.LoadPath(p, cfg)
		if err != nil {
			fmt.Fprintf(stdout, "error: %s\n", err)
			errs++
			continue
		}
		for _, r := range results {
			files++
			if r.Loaded != nil {
				loaded = append(loaded, r.Loaded)
			}
			for _, d := range r.Diagnostics {
				fmt.Fprintf(stdout, "%s: %s\n", d.Severity, d)
			}
			e, w := len(r.Diagnostics.Errors()), len(r.Diagnostics.Warnings())
			errs += e
			warns += w
			if !*quiet {
				status := "ok"
				if e > 0 {
					status = "INVALID"
				}
				fmt.Fprintf(stdout, "%s: %s (%d errors, %d warnings)\n", r.File, status, e, w)
			}
		}
	}
	// Agent tools name agents of the set serve would run: these templates
	// and the shipped ones they do not replace.
	for _, d := range template.CheckAgents(withShipped(loaded, cfg)) {
		if slices.ContainsFunc(loaded, func(l *template.Loaded) bool { return l.File == d.File }) {
			fmt.Fprintf(stdout, "%s: %s\n", d.Severity, d)
			errs++
		}
	}
	if !*noMCP {
		e, w := checkMCPServers(ctx, stdout, servers, loaded)
		errs += e
		warns += w
	}
	if !*quiet {
		fmt.Fprintf(stdout, "%d templates: %d errors, %d warnings\n", files, errs, warns)
	}
	if errs > 0 {
		return 1
	}
	return 0
}

// withShipped is loaded and the shipped templates whose agent ID none of
// loaded has, as serve runs them together.
func withShipped(loaded []*template.Loaded, cfg template.Config) []*template.Loaded {
	all := slices.Clone(loaded)
	shipped, err := template.LoadFS(templates.FS(), ".", cfg)
	if err != nil {
		return all
	}
	for _, r := range shipped {
		if r.Loaded != nil && !slices.ContainsFunc(all, func(l *template.Loaded) bool { return l.ID() == r.Loaded.ID() }) {
			all = append(all, r.Loaded)
		}
	}
	return all
}
