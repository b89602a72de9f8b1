package llmorch

import (
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// PromptInput is what a system prompt is rendered from.
type PromptInput struct {
	// Personality opens the prompt.
	Personality []string
	// Guide is the template's orchestration description.
	Guide []string
	// Steps are the template's orchestration steps, as written.
	Steps []orchestration.Step
	// Snapshot is the orchestration at this model call.
	Snapshot chat.Snapshot
	// FinalAnswer asks for an answer without tools (the turn's step budget
	// is spent).
	FinalAnswer bool
}

// SystemPrompt renders the system prompt of one model call: the personality,
// then the orchestration guide built from the real template (every step with
// its description, activation rule and sequence), then where the session is
// now and which tools may be used. Nothing is rendered as "undefined": absent
// parts are left out.
func SystemPrompt(in PromptInput) string {
	var b strings.Builder
	for _, l := range in.Personality {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if len(in.Steps) > 0 {
		b.WriteString("\n## Orchestration\n")
		for _, l := range in.Guide {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		b.WriteString("\nModes (steps):\n")
		for _, s := range in.Steps {
			fmt.Fprintf(&b, "- %s", s.Name)
			if s.IsDefault {
				b.WriteString(" (default)")
			}
			if s.Description != "" {
				fmt.Fprintf(&b, ": %s", s.Description)
			}
			b.WriteByte('\n')
			if rule := activation(s); rule != "" {
				fmt.Fprintf(&b, "  Activates when: %s\n", rule)
			}
			if len(s.Sequence) > 0 {
				parts := make([]string, len(s.Sequence))
				for i, g := range s.Sequence {
					parts[i] = strings.Join(g, " or ")
				}
				fmt.Fprintf(&b, "  Sequence: %s\n", strings.Join(parts, " -> "))
			}
		}
	}
	b.WriteString("\n## Now\n")
	snap := in.Snapshot
	if snap.ActiveStep != "" {
		fmt.Fprintf(&b, "Active step: %s", snap.ActiveStep)
		if n := len(snap.Sequence); n > 0 {
			switch {
			case snap.SequenceIndex < n && snap.Blocked != "":
				// Said plainly, so that the model does not keep calling
				// tools to pass a position nothing can pass.
				fmt.Fprintf(&b, " (%s; do not try to follow the rest of the sequence)", snap.Blocked)
			case snap.SequenceIndex < n:
				fmt.Fprintf(&b, " (sequence position %d of %d: next %s)", snap.SequenceIndex+1, n, strings.ReplaceAll(snap.Sequence[snap.SequenceIndex], "|", " or "))
			default:
				b.WriteString(" (sequence complete)")
			}
		}
		b.WriteByte('\n')
	}
	switch {
	case in.FinalAnswer:
		b.WriteString("The tool budget of this turn is spent: answer now, without tools, using the results you have.\n")
	case len(snap.OfferedTools) == 0:
		b.WriteString("No tools may be used now.\n")
	default:
		fmt.Fprintf(&b, "Tools you may use now: %s\n", strings.Join(snap.OfferedTools, ", "))
	}
	return b.String()
}

// activation renders a step's conditions for the model.
func activation(s orchestration.Step) string {
	if s.IsDefault {
		return ""
	}
	var parts []string
	for _, c := range s.Conditions {
		switch c.Type {
		case orchestration.CondToolUsed:
			parts = append(parts, fmt.Sprintf("the tool %s has been used", c.Value))
		case orchestration.CondSequenceMatch:
			seq := make([]string, len(s.Sequence))
			for i, g := range s.Sequence {
				seq[i] = strings.Join(g, " or ")
			}
			parts = append(parts, fmt.Sprintf("the most recent tools used were %s, in that order", strings.Join(seq, ", ")))
		case orchestration.CondMessageContains:
			parts = append(parts, fmt.Sprintf("the user's message contains %q", c.Value))
		case orchestration.CondMessageStartsWith:
			parts = append(parts, fmt.Sprintf("the user's message starts with %q", c.Value))
		case orchestration.CondMessageRegex:
			parts = append(parts, fmt.Sprintf("the user's message matches /%s/", c.Value))
		case orchestration.CondNotRecentlyUsed:
			w := 0
			if c.Window != nil {
				w = *c.Window
			}
			parts = append(parts, fmt.Sprintf("%s was not among the last %d tools used", c.Value, w))
		}
	}
	return strings.Join(parts, " and ")
}
