package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/orchestration"
)

const secretKey = "sk-test-PLANTED-SECRET-0123456789"

var testTools = []chat.ToolSpec{
	{Name: "think", Description: "Think.", Parameters: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string"}}}`)},
	{Name: "search", Description: "Search.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
	{Name: "critique"},
}

// testModel returns a model against srv speaking wire, whose retry waits
// are recorded instead of slept.
func testModel(t testing.TB, srv *mockllm.Server, wire string, edit ...func(*Config)) (*model, *[]time.Duration) {
	t.Helper()
	cfg := Config{Provider: wire, Model: "test-model", APIKey: secretKey, BaseURL: srv.URL() + "/v1"}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := newModel(cfg)
	if err != nil {
		t.Fatalf("newModel: %v", err)
	}
	var mu sync.Mutex
	waits := &[]time.Duration{}
	m.sleep = func(done <-chan struct{}, d time.Duration) bool {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	return m, waits
}

func collect(t testing.TB, m llmorch.Model, ctx context.Context, req llmorch.Request) ([]chat.Event, error) {
	t.Helper()
	var evs []chat.Event
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func userReq(text string) llmorch.Request {
	return llmorch.Request{System: "be brief", Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}, Tools: testTools}
}

func textOf(evs []chat.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Kind == chat.KindTextDelta {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

func callsOf(evs []chat.Event) []chat.ToolCall {
	var out []chat.ToolCall
	for _, ev := range evs {
		if ev.Kind == chat.KindToolCall {
			out = append(out, *ev.ToolCall)
		}
	}
	return out
}

func kinds(evs []chat.Event) []chat.Kind {
	out := make([]chat.Kind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func code(err error) string {
	var ce *chat.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func TestOpenAIToolCallStyles(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	m, _ := testModel(t, srv, OpenAI)

	three := []mockllm.ToolCall{
		{ID: "call_a", Name: "think", Arguments: `{"topic":"alpha","n":[1,2,3]}`},
		{ID: "call_b", Name: "search", Arguments: `{"query":"beta gamma delta"}`},
		{ID: "call_c", Name: "critique", Arguments: `{"subject":"ünïcödé ✓"}`},
	}
	want := []chat.ToolCall{
		{ID: "call_a", Name: "think", Arguments: json.RawMessage(`{"topic":"alpha","n":[1,2,3]}`)},
		{ID: "call_b", Name: "search", Arguments: json.RawMessage(`{"query":"beta gamma delta"}`)},
		{ID: "call_c", Name: "critique", Arguments: json.RawMessage(`{"subject":"ünïcödé ✓"}`)},
	}
	cases := []struct {
		name  string
		style mockllm.Style
		calls int
	}{
		{"one call", 0, 1},
		{"parallel in order", 0, 3},
		{"interleaved", mockllm.StyleInterleaved, 3},
		{"repeated type (phantom style)", mockllm.StyleRepeatType, 2},
		{"trailing empty delta", mockllm.StyleTrailingEmpty, 2},
		{"all quirks at once", mockllm.StyleInterleaved | mockllm.StyleRepeatType | mockllm.StyleTrailingEmpty, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"Let me ", "check."}, ToolCalls: three[:tc.calls], Style: tc.style,
				ArgPieces: 4, Usage: &mockllm.Usage{Input: 10, Output: 5}})
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			got := callsOf(evs)
			if !equalCalls(got, want[:tc.calls]) {
				t.Fatalf("calls = %s\nwant %s", mustJSON(got), mustJSON(want[:tc.calls]))
			}
			if textOf(evs) != "Let me check." {
				t.Errorf("text = %q (tool-call JSON must never be text)", textOf(evs))
			}
			wantKinds := []chat.Kind{chat.KindTextDelta, chat.KindTextDelta}
			for range tc.calls {
				wantKinds = append(wantKinds, chat.KindToolCall)
			}
			wantKinds = append(wantKinds, chat.KindUsage)
			if !slices.Equal(kinds(evs), wantKinds) {
				t.Errorf("kinds = %v, want %v", kinds(evs), wantKinds)
			}
		})
	}
}

func equalCalls(a, b []chat.ToolCall) bool {
	return slices.EqualFunc(a, b, func(x, y chat.ToolCall) bool {
		return x.ID == y.ID && x.Name == y.Name && string(x.Arguments) == string(y.Arguments)
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAnthropicStream(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	m, _ := testModel(t, srv, Anthropic)
	srv.Enqueue(mockllm.Script{Text: []string{"On ", "it."}, ArgPieces: 3, Usage: &mockllm.Usage{Input: 21, Output: 9},
		ToolCalls: []mockllm.ToolCall{
			{ID: "toolu_1", Name: "think", Arguments: `{"topic":"x"}`},
			{ID: "toolu_2", Name: "search", Arguments: `{"query":"y"}`},
		}})
	evs, err := collect(t, m, t.Context(), userReq("hi"))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []chat.ToolCall{
		{ID: "toolu_1", Name: "think", Arguments: json.RawMessage(`{"topic":"x"}`)},
		{ID: "toolu_2", Name: "search", Arguments: json.RawMessage(`{"query":"y"}`)},
	}
	if got := callsOf(evs); !equalCalls(got, want) {
		t.Fatalf("calls = %s, want %s", mustJSON(got), mustJSON(want))
	}
	if textOf(evs) != "On it." {
		t.Errorf("text = %q", textOf(evs))
	}
	last := evs[len(evs)-1]
	if last.Kind != chat.KindUsage || *last.Usage != (chat.Usage{Prompt: 21, Completion: 9, Total: 30}) {
		t.Errorf("last event = %+v, want usage 21/9/30", last)
	}
}

func TestUsage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		m, _ := testModel(t, srv, wire)
		t.Run(wire+"/reported", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"a"}, Usage: &mockllm.Usage{Input: 7, Output: 3}})
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatal(err)
			}
			var usages []chat.Usage
			for _, ev := range evs {
				if ev.Kind == chat.KindUsage {
					usages = append(usages, *ev.Usage)
				}
			}
			if !slices.Equal(usages, []chat.Usage{{Prompt: 7, Completion: 3, Total: 10}}) {
				t.Errorf("usage events = %v, want exactly one 7/3/10", usages)
			}
		})
		t.Run(wire+"/cached", func(t *testing.T) {
			// The same counts in each wire's convention (OpenAI's cached
			// tokens inside prompt_tokens, Anthropic's cache counts outside
			// input_tokens) come out the same: the cached input is part of
			// the prompt.
			srv.Enqueue(mockllm.Script{Text: []string{"a"}, Usage: &mockllm.Usage{Input: 2048, Output: 3, CacheRead: 1536, CacheWrite: 256}})
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatal(err)
			}
			want := chat.Usage{Prompt: 2048, Completion: 3, Total: 2051, CacheRead: 1536, CacheWrite: 256}
			if wire == OpenAI {
				want.CacheWrite = 0 // OpenAI reports no cache writes
			}
			if got := evs[len(evs)-1]; got.Kind != chat.KindUsage || *got.Usage != want {
				t.Errorf("last event = %+v, want usage %+v", got, want)
			}
		})
		t.Run(wire+"/absent", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"a", "b"}})
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(kinds(evs), []chat.Kind{chat.KindTextDelta, chat.KindTextDelta}) {
				t.Errorf("kinds = %v, want two text deltas and no usage", kinds(evs))
			}
		})
	}
}

