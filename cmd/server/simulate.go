package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/agentdock-go/agentdock/scenario"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
)

// runSimulate plays scenarios against a store. Exit code 0 when every
// expectation holds, 1 on a mismatch, 2 when a scenario or its template
// cannot be read (or the store cannot be opened).
func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", "memory://", "session store: memory:// or redis://[user:pass@]host:port/db")
	quiet := fs.Bool("q", false, "print only failing scenarios")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agentdock simulate [--store URL] [-q] SCENARIO...")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
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

	return runFiles(fs.Args(), *quiet, stdout, func(file string) (*scenario.Report, error) { return simulateOne(ctx, file, store) })
}

func simulateOne(ctx context.Context, file string, store session.Store) (*scenario.Report, error) {
	sc, err := scenario.Load(file)
	if err != nil {
		return nil, err
	}
	engine, err := sc.Engine()
	if err != nil {
		return nil, err
	}
	return scenario.Run(ctx, sc, engine, store)
}
