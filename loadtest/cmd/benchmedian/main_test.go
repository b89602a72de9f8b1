package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/loadtest"
)

// writeRun writes a summary as the harness's -json does.
func writeRun(t *testing.T, path string, memoryCPU float64) {
	t.Helper()
	kib := func(x float64) *float64 { return &x }
	s := loadtest.Summary{
		Relay:      &loadtest.Figures{Streams: 50, Turns: 300, CPUPerTurnMS: 2, LatencyP50MS: 1, IdleStreams: 200, MemoryPerStreamKiB: kib(60)},
		RelayRedis: &loadtest.Figures{Streams: 50, Turns: 300, CPUPerTurnMS: 2.6, LatencyP50MS: 1.4, IdleStreams: 200, MemoryPerStreamKiB: kib(62)},
		Runtime: map[string]*loadtest.Figures{
			"memory": {Streams: 50, Turns: 300, CPUPerTurnMS: memoryCPU, LatencyP50MS: 1.5, IdleStreams: 200, MemoryPerStreamKiB: kib(84)},
			"redis":  {Streams: 50, Turns: 300, CPUPerTurnMS: 3.8, LatencyP50MS: 2.9, IdleStreams: 200, MemoryPerStreamKiB: kib(93)},
		},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := s.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	for _, d := range []string{before, after} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, cpu := range []float64{3.2, 3.0, 3.4} {
		name := fmt.Sprintf("run-%d.json", i+1)
		writeRun(t, filepath.Join(before, name), cpu)
		writeRun(t, filepath.Join(after, name), cpu-0.4)
	}
	var out strings.Builder
	if err := run([]string{"old=" + filepath.Join(before, "run-*.json"), after}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#### old: median of 3 runs",
		"#### after: median of 3 runs",
		"| goal | floor | limit | old | after |",
		"| CPU per paced turn, memory store | relay | <= 1.6x | 1.60x (1.50..1.70): met, 2 of 3 runs | 1.40x (1.30..1.50): met, 3 of 3 runs |",
		"| added TTFT p50, Redis store | relay-redis | <= 2 ms | +1.50 ms (+1.50..+1.50): met, 3 of 3 runs |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no line %q in:\n%s", want, out.String())
		}
	}
}

// TestRunRefuses: what is not a set of the harness's summaries is refused
// with a message that says which path and why.
func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "bad.json")
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(notJSON, []byte("load.md, not JSON"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(`{"name": "not a summary"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: benchmedian"},
		{[]string{filepath.Join(dir, "absent")}, "no such file"},
		{[]string{empty}, "empty/*.json: no such files"},
		{[]string{filepath.Join(dir, "run-*.json")}, "run-*.json: no such files"},
		{[]string{notJSON}, "bad.json: not a harness summary"},
		{[]string{"x=" + other}, "other.json: no figures in it"},
	} {
		err := run(tc.args, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