func TestInvalidToolCalls(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			m, _ := testModel(t, srv, wire)
			srv.Enqueue(mockllm.Script{ToolCalls: []mockllm.ToolCall{
				{ID: "c1", Name: "think", Arguments: ``},              // empty -> {}
				{ID: "c2", Name: "rm_rf", Arguments: `{"path":"/"}`},  // not offered: the orchestration refuses it
				{ID: "c3", Name: "search", Arguments: `{"query":"x"`}, // truncated JSON
				{ID: "c4", Name: "search", Arguments: `["not","object"]`},
				{Name: "think", Arguments: `{"topic":"no id"}`}, // ID generated
				{ID: "c1", Name: "think", Arguments: `{}`},      // duplicate ID regenerated
			}})
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if len(evs) != 6 {
				t.Fatalf("got %d events, want 6: %s", len(evs), mustJSON(evs))
			}
			ids := map[string]bool{}
			for i, ev := range evs {
				if ev.ToolCall == nil || ev.ToolCall.ID == "" || ids[ev.ToolCall.ID] {
					t.Fatalf("event %d has no call or a missing/duplicate ID: %s", i, mustJSON(ev))
				}
				ids[ev.ToolCall.ID] = true
				if !isJSONObject(ev.ToolCall.Arguments) {
					t.Errorf("event %d arguments %q are not an object", i, ev.ToolCall.Arguments)
				}
			}
			wantKinds := []chat.Kind{chat.KindToolCall, chat.KindToolCall, chat.KindError, chat.KindError, chat.KindToolCall, chat.KindToolCall}
			if !slices.Equal(kinds(evs), wantKinds) {
				t.Fatalf("kinds = %v, want %v", kinds(evs), wantKinds)
			}
			if string(evs[0].ToolCall.Arguments) != "{}" || evs[0].ToolCall.ID != "c1" {
				t.Errorf("empty arguments: %s", mustJSON(evs[0]))
			}
			if c := evs[1].ToolCall; c.ID != "c2" || c.Name != "rm_rf" || string(c.Arguments) != `{"path":"/"}` {
				t.Errorf("a tool the request did not offer is passed on for the orchestration to refuse: %s", mustJSON(evs[1]))
			}
			for _, i := range []int{2, 3} {
				if e := evs[i].Error; e.Code != CodeInvalidToolCall || !strings.Contains(e.Message, "not a valid JSON object") {
					t.Errorf("bad arguments %d: %s", i, mustJSON(evs[i]))
				}
			}
			if evs[4].ToolCall.ID == "" || string(evs[4].ToolCall.Arguments) != `{"topic":"no id"}` {
				t.Errorf("generated ID: %s", mustJSON(evs[4]))
			}
			if evs[5].ToolCall.ID == "c1" {
				t.Errorf("duplicate ID kept: %s", mustJSON(evs[5]))
			}
		})
	}
}

func TestLongLines(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	big := strings.Repeat("x", 200<<10)
	args := `{"topic":"` + strings.Repeat("y", 150<<10) + `"}`
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			m, _ := testModel(t, srv, wire)
			srv.Enqueue(mockllm.Script{Text: []string{big, "!"}, ToolCalls: []mockllm.ToolCall{{ID: "c", Name: "think", Arguments: args}}, ArgPieces: 1})
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if textOf(evs) != big+"!" {
				t.Errorf("text has %d bytes, want %d", len(textOf(evs)), len(big)+1)
			}
			if c := callsOf(evs); len(c) != 1 || string(c[0].Arguments) != args {
				t.Errorf("long-argument call lost: %d calls", len(c))
			}
		})
	}
}

