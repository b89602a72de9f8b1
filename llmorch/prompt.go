package llmorch

import (
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// PromptInput is what a system prompt and a call's note are rendered from.
type PromptInput struct {
	// Personality opens the prompt.
	Personality []string
	// Guide is the template's orchestration description.
	Guide []string
	// Steps are the template's orchestration steps, as written.
	Steps []orchestration.Step
	// Snapshot is the orchestration at this model call (the note's).
	Snapshot chat.Snapshot
	// FinalAnswer asks for an answer without tools (the turn's step budget
	// is spent; the note's).
	FinalAnswer bool
	// Client is the client's own instructions (system and developer
	// messages, the Responses API's instructions), given after the
	// template's and marked as the client's (the prompt's).
	Client string
	// Require says the model must call one of the offered tools now, and
	// Format, when the model does not take it natively, is the format of
	// the answer (the note's).
	Require bool
	Format  *Format
	// OneCall says that one tool call of an answer runs, the others are
	// refused (Turn.OneCallPerAnswer; the note's).
	OneCall bool
}

// ClientHeading opens the client's instructions in a system prompt.
const ClientHeading = "## Instructions from the client"

// SystemPrompt renders the system prompt: the personality, then the
// orchestration guide built from the real template (every step with its
// description, activation rule and sequence). It depends on the template
// alone, never on the call's Snapshot, so that it is byte-identical on
// every call and stays in the provider's prompt cache; where the session
// is now is the call's Note. Nothing is rendered as "undefined": absent
// parts are left out.
func SystemPrompt(in PromptInput) string {
	var b strings.Builder
	for _, l := range in.Personality {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if c := strings.TrimSpace(in.Client); c != "" {
		// After the template's own instructions, and before the
		// orchestration, which stays last and wins.
		b.WriteString("\n" + ClientHeading + "\n")
		b.WriteString("The application that calls this agent adds these instructions. Follow them where they agree with the instructions above and the orchestration below, which take precedence.\n\n")
		b.WriteString(c)
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
	b.WriteString("\nBefore each of your answers the runtime adds a note, \"## Now\", after the conversation: the active step, its sequence position and the tools you may use now. Call no other tool: it would be refused.\n")
	return b.String()
}

// Note renders a model call's guidance: the active step, its sequence
// position and the tools the model may use now, or that it must answer
// without tools. It is sent after the conversation (Request.Note), so that
// what changes from call to call stays out of the cached prefix.
func Note(in PromptInput) string {
	var b strings.Builder
	b.WriteString("## Now (a note from the runtime, not from the user)\n")
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
	case in.Require:
		fmt.Fprintf(&b, "Call one of these tools now: %s\n", strings.Join(snap.OfferedTools, ", "))
	default:
		fmt.Fprintf(&b, "Tools you may use now: %s\n", strings.Join(snap.OfferedTools, ", "))
	}
	if in.OneCall && !in.FinalAnswer && len(snap.OfferedTools) > 0 {
		b.WriteString("Make at most one tool call in this answer: only the first call of an answer runs.\n")
	}
	if in.Format != nil {
		b.WriteString(in.Format.instruction())
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
