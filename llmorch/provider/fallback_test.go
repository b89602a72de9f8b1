package provider

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// byModel is a scripted provider that answers each request by the model
// it names: a model with a queue of failures takes the next one, any
// other answers with its name. One server stands for several models, as
// a provider serves several; its requests say which model was called,
// in order.
type byModel struct {
	srv   *mockllm.Server
	fails map[string][]mockllm.Script
}

func newByModel(t *testing.T) *byModel {
	b := &byModel{fails: map[string][]mockllm.Script{}}
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	b.srv = mockllm.New(mockllm.WithResponder(func(r mockllm.Request) mockllm.Script {
		<-ch
		defer func() { ch <- struct{}{} }()
		if q := b.fails[r.Model]; len(q) > 0 {
			b.fails[r.Model] = q[1:]
			return q[0]
		}
		return mockllm.Script{Text: []string{"answer from ", r.Model}, Usage: &mockllm.Usage{Input: 10, Output: 3}}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

// fail queues failures of model (set before the calls that meet them).
func (b *byModel) fail(model string, s ...mockllm.Script) {
	b.fails[model] = append(b.fails[model], s...)
}

// models lists the models the requests named, in order.
func (b *byModel) models() []string {
	var out []string
	for _, r := range b.srv.Requests() {
		out = append(out, r.Model)
	}
	return out
}

func (b *byModel) candidate(t *testing.T, key, model string, window int, edit ...func(*Config)) llmorch.Candidate {
	m, _ := testModel(t, b.srv, OpenAI, append([]func(*Config){func(c *Config) { c.Model = model; c.IdleTimeout = 200 * time.Millisecond }}, edit...)...)
	return llmorch.Candidate{Model: m, Config: key, ContextWindow: window}
}

// TestFallbacks: a call whose model fails before its first token, with an
// error retrying will not cure (a 5xx after the retries, a 429 asking to
// wait longer than the chain waits, a stream that stays silent, a request
// longer than the model's context when the next model's is larger), is
// answered by the next model of its fallbacks, after a KindFallback event
// naming both; a failure after the first token, or another error, ends
// the call as it is.
func TestFallbacks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := newByModel(t)
	defer b.srv.Close()
	primary := b.candidate(t, "llm.openai", "gpt-primary", 8000)
	backup := b.candidate(t, "llm.backup", "gpt-backup", 128000)
	third := b.candidate(t, "llm.third", "gpt-third", 4000)
	chain := llmorch.Fallbacks(5*time.Second, primary, backup, third)
	if chain.Info() != primary.Model.Info() {
		t.Errorf("Info = %+v, want the primary's", chain.Info())
	}
	contextErr := mockllm.Script{Status: http.StatusBadRequest, ErrorMessage: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."}
	stall := mockllm.Script{Text: []string{"never"}, TimeToFirstToken: time.Minute}
	cases := []struct {
		name     string
		fails    map[string][]mockllm.Script
		want     string   // the answer's text ("" for an error)
		calls    []string // the models called, in order
		code     string   // the error's code, when it fails
		fallback bool     // a KindFallback event came
	}{
		{"503 after the retries", map[string][]mockllm.Script{"gpt-primary": {mockllm.ErrorScript(503, 0), mockllm.ErrorScript(503, 0), mockllm.ErrorScript(503, 0)}},
			"answer from gpt-backup", []string{"gpt-primary", "gpt-primary", "gpt-primary", "gpt-backup"}, "", true},
		{"503 cured by a retry", map[string][]mockllm.Script{"gpt-primary": {mockllm.ErrorScript(503, 0)}},
			"answer from gpt-primary", []string{"gpt-primary", "gpt-primary"}, "", false},
		{"429 asking for longer than the chain waits", map[string][]mockllm.Script{"gpt-primary": {mockllm.ErrorScript(429, time.Minute)}},
			"answer from gpt-backup", []string{"gpt-primary", "gpt-backup"}, "", true},
		{"429 asking for a short wait is waited for", map[string][]mockllm.Script{"gpt-primary": {mockllm.ErrorScript(429, time.Second)}},
			"answer from gpt-primary", []string{"gpt-primary", "gpt-primary"}, "", false},
		{"a stream silent before its first token", map[string][]mockllm.Script{"gpt-primary": {stall, stall, stall}},
			"answer from gpt-backup", []string{"gpt-primary", "gpt-primary", "gpt-primary", "gpt-backup"}, "", true},
		{"a failure after the first token ends the call", map[string][]mockllm.Script{"gpt-primary": {{Text: []string{"half ", "an answer"}, Fail: mockllm.FailAbort, FailAfter: 1}}},
			"", []string{"gpt-primary"}, CodeUnavailable, false},
		{"a stall after the first token ends the call", map[string][]mockllm.Script{"gpt-primary": {{Text: []string{"half ", "an answer"}, InterTokenDelay: time.Minute}}},
			"", []string{"gpt-primary"}, CodeTimeout, false},
		{"a refused key is not an outage", map[string][]mockllm.Script{"gpt-primary": {mockllm.ErrorScript(401, 0)}},
			"", []string{"gpt-primary"}, CodeAuth, false},
		{"context length: the next larger context answers", map[string][]mockllm.Script{"gpt-primary": {contextErr}},
			"answer from gpt-backup", []string{"gpt-primary", "gpt-backup"}, "", true},
		{"context length: a smaller context is skipped", map[string][]mockllm.Script{"gpt-primary": {mockllm.ErrorScript(503, 0), mockllm.ErrorScript(503, 0), mockllm.ErrorScript(503, 0)}, "gpt-backup": {contextErr}},
			"", []string{"gpt-primary", "gpt-primary", "gpt-primary", "gpt-backup"}, CodeContextLength, true},
		{"every model down: the last one's error, naming the others'", map[string][]mockllm.Script{
			"gpt-primary": {mockllm.ErrorScript(503, 0), mockllm.ErrorScript(503, 0), mockllm.ErrorScript(503, 0)},
			"gpt-backup":  {mockllm.ErrorScript(502, 0), mockllm.ErrorScript(502, 0), mockllm.ErrorScript(502, 0)},
			"gpt-third":   {mockllm.ErrorScript(500, 0), mockllm.ErrorScript(500, 0), mockllm.ErrorScript(500, 0)}},
			"", slices.Concat(slices.Repeat([]string{"gpt-primary"}, 3), slices.Repeat([]string{"gpt-backup"}, 3), slices.Repeat([]string{"gpt-third"}, 3)), CodeUnavailable, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(b.models())
			for m, s := range tc.fails {
				b.fail(m, s...)
			}
			evs, err := collect(t, chain, t.Context(), userReq("hi"))
			calls := b.models()[before:]
			if !slices.Equal(calls, tc.calls) {
				t.Errorf("models called %v, want %v", calls, tc.calls)
			}
			var fb *chat.Fallback
			for _, ev := range evs {
				if ev.Kind == chat.KindFallback {
					fb = ev.Fallback
				}
			}
			if (fb != nil) != tc.fallback {
				t.Errorf("fallback event %+v, want one: %v", fb, tc.fallback)
			}
			if tc.code != "" {
				if code(err) != tc.code {
					t.Fatalf("err = %v, want code %s", err, tc.code)
				}
				return
			}
			if err != nil || textOf(evs) != tc.want {
				t.Fatalf("text %q, err %v; want %q", textOf(evs), err, tc.want)
			}
			if fb != nil && (fb.From.Config != "llm.openai" || fb.From.Model != "gpt-primary" || fb.To.Config != "llm.backup" || fb.To.Model != "gpt-backup" || fb.Error.Code == "") {
				t.Errorf("fallback = %+v", fb)
			}
			if k := slices.Index(kinds(evs), chat.KindFallback); fb != nil && k != 0 {
				t.Errorf("the fallback event is event %d, want the first: %v", k, kinds(evs))
			}
		})
	}
}

// TestFallbackErrorNamesEveryModel: when every model of the chain fails,
// the error is the last one's, and says what the others failed with.
func TestFallbackErrorNamesEveryModel(t *testing.T) {
	b := newByModel(t)
	chain := llmorch.Fallbacks(0, b.candidate(t, "llm.a", "model-a", 0, func(c *Config) { c.MaxRetries = -1 }),
		b.candidate(t, "llm.b", "model-b", 0, func(c *Config) { c.MaxRetries = -1 }))
	b.fail("model-a", mockllm.ErrorScript(503, 0))
	b.fail("model-b", mockllm.ErrorScript(401, 0))
	_, err := collect(t, chain, t.Context(), userReq("hi"))
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != CodeAuth || !strings.Contains(ce.Message, "model-b") || !strings.Contains(ce.Message, "model-a") {
		t.Fatalf("err = %v", err)
	}
	if errors.Is(err, llmorch.ErrModelUnavailable) != true {
		t.Errorf("the first model's outage is not kept in the chain: %v", err)
	}
	// A cancelled call is not handed on.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := len(b.models())
	if _, err := collect(t, chain, ctx, userReq("hi")); !errors.Is(err, context.Canceled) || len(b.models()) != before {
		t.Errorf("cancelled: err %v, calls %v", err, b.models()[before:])
	}
}