func TestRetryOn429(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			m, waits := testModel(t, srv, wire)
			before := len(srv.Requests())
			srv.Enqueue(mockllm.ErrorScript(http.StatusTooManyRequests, 1500*time.Millisecond), mockllm.TextScript("ok"))
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if textOf(evs) != "ok" {
				t.Errorf("text = %q", textOf(evs))
			}
			if n := len(srv.Requests()) - before; n != 2 {
				t.Errorf("mock got %d requests, want 2", n)
			}
			// retry-after-ms wins over the rounded-up Retry-After seconds.
			if !slices.Equal(*waits, []time.Duration{1500 * time.Millisecond}) {
				t.Errorf("waits = %v, want the server's 1.5s", *waits)
			}
		})
	}
}

func TestRetryLimits(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	t.Run("exhausted", func(t *testing.T) {
		m, waits := testModel(t, srv, OpenAI, func(c *Config) { c.RetryBaseDelay = time.Millisecond })
		before := len(srv.Requests())
		srv.Enqueue(mockllm.ErrorScript(503, 0), mockllm.ErrorScript(502, 0), mockllm.ErrorScript(500, 0), mockllm.TextScript("unused"))
		_, err := collect(t, m, t.Context(), userReq("hi"))
		if code(err) != CodeUnavailable || !strings.Contains(err.Error(), "after 3 attempts") {
			t.Fatalf("err = %v, want provider_unavailable after 3 attempts", err)
		}
		if n := len(srv.Requests()) - before; n != 3 || len(*waits) != 2 {
			t.Errorf("requests = %d, waits = %v; want 3 requests, 2 waits", n, *waits)
		}
		for i, w := range *waits {
			if hi := time.Duration(1.2*float64(time.Millisecond<<i)) + 1; w <= 0 || w > hi {
				t.Errorf("wait %d = %v, want exponential backoff up to %v", i, w, hi)
			}
		}
		if srv.Pending() != 1 {
			t.Fatalf("pending = %d", srv.Pending())
		}
		srv.Enqueue()
		_, _ = collect(t, m, t.Context(), userReq("drain"))
	})
	t.Run("retry-after over the limit", func(t *testing.T) {
		m, waits := testModel(t, srv, OpenAI, func(c *Config) { c.MaxRetryDelay = time.Second })
		before := len(srv.Requests())
		srv.Enqueue(mockllm.ErrorScript(429, time.Minute))
		_, err := collect(t, m, t.Context(), userReq("hi"))
		if code(err) != CodeRateLimited || len(*waits) != 0 || len(srv.Requests())-before != 1 {
			t.Errorf("err = %v, waits = %v; want an immediate rate_limited", err, *waits)
		}
	})
	t.Run("no retry on 400", func(t *testing.T) {
		m, _ := testModel(t, srv, Anthropic)
		before := len(srv.Requests())
		srv.Enqueue(mockllm.ErrorScript(400, 0))
		_, err := collect(t, m, t.Context(), userReq("hi"))
		if code(err) != CodeProviderError || len(srv.Requests())-before != 1 {
			t.Errorf("err = %v; want one provider_error", err)
		}
	})
	t.Run("retries disabled", func(t *testing.T) {
		m, _ := testModel(t, srv, OpenAI, func(c *Config) { c.MaxRetries = -1 })
		before := len(srv.Requests())
		srv.Enqueue(mockllm.ErrorScript(503, 0))
		_, err := collect(t, m, t.Context(), userReq("hi"))
		if code(err) != CodeUnavailable || len(srv.Requests())-before != 1 {
			t.Errorf("err = %v; want one provider_unavailable", err)
		}
	})
}

func TestMidStreamFailure(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		for _, fail := range []mockllm.Fail{mockllm.FailAbort, mockllm.FailErrorEvent} {
			t.Run(wire, func(t *testing.T) {
				m, waits := testModel(t, srv, wire)
				before := len(srv.Requests())
				srv.Enqueue(mockllm.Script{Text: []string{"one ", "two ", "three"}, Fail: fail, FailAfter: 2}, mockllm.TextScript("unused"))
				evs, err := collect(t, m, t.Context(), userReq("hi"))
				if code(err) != CodeUnavailable {
					t.Fatalf("err = %v, want provider_unavailable", err)
				}
				if textOf(evs) != "one two " {
					t.Errorf("text before the failure = %q", textOf(evs))
				}
				if n := len(srv.Requests()) - before; n != 1 || len(*waits) != 0 {
					t.Errorf("requests = %d, waits = %v: output had started, so no retry", n, *waits)
				}
				if srv.Pending() != 1 {
					t.Fatalf("pending = %d", srv.Pending())
				}
				_, _ = collect(t, m, t.Context(), userReq("drain"))
			})
		}
	}
}

func TestFailureBeforeFirstTokenIsRetried(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			m, waits := testModel(t, srv, wire)
			before := len(srv.Requests())
			srv.Enqueue(mockllm.Script{Text: []string{"lost"}, Fail: mockllm.FailAbort}, mockllm.TextScript("fine"))
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil || textOf(evs) != "fine" {
				t.Fatalf("evs = %v, err = %v", textOf(evs), err)
			}
			if n := len(srv.Requests()) - before; n != 2 || len(*waits) != 1 {
				t.Errorf("requests = %d, waits = %v; want one retry", n, *waits)
			}
		})
	}
}

