// Command promptcache prints what a provider's prompt cache makes of the
// runtime's requests in each tool filtering mode: it plays the fixed
// ten-turn Cognitive Reasoner conversation of package promptcache against a
// mock model with a prefix cache, each mode -runs times, and prints one
// markdown table row per mode with the median of the runs (the figures are
// bytes and tokens, the same on every run), then the figures per model of
// the conversation on one model and routed by step (some modes on
// llm.cheap). `make bench-cache` runs it;
// BENCHMARKS.md, "Prompt cache", shows its table.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

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
	return reportByModel(ctx, w, runs)
}

// routedModes are the modes a routed run sends to llm.cheap: the ones
// that gather and compare.
var routedModes = []string{"ComparisonMode", "ResearchMode"}

// reportByModel prints the figure per model: the conversation on one
// model, then with routedModes on llm.cheap (each step's "model"), whose
// prompt cache sees only its own requests (openai wire, stable).
func reportByModel(ctx context.Context, w io.Writer, runs int) error {
	fmt.Fprintf(w, "\nPer model (openai wire, `stable`): the same conversation on one model, then with %s on `llm.cheap` (%s) and the other modes on the agent's own model (%s); median of %d runs.\n\n",
		strings.Join(routedModes, " and "), promptcache.Cheap, promptcache.Strong, runs)
	fmt.Fprintln(w, "| run | model | calls | shared prefix, of what could be shared | input tokens sent | cached | not cached |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, routed := range []bool{false, true} {
		byModel := map[string][]row{}
		var order []string
		calls := map[string]int{}
		for range runs {
			var (
				r   promptcache.Result
				err error
			)
			if routed {
				r, err = promptcache.RunRouted(ctx, template.ToolFilteringStable, routedModes)
			} else {
				r, err = promptcache.Run(ctx, template.ToolFilteringStable)
			}
			if err != nil {
				return fmt.Errorf("per model (routed %v): %w", routed, err)
			}
			for _, m := range r.ByModel() {
				name := m.Requests[0].Model
				if _, seen := byModel[name]; !seen {
					order = append(order, name)
				}
				shared, shareable, input, cached := m.Totals()
				byModel[name] = append(byModel[name], row{fraction: m.Fraction(), input: input, cached: cached, shared: shared, shareable: shareable})
				calls[name] = len(m.Requests)
			}
		}
		run := "one model"
		if routed {
			run = "routed by step"
		}
		for _, name := range order {
			m := median(byModel[name])
			fmt.Fprintf(w, "| %s | %s | %d | %.1f %% (%s of %s bytes) | %s | %s (%.1f %%) | %s |\n", run, name, calls[name], 100*m.fraction,
				thousands(m.shared), thousands(m.shareable), thousands(m.input), thousands(m.cached), 100*float64(m.cached)/float64(m.input),
				thousands(m.input-m.cached))
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
