// Package proc lists processes as Linux's /proc shows them: what the MCP
// supervisor reads to find the processes descended from a server, and
// what the tests read to check that a process was started or ended.
package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is a live process.
type Process struct {
	PID, PPID, PGID int
	// Cmdline is the command line, its arguments joined by spaces; read
	// only when asked for.
	Cmdline string
}

// List lists the live processes, zombies left out (they are dead, and
// wait for their parent to reap them), with their command lines when
// cmdline is set. It fails only when /proc cannot be read (not Linux).
func List(cmdline bool) ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and
		// parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		p := Process{PID: pid}
		p.PPID, _ = strconv.Atoi(fields[1])
		p.PGID, _ = strconv.Atoi(fields[2])
		if cmdline {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			p.Cmdline = strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")
		}
		out = append(out, p)
	}
	return out, nil
}
