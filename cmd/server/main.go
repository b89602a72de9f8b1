// Command agentdock is the agent runtime: one binary that serves agents over
// HTTP (serve, the default), checks templates (validate), plays orchestration
// scenarios (simulate) and template transcripts (test), and runs a mock model
// server for load tests and for trying templates by hand (mockllm).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. run returns the process exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"serve", "serve the agents, the API and the web page (the default)", runServe},
		{"validate", "check templates: validate PATH... (files or directories)", runValidate},
		{"simulate", "play orchestration scenarios: simulate [--store URL] SCENARIO...", runSimulate},
		{"test", "play template transcripts through the turn loop with scripted model answers: test PATH...", runTest},
		{"mockllm", "serve a mock OpenAI/Anthropic-compatible model for load tests, or scripted answers: mockllm [--addr ADDR] [--ttft D] [--inter-token D] [--chunks N | --script FILE]", mockllmCommand},
		{"mcp", "list the MCP servers and their tools (mcp list [--config FILE] [--templates DIR]), or serve the agents as MCP tools over stdio (mcp serve)", runMCP},
		{"healthcheck", "ask a running server's /healthz (for container health checks)", runHealthcheck},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// isHelp reports whether arg asks for the list of commands.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// servesByDefault reports whether args name no command (none, or flags
// first): serve runs with all of them.
func servesByDefault(args []string) bool {
	return len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-'
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		usage(stdout)
		return 0
	}
	if servesByDefault(args) {
		return runServe(ctx, args, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "agentdock: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// parseFlags parses a command's flags. -h, -help and --help print the
// command's usage and end it with exit code 0, a bad flag with 2: ok is
// false then, and code is the exit code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	}
	return 2, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: agentdock [command] [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nWithout a command, or with flags first, agentdock serves (serve's flags apply).")
	fmt.Fprintln(w, "Run 'agentdock COMMAND -h' for a command's flags.")
}