func TestCancellation(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		m, _ := testModel(t, srv, wire)
		t.Run(wire+"/cancel mid-stream", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"first", "never"}, InterTokenDelay: time.Hour})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var evs []chat.Event
			var gotErr error
			for ev, err := range m.Stream(ctx, userReq("hi")) {
				if err != nil {
					gotErr = err
					break
				}
				evs = append(evs, ev)
				cancel()
			}
			if textOf(evs) != "first" || !errors.Is(gotErr, context.Canceled) || code(gotErr) != CodeCancelled {
				t.Errorf("text = %q, err = %v; want the first delta, then cancelled", textOf(evs), gotErr)
			}
		})
		t.Run(wire+"/deadline before first token", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"late"}, TimeToFirstToken: time.Hour})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
			defer cancel()
			_, err := collect(t, m, ctx, userReq("hi"))
			if !errors.Is(err, context.DeadlineExceeded) || code(err) != CodeTimeout {
				t.Errorf("err = %v, want timeout", err)
			}
		})
		t.Run(wire+"/consumer stops early", func(t *testing.T) {
			srv.Enqueue(mockllm.Script{Text: []string{"a", "b", "c"}, InterTokenDelay: time.Hour})
			for range m.Stream(t.Context(), userReq("hi")) {
				break
			}
		})
		t.Run(wire+"/config timeout", func(t *testing.T) {
			// Long enough for the first delta's way on a loaded machine
			// under the race detector: the case is that the timeout cuts
			// the stream after it, not how soon the delta comes.
			mt, _ := testModel(t, srv, wire, func(c *Config) { c.Timeout = 500 * time.Millisecond })
			srv.Enqueue(mockllm.Script{Text: []string{"a", "b"}, InterTokenDelay: time.Hour})
			evs, err := collect(t, mt, t.Context(), userReq("hi"))
			if textOf(evs) != "a" || code(err) != CodeTimeout {
				t.Errorf("text = %q, err = %v; want a, then timeout", textOf(evs), err)
			}
		})
	}
}

func TestErrorsCarryNoSecrets(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	body := "Incorrect API key provided: " + secretKey + ". raw provider body"
	cases := []struct {
		status int
		code   string
	}{{401, CodeAuth}, {403, CodeAuth}, {400, CodeProviderError}, {404, CodeProviderError}, {429, CodeRateLimited}, {500, CodeUnavailable}, {529, CodeUnavailable}}
	for _, wire := range []string{OpenAI, Anthropic} {
		m, _ := testModel(t, srv, wire, func(c *Config) { c.MaxRetries = -1 })
		for _, tc := range cases {
			srv.Enqueue(mockllm.Script{Status: tc.status, ErrorMessage: body})
			_, err := collect(t, m, t.Context(), userReq("hi"))
			if err == nil {
				t.Fatalf("%s %d: no error", wire, tc.status)
			}
			if strings.Contains(err.Error(), "PLANTED") || strings.Contains(err.Error(), "raw provider body") || strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("%s %d: error leaks: %v", wire, tc.status, err)
			}
			if code(err) != tc.code || !strings.Contains(err.Error(), "HTTP ") {
				t.Errorf("%s %d: err = %v, want code %s", wire, tc.status, err, tc.code)
			}
		}
	}
	// A dead server: the connection error must not leak the address or key.
	dead := mockllm.New()
	url := dead.URL()
	dead.Close()
	m, err := newModel(Config{Provider: OpenAI, Model: "x", APIKey: secretKey, BaseURL: url + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = collect(t, m, t.Context(), userReq("hi"))
	if code(err) != CodeUnavailable || strings.Contains(err.Error(), "PLANTED") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("dead server: %v", err)
	}
}

