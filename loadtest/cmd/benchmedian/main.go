// Command benchmedian reads the JSON summaries of repeated load harness
// runs (make bench-median writes one per run) and prints, in Markdown
// ready for BENCHMARKS.md, the median and spread of every figure per
// server and of every goal's ratio to its floor, with a column per set of
// runs (for example before and after a change).
//
// Usage:
//
//	benchmedian [LABEL=]PATH...
//
// Each PATH is a set of runs: a directory (its *.json files), one JSON
// file, or a pattern of them (quoted: 'dir/load-*.json'). LABEL names the
// set in the tables; without it the set is named after PATH.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentdock-go/agentdock/loadtest"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchmedian:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		return errors.New("usage: benchmedian [LABEL=]PATH... (PATH: a directory of the harness's -json files, one file, or a pattern of them)")
	}
	var sets []loadtest.RunSet
	for _, arg := range args {
		set, err := readSet(arg)
		if err != nil {
			return err
		}
		sets = append(sets, set)
	}
	return loadtest.WriteMedians(stdout, sets)
}

// readSet reads the runs of one [LABEL=]PATH argument.
func readSet(arg string) (loadtest.RunSet, error) {
	label, path, ok := strings.Cut(arg, "=")
	if !ok {
		label, path = filepath.Base(filepath.Clean(arg)), arg
	}
	pattern := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		pattern = filepath.Join(path, "*.json")
	} else if err != nil && !strings.ContainsAny(path, "*?[") {
		return loadtest.RunSet{}, err
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		return loadtest.RunSet{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(files) == 0 {
		return loadtest.RunSet{}, fmt.Errorf("%s: no such files (want the harness's -json output)", pattern)
	}
	set := loadtest.RunSet{Label: label}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return loadtest.RunSet{}, err
		}
		var s loadtest.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			return loadtest.RunSet{}, fmt.Errorf("%s: not a harness summary: %w", file, err)
		}
		if s.Relay == nil && s.RelayRedis == nil && len(s.Runtime) == 0 {
			return loadtest.RunSet{}, fmt.Errorf("%s: no figures in it: want the JSON the harness writes with -json", file)
		}
		set.Runs = append(set.Runs, s)
	}
	return set, nil
}
