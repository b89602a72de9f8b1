// Command tracewait reads a Go execution trace of a server (the .trace.pprof
// files the load harness saves with -profile) and reports how long its
// goroutines waited for a core once they could run, by kind: the function
// each goroutine was started with.
//
// A CPU profile shows where a server spends CPU; the time a turn's first
// token waits is mostly not spent at all. A goroutine woken by the network
// or a channel is runnable, and runs once a P takes it from a run queue:
// on a loaded machine that wait, repeated at every hand-over on a token's
// way, is most of the added time to first token. The report gives each
// kind's wake-ups (runnable to running) with the wait's mean and
// percentiles, and the goroutines the trace saw created, by kind, so that
// two servers traced under the same load can be compared per turn.
//
// With -paths it reports instead where a relaying server's model requests
// and first tokens wait on their way, hop by hop (paths.go).
//
// Usage:
//
//	tracewait [-min n] file.trace.pprof...
//	tracewait -paths [-gap d] [-top n] file.trace.pprof...
//
// Goroutines that existed before the trace started have no known start and
// are reported as "(before the trace)".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	minWakes := flag.Int("min", 50, "leave out kinds with fewer wake-ups than this")
	showPaths := flag.Bool("paths", false, "report the wake-up paths of model requests and client writes instead")
	gap := flag.Duration("gap", 60*time.Millisecond, "with -paths: a client write after this long without one carries a turn's first token")
	top := flag.Int("top", 3, "with -paths: the most frequent paths of each kind to print")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: tracewait [-min n] file.trace.pprof...\n       tracewait -paths [-gap d] [-top n] file.trace.pprof...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		if *showPaths {
			p, err := readPaths(path, *gap)
			if err != nil {
				fmt.Fprintln(os.Stderr, "tracewait:", err)
				os.Exit(1)
			}
			fmt.Printf("== %s\n", path)
			p.print(os.Stdout, *top)
			continue
		}
		r, err := read(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracewait:", err)
			os.Exit(1)
		}
		fmt.Printf("== %s (%.2f s traced)\n", path, r.span.Seconds())
		r.print(os.Stdout, *minWakes)
	}
}

// unknownKind names the goroutines that were there before the trace began.
const unknownKind = "(before the trace)"

// report is what one trace says.
type report struct {
	span    time.Duration
	waits   map[string][]time.Duration // by kind
	created map[string]int             // by kind
}

func read(path string) (*report, error) {
	rep := &report{waits: map[string][]time.Duration{}, created: map[string]int{}}
	kind := map[trace.GoID]string{}
	readied := map[trace.GoID]trace.Time{}
	span, err := eachGoroutineMove(path, func(ev trace.Event, st trace.StateTransition) {
		id := st.Resource.Goroutine()
		from, to := st.Goroutine()
		if from == trace.GoNotExist {
			// The transition's stack is the new goroutine's: its start.
			k := startOf(st.Stack)
			kind[id] = k
			rep.created[k]++
		}
		switch {
		case to == trace.GoRunnable:
			readied[id] = ev.Time()
		case from == trace.GoRunnable && to == trace.GoRunning:
			t0, ok := readied[id]
			if !ok {
				return
			}
			delete(readied, id)
			k, ok := kind[id]
			if !ok {
				k = unknownKind
			}
			rep.waits[k] = append(rep.waits[k], ev.Time().Sub(t0))
		case to == trace.GoNotExist:
			delete(kind, id)
			delete(readied, id)
		}
	})
	if err != nil {
		return nil, err
	}
	rep.span = span
	return rep, nil
}

// eachGoroutineMove calls fn with every goroutine state transition of the
// trace in path, in order, and returns the time the trace spans.
func eachGoroutineMove(path string, fn func(trace.Event, trace.StateTransition)) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	tr, err := trace.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	var first, last trace.Time
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			return last.Sub(first), nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		if first == 0 {
			first = ev.Time()
		}
		last = ev.Time()
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		if st := ev.StateTransition(); st.Resource.Kind == trace.ResourceGoroutine {
			fn(ev, st)
		}
	}
}

// startOf is the function a goroutine was started with: the outermost
// frame of its first stack.
func startOf(st trace.Stack) string {
	k := "(no stack)"
	for f := range st.Frames() {
		k = f.Func
	}
	return k
}

func (r *report) print(w io.Writer, minCount int) {
	var all []time.Duration
	for _, ws := range r.waits {
		all = append(all, ws...)
	}
	fmt.Fprintf(w, "%-60s %9s %9s %9s %9s %9s %11s\n", "wake-ups, by the goroutine's start", "count", "mean µs", "p50 µs", "p90 µs", "p99 µs", "total ms")
	line := func(name string, ws []time.Duration) {
		if len(ws) == 0 {
			return
		}
		slices.Sort(ws)
		sum := total(ws)
		q := func(p float64) float64 { return us(quantile(ws, p)) }
		fmt.Fprintf(w, "%-60s %9d %9.1f %9.1f %9.1f %9.1f %11.1f\n", short(name), len(ws), us(sum)/float64(len(ws)), q(.5), q(.9), q(.99), us(sum)/1e3)
	}
	line("all", all)
	for _, k := range mostFirst(r.waits, func(ws []time.Duration) int { return len(ws) }, minCount) {
		line(k, r.waits[k])
	}
	fmt.Fprintf(w, "%-60s %9s\n", "goroutines created, by start", "count")
	for _, k := range mostFirst(r.created, func(n int) int { return n }, minCount) {
		fmt.Fprintf(w, "%-60s %9d\n", short(k), r.created[k])
	}
}

// mostFirst returns m's keys whose count is at least minCount, the
// largest count first.
func mostFirst[V any](m map[string]V, count func(V) int, minCount int) []string {
	var keys []string
	for k, v := range m {
		if count(v) >= minCount {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return count(m[b]) - count(m[a]) })
	return keys
}

// quantile is the p quantile (0 to 1) of sorted, which is not empty.
func quantile(sorted []time.Duration, p float64) time.Duration {
	return sorted[int(p*float64(len(sorted)-1))]
}

func total(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// short drops a function name's import path but its last element.
func short(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}