func TestRequestBodyOpenAI(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	temp := 0.3
	history := []chat.Message{
		{Role: chat.RoleUser, Content: "plan it"},
		{Role: chat.RoleAssistant, Content: "thinking", ToolCalls: []chat.ToolCall{
			{ID: "c1", Name: "think", Arguments: json.RawMessage(`{"topic":"a"}`)},
			{ID: "c2", Name: "search", Arguments: json.RawMessage(`{"query":"b"}`)}}},
		{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "think", Content: "thought"},
		{Role: chat.RoleTool, ToolCallID: "c2", ToolName: "search", Content: "failed", IsError: true},
	}
	cases := []struct {
		name    string
		cfg     func(*Config)
		req     llmorch.Request
		check   func(t *testing.T, r mockllm.Request)
		keyless bool
	}{
		{"defaults", nil, llmorch.Request{System: "sys", Messages: history, Tools: testTools}, func(t *testing.T, r mockllm.Request) {
			if r.Temperature != nil || r.MaxTokens != nil || r.MaxCompletionTokens != nil {
				t.Errorf("unset temperature/max tokens were sent: %s", r.Body)
			}
		}, false},
		{"temperature and max_completion_tokens", func(c *Config) { c.Temperature = &temp; c.MaxTokens = 100 },
			llmorch.Request{System: "sys", Messages: history, Tools: testTools}, func(t *testing.T, r mockllm.Request) {
				if r.Temperature == nil || *r.Temperature != 0.3 || r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 100 || r.MaxTokens != nil {
					t.Errorf("body = %s", r.Body)
				}
			}, false},
		{"request overrides, legacy max_tokens", func(c *Config) { c.Temperature = &temp; c.MaxTokens = 100; c.LegacyMaxTokensField = true },
			llmorch.Request{System: "sys", Messages: history, Tools: testTools, Temperature: new(0.0), MaxTokens: 7}, func(t *testing.T, r mockllm.Request) {
				if r.Temperature == nil || *r.Temperature != 0 || r.MaxTokens == nil || *r.MaxTokens != 7 || r.MaxCompletionTokens != nil {
					t.Errorf("body = %s", r.Body)
				}
			}, false},
		{"keyless", func(c *Config) { c.APIKey = "" }, llmorch.Request{System: "sys", Messages: history, Tools: testTools}, func(t *testing.T, r mockllm.Request) {
			if h := r.Header.Get("Authorization"); h != "" {
				t.Errorf("keyless server got Authorization %q", h)
			}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edits := []func(*Config){}
			if tc.cfg != nil {
				edits = append(edits, tc.cfg)
			}
			m, _ := testModel(t, srv, OpenAI, edits...)
			srv.Enqueue(mockllm.TextScript("ok"))
			if _, err := collect(t, m, t.Context(), tc.req); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			r := reqs[len(reqs)-1]
			if r.API != mockllm.APIOpenAI || r.Path != "/v1/chat/completions" || r.Model != "test-model" || !r.Stream || !r.IncludeUsage {
				t.Errorf("request = %s %s model %q stream %v usage %v", r.API, r.Path, r.Model, r.Stream, r.IncludeUsage)
			}
			if !tc.keyless && r.Header.Get("Authorization") != "Bearer "+secretKey {
				t.Errorf("Authorization header missing")
			}
			if !slices.Equal(r.ToolNames(), []string{"think", "search", "critique"}) || string(r.Tools[2].Parameters) != string(emptySchema) {
				t.Errorf("tools = %v / %s", r.ToolNames(), r.Tools[2].Parameters)
			}
			if r.System != "sys" || len(r.Messages) != 4 {
				t.Fatalf("system %q, %d messages", r.System, len(r.Messages))
			}
			a := r.Messages[1]
			if a.Role != "assistant" || a.Text != "thinking" || len(a.ToolCalls) != 2 || a.ToolCalls[1].ID != "c2" || a.ToolCalls[1].Arguments != `{"query":"b"}` {
				t.Errorf("assistant message = %+v", a)
			}
			if res := r.Messages[3].ToolResults; r.Messages[3].Role != "tool" || len(res) != 1 || res[0].CallID != "c2" || res[0].Content != "failed" {
				t.Errorf("tool message = %+v", r.Messages[3])
			}
			tc.check(t, r)
		})
	}
}

func TestRequestBodyAnthropic(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	m, _ := testModel(t, srv, Anthropic, func(c *Config) { c.BaseURL = srv.URL() }) // root without /v1
	srv.Enqueue(mockllm.TextScript("ok"))
	req := llmorch.Request{System: "sys", Tools: testTools, Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "more sys"},
		{Role: chat.RoleUser, Content: "plan it"},
		{Role: chat.RoleAssistant, Content: "thinking", ToolCalls: []chat.ToolCall{
			{ID: "c1", Name: "think", Arguments: json.RawMessage(`{"topic":"a"}`)},
			{ID: "c2", Name: "search", Arguments: json.RawMessage(`{"query":"b"}`)}}},
		{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "think", Content: "thought"},
		{Role: chat.RoleTool, ToolCallID: "c2", ToolName: "search", Content: "failed", IsError: true},
		{Role: chat.RoleUser, Content: "go on"},
	}}
	if _, err := collect(t, m, t.Context(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.API != mockllm.APIAnthropic || r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != secretKey {
		t.Errorf("request %s %s, key header set: %v", r.API, r.Path, r.Header.Get("X-Api-Key") == secretKey)
	}
	if r.MaxTokens == nil || *r.MaxTokens != DefaultAnthropicMaxTokens || r.Temperature != nil {
		t.Errorf("max_tokens/temperature wrong: %s", r.Body)
	}
	if r.System != "sys\n\nmore sys" || !slices.Equal(r.ToolNames(), []string{"think", "search", "critique"}) {
		t.Errorf("system %q tools %v", r.System, r.ToolNames())
	}
	roles := make([]string, len(r.Messages))
	for i, msg := range r.Messages {
		roles[i] = msg.Role
	}
	// The tool results and the next user message form one user turn.
	if !slices.Equal(roles, []string{"user", "assistant", "user"}) {
		t.Fatalf("roles = %v, body %s", roles, r.Body)
	}
	a := r.Messages[1]
	if a.Text != "thinking" || len(a.ToolCalls) != 2 || a.ToolCalls[0].ID != "c1" || a.ToolCalls[1].Name != "search" {
		t.Errorf("assistant turn = %+v", a)
	}
	u := r.Messages[2]
	want := []mockllm.ToolResult{{CallID: "c1", Content: "thought"}, {CallID: "c2", Content: "failed", IsError: true}}
	if !slices.Equal(u.ToolResults, want) || u.Text != "go on" {
		t.Errorf("user turn = %+v", u)
	}
}

// TestLongCallIDs: a call ID a provider would refuse (over 40 bytes, as
// a client call's ID with its trail is, or with other characters) reaches
// it as one it takes, the same in the call and in its result, on both
// APIs, and with the error mark of its result kept (Anthropic's); short
// IDs pass as they are.
func TestLongCallIDs(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	long := orchestration.TrailID("call_0123456789abcdefghij", [][]string{{"think", "search"}}, []string{"reflect"})
	odd := "call.1:x"
	req := llmorch.Request{System: "sys", Tools: testTools, Messages: []chat.Message{
		{Role: chat.RoleUser, Content: "plan it"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: long, Name: "think"}, {ID: odd, Name: "search"}, {ID: "c3", Name: "critique"}}},
		{Role: chat.RoleTool, ToolCallID: long, ToolName: "think", Content: "thought"},
		{Role: chat.RoleTool, ToolCallID: odd, ToolName: "search", Content: "failed", IsError: true},
		{Role: chat.RoleTool, ToolCallID: "c3", ToolName: "critique", Content: "fine"},
		{Role: chat.RoleUser, Content: "go on"},
	}}
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
	for _, p := range []string{OpenAI, Anthropic} {
		m, _ := testModel(t, srv, p, func(c *Config) {
			if p == Anthropic {
				c.BaseURL = srv.URL()
			}
		})
		srv.Enqueue(mockllm.TextScript("ok"))
		if _, err := collect(t, m, t.Context(), req); err != nil {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		r := reqs[len(reqs)-1]
		var ids, results []string
		errs := map[string]bool{}
		for _, msg := range r.Messages {
			for _, c := range msg.ToolCalls {
				ids = append(ids, c.ID)
			}
			for _, res := range msg.ToolResults {
				results = append(results, res.CallID)
				errs[res.CallID] = res.IsError
			}
		}
		if len(ids) != 3 || !slices.Equal(ids, results) || ids[2] != "c3" || ids[0] == long || ids[1] == odd {
			t.Fatalf("%s: calls %v, results %v", p, ids, results)
		}
		for _, id := range ids {
			if !valid.MatchString(id) {
				t.Errorf("%s: ID %q", p, id)
			}
		}
		if p == Anthropic && (!errs[ids[1]] || errs[ids[0]]) {
			// Only Anthropic's wire marks a result as an error.
			t.Errorf("%s: error marks %v", p, errs)
		}
	}
	if wireID(long) != wireID(long) || wireID(long) == wireID(long+"x") {
		t.Fatal("wireID is not a function of the ID")
	}
}

