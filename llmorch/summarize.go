package llmorch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
)

// SummaryInput is what a summary is made of: the summary it folds in, if
// any, and the whole turns it replaces. Request.Summarize carries it to
// the summarizer, beside its rendering as text (Request.Messages), so that
// a model that works on structure (the offline model's extractive
// summary) need not parse the text.
type SummaryInput struct {
	// Previous is the summary entry (chat.RoleSummary) of the turns
	// before Turns, nil for the first summary.
	Previous *chat.Message
	// Turns are the turns replaced, oldest first.
	Turns []SummaryTurn
	// MaxTokens bounds the summary: a longer one is refused.
	MaxTokens int
}

// SummaryTurn is one turn of a SummaryInput: its number (by the session's
// user messages) and its messages, the user message first, with every
// tool call beside its result.
type SummaryTurn struct {
	Number   int
	Messages []chat.Message
}

// DefaultSummaryPrompt is the summarizer's instructions unless the
// template's options.context.summarizer.prompt replaces them.
const DefaultSummaryPrompt = `You write the memory of a conversation between a user and an assistant that uses tools. The assistant will read your summary instead of the turns it covers, so it must be able to go on as if it had read them.
Keep: every fact, name, number, date and preference the user stated; what the user asked for and what was decided; the results of tools that matter, with their key values; what is still open.
Drop: greetings, repetition, and how the assistant phrased things.
If the conversation starts with an earlier summary, fold it in: keep its facts unless a later turn changed them.
Write plain text, facts first, as short as it can be while keeping them. Do not answer the user; do not call tools.`

// maxRendered bounds a message's text in the summarizer's input: a huge
// tool result is cut (its start kept) rather than sent whole.
const maxRendered = 4000

// RenderSummaryInput renders in as the text a summarizer model reads.
func RenderSummaryInput(in SummaryInput) string {
	var b strings.Builder
	if p := in.Previous; p != nil && p.Summary != nil {
		fmt.Fprintf(&b, "## Earlier summary (turns %d to %d)\n%s\n\n", p.Summary.From, p.Summary.Through, p.Content)
	}
	if len(in.Turns) > 0 {
		fmt.Fprintf(&b, "## Turns %d to %d\n", in.Turns[0].Number, in.Turns[len(in.Turns)-1].Number)
	}
	names := map[string]string{}
	for _, t := range in.Turns {
		fmt.Fprintf(&b, "\n### Turn %d\n", t.Number)
		for _, m := range t.Messages {
			switch m.Role {
			case chat.RoleUser:
				fmt.Fprintf(&b, "User: %s\n", clipText(m.Content, maxRendered))
			case chat.RoleAssistant:
				if m.Content != "" {
					fmt.Fprintf(&b, "Assistant: %s\n", clipText(m.Content, maxRendered))
				}
				for _, c := range m.ToolCalls {
					names[c.ID] = c.Name
					fmt.Fprintf(&b, "Assistant called %s %s\n", c.Name, clipText(string(c.Arguments), maxRendered))
				}
			case chat.RoleTool:
				name := m.ToolName
				if name == "" {
					name = names[m.ToolCallID]
				}
				// A call that did not run, or failed, is summarized as
				// what it was: its result says so in its first words.
				what := "Result of " + name
				switch {
				case m.Denied:
					what = "The user declined " + name
				case m.NotRun:
					what = name + " did not run"
				case m.IsError:
					what = name + " failed"
				}
				fmt.Fprintf(&b, "%s: %s\n", what, clipText(m.Content, maxRendered))
			}
		}
	}
	b.WriteString("\nWrite the summary now.")
	return b.String()
}

// clipText cuts s to about n bytes at a character boundary, saying so.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncateUTF8(s, n) + " […]"
}

// Why a summary is refused; each wraps errSummary.
var (
	errSummary       = errors.New("no summary")
	errSummaryEmpty  = fmt.Errorf("%w: the summarizer answered nothing", errSummary)
	errSummaryError  = fmt.Errorf("%w: the summarizer answered with an error text", errSummary)
	errSummaryTooBig = fmt.Errorf("%w: the summary is longer than its budget", errSummary)
)

// errorOpenings are how an error text opens: such an answer is never
// taken for a summary, since the model would read the error as what the
// conversation said.
var errorOpenings = []string{"error", "{\"error", "an error", "exception", "traceback", "internal server error", "rate limit", "request failed", "i'm sorry", "i am sorry", "sorry,"}

// looksLikeError reports whether a summarizer's answer reads as an error
// or a refusal rather than a summary.
func looksLikeError(s string) bool {
	head := strings.ToLower(strings.TrimLeft(s, " \t\r\n*#>`\"'"))
	for _, o := range errorOpenings {
		if strings.HasPrefix(head, o) {
			return true
		}
	}
	return false
}

// summarize runs one summarizer call: the model's whole answer, or an
// error. Nothing of an answer that failed, or that was cut, is used: a
// summary is made of a complete answer or not at all.
func summarize(ctx context.Context, model Model, prompt string, in SummaryInput, count func(string) int) (string, chat.Usage, error) {
	if prompt == "" {
		prompt = DefaultSummaryPrompt
	}
	req := Request{
		System:    prompt,
		Messages:  []chat.Message{{Role: chat.RoleUser, Content: RenderSummaryInput(in)}},
		MaxTokens: in.MaxTokens,
		// Room for a summary of MaxTokens, in the bytes a token takes.
		MaxOutputBytes: in.MaxTokens * 8,
		Summarize:      &in,
	}
	var (
		text  strings.Builder
		usage chat.Usage
	)
	for ev, err := range model.Stream(ctx, req) {
		if err != nil {
			if errors.Is(err, ErrOutputLimit) {
				return "", usage, errSummaryTooBig
			}
			return "", usage, fmt.Errorf("%w: %w", errSummary, err)
		}
		switch ev.Kind {
		case chat.KindTextDelta:
			text.WriteString(ev.Text)
		case chat.KindUsage:
			usage = usage.Add(*ev.Usage)
		case chat.KindError:
			msg := "the summarizer failed"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			return "", usage, fmt.Errorf("%w: %s", errSummary, msg)
		case chat.KindToolCall:
			return "", usage, fmt.Errorf("%w: the summarizer called a tool instead of answering", errSummary)
		}
	}
	if err := ctx.Err(); err != nil {
		return "", usage, err
	}
	s := strings.TrimSpace(text.String())
	switch {
	case s == "":
		return "", usage, errSummaryEmpty
	case looksLikeError(s):
		return "", usage, errSummaryError
	case count(s) > in.MaxTokens:
		return "", usage, errSummaryTooBig
	}
	return s, usage, nil
}
