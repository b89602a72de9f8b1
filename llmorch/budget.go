package llmorch

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// Budget bounds one turn, so that nothing a model does can hold a session
// or grow it without end: a model that answers with a thousand tool calls,
// streams without end or never finishes still ends its turn cleanly, with
// its partial answer saved and the session free for the next turn.
//
// Zero fields are unset. A Service takes each value from the template's
// options when it sets it, else from ServiceConfig.Budget (the server's
// settings), else the Default* constant.
type Budget struct {
	// MaxSteps bounds the model calls of a turn before its final answer
	// (template options.maxSteps, server MAX_STEPS). The call after the last
	// step is offered no tools, so the model must answer.
	MaxSteps int
	// MaxToolCalls bounds the tool calls that run per model answer
	// (options.maxToolCalls, MAX_TOOL_CALLS). Beyond it the first excess call
	// is refused with an error result naming the limit and the rest are
	// dropped: none of them runs or is recorded.
	MaxToolCalls int
	// MaxOutputBytes bounds what the model streams in one turn: the bytes of
	// its text and of its tool calls' arguments (options.maxOutputBytes,
	// MAX_OUTPUT_BYTES). It also lowers the max_tokens sent to the provider.
	MaxOutputBytes int
	// TurnTimeout bounds a turn's duration (options.turnTimeout,
	// TURN_TIMEOUT).
	TurnTimeout time.Duration
	// MaxToolResultBytes bounds what the model reads of one tool result
	// (options.maxToolResultBytes, MAX_TOOL_RESULT_BYTES): a longer result
	// is cut, with a note the model reads, before it is streamed, stored
	// or sent to a model (tools.LimitResult). At least
	// tools.MinMaxResultBytes.
	MaxToolResultBytes int
}

// The budgets' defaults.
const (
	DefaultMaxSteps       = template.DefaultMaxSteps
	DefaultMaxToolCalls   = 16
	DefaultMaxOutputBytes = 256 << 10
	DefaultTurnTimeout    = 10 * time.Minute
	// DefaultMaxToolResultBytes is tools.DefaultMaxResultBytes.
	DefaultMaxToolResultBytes = tools.DefaultMaxResultBytes
)

// Validate reports negative values; zero values are unset.
func (b Budget) Validate() error {
	var errs []error
	if b.MaxSteps < 0 {
		errs = append(errs, fmt.Errorf("MaxSteps must not be negative, got %d", b.MaxSteps))
	}
	if b.MaxToolCalls < 0 {
		errs = append(errs, fmt.Errorf("MaxToolCalls must not be negative, got %d", b.MaxToolCalls))
	}
	if b.MaxOutputBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxOutputBytes must not be negative, got %d", b.MaxOutputBytes))
	}
	if b.TurnTimeout < 0 {
		errs = append(errs, fmt.Errorf("TurnTimeout must not be negative, got %s", b.TurnTimeout))
	}
	if b.MaxToolResultBytes != 0 && b.MaxToolResultBytes < tools.MinMaxResultBytes {
		errs = append(errs, fmt.Errorf("MaxToolResultBytes must be at least %d, got %d", tools.MinMaxResultBytes, b.MaxToolResultBytes))
	}
	return errors.Join(errs...)
}

// Or returns b with its unset fields taken from d.
func (b Budget) Or(d Budget) Budget {
	if b.MaxSteps == 0 {
		b.MaxSteps = d.MaxSteps
	}
	if b.MaxToolCalls == 0 {
		b.MaxToolCalls = d.MaxToolCalls
	}
	if b.MaxOutputBytes == 0 {
		b.MaxOutputBytes = d.MaxOutputBytes
	}
	if b.TurnTimeout == 0 {
		b.TurnTimeout = d.TurnTimeout
	}
	if b.MaxToolResultBytes == 0 {
		b.MaxToolResultBytes = d.MaxToolResultBytes
	}
	return b
}

// DefaultBudget holds the Default* values.
var DefaultBudget = Budget{
	MaxSteps:       DefaultMaxSteps,
	MaxToolCalls:   DefaultMaxToolCalls,
	MaxOutputBytes: DefaultMaxOutputBytes,
	TurnTimeout:    DefaultTurnTimeout,

	MaxToolResultBytes: DefaultMaxToolResultBytes,
}

