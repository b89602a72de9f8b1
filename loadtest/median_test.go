package loadtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// run is one run's summary: each server's CPU per paced turn, TTFT p50 net
// of the model's wait (both at 50 streams) and RSS per open stream (200
// idle streams), for relay, relay-redis, memory and redis in that order.
func run(cpu, lat, rss [4]float64) Summary {
	s := Summary{Runtime: map[string]*Figures{}}
	for i, srv := range servers {
		s.setFigures(srv, &Figures{Streams: 50, Turns: 100, CPUPerTurnMS: cpu[i], ServerCPUPerTurnMS: cpu[i], LatencyP50MS: lat[i],
			IdleStreams: 200, MemoryPerStreamKiB: f(rss[i])})
	}
	return s
}

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{2}, Spread{Median: 2, Min: 2, Max: 2, N: 1}},
		{[]float64{3, 1, 2}, Spread{Median: 2, Min: 1, Max: 3, N: 3}},
		{[]float64{4, 1, 3, 2}, Spread{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{[]float64{1.4, 1.6, 1.3, 1.5, 1.45}, Spread{Median: 1.45, Min: 1.3, Max: 1.6, N: 5}},
	} {
		if got := spreadOf(tc.in); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// TestGoalValue: each goal compares its store with its own floor, within
// one run, and says when the run did not measure one of them.
func TestGoalValue(t *testing.T) {
	s := run([4]float64{2, 2.5, 3, 5}, [4]float64{1, 1.5, 1.8, 3}, [4]float64{60, 62, 90, 100})
	noRedisRelay := run([4]float64{2, 2.5, 3, 5}, [4]float64{1, 1.5, 1.8, 3}, [4]float64{60, 62, 90, 100})
	noRedisRelay.RelayRedis = nil
	noIdle := run([4]float64{2, 2.5, 3, 5}, [4]float64{1, 1.5, 1.8, 3}, [4]float64{60, 62, 90, 100})
	noIdle.Runtime["memory"].MemoryPerStreamKiB = nil
	for _, tc := range []struct {
		goal Goal
		s    Summary
		want float64
		ok   bool
	}{
		{Goal{Store: "memory", Floor: StoreRelay, Measure: MeasureCPU}, s, 1.5, true},
		{Goal{Store: "redis", Floor: StoreRelay, Measure: MeasureCPU}, s, 2.5, true},
		{Goal{Store: "redis", Floor: StoreRelayRedis, Measure: MeasureCPU}, s, 2, true},
		{Goal{Store: "memory", Floor: StoreRelay, Measure: MeasureMemory}, s, 1.5, true},
		{Goal{Store: "redis", Floor: StoreRelayRedis, Measure: MeasureMemory}, s, 1.6129, true},
		{Goal{Store: "memory", Floor: StoreRelay, Measure: MeasureTTFT}, s, 0.8, true},
		{Goal{Store: "redis", Floor: StoreRelayRedis, Measure: MeasureTTFT}, s, 1.5, true},
		{Goal{Store: "redis", Floor: StoreRelayRedis, Measure: MeasureTTFT}, noRedisRelay, 0, false},
		{Goal{Store: "memory", Floor: StoreRelay, Measure: MeasureMemory}, noIdle, 0, false},
	} {
		got, ok := tc.goal.Value(tc.s)
		if ok != tc.ok || fmt.Sprintf("%.4f", got) != fmt.Sprintf("%.4f", tc.want) {
			t.Errorf("%s against %s, measure %d: %v %v, want %v %v", tc.goal.Store, tc.goal.Floor, tc.goal.Measure, got, ok, tc.want, tc.ok)
		}
	}
}

// TestGoalSpread: the median of the runs' ratios, their range, and the
// runs that met the limit.
func TestGoalSpread(t *testing.T) {
	set := RunSet{Label: "after"}
	for _, memoryCPU := range []float64{2.8, 3.4, 2.6, 3.3, 2.9} { // against the relay's 2: 1.4, 1.7, 1.3, 1.65, 1.45
		set.Runs = append(set.Runs, run([4]float64{2, 2.5, memoryCPU, 5}, [4]float64{1, 1.5, 1.8, 3}, [4]float64{60, 62, 90, 100}))
	}
	sp, met := set.GoalSpread(Goals[0])
	if sp.N != 5 || fmt.Sprintf("%.2f %.2f %.2f", sp.Median, sp.Min, sp.Max) != "1.45 1.30 1.70" || met != 3 {
		t.Fatalf("spread %+v, met %d; want median 1.45 (1.30 - 1.70), met in 3 of 5", sp, met)
	}
}

// TestWriteMedians: the figures' table per set and the goals' table with a
// column per set, each goal judged on its median.
func TestWriteMedians(t *testing.T) {
	before := RunSet{Label: "before"}
	after := RunSet{Label: "after"}
	for _, d := range []float64{-0.1, 0, 0.1} {
		before.Runs = append(before.Runs, run([4]float64{2, 2.5, 3.4 + d, 5}, [4]float64{1, 1.5, 2.2 + d, 3.9 + d}, [4]float64{60, 62, 100, 116}))
		after.Runs = append(after.Runs, run([4]float64{2, 2.5, 2.8 + d, 5}, [4]float64{1, 1.5, 1.8 + d, 3.1 + d}, [4]float64{60, 62, 90, 96}))
	}
	wantLines(t, medians(t, before, after),
		"#### before: median of 3 runs (smallest..largest)",
		"Paced phase at 50 streams; memory with 200 idle streams open.",
		"| CPU per paced turn (ms; redis-server's included) | 2.00 (2.00..2.00) | 2.50 (2.50..2.50) | 3.40 (3.30..3.50) | 5.00 (5.00..5.00) |",
		"| errors (all runs) | 0 | 0 | 0 | 0 |",
		"| goal | floor | limit | before | after |",
		"| CPU per paced turn, memory store | relay | <= 1.6x | 1.70x (1.65..1.75): **missed**, 0 of 3 runs | 1.40x (1.35..1.45): met, 3 of 3 runs |",
		"| added TTFT p50, memory store | relay | <= 1 ms | +1.20 ms (+1.10..+1.30): **missed**, 0 of 3 runs | +0.80 ms (+0.70..+0.90): met, 3 of 3 runs |",
		"| added TTFT p50, Redis store | relay-redis | <= 2 ms | +2.40 ms (+2.30..+2.50): **missed**, 0 of 3 runs | +1.60 ms (+1.50..+1.70): met, 3 of 3 runs |",
		"| RSS per open stream, Redis store | relay-redis | <= 1.8x | 1.87x (1.87..1.87): **missed**, 0 of 3 runs | 1.55x (1.55..1.55): met, 3 of 3 runs |",
		"| CPU per paced turn, Redis store (redis-server included) | relay-redis | <= 2.25x | 2.00x (2.00..2.00): met, 3 of 3 runs | 2.00x (2.00..2.00): met, 3 of 3 runs |",
		"| CPU per paced turn, Redis store (redis-server included) | relay | - | 2.50x (2.50..2.50) | 2.50x (2.50..2.50) |",
	)
}

// medians is WriteMedians' output for sets.
func medians(t *testing.T, sets ...RunSet) string {
	t.Helper()
	var b strings.Builder
	if err := WriteMedians(&b, sets); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// wantLines fails t for each of lines that out does not contain.
func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
}

// TestWriteMediansMissing: a server a run did not measure shows as "-",
// and one run's figure stands alone.
func TestWriteMediansMissing(t *testing.T) {
	s := run([4]float64{2, 2.5, 3, 5}, [4]float64{1, 1.5, 1.8, 3}, [4]float64{60, 62, 90, 100})
	s.RelayRedis = nil
	out := medians(t, RunSet{Label: "smoke", Runs: []Summary{s}})
	wantLines(t, out,
		"| CPU per paced turn (ms; redis-server's included) | 2.00 | - | 3.00 | 5.00 |",
		"| added TTFT p50, Redis store | relay-redis | <= 2 ms | - |",
		"| CPU per paced turn, memory store | relay | <= 1.6x | 1.50x: met, 1 of 1 run |",
	)
	if strings.Contains(out, "once collected") {
		t.Errorf("rows of a figure no run measured (-settled) in:\n%s", out)
	}
}

// TestWriteMediansSettled: with -settled, the figure's row and its
// comparisons with the floors, which have no limit.
func TestWriteMediansSettled(t *testing.T) {
	var set RunSet
	for _, d := range []float64{-2, 0, 2} {
		s := run([4]float64{2, 2.5, 3, 5}, [4]float64{1, 1.5, 1.8, 3}, [4]float64{60, 62, 90, 100})
		s.Relay.SettledPerStreamKiB, s.RelayRedis.SettledPerStreamKiB = f(64), f(70)
		s.Runtime["memory"].SettledPerStreamKiB, s.Runtime["redis"].SettledPerStreamKiB = f(96), f(98+d)
		set.Runs = append(set.Runs, s)
	}
	set.Label = "after"
	wantLines(t, medians(t, set),
		"| heap and stacks per open stream once collected (KiB) | 64.0 (64.0..64.0) | 70.0 (70.0..70.0) | 96.0 (96.0..96.0) | 98.0 (96.0..100.0) |",
		"| heap and stacks per open stream once collected, memory store | relay | - | 1.50x (1.50..1.50) |",
		"| heap and stacks per open stream once collected, Redis store | relay-redis | - | 1.40x (1.37..1.43) |",
	)
}

// Example: the goals' table of one run of the memory store and the relay
// (a goal's row prints "-" where the run did not measure it; a comparison
// without a limit that no run measured is left out).
func ExampleWriteMedians() {
	relay := &Figures{Streams: 50, Turns: 300, CPUPerTurnMS: 2, LatencyP50MS: 0.9, IdleStreams: 200, MemoryPerStreamKiB: f(62)}
	memory := &Figures{Streams: 50, Turns: 300, CPUPerTurnMS: 2.7, LatencyP50MS: 1.3, IdleStreams: 200, MemoryPerStreamKiB: f(80.6)}
	set := RunSet{Label: "today", Runs: []Summary{{Relay: relay, Runtime: map[string]*Figures{"memory": memory}}}}
	var b strings.Builder
	_ = WriteMedians(&b, []RunSet{set})
	for line := range strings.SplitSeq(b.String(), "\n") {
		if strings.Contains(line, "memory store") {
			fmt.Fprintln(os.Stdout, line)
		}
	}
	// Output:
	// | CPU per paced turn, memory store | relay | <= 1.6x | 1.35x: met, 1 of 1 run |
	// | RSS per open stream, memory store | relay | <= 1.6x | 1.30x: met, 1 of 1 run |
	// | added TTFT p50, memory store | relay | <= 1 ms | +0.40 ms: met, 1 of 1 run |
}
