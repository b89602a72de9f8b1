// Package llmorch runs chat turns: it adapts model providers to one small
// streaming interface (Model) and drives a turn as a loop of model calls
// under the orchestration (Service).
package llmorch

import (
	"context"
	"iter"
	"slices"
	"time"

	"github.com/agentdock-go/agentdock/chat"
)

// Model is one model behind one provider.
type Model interface {
	// Stream runs one model call. It yields, in order: text deltas
	// (chat.KindTextDelta), complete and validated tool calls
	// (chat.KindToolCall: a name, an ID, arguments a JSON object; the name
	// may be one req.Callable does not hold, which the orchestration then
	// refuses with the reason the model needs),
	// at most one chat.KindUsage, and nothing after an error. A call the
	// model made that cannot be valid comes as chat.KindError with both
	// Error (the message for the model) and ToolCall set; it is never
	// executed, but answered with an error result. The sequence
	// ends when the model finished; a non-nil error ends it early. Stream
	// stops promptly when ctx is cancelled and then yields ctx.Err().
	Stream(ctx context.Context, req Request) iter.Seq2[chat.Event, error]
	// Info names the provider and model, for tracing and logs.
	Info() Info
}

// Info names a model.
type Info struct {
	// Provider is "openai", "anthropic" or "offline".
	Provider string
	Model    string
	// RestrictsTools: the model itself keeps to Request.Offered (OpenAI's
	// tool_choice allowed_tools; the offline model), so a template that
	// does not choose gets stable tool filtering
	// (template.ToolFilteringStable).
	RestrictsTools bool
	// Images and Files say which kinds of chat.Attachment the model
	// takes; a turn whose messages carry another kind is refused before
	// it starts.
	Images, Files bool
	// Formats: the provider takes an answer's Format in a field of its
	// own (OpenAI's response_format); any other model reads it in each
	// call's note. Either way the answer is checked.
	Formats bool
}

// Takes reports whether the model takes attachments of kind.
func (i Info) Takes(kind string) bool {
	return kind == chat.AttachImage && i.Images || kind == chat.AttachFile && i.Files
}

// Request is one model call. Tools, System and Messages, in that order,
// are what providers cache as a prefix: with stable tool filtering they
// change between two calls of a session only by the messages added, and
// what changes from call to call (Note, Offered) comes after them or
// beside them.
type Request struct {
	// System is the system prompt: the agent's personality and its
	// orchestration guide, the same on every call.
	System   string
	Messages []chat.Message
	// Note is this call's guidance (the active step, its sequence
	// position, the tools usable now; see Note), sent after Messages as
	// the user's side of the conversation and never stored.
	Note string
	// Tools are the tool definitions sent. With stable tool filtering they
	// are all the agent's tools, in one order, on every call; with
	// filtering only the offered ones.
	Tools []chat.ToolSpec
	// Offered, when not nil, names the tools of Tools the model may call
	// now (empty: none), and Tools are the stable set. A model that can
	// restrict itself (Info.RestrictsTools) sends it to the provider;
	// either way the runtime refuses a call of any other tool. Nil offers
	// all of Tools.
	Offered []string
	// Require: the model must call one of the tools it may call (a
	// client's tool_choice "required" or a named function, on a turn's
	// first call).
	Require bool
	// Format, when set, is the format the answer must be in (see
	// Format); the model may still call tools.
	Format *Format
	// OneCallPerAnswer asks the model for at most one tool call per
	// answer (Turn.OneCallPerAnswer): a provider that takes it is told
	// (OpenAI's parallel_tool_calls: false, Anthropic's
	// disable_parallel_tool_use); the runtime enforces it either way.
	OneCallPerAnswer bool
	Temperature      *float64
	// MaxTokens is the max_tokens to send (0: the provider's default).
	MaxTokens int
	// RetryWait, when positive, bounds how long the model waits to retry
	// a failed call (a rate limit's Retry-After): a call that would wait
	// longer fails at once, marked ErrModelUnavailable. A fallback chain
	// sets it (Fallbacks), so that another model answers instead.
	RetryWait time.Duration
	// MaxOutputBytes, when positive, is what is left of the turn's output
	// budget: a model stops once the bytes of its text and tool-call
	// arguments exceed it, without buffering more, and ends its sequence
	// with ErrOutputLimit after the text it yielded. The caller counts the
	// text too, so a model that ignores it is still cut.
	MaxOutputBytes int

	// Orchestration describes the active step and the agent's modes. Real
	// providers see it only through the system prompt; the offline model
	// reads it to follow sequences and pick modes.
	Orchestration *chat.Snapshot
	Modes         []Mode
	// ApprovalTools are the offered tools whose calls wait for a person's
	// approval before they run. Real providers are not told; the offline
	// model calls them to show the approval.
	ApprovalTools []string

	// Summarize, when set, makes the call a summarizer's (context
	// compaction): Messages render it as text and no tools are offered; a
	// model that works on its structure (the offline model) reads it.
	Summarize *SummaryInput
	// Judge, when set, makes the call a guardrail's model check:
	// Messages ask its question about its text, the answer is yes or no,
	// and no tools are offered; the offline model reads it.
	Judge *JudgeInput
}

// Callable returns the tools of r the model may call now: Tools, less
// those Offered leaves out.
func (r Request) Callable() []chat.ToolSpec {
	if r.Offered == nil {
		return r.Tools
	}
	out := make([]chat.ToolSpec, 0, len(r.Offered))
	for _, t := range r.Tools {
		if slices.Contains(r.Offered, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// Mode is one orchestration step as the model is told about it.
type Mode struct {
	Name        string
	Description string
	// Sequence lists the step's sequence; each entry is a group of
	// alternative tools.
	Sequence [][]string
	// Tools are the step's tools (allowed minus denied).
	Tools []string
	// Default marks the default step.
	Default bool
}