func TestConfigValidation(t *testing.T) {
	good := Config{Provider: OpenAI, Model: "m", APIKey: "k"}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"keyless with base URL", func(c *Config) { c.APIKey = ""; c.BaseURL = "http://localhost:11434/v1" }, ""},
		{"unknown provider", func(c *Config) { c.Provider = "groq" }, `Provider "groq" is not supported`},
		{"no model", func(c *Config) { c.Model = " " }, "Model is empty"},
		{"no key", func(c *Config) { c.APIKey = "" }, "APIKey is empty"},
		{"bad URL", func(c *Config) { c.BaseURL = "localhost:8080" }, "BaseURL must start with http"},
		{"temperature", func(c *Config) { c.Temperature = new(2.5) }, "Temperature 2.5 is outside [0, 2]"},
		{"anthropic temperature", func(c *Config) { c.Provider = Anthropic; c.Temperature = new(1.5) }, "outside [0, 1]"},
		{"anthropic legacy field", func(c *Config) { c.Provider = Anthropic; c.LegacyMaxTokensField = true }, "LegacyMaxTokensField"},
		{"anthropic allowed tools", func(c *Config) { c.Provider = Anthropic; c.RestrictsTools = true }, "Anthropic has no allowed_tools"},
		{"negative tokens", func(c *Config) { c.MaxTokens = -1 }, "MaxTokens -1 is negative"},
		{"too many retries", func(c *Config) { c.MaxRetries = 11 }, "MaxRetries 11 is over 10"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "Timeout -1s is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := New(cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
	cfg := Config{Provider: OpenAI, Model: "m", APIKey: "k"}
	m, err := New(cfg)
	if err != nil || m.Info() != (llmorch.Info{Provider: OpenAI, Model: "m", Images: true, Files: true, Formats: true}) {
		t.Errorf("Info = %+v, %v", m.Info(), err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		provider string
		model    string
		want     Config
		usable   bool
		err      string
	}{
		{"anthropic with key", map[string]string{"ANTHROPIC_API_KEY": "ak"}, "anthropic", "claude-x",
			Config{Provider: Anthropic, Model: "claude-x", APIKey: "ak"}, true, ""},
		{"anthropic without any key", nil, "llm.anthropic", "claude-x",
			Config{Provider: Anthropic, Model: "claude-x"}, false, ""},
		{"openai overrides", map[string]string{"OPENAI_API_KEY": "ok", "OPENAI_BASE_URL": "http://h/v1", "OPENAI_MODEL": "gpt-y"}, "openai", "gpt-x",
			Config{Provider: OpenAI, Model: "gpt-y", APIKey: "ok", BaseURL: "http://h/v1"}, true, ""},
		{"groq maps to openai wire, own key only", map[string]string{"OPENAI_API_KEY": "ok", "GROQ_API_KEY": "gk"}, "groq", "",
			Config{Provider: OpenAI, Model: "llama-3.3-70b-versatile", APIKey: "gk", BaseURL: "https://api.groq.com/openai/v1"}, true, ""},
		{"openai key is not sent to gemini: openai answers with its own model", map[string]string{"OPENAI_API_KEY": "ok"}, "gemini", "gemini-x",
			Config{Provider: OpenAI, Model: "gpt-4o-mini", APIKey: "ok", RestrictsTools: true}, true, ""},
		{"the only configured provider answers for another's template", map[string]string{"OPENAI_API_KEY": "ok", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "llm.anthropic", "claude-x",
			Config{Provider: OpenAI, Model: "gpt-4o-mini", APIKey: "ok", BaseURL: "http://127.0.0.1:9/v1"}, true, ""},
		{"with LLM_MODEL", map[string]string{"ANTHROPIC_API_KEY": "ak", "LLM_MODEL": "m"}, "openai", "gpt-x",
			Config{Provider: Anthropic, Model: "m", APIKey: "ak"}, true, ""},
		{"several configured: none chosen", map[string]string{"ANTHROPIC_API_KEY": "ak", "GROQ_API_KEY": "gk"}, "openai", "gpt-x",
			Config{Provider: OpenAI, Model: "gpt-x", RestrictsTools: true}, false, ""},
		{"LLM_PROVIDER without a key stays unusable", map[string]string{"LLM_PROVIDER": "groq", "OPENAI_API_KEY": "ok"}, "openai", "",
			Config{Provider: OpenAI, Model: "llama-3.3-70b-versatile", BaseURL: "https://api.groq.com/openai/v1"}, false, ""},
		{"gemini via GOOGLE_API_KEY", map[string]string{"GOOGLE_API_KEY": "g"}, "gemini", "",
			Config{Provider: OpenAI, Model: "gemini-2.0-flash", APIKey: "g", BaseURL: "https://generativelanguage.googleapis.com/v1beta/openai"}, true, ""},
		{"LLM_ overrides everything", map[string]string{"LLM_PROVIDER": "openai", "LLM_MODEL": "qwen", "LLM_BASE_URL": "http://127.0.0.1:8000/v1"}, "anthropic", "claude-x",
			Config{Provider: OpenAI, Model: "qwen", BaseURL: "http://127.0.0.1:8000/v1"}, true, ""},
		{"keyless ollama needs a base URL", nil, "ollama", "llama3",
			Config{Provider: OpenAI, Model: "llama3"}, false, ""},
		{"keyless ollama", map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1"}, "ollama", "llama3",
			Config{Provider: OpenAI, Model: "llama3", BaseURL: "http://localhost:11434/v1"}, true, ""},
		{"empty provider picks anthropic by key", map[string]string{"ANTHROPIC_API_KEY": "ak"}, "", "",
			Config{Provider: Anthropic, Model: "claude-sonnet-4-5", APIKey: "ak"}, true, ""},
		{"openai at its endpoint restricts tools", map[string]string{"OPENAI_API_KEY": "ok"}, "openai", "",
			Config{Provider: OpenAI, Model: "gpt-4o-mini", APIKey: "ok", RestrictsTools: true}, true, ""},
		{"openai at another URL does not", map[string]string{"OPENAI_API_KEY": "ok", "OPENAI_BASE_URL": "http://h/v1"}, "openai", "",
			Config{Provider: OpenAI, Model: "gpt-4o-mini", APIKey: "ok", BaseURL: "http://h/v1"}, true, ""},
		{"LLM_ALLOWED_TOOLS says it does", map[string]string{"LLM_ALLOWED_TOOLS": "true", "LLM_BASE_URL": "http://127.0.0.1:8000/v1"}, "vllm", "qwen",
			Config{Provider: OpenAI, Model: "qwen", BaseURL: "http://127.0.0.1:8000/v1", RestrictsTools: true}, true, ""},
		{"LLM_ALLOWED_TOOLS says it does not", map[string]string{"OPENAI_API_KEY": "ok", "LLM_ALLOWED_TOOLS": "false"}, "openai", "",
			Config{Provider: OpenAI, Model: "gpt-4o-mini", APIKey: "ok"}, true, ""},
		{"LLM_ALLOWED_TOOLS malformed", map[string]string{"LLM_ALLOWED_TOOLS": "yes"}, "openai", "", Config{}, false, `LLM_ALLOWED_TOOLS="yes": want true or false`},
		{"anthropic has no allowed_tools", map[string]string{"LLM_ALLOWED_TOOLS": "1"}, "anthropic", "", Config{}, false, "anthropic has no allowed_tools"},
		{"unknown provider", nil, "mistral", "", Config{}, false, `unknown provider "mistral"`},
		{"bad base URL", map[string]string{"LLM_BASE_URL": "not a url"}, "openai", "", Config{}, false, "not an http(s) URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := configFrom(func(k string) string { return tc.env[k] }, tc.provider, tc.model, nil, 0)
			got, usable := s.Config, s.Usable
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Provider != tc.want.Provider || got.Model != tc.want.Model || got.APIKey != tc.want.APIKey || got.BaseURL != tc.want.BaseURL ||
				got.RestrictsTools != tc.want.RestrictsTools || usable != tc.usable {
				t.Errorf("got %+v usable %v, want %+v usable %v", got, usable, tc.want, tc.usable)
			}
			if usable {
				if _, err := New(got); err != nil {
					t.Errorf("a usable config must construct: %v", err)
				}
			}
		})
	}
	temp := 0.5
	t.Setenv("OPENAI_API_KEY", "from-env")
	s, err := ConfigFromEnv("openai", "gpt-x", &temp, 99)
	cfg, ok := s.Config, s.Usable
	if err != nil || !ok || cfg.APIKey != "from-env" || cfg.Temperature != &temp || cfg.MaxTokens != 99 {
		t.Errorf("ConfigFromEnv = %+v %v %v", cfg, ok, err)
	}
}

// TestConfigFromEnvNote: the Setup says which provider answers a template
// and why, when it is not the template's own, or why none can.
func TestConfigFromEnvNote(t *testing.T) {
	cases := []struct {
		name, provider string
		env            map[string]string
		vendor, note   string
	}{
		{"own provider", "openai", map[string]string{"OPENAI_API_KEY": "ok"}, "openai", ""},
		{"the only configured one", "llm.anthropic", map[string]string{"OPENAI_API_KEY": "ok"}, "openai",
			"the template names anthropic, which has no ANTHROPIC_API_KEY; openai is the only provider configured"},
		{"none", "anthropic", nil, "anthropic", "no model provider is configured: anthropic needs ANTHROPIC_API_KEY"},
		{"several", "openai", map[string]string{"ANTHROPIC_API_KEY": "ak", "GEMINI_API_KEY": "g"}, "openai",
			"several providers are configured (anthropic, gemini): set LLM_PROVIDER to choose one"},
		{"chosen without a key", "openai", map[string]string{"LLM_PROVIDER": "groq"}, "groq", "LLM_PROVIDER=groq has no GROQ_API_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := configFrom(func(k string) string { return tc.env[k] }, tc.provider, "", nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if s.Vendor != tc.vendor || (tc.note == "") != (s.Note == "") || !strings.Contains(s.Note, tc.note) {
				t.Errorf("vendor %s, note %q; want %s, %q", s.Vendor, s.Note, tc.vendor, tc.note)
			}
		})
	}
}

