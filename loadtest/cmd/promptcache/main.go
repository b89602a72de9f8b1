// Command promptcache prints what a provider's prompt cache makes of the
// runtime's requests in each tool filtering mode: it plays the fixed
// ten-turn Cognitive Reasoner conversation of package promptcache against a
// mock model with a prefix cache, each mode -runs times, and prints one
// markdown table row per mode with the median of the runs (the figures are
// bytes and tokens, the same on every run). `make bench-cache` runs it;
// BENCHMARKS.md, "Prompt cache", shows its table.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/loadtest/promptcache"
	"github.com/agentdock-go/agentdock/template"
)

func main() {
	runs := flag.Int("runs", 3, "runs per mode; the table gives their median")
	out := flag.String("o", "", "also write the table to this file")
	flag.Parse()
	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "promptcache: -runs must be at least 1")
		os.Exit(2)
	}
	var w io.Writer = os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "promptcache:", err)
			os.Exit(1)
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	if err := report(context.Background(), w, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "promptcache:", err)
		os.Exit(1)
	}
}

// row is one run's figures.
type row struct {
	fraction                                  float64
	input, cached, written, shared, shareable int
}

func report(ctx context.Context, w io.Writer, runs int) error {
	fmt.Fprintf(w, "Ten turns of the Cognitive Reasoner, each in another mode, each following its sequence (%d model calls); median of %d runs.\n\n",
		4*len(promptcache.Conversation), runs)
	fmt.Fprintln(w, "| wire | tool filtering | shared prefix, of what could be shared | input tokens sent | cached | written to the cache | not cached |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, wire := range []string{provider.OpenAI, provider.Anthropic} {
		for _, mode := range []string{template.ToolFilteringStable, template.ToolFilteringFilter} {
			var rows []row
			for range runs {
				r, err := promptcache.RunWire(ctx, wire, mode)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", wire, mode, err)
				}
				shared, shareable, input, cached := r.Totals()
				rows = append(rows, row{fraction: r.Fraction(), input: input, cached: cached, written: r.Written(), shared: shared, shareable: shareable})
			}
			m := median(rows)
			fmt.Fprintf(w, "| %s | `%s` | %.1f %% (%s of %s bytes) | %s | %s (%.1f %%) | %s | %s |\n", wire, mode, 100*m.fraction,
				thousands(m.shared), thousands(m.shareable), thousands(m.input), thousands(m.cached), 100*float64(m.cached)/float64(m.input),
				thousands(m.written), thousands(m.input-m.cached))
		}
	}
	return nil
}

// median is the run whose shared fraction is the median.
func median(rows []row) row {
	slices.SortFunc(rows, func(a, b row) int {
		switch {
		case a.fraction < b.fraction:
			return -1
		case a.fraction > b.fraction:
			return 1
		}
		return 0
	})
	return rows[len(rows)/2]
}

// thousands writes n with commas.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
