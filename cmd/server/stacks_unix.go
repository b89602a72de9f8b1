//go:build unix

package main

import (
	"os"
	"strings"
	"syscall"
)

// smallStacksEnv is the GODEBUG setting serve runs with: goroutines start
// with the runtime's smallest stack (2 KiB) and grow as they need.
//
// Why: by default (adaptivestackstart=1) every new goroutine starts with a
// stack the size of the average stack in use at the last GC. A server
// whose turns wait in deep calls (the handler under gin's middleware, the
// turn in the model's stream) raises that average to 4 or 8 KiB, and then
// every goroutine a waiting stream holds starts that large, even those
// that never use 1 KiB (net/http's background reader, the model
// connection's read and write loops, r3labs' per-session goroutines). With
// 1,000 streams held open, this setting took the stacks per stream from
// 35.2 to 30.7 KiB and RSS per stream from 98.7 to 92.7 KiB with Redis
// (BENCHMARKS.md, eighth round). What it costs is a stack copy when a
// goroutine outgrows 2 KiB. A turn's goroutine, which always needs 8 KiB,
// takes them at once (server.reserveTurnStack): grown step by step, its
// copies were 2 % of the server's CPU at 200 streams (fourteenth round).
//
// The runtime reads the setting only at start-up (it is not one that
// //go:debug accepts), so serve sets it by executing itself again.
const smallStacksEnv = "adaptivestackstart=0"

// withSmallStacks re-executes the process with smallStacksEnv added to
// GODEBUG, unless GODEBUG already says adaptivestackstart (an operator's
// choice, or this process after the re-exec). It returns only when it
// did not re-execute: the setting is an optimisation, and a process that
// cannot re-execute itself runs as it is.
func withSmallStacks() {
	cur, set := os.LookupEnv("GODEBUG")
	if set && strings.Contains(cur, "adaptivestackstart=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	v := smallStacksEnv
	if cur != "" {
		v = cur + "," + smallStacksEnv
	}
	// Both the runtime and os.Getenv read a variable's first entry.
	env := append([]string{"GODEBUG=" + v}, withoutVar(os.Environ(), "GODEBUG")...)
	_ = syscall.Exec(exe, os.Args, env)
}

// withoutVar returns env without its entries for the variable name.
func withoutVar(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
