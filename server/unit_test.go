package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/spend"
	"github.com/agentdock-go/agentdock/turns"
)

func TestConfigValidate(t *testing.T) {
	e := newEnv(t, envOptions{})
	rt := e.srv.rt
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no runtime", Config{}, "Runtime is required"},
		{"negative", Config{Runtime: rt, Heartbeat: -1, MaxBodyBytes: -5}, "Heartbeat must not be negative"},
		{"defaults", Config{Runtime: rt}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			err := cfg.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.MaxBodyBytes != DefaultMaxBodyBytes || cfg.Heartbeat != DefaultHeartbeat || cfg.Logger == nil {
					t.Fatalf("defaults not filled: %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestUIMapper(t *testing.T) {
	m := &uiMapper{turnID: "turn1234"}
	args := json.RawMessage(`{"topic":"x"}`)
	events := []chat.Event{
		{Kind: chat.KindStart, Start: &chat.Start{Turn: "turn1234", Message: "msg-1"}},
		{Kind: chat.KindOrchestration, Orchestration: &chat.Snapshot{ActiveStep: "Explore", Sequence: []string{"brainstorm"}, OfferedTools: []string{"brainstorm"}, Transition: true}},
		{Kind: chat.KindStepStart},
		{Kind: chat.KindTextDelta, Text: "Let me "},
		{Kind: chat.KindTextDelta, Text: ""},
		{Kind: chat.KindTextDelta, Text: "think."},
		{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "brainstorm", Arguments: args}},
		{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{CallID: "c1", Name: "brainstorm", Content: "## Ideas", Type: "brainstorm_result"}},
		{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{CallID: "c2", Name: "compare", Content: "Refused", IsError: true}},
		{Kind: chat.KindStepFinish},
		{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 10, Completion: 5, CacheRead: 8}, SessionUsage: &chat.Usage{Prompt: 100, Completion: 50, CacheRead: 80, CacheWrite: 2}},
		{Kind: chat.KindStepStart},
		{Kind: chat.KindTextDelta, Text: "Answer"},
		{Kind: chat.KindWarning, Text: "careful"},
		{Kind: chat.KindError, Error: &chat.Error{Code: "model_error", Message: "the model failed"}},
		{Kind: chat.KindDone, FinishReason: chat.FinishError},
	}
	var got []string
	for _, ev := range events {
		for _, it := range m.add(ev, true) {
			got = append(got, string(it))
		}
	}
	want := []string{
		`{"type":"start","messageId":"msg-1"}`,
		`{"type":"data-orchestration","data":{"activeStep":"Explore","sequenceIndex":0,"sequence":["brainstorm"],"offeredTools":["brainstorm"],"previousStep":"","transition":true}}`,
		`{"type":"start-step"}`,
		`{"type":"text-start","id":"turn1234-text-1"}`,
		`{"type":"text-delta","id":"turn1234-text-1","delta":"Let me "}`,
		`{"type":"text-delta","id":"turn1234-text-1","delta":"think."}`,
		`{"type":"text-end","id":"turn1234-text-1"}`,
		`{"type":"tool-input-start","toolCallId":"c1","toolName":"brainstorm"}`,
		`{"type":"tool-input-available","toolCallId":"c1","toolName":"brainstorm","input":{"topic":"x"}}`,
		`{"type":"tool-output-available","toolCallId":"c1","output":{"content":"## Ideas","type":"brainstorm_result"}}`,
		`{"type":"tool-output-error","toolCallId":"c2","errorText":"Refused"}`,
		`{"type":"finish-step"}`,
		`{"type":"data-usage","data":{"prompt":10,"completion":5,"total":15,"cacheRead":8,"final":false,"session":{"prompt":100,"completion":50,"total":150,"cacheRead":80,"cacheWrite":2}}}`,
		`{"type":"start-step"}`,
		`{"type":"text-start","id":"turn1234-text-2"}`,
		`{"type":"text-delta","id":"turn1234-text-2","delta":"Answer"}`,
		`{"type":"data-warning","data":{"message":"careful"}}`,
		`{"type":"text-end","id":"turn1234-text-2"}`,
		`{"type":"error","errorText":"model_error: the model failed"}`,
		`{"type":"finish","finishReason":"error"}`,
		`[DONE]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func BenchmarkUIMapTextDelta(b *testing.B) {
	m := &uiMapper{turnID: "turn1234"}
	ev := chat.Event{Kind: chat.KindTextDelta, Text: "word "}
	b.ReportAllocs()
	for b.Loop() {
		m.add(ev, true)
	}
}

func TestRawErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		in       string
		status   string
		code     string
		message  string
		rewrites bool
	}{
		{"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large",
			"431 Request Header Fields Too Large", "headers_too_large", "the request's headers are too large", true},
		{"HTTP/1.1 400 Bad Request: missing required Host header\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: missing required Host header",
			"400 Bad Request: missing required Host header", "bad_request", "Bad Request: missing required Host header", true},
		{"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding",
			"501 Not Implemented", "not_implemented", "Unsupported transfer encoding", true},
		{"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nfrom a handler", "", "", "", false},
		{"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n200 OK", "", "", "", false},
		{`{"type":"text-delta"}`, "", "", "", false},
	} {
		out, ok := rawErrorJSON([]byte(tc.in))
		if ok != tc.rewrites {
			t.Errorf("%q: rewritten %v", tc.in, ok)
			continue
		}
		if !ok {
			continue
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("%q: the rewrite is not an HTTP answer: %v", tc.in, err)
		}
		var body struct {
			Error struct{ Code, Message, Type string }
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.Status != tc.status || res.Header.Get("Content-Type") != "application/json" ||
			body.Error.Code != tc.code || body.Error.Message != tc.message || body.Error.Type != "invalid_request_error" {
			t.Errorf("%q: %s %v %+v (%v)", tc.in, res.Status, res.Header, body, err)
		}
	}
}

// TestBudgetExceededOnEveryDoor: a turn refused for its key's budget is
// 429 budget_exceeded, with the limit, what was spent and when it resets
// in the message and Retry-After, wherever it is wrapped: every door
// answers turns.Describe's problem.
func TestBudgetExceededOnEveryDoor(t *testing.T) {
	resets := time.Now().Add(90 * time.Minute)
	err := fmt.Errorf("starting: %w", &spend.ExceededError{Limit: spend.LimitDay, Max: 3000, Used: 3120, Resets: resets})
	e := turns.Describe(err)
	if e.Status != http.StatusTooManyRequests || e.Code != "budget_exceeded" || e.RetryAfter < 89*time.Minute || e.RetryAfter > 90*time.Minute ||
		!strings.Contains(e.Message, "TOKENS_PER_OWNER_PER_DAY") || !strings.Contains(e.Message, "3120") || !strings.Contains(e.Message, resets.UTC().Format(time.RFC3339)) {
		t.Errorf("turns.Describe = %+v", e)
	}
	if !errors.Is(err, err) {
		t.Fatal("unreachable")
	}
}
