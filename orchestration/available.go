package orchestration

import (
	"fmt"
	"slices"
)

// Available reports whether one of the agent's tools can run now. The
// runtime passes it in for tools that exist only while something outside
// runs (an MCP server that may be starting, restarting or have dropped a
// tool); the engine stays pure and never asks. Nil means every tool the
// engine was compiled with can run.
type Available func(tool string) bool

// OfferNow is Offer when some of the agent's tools cannot run now: those
// are left out, and a sequence position none of whose tools can run now
// falls back to the step's tools that can, with a warning; the position
// still waits for its tools, which may come back (unlike a position no
// provided tool can fill, which Offer reports as Blocked). With available
// nil it is Offer.
func (e *Engine) OfferNow(s State, available Available) Offer {
	offer := e.Offer(s)
	if available == nil || !slices.ContainsFunc(offer.Tools, func(t string) bool { return !available(t) }) {
		return offer
	}
	out := offer
	out.Tools = filterAvailable(offer.Tools, available)
	st := e.step(s.ActiveStep)
	if len(out.Tools) == 0 && st != nil && s.SequenceIndex >= 0 && s.SequenceIndex < len(st.sequence) {
		group := Group(st.sequence[s.SequenceIndex])
		out.Tools = filterAvailable(st.tools, available)
		out.Warning = fmt.Sprintf("step %q: none of the tools at sequence position %d (%s) can run now; offering the step's tools instead", s.ActiveStep, s.SequenceIndex, group)
	}
	return out
}

// ToolUsedNow is ToolUsed for a runtime that passed available to OfferNow
// for the same model call: the tool is refused unless OfferNow offers it.
func ToolUsedNow(name string, available Available) Input {
	return Input{Kind: InputToolUsed, Tool: name, Available: available}
}

func filterAvailable(tools []string, available Available) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		if available(t) {
			out = append(out, t)
		}
	}
	return out
}
