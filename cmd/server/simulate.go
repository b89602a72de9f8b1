package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentdock-go/agentdock/scenario"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// runSimulate plays scenarios against a store. Exit code 0 when every
// expectation holds, 1 on a mismatch, 2 when a scenario or its template
// cannot be read (or the store cannot be opened).
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", "memory://", "session store: memory:// or redis://[user:pass@]host:port/db")
	quiet := fs.Bool("q", false, "print only failing scenarios")
	mcpFile := fs.String("mcp-config", os.Getenv(mcpServersFileEnv), "MCP servers file (env "+mcpServersFileEnv+"): its servers' tools count as provided, as serve counts them")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentdock simulate [--store URL] [--mcp-config FILE] [-q] SCENARIO...")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	servers, err := readMCPServers(*mcpFile)
	if err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 2
	}
	// A template is loaded as serve loads it: a node naming a tool the
	// runtime does not provide is never offered, and a sequence position
	// only such tools fill is blocked.
	tcfg := template.Config{Provided: tools.BuiltinNames(), MCPServers: servers.Names()}
	ttl, err := session.TTLFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "simulate:", err)
		return 2
	}
	store, err := redisstore.Open(ctx, *storeURL, session.Config{TTL: ttl})
	if err != nil {
		fmt.Fprintf(stderr, "simulate: opening store %s: %v\n", *storeURL, err)
		return 2
	}
	defer store.Close()

	return runFiles(fs.Args(), *quiet, stdout, func(file string) (*scenario.Report, error) { return simulateOne(ctx, file, tcfg, store) })
}

func simulateOne(ctx context.Context, file string, tcfg template.Config, store session.Store) (*scenario.Report, error) {
	sc, err := scenario.Load(file)
	if err != nil {
		return nil, err
	}
	engine, err := sc.Engine(tcfg)
	if err != nil {
		return nil, err
	}
	return scenario.Run(ctx, sc, engine, store)
}
