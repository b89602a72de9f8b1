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
// nil it is Offer. It is OfferWith for a request without client tools.
func (e *Engine) OfferNow(s State, available Available) Offer {
	return e.OfferWith(s, available, nil)
}

// OfferWith is OfferNow for a model call of a request whose client brings
// tools of its own, client (by name; the client runs them). A client tool
// is offered by the step's rules, whether the template declares it
// (options.clientTools) or not: where the step's availableTools.allowed
// is absent or matches it, and its denied does not; with no active step,
// always. A sequence position that names client tools the template
// declares offers those the request brings; when it brings none of them
// (nor a runnable tool of the agent at that position), the position
// waits for them and the step's tools are offered with a warning, as for
// a tool that cannot run now. A client name that is one of the agent's
// tools is never offered as a client tool (a request bringing one is
// refused before it gets here).
func (e *Engine) OfferWith(s State, available Available, client []string) Offer {
	st := e.step(s.ActiveStep)
	k := s.SequenceIndex
	inSeq := st != nil && k >= 0 && k < len(st.offers)
	waits := inSeq && len(st.client[k]) > 0
	if len(client) == 0 && !waits {
		return e.offerNow(s, available)
	}
	var clientOK []string
	for _, c := range client {
		if !slices.Contains(e.tools, c) && !slices.Contains(clientOK, c) && (st == nil || st.admits(c)) {
			clientOK = append(clientOK, c)
		}
	}
	if st == nil {
		return Offer{Tools: append(runnable(e.tools, available), clientOK...)}
	}
	o := Offer{Step: st.name, SequenceIndex: k, StepChanges: s.StepChanges}
	stepTools := append(runnable(st.tools, available), clientOK...)
	if !inSeq {
		o.Tools = stepTools
		return o
	}
	if st.blocked[k] != "" {
		o.Tools, o.Blocked = stepTools, st.blocked[k]
		return o
	}
	var group []string
	for _, t := range st.sequence[k] {
		switch {
		case slices.Contains(st.client[k], t):
			if slices.Contains(clientOK, t) {
				group = append(group, t)
			}
		case slices.Contains(st.offers[k], t) && slices.Contains(st.tools, t) && (available == nil || available(t)):
			group = append(group, t)
		}
	}
	if len(group) > 0 {
		o.Tools = group
		return o
	}
	o.Tools = stepTools
	o.Warning = fmt.Sprintf("step %q: none of the tools at sequence position %d (%s) can run now; offering the step's tools instead", s.ActiveStep, k+1, Group(st.sequence[k]))
	if len(st.client[k]) > 0 {
		o.Warning = fmt.Sprintf("step %q: none of the tools at sequence position %d (%s) can run now (the client tools among them come only with a request that brings them); offering the step's tools instead", s.ActiveStep, k+1, Group(st.sequence[k]))
	}
	return o
}

// offerNow is OfferNow for a request without client tools at a position
// that waits for none.
func (e *Engine) offerNow(s State, available Available) Offer {
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
		out.Warning = fmt.Sprintf("step %q: none of the tools at sequence position %d (%s) can run now; offering the step's tools instead", s.ActiveStep, s.SequenceIndex+1, group)
	}
	return out
}

// admits reports whether the step offers a client tool named c: its
// allowed patterns are absent or match c, and its denied ones do not.
func (st *step) admits(c string) bool {
	return (len(st.allowed) == 0 || matchAny(st.allowed, c)) && !matchAny(st.denied, c)
}

// runnable returns the tools that can run now (a new slice: callers
// append to it).
func runnable(tools []string, available Available) []string {
	out := make([]string, 0, len(tools)+4)
	for _, t := range tools {
		if available == nil || available(t) {
			out = append(out, t)
		}
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

// ToolChoice is a client's tool_choice for one turn (OpenAI's auto, none,
// required, a named function, allowed_tools), as the orchestration honours
// it: it narrows what the step offers and never widens it.
type ToolChoice struct {
	// None: the model may call no tool in the turn.
	None bool
	// Only, when not nil, narrows the offer of every model call of the
	// turn to these tools (a named function is one; allowed_tools lists
	// several).
	Only []string
	// Required: the turn's first model call must call one of the tools it
	// is offered (required, a named function, allowed_tools in mode
	// "required"). The later calls of the turn may answer without tools,
	// so that the turn can end.
	Required bool
}

// IsZero reports whether c is "auto": the orchestration's offer as it is.
func (c ToolChoice) IsZero() bool { return !c.None && c.Only == nil && !c.Required }

// Narrow returns o as c narrows it. It does not modify o.
func (c ToolChoice) Narrow(o Offer) Offer {
	switch {
	case c.None:
		o.Tools = []string{}
	case c.Only != nil:
		tools := make([]string, 0, len(o.Tools))
		for _, t := range o.Tools {
			if slices.Contains(c.Only, t) {
				tools = append(tools, t)
			}
		}
		o.Tools = tools
	}
	return o
}

// CheckChoice reports why choice cannot be honoured under offer, the offer
// of a turn's first model call, or nil: a choice that requires a call
// (required, a named function, allowed_tools in mode "required") of tools
// none of which the step offers now. The message names the step, its
// sequence position and what it offers, as a refusal does.
func (e *Engine) CheckChoice(offer Offer, choice ToolChoice) error {
	if !choice.Required || len(choice.Narrow(offer).Tools) > 0 {
		return nil
	}
	want := "a call of a tool"
	if choice.Only != nil {
		want = "a call of " + listOrNone(choice.Only)
	}
	where := "the agent offers"
	if st := e.step(offer.Step); st != nil {
		where = fmt.Sprintf("step %q offers", st.name)
		if offer.SequenceIndex >= 0 && offer.SequenceIndex < len(st.sequence) {
			where = fmt.Sprintf("step %q, at position %d of its sequence %s, offers", st.name, offer.SequenceIndex+1, seqString(st.sequence))
		}
	}
	return fmt.Errorf("tool_choice requires %s, and %s none of them now (tools it offers now: %s)", want, where, listOrNone(offer.Tools))
}
