package loadtest

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// A RunSet is the summaries of repeated runs of one binary (make
// bench-median's runs), under a label such as "before" or "after".
type RunSet struct {
	Label string
	Runs  []Summary
}

// A Goal is one of the relay-floor goals: a figure of the runtime with one
// store against the same figure of a floor measured in the same run.
type Goal struct {
	// Name says what is judged, as the goals' table prints it.
	Name string
	// Store is the runtime's session store ("memory" or "redis"); Floor
	// the server it is compared with (StoreRelay or StoreRelayRedis).
	Store, Floor string
	// Measure is the comparison: MeasureCPU and MeasureMemory are ratios
	// (the runtime's figure over the floor's), MeasureTTFT a difference in
	// milliseconds (Ratios.AddedTTFTP50MS).
	Measure Measure
	// Limit is the largest value that meets the goal; 0 for a row shown
	// for information only.
	Limit float64
}

// Measure names the figure a Goal compares.
type Measure int

const (
	// MeasureCPU is the CPU per paced turn, redis-server's included.
	MeasureCPU Measure = iota
	// MeasureMemory is the RSS per open stream.
	MeasureMemory
	// MeasureTTFT is the time to first token net of the model's wait,
	// at the median.
	MeasureTTFT
	// MeasureSettled is the heap and stacks in use per open stream once
	// collected (harness flag -settled).
	MeasureSettled
)

// Goals are the relay floors, regression guards each judged as the
// median of the runs: the memory store against the relay, the Redis store
// against relay-redis, the floor that keeps its sessions in Redis too
// (CPU with redis-server's included). The rows with no limit show the other floor for comparison.
var Goals = []Goal{
	{Name: "CPU per paced turn, memory store", Store: "memory", Floor: StoreRelay, Measure: MeasureCPU, Limit: 1.6},
	{Name: "CPU per paced turn, Redis store (redis-server included)", Store: "redis", Floor: StoreRelayRedis, Measure: MeasureCPU, Limit: 2.25},
	{Name: "CPU per paced turn, Redis store (redis-server included)", Store: "redis", Floor: StoreRelay, Measure: MeasureCPU},
	{Name: "RSS per open stream, memory store", Store: "memory", Floor: StoreRelay, Measure: MeasureMemory, Limit: 1.6},
	{Name: "RSS per open stream, Redis store", Store: "redis", Floor: StoreRelayRedis, Measure: MeasureMemory, Limit: 1.8},
	{Name: "RSS per open stream, Redis store", Store: "redis", Floor: StoreRelay, Measure: MeasureMemory},
	{Name: "heap and stacks per open stream once collected, memory store", Store: "memory", Floor: StoreRelay, Measure: MeasureSettled},
	{Name: "heap and stacks per open stream once collected, Redis store", Store: "redis", Floor: StoreRelayRedis, Measure: MeasureSettled},
	{Name: "added TTFT p50, memory store", Store: "memory", Floor: StoreRelay, Measure: MeasureTTFT, Limit: 1},
	{Name: "added TTFT p50, Redis store", Store: "redis", Floor: StoreRelayRedis, Measure: MeasureTTFT, Limit: 2},
	{Name: "added TTFT p50, Redis store", Store: "redis", Floor: StoreRelay, Measure: MeasureTTFT},
}

// setFigures puts f as server's figures (a store or a floor) in s.
func (s *Summary) setFigures(server string, f *Figures) {
	switch server {
	case StoreRelay:
		s.Relay = f
	case StoreRelayRedis:
		s.RelayRedis = f
	default:
		s.Runtime[server] = f
	}
}

// figures returns the figures of server (a store or a floor) in s, nil
// when the run did not measure it.
func (s Summary) figures(server string) *Figures {
	switch server {
	case StoreRelay:
		return s.Relay
	case StoreRelayRedis:
		return s.RelayRedis
	}
	return s.Runtime[server]
}

// Value is the goal's figure in one run, false when the run did not
// measure both sides. The ratio is taken within the run: runs on a shared
// machine move together, and their ratios move less than their figures.
func (g Goal) Value(s Summary) (float64, bool) {
	floor, rt := s.figures(g.Floor), s.figures(g.Store)
	if floor == nil || rt == nil {
		return 0, false
	}
	r := ratios(floor, rt)
	var v *float64
	switch g.Measure {
	case MeasureCPU:
		v = r.CPUPerTurn
	case MeasureMemory:
		v = r.MemoryPerStream
	case MeasureTTFT:
		v = r.AddedTTFTP50MS
	case MeasureSettled:
		v = r.SettledPerStream
	}
	if v == nil {
		return 0, false
	}
	return *v, true
}

// Spread is the median of a figure over runs, with its smallest and
// largest value.
type Spread struct {
	Median, Min, Max float64
	// N is the runs that measured the figure.
	N int
}

// spreadOf is the Spread of xs (N 0 when xs is empty).
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Sorted(slices.Values(xs))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// GoalSpread is g's figure over the runs of set, and how many of them met
// it (for a goal with a limit).
func (set RunSet) GoalSpread(g Goal) (sp Spread, met int) {
	var xs []float64
	for _, s := range set.Runs {
		if v, ok := g.Value(s); ok {
			xs = append(xs, v)
			if g.Limit != 0 && v <= g.Limit {
				met++
			}
		}
	}
	return spreadOf(xs), met
}

// servers are the columns of the figures' table, in the order the harness
// measures them.
var servers = []string{StoreRelay, StoreRelayRedis, "memory", "redis"}

// A figureRow is one row of the figures' table: its name, the decimals it
// is printed with, and how to read it from a server's figures.
type figureRow struct {
	name     string
	decimals int
	get      func(*Figures) *float64
}

func val(x float64) *float64 { return &x }

