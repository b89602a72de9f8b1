package mockllm

import "time"

// Script is one scripted response. The same script renders on either wire
// format, so one test can check both providers against the same answer.
type Script struct {
	// Status, when neither 0 nor 200, makes the response an error with this
	// HTTP status and a JSON error body in the wire format's shape.
	Status int
	// RetryAfter, with an error Status, is sent as Retry-After (whole
	// seconds, rounded up) and as retry-after-ms (OpenAI's precise form).
	RetryAfter time.Duration
	// ErrorMessage is the error body's message (a default names the status).
	// Tests plant secrets here to prove they never reach callers.
	ErrorMessage string

	// Text is the answer, one delta per entry.
	Text []string
	// Chunks, when Text is empty, generates that many small text deltas
	// ("tok0 ", "tok1 ", ...) for load tests.
	Chunks int
	// ToolCalls are the calls the model makes, in order.
	ToolCalls []ToolCall
	// Style selects how the OpenAI stream splits tool-call deltas (flags;
	// zero is the well-behaved style). Anthropic streams ignore it: their
	// blocks never interleave.
	Style Style
	// ArgPieces is how many deltas each call's arguments are split into
	// (default 3).
	ArgPieces int
	// Usage is reported when set: on OpenAI only if the request asked for
	// it (stream_options.include_usage) or is not streaming; on Anthropic
	// always (zeros when nil, as the wire format has no way to omit it).
	Usage *Usage
	// EstimateUsage, when Usage is nil, reports usage anyway, estimated at
	// four bytes a token of the request body and of the answer, for
	// scripts written by hand (agentdock mockllm --script).
	EstimateUsage bool
	// FinishReason overrides the finish reason ("stop"/"tool_calls" on
	// OpenAI, "end_turn"/"tool_use" on Anthropic).
	FinishReason string

	// TimeToFirstToken delays the first content delta (headers go out at
	// once); InterTokenDelay delays every later one.
	TimeToFirstToken time.Duration
	InterTokenDelay  time.Duration

	// Fail makes a streamed response break after FailAfter content deltas
	// (0: before the first one).
	Fail      Fail
	FailAfter int
}

// ToolCall is one scripted tool call. Arguments are sent verbatim, so a
// script can send invalid JSON; an empty ID is omitted from the wire.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is the token count a script reports. Input counts every input
// token, cached or not; CacheRead and CacheWrite are the parts of it read
// from and written to a prompt cache. Each wire reports them in its own
// convention: OpenAI's prompt_tokens include prompt_tokens_details.
// cached_tokens (and no cache writes), Anthropic's input_tokens leave out
// cache_read_input_tokens and cache_creation_input_tokens.
type Usage struct {
	Input      int `json:"input"`
	Output     int `json:"output"`
	CacheRead  int `json:"cacheRead,omitempty"`
	CacheWrite int `json:"cacheWrite,omitempty"`
}

// Style is a set of flags reproducing OpenAI-compatible servers' ways of
// streaming tool calls that naive accumulators get wrong.
type Style uint8

const (
	// StyleInterleaved alternates the deltas of parallel calls; only the
	// delta's index tells them apart.
	StyleInterleaved Style = 1 << iota
	// StyleRepeatType repeats "type":"function" on every follow-up delta
	// (the phantom-call style).
	StyleRepeatType
	// StyleTrailingEmpty ends the calls with one more delta that carries
	// only the index and empty arguments (some vLLM versions).
	StyleTrailingEmpty
)

// Fail is how a streamed response breaks.
type Fail uint8

const (
	// FailNone streams to the end.
	FailNone Fail = iota
	// FailAbort closes the connection without ending the response (what a
	// proxy in front of a crashing server does: a 500 mid-stream).
	FailAbort
	// FailErrorEvent sends the wire format's in-band error (OpenAI-style
	// `data: {"error":...}`, Anthropic's `event: error` overloaded_error)
	// and ends the response.
	FailErrorEvent
)

// TextScript returns a script that answers with the given text deltas.
func TextScript(deltas ...string) Script { return Script{Text: deltas} }

// ToolScript returns a script that makes the given calls.
func ToolScript(calls ...ToolCall) Script { return Script{ToolCalls: calls} }

// ErrorScript returns a script answering with HTTP status and, when
// retryAfter > 0, a Retry-After.
func ErrorScript(status int, retryAfter time.Duration) Script {
	return Script{Status: status, RetryAfter: retryAfter}
}
