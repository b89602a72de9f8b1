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
}

const mockllmUsage = `usage: agentdock mockllm [--addr ADDR] [--ttft D] [--inter-token D] [--chunks N]

Serves a mock model on ADDR: OpenAI chat completions (POST /v1/chat/completions)
and Anthropic messages (POST /v1/messages), streaming or not. Every request gets
the same answer: N text chunks ("tok0 ", "tok1 ", ...) with --chunks, otherwise
"Hello from mockllm." in three chunks; the first after --ttft, each later one
--inter-token after the one before; usage is reported. Point the server at it
for a paced load test:

  agentdock mockllm --addr 127.0.0.1:8090 --ttft 100ms --inter-token 10ms --chunks 64 &
  LLM_PROVIDER=openai LLM_BASE_URL=http://127.0.0.1:8090/v1 OPENAI_API_KEY=x agentdock serve

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
	return o, errors.Join(errs...)
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
	if o.chunks > 0 {
		answer = fmt.Sprintf("%d chunks", o.chunks)
	}
	fmt.Fprintf(stdout, "mock model server on http://%s (OpenAI: /v1/chat/completions, Anthropic: /v1/messages): %s, first after %v, then %v apart\n",
		o.addr, answer, o.ttft, o.interTok)
	if err := mockllm.ListenAndServe(ctx, o.addr, mockllm.Config{Default: &s, MaxRecorded: -1}); err != nil {
		fmt.Fprintln(stderr, "agentdock mockllm:", err)
		return 1
	}
	return 0
}