var figureRows = []figureRow{
	{"CPU per paced turn (ms; redis-server's included)", 2, func(f *Figures) *float64 { return nonZero(f.Turns, f.CPUPerTurnMS) }},
	{"server CPU per paced turn (ms)", 2, func(f *Figures) *float64 { return nonZero(f.Turns, f.ServerCPUPerTurnMS) }},
	{"TTFT p50 net of the model's wait (ms)", 2, func(f *Figures) *float64 { return nonZero(f.Turns, f.LatencyP50MS) }},
	{"TTFT p99 net of the model's wait (ms)", 2, func(f *Figures) *float64 { return nonZero(f.Turns, f.LatencyP99MS) }},
	{"paced turns per second", 1, func(f *Figures) *float64 { return nonZero(f.Turns, f.TurnsPerSecond) }},
	{"RSS per open stream (KiB)", 1, func(f *Figures) *float64 { return f.MemoryPerStreamKiB }},
	{"heap in use per open stream (KiB)", 1, func(f *Figures) *float64 { return f.HeapPerStreamKiB }},
	{"stacks per open stream (KiB)", 1, func(f *Figures) *float64 { return f.StackPerStreamKiB }},
	{"heap and stacks per open stream once collected (KiB)", 1, func(f *Figures) *float64 { return f.SettledPerStreamKiB }},
	{"goroutines per open stream", 2, func(f *Figures) *float64 { return f.GoroutinesPerStream }},
	{"instant turns per second", 1, func(f *Figures) *float64 { return f.InstantTurnsPerSecond }},
}

// nonZero is x when the phase it comes from completed turns.
func nonZero(turns int, x float64) *float64 {
	if turns == 0 {
		return nil
	}
	return val(x)
}

// WriteMedians writes, for each set, the median and spread of every
// figure per server, then one table of the goals with a column per set:
// the tables of BENCHMARKS.md, in Markdown.
func WriteMedians(w io.Writer, sets []RunSet) error {
	var b strings.Builder
	for _, set := range sets {
		writeFigures(&b, set)
	}
	writeGoals(&b, sets)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFigures(b *strings.Builder, set RunSet) {
	streams, idle, errs := 0, 0, map[string]int{}
	for _, s := range set.Runs {
		for _, srv := range servers {
			if f := s.figures(srv); f != nil {
				streams, idle = cmp.Or(streams, f.Streams), cmp.Or(idle, f.IdleStreams)
				errs[srv] += f.Errors
			}
		}
	}
	fmt.Fprintf(b, "#### %s: median of %s (smallest..largest)\n\n", set.Label, runs(len(set.Runs)))
	fmt.Fprintf(b, "Paced phase at %d streams; memory with %d idle streams open.\n\n", streams, idle)
	b.WriteString("| figure | relay | relay-redis | memory | redis |\n|---|---|---|---|---|\n")
	for _, row := range figureRows {
		cells, seen := "", false
		for _, srv := range servers {
			var xs []float64
			for _, s := range set.Runs {
				if f := s.figures(srv); f != nil {
					if v := row.get(f); v != nil {
						xs = append(xs, *v)
					}
				}
			}
			seen = seen || len(xs) > 0
			cells += " | " + formatSpread(spreadOf(xs), row.decimals, "")
		}
		if seen { // a row no run measured (a phase skipped) is left out
			b.WriteString("| " + row.name + cells + " |\n")
		}
	}
	b.WriteString("| errors (all runs) |")
	for _, srv := range servers {
		fmt.Fprintf(b, " %d |", errs[srv])
	}
	b.WriteString("\n\n")
}

func writeGoals(b *strings.Builder, sets []RunSet) {
	b.WriteString("#### Against the goals: median of the runs (smallest..largest), runs that met the goal\n\n| goal | floor | limit |")
	for _, set := range sets {
		b.WriteString(" " + set.Label + " |")
	}
	b.WriteString("\n|---|---|---|")
	for range sets {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, g := range Goals {
		if g.Limit == 0 && !measured(sets, g) {
			continue // a comparison no run measured
		}
		unit, decimals, limit := "x", 2, "-"
		if g.Measure == MeasureTTFT {
			unit = " ms"
		}
		if g.Limit != 0 {
			limit = fmt.Sprintf("<= %g%s", g.Limit, unit)
		}
		fmt.Fprintf(b, "| %s | %s | %s |", g.Name, g.Floor, limit)
		for _, set := range sets {
			sp, met := set.GoalSpread(g)
			cell := formatSpread(sp, decimals, unit)
			if sp.N > 0 && g.Limit != 0 {
				verdict := "met"
				if sp.Median > g.Limit {
					verdict = "**missed**"
				}
				cell += fmt.Sprintf(": %s, %d of %s", verdict, met, runs(sp.N))
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// measured reports whether a run of sets has g's figure.
func measured(sets []RunSet, g Goal) bool {
	for _, set := range sets {
		if sp, _ := set.GoalSpread(g); sp.N > 0 {
			return true
		}
	}
	return false
}

// runs is "1 run" or "n runs".
func runs(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// formatSpread prints a Spread as "median (min..max)", a lone run's
// figure alone, and "-" when no run measured it. An added time keeps its
// sign.
func formatSpread(sp Spread, decimals int, unit string) string {
	if sp.N == 0 {
		return "-"
	}
	verb := fmt.Sprintf("%%.%df", decimals)
	if unit == " ms" {
		verb = fmt.Sprintf("%%+.%df", decimals)
	}
	one := func(x float64) string { return fmt.Sprintf(verb, x) }
	if sp.N == 1 {
		return one(sp.Median) + unit
	}
	return fmt.Sprintf("%s%s (%s..%s)", one(sp.Median), unit, one(sp.Min), one(sp.Max))
}
