package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/transcript"
)

// Bounds that keep a mistyped knob from making the mock answer in hours or
// with gigabytes.
const (
	mockMaxTTFT       = 10 * time.Minute
	mockMaxInterToken = time.Minute
	mockMaxChunks     = 100000
)

// mockOptions is the mockllm subcommand's flags.
type mockOptions struct {
	addr           string
	ttft, interTok time.Duration
	chunks         int
	inputTokens    int
	scriptFile     string
	answers        []transcript.Answer // read from script
	prefixCache    bool
}

const mockllmUsage = `usage: agentdock mockllm [--addr ADDR] [--ttft D] [--inter-token D] [--chunks N | --script FILE]

Serves a mock model on ADDR: OpenAI chat completions (POST /v1/chat/completions)
and Anthropic messages (POST /v1/messages), streaming or not. Every request gets
the same answer: N text chunks ("tok0 ", "tok1 ", ...) with --chunks, otherwise
"Hello from mockllm." in three chunks; the first after --ttft, each later one
--inter-token after the one before; usage is reported. Point the server at it
for a paced load test:

  agentdock mockllm --addr 127.0.0.1:8090 --ttft 100ms --inter-token 10ms --chunks 64 &
  LLM_PROVIDER=openai LLM_BASE_URL=http://127.0.0.1:8090/v1 OPENAI_API_KEY=x agentdock serve

With --script FILE the requests get the file's model answers instead, one each,
in order: the "model" answers of a transcript (docs/testing.md), turn after
turn, or a file of just those ([answers] or {"model": [answers]}). Tool calls
are streamed as a model streams them, and usage is reported (the answer's, or
estimated). Try a template by hand with the answers its transcript scripts:

  agentdock mockllm --script templates/cognitive-reasoner/tests/modes.json &
  LLM_PROVIDER=openai LLM_BASE_URL=http://127.0.0.1:8090/v1 OPENAI_API_KEY=x agentdock serve

Every request takes the next answer, whatever its agent or session. Once all
are served, each request gets a text answer saying so; restart to replay.

With --prefix-cache the usage of every answer is what a provider's prompt
cache would report: the request's input tokens and those of its longest start
in common with an earlier request (prompt_tokens_details.cached_tokens;
Anthropic's cache fields), so the page's usage line shows what the template's
tool filtering keeps cached (docs/orchestration.md). It keeps every request it
received: for trying a template by hand, not with --chunks.

flags:
`

// parseMockLLM reads the flags; errors say which flag was wrong.
func parseMockLLM(args []string, stderr io.Writer) (mockOptions, error) {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o mockOptions
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8090", "listen address, host:port")
	fs.DurationVar(&o.ttft, "ttft", 0, "time to first token: the delay before the first text chunk (headers go out at once)")
	fs.DurationVar(&o.interTok, "inter-token", 0, "delay before every later chunk")
	fs.IntVar(&o.chunks, "chunks", 0, "text chunks per answer (0: the default three-chunk answer)")
	fs.IntVar(&o.inputTokens, "input-tokens", 40, "prompt tokens reported in the usage")
	fs.StringVar(&o.scriptFile, "script", "", "serve these model answers in order: a transcript, or a file of answers")
	fs.BoolVar(&o.prefixCache, "prefix-cache", false, "report usage as a prompt cache would: input and cached tokens of each request")
	fs.Usage = func() {
		fmt.Fprint(stderr, mockllmUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q (the mock takes only flags)", fs.Args()))
	}
	if strings.TrimSpace(o.addr) == "" {
		errs = append(errs, errors.New("--addr: empty; want host:port, e.g. 127.0.0.1:8090"))
	}
	if o.ttft < 0 || o.ttft > mockMaxTTFT {
		errs = append(errs, fmt.Errorf("--ttft %v: want a duration from 0 to %v", o.ttft, mockMaxTTFT))
	}
	if o.interTok < 0 || o.interTok > mockMaxInterToken {
		errs = append(errs, fmt.Errorf("--inter-token %v: want a duration from 0 to %v", o.interTok, mockMaxInterToken))
	}
	if o.chunks < 0 || o.chunks > mockMaxChunks {
		errs = append(errs, fmt.Errorf("--chunks %d: want 0 (the default answer) to %d", o.chunks, mockMaxChunks))
	}
	if o.inputTokens < 0 {
		errs = append(errs, fmt.Errorf("--input-tokens %d: want >= 0", o.inputTokens))
	}
	if o.prefixCache && o.chunks > 0 {
		errs = append(errs, errors.New("--prefix-cache and --chunks: the prefix cache keeps every request, which a load run would grow without bound"))
	}
	if o.scriptFile != "" {
		if o.chunks > 0 {
			errs = append(errs, errors.New("--script and --chunks: give one answer source"))
		}
		answers, err := transcript.LoadAnswers(o.scriptFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--script: %w", err))
		}
		o.answers = answers
	}
	return o, errors.Join(errs...)
}

// queue is the scripted answers as mock scripts, paced as the flags say.
func (o mockOptions) queue() []mockllm.Script {
	out := make([]mockllm.Script, len(o.answers))
	for i, a := range o.answers {
		s := mockllm.Script{TimeToFirstToken: o.ttft, InterTokenDelay: o.interTok, EstimateUsage: true}
		if a.Text != "" {
			// A delta per word, as a model streams.
			s.Text = strings.SplitAfter(a.Text, " ")
		}
		for _, c := range a.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			s.ToolCalls = append(s.ToolCalls, mockllm.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		}
		if a.Usage != nil {
			s.Usage = &mockllm.Usage{Input: int(a.Usage.Prompt), Output: int(a.Usage.Completion)}
		}
		out[i] = s
	}
	return out
}

// script is the answer the flags describe.
func (o mockOptions) script() mockllm.Script {
	s := mockllm.DefaultScript
	if o.chunks > 0 {
		s = mockllm.Script{Chunks: o.chunks, Usage: &mockllm.Usage{Input: o.inputTokens, Output: o.chunks}}
	} else {
		u := *s.Usage
		u.Input = o.inputTokens
		s.Usage = &u
	}
	s.TimeToFirstToken, s.InterTokenDelay = o.ttft, o.interTok
	return s
}

// mockllmCommand is the mockllm subcommand: exit 2 on bad flags, 1 when it
// cannot listen, 0 after ctx ends it.
func mockllmCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseMockLLM(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "agentdock mockllm:", err)
		return 2
	}
	s := o.script()
	answer := "the default answer"
	cfg := mockllm.Config{Default: &s, MaxRecorded: -1, PrefixCache: o.prefixCache}
	switch {
	case o.chunks > 0:
		answer = fmt.Sprintf("%d chunks", o.chunks)
	case o.scriptFile != "":
		answer = fmt.Sprintf("the %d answers of %s in order", len(o.answers), o.scriptFile)
		cfg.Queue = o.queue()
		s = mockllm.Script{EstimateUsage: true,
			Text: []string{fmt.Sprintf("(mockllm: all %d answers of %s were served; restart mockllm to replay them.)", len(o.answers), o.scriptFile)}}
	}
	if o.prefixCache {
		answer += ", usage as a prompt cache counts it"
	}
	fmt.Fprintf(stdout, "mock model server on http://%s (OpenAI: /v1/chat/completions, Anthropic: /v1/messages): %s, first after %v, then %v apart\n",
		o.addr, answer, o.ttft, o.interTok)
	if err := mockllm.ListenAndServe(ctx, o.addr, cfg); err != nil {
		fmt.Fprintln(stderr, "agentdock mockllm:", err)
		return 1
	}
	return 0
}