// TestIdleTimeout: a provider that sends its headers and then nothing is
// cut after IdleTimeout. Before any output the call is retried (and the
// second answer is used); once output started the call fails with
// CodeTimeout and keeps what it had yielded. The mock's server side of the
// cut connection ends too (no goroutine left behind).
func TestIdleTimeout(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			m, waits := testModel(t, srv, wire, func(c *Config) { c.IdleTimeout = 150 * time.Millisecond })
			before := len(srv.Requests())
			srv.Enqueue(mockllm.Script{Text: []string{"late"}, TimeToFirstToken: time.Minute}, mockllm.TextScript("fine"))
			evs, err := collect(t, m, t.Context(), userReq("hi"))
			if err != nil || textOf(evs) != "fine" {
				t.Fatalf("silent before the first token: evs %q, err %v; want the retry's answer", textOf(evs), err)
			}
			if n := len(srv.Requests()) - before; n != 2 || len(*waits) != 1 {
				t.Errorf("requests = %d, waits = %v; want one retry", n, *waits)
			}

			before = len(srv.Requests())
			srv.Enqueue(mockllm.Script{Text: []string{"one ", "two ", "three"}, InterTokenDelay: time.Minute}, mockllm.TextScript("unused"))
			evs, err = collect(t, m, t.Context(), userReq("hi"))
			if code(err) != CodeTimeout || textOf(evs) != "one " {
				t.Fatalf("silent after the first token: text %q, err %v; want %q and %s", textOf(evs), err, "one ", CodeTimeout)
			}
			if n := len(srv.Requests()) - before; n != 1 {
				t.Errorf("requests = %d: output had started, so no retry", n)
			}
			_, _ = collect(t, m, t.Context(), userReq("drain"))
		})
	}
	m, err := newModel(Config{Provider: OpenAI, Model: "m", APIKey: "k"})
	if err != nil || m.cfg.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("default IdleTimeout = %v, %v; want %v", m.cfg.IdleTimeout, err, DefaultIdleTimeout)
	}
}