// templateBudget reads a template's budget options (validated when the
// template was loaded).
func templateBudget(t *template.Template) Budget {
	return Budget{
		MaxSteps:       t.Options.MaxSteps,
		MaxToolCalls:   t.Options.MaxToolCalls,
		MaxOutputBytes: t.Options.MaxOutputBytes,
		TurnTimeout:    t.Options.TurnTimeoutDuration(),

		MaxToolResultBytes: t.Options.MaxToolResultBytes,
	}
}

// MessagesPerTurn is the most history messages one turn under b can add:
// the user message and, for every model call (the steps and the final
// answer), the assistant message and one tool message per kept call (the
// calls that run plus the one refused in their place). A session store's
// history cap above it never has to cut into the turn that is running.
func (b Budget) MessagesPerTurn() int {
	b = b.Or(DefaultBudget)
	return 1 + (b.MaxSteps+1)*(b.MaxToolCalls+2)
}

// ErrOutputLimit is returned by a Model whose output reached
// Request.MaxOutputBytes; what it yielded before stays valid.
var ErrOutputLimit = errors.New("the model's output reached the turn's output budget")

// The limits a turn reports. The setting names in the messages are the
// template option first, then the server setting.
func limitToolCalls(max, made int) *chat.Limit {
	return &chat.Limit{Name: chat.LimitToolCalls, Value: strconv.Itoa(max),
		Message: fmt.Sprintf("the model made %d tool calls in one answer; the first %d ran and the rest were refused (options.maxToolCalls, MAX_TOOL_CALLS)", made, max)}
}

func limitSteps(max int) *chat.Limit {
	return &chat.Limit{Name: chat.LimitSteps, Value: strconv.Itoa(max),
		Message: fmt.Sprintf("the turn made %d model calls; the model was asked for its final answer without tools (options.maxSteps, MAX_STEPS)", max)}
}

func limitOutput(max int) *chat.Limit {
	return &chat.Limit{Name: chat.LimitOutput, Value: strconv.Itoa(max),
		Message: fmt.Sprintf("the answer reached the turn's output budget of %d bytes and was cut there; the partial answer was saved (options.maxOutputBytes, MAX_OUTPUT_BYTES)", max)}
}

// LimitTime is the limit of a turn that ran out of time (the cause of its
// context's cancellation).
func LimitTime(d time.Duration) *chat.Limit {
	return &chat.Limit{Name: chat.LimitTime, Value: d.String(),
		Message: fmt.Sprintf("the turn reached its time limit of %s and was stopped; the partial answer was saved (options.turnTimeout, TURN_TIMEOUT)", d)}
}

// finishReason is the Done reason of a turn that ended at lim.
func finishReason(lim *chat.Limit) string {
	switch lim.Name {
	case chat.LimitTime:
		return chat.FinishTimeout
	case chat.LimitSteps:
		return chat.FinishMaxSteps
	}
	return chat.FinishLength
}

// refusedOverLimit is the result of the first call over MaxToolCalls,
// which stands for every excess call of the answer.
func refusedOverLimit(call chat.ToolCall, max, made int) chat.ToolResult {
	return chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "refused", IsError: true, NotRun: true,
		Content: fmt.Sprintf("Refused: at most %d tool calls run per answer; this answer made %d, so this call and the %d after it were not run. Make at most %d calls in one answer.",
			max, made, made-max-1, max)}
}

// refusedParallel is the result of an answer's second call on a turn
// that runs one call per answer (Turn.OneCallPerAnswer), which stands for
// every call after the first.
func refusedParallel(call chat.ToolCall, made int) chat.ToolResult {
	notRun := "this call was not run"
	if made > 2 {
		notRun = fmt.Sprintf("this call and the %d after it were not run", made-2)
	}
	return chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "refused", IsError: true, NotRun: true,
		Content: fmt.Sprintf("Refused: this conversation runs one tool call per answer (the client turned parallel tool calls off); this answer made %d, so only the first ran and %s. Make one call per answer: call it again on its own if you still need it.",
			made, notRun)}
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// safeMaxTokens is the largest max_tokens every current model accepts; a
// budget below it is sent even when the template names no maxTokens, while a
// larger one is left to the provider's default.
const safeMaxTokens = 4096

// maxTokens is the max_tokens of the next model call: the template's, lowered
// to what the remaining output budget allows (counting four bytes a token,
// the usual rate; the bytes themselves are counted on the stream too).
func maxTokens(configured, remaining int) int {
	limit := max(remaining/4, 1)
	switch {
	case configured > 0:
		return min(configured, limit)
	case limit < safeMaxTokens:
		return limit
	}
	return 0
}