// TestOutputLimit: a stream over the request's MaxOutputBytes ends with
// llmorch.ErrOutputLimit, not retried, after the text received, whether
// the text or a tool call's arguments go over it; nothing more is read.
func TestOutputLimit(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	for _, wire := range []string{OpenAI, Anthropic} {
		for _, tc := range []struct {
			name   string
			script mockllm.Script
		}{
			{"endless text", mockllm.Script{Chunks: 100000}},
			{"endless arguments", mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: "c", Name: "think", Arguments: `{"topic":"` + strings.Repeat("y", 1<<20) + `"}`}}, ArgPieces: 1000}},
		} {
			t.Run(wire+"/"+tc.name, func(t *testing.T) {
				m, waits := testModel(t, srv, wire)
				srv.Enqueue(tc.script)
				req := userReq("hi")
				req.MaxOutputBytes = 4096
				evs, err := collect(t, m, t.Context(), req)
				if !errors.Is(err, llmorch.ErrOutputLimit) || code(err) != CodeOutputLimit {
					t.Fatalf("err %v, want the output limit", err)
				}
				if n := len(textOf(evs)); n > 4096+64 {
					t.Fatalf("%d bytes of text passed a budget of 4096", n)
				}
				if len(callsOf(evs)) != 0 || len(*waits) != 0 {
					t.Fatalf("calls %v, retries %v", callsOf(evs), *waits)
				}
			})
		}
	}
}
