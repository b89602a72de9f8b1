package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/spend"
)

func TestConfigValidate(t *testing.T) {
	e := newEnv(t, envOptions{})
	agents := e.srv.cfg.Agents
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no agents", Config{}, "Agents is required"},
		{"negative", Config{Agents: agents, Heartbeat: -1, MaxBodyBytes: -5}, "Heartbeat must not be negative"},
		{"tiny event cap", Config{Agents: agents, MaxTurnEvents: 3}, "MaxTurnEvents must be at least 16"},
		{"defaults", Config{Agents: agents}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			err := cfg.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.MaxBodyBytes != DefaultMaxBodyBytes || cfg.Heartbeat != DefaultHeartbeat || cfg.StreamRetention != DefaultStreamRetention ||
					cfg.Store == nil || cfg.Logger == nil || cfg.DisconnectGrace != 0 {
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
		for _, it := range m.mapEvent(ev) {
			got = append(got, string(it.data))
		}
	}
	want := []string{
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

func TestTurnLogWindow(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tr := newTurn("turnabcdef", "sess", "a", "", cancel, 16, 0)
	for i := 0; i < 40; i++ {
		tr.add(frame{data: []byte(`{"type":"start-step"}`)})
		if stopped := ctx.Err() != nil; stopped != (i >= 16) {
			t.Fatalf("after %d frames with a cap of 16 the turn is stopped: %v", i+1, stopped)
		}
	}
	var lim *chat.Limit
	if !errors.As(context.Cause(ctx), &lim) || lim.Name != chat.LimitEvents || lim.Value != "16" {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if frames, _, gap, _ := tr.read(0); gap || len(frames) != 40 {
		t.Fatalf("read(0) after 40 frames with a cap of 16: %d frames, gap %v: every frame is kept", len(frames), gap)
	}
	frames, done, gap, changed := tr.read(30)
	if gap || done || len(frames) != 10 || frames[0].seq != 31 || frames[9].seq != 40 {
		t.Fatalf("read(30): %d frames from %d, gap %v done %v", len(frames), frames[0].seq, gap, done)
	}
	// Past the slack (a turn that ignores its cancellation), the oldest go.
	for range FrameSlack {
		tr.add(frame{data: []byte(`{"type":"start-step"}`)})
	}
	if _, _, gap, _ := tr.read(0); !gap {
		t.Fatal("reading from 0 past the slack must be a gap")
	}
	tr.finish()
	select {
	case <-changed:
	default:
		t.Fatal("finish did not wake readers")
	}
	tr.add(frame{data: []byte("x")})
	if last, done := tr.state(); last != 40+FrameSlack || !done {
		t.Fatalf("after finish: last %d done %v", last, done)
	}
}

func BenchmarkTurnLogAdd(b *testing.B) {
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tr := newTurn("turnabcdef", "sess", "a", "", cancel, DefaultMaxTurnEvents, 0)
	it := frame{data: []byte(`{"type":"text-delta","id":"t-1","delta":"word "}`)}
	b.ReportAllocs()
	for b.Loop() {
		tr.add(it)
	}
}

func BenchmarkUIMapTextDelta(b *testing.B) {
	m := &uiMapper{turnID: "turn1234"}
	ev := chat.Event{Kind: chat.KindTextDelta, Text: "word "}
	b.ReportAllocs()
	for b.Loop() {
		m.mapEvent(ev)
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

// TestBatchDue: a batch is due on the replica's shared grid of
// mirrorBatch/2, between mirrorBatch/2 and mirrorBatch after its oldest
// frame.
func TestBatchDue(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after, want time.Duration
	}{
		{0, 50 * time.Millisecond},
		{time.Millisecond, 100 * time.Millisecond},
		{49 * time.Millisecond, 100 * time.Millisecond},
		{50 * time.Millisecond, 100 * time.Millisecond},
		{51 * time.Millisecond, 150 * time.Millisecond},
		{99*time.Millisecond + 999*time.Microsecond, 150 * time.Millisecond},
	} {
		oldest := base.Add(tc.after)
		got := batchDue(oldest)
		if got.Sub(base) != tc.want {
			t.Errorf("batchDue(+%v) = +%v, want +%v", tc.after, got.Sub(base), tc.want)
		}
		if wait := got.Sub(oldest); wait < mirrorBatch/2 || wait > mirrorBatch {
			t.Errorf("batchDue(+%v): the oldest frame waits %v", tc.after, wait)
		}
	}
}

// TestMirrorStep: stepped on the grid (a little late), the mirror writes a batch at the
// grid point after the one where it first saw the batch's frames (so a
// frame waits at most mirrorBatch), a sign of life after a heartbeat
// without frames, and the last frames with the end at the first grid
// point after the turn ended.
func TestMirrorStep(t *testing.T) {
	s := &Server{cfg: Config{Heartbeat: time.Second}, log: slog.New(slog.DiscardHandler), base: t.Context()}
	grid := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	// Each step runs a little after its grid point, as a timer fires.
	at := func(n int) time.Time { return grid.Add(time.Duration(n)*mirrorGrid + 3*time.Millisecond) }
	tr := newTurn("turn-1", "session-1", "agent", "", func(error) {}, 100, time.Minute)
	st := &mirrorState{t: tr, lastWrite: at(0)}
	step := func(n int) bool {
		w := s.mirrorStep(st, at(n))
		if w != nil {
			// What a successful write records.
			last, _ := tr.state()
			st.sent, st.lastWrite, st.pending = last, at(n), time.Time{}
		}
		return w != nil
	}
	if step(1) {
		t.Fatal("a write with no frames and no heartbeat due")
	}
	tr.add(frame{data: []byte(`{"type":"start"}`)}) // just after point 1
	if step(2) {
		t.Fatal("a batch written at the first point that saw it")
	}
	if !step(3) {
		t.Fatal("no batch at the point after the one that saw its frames")
	}
	if step(4) || step(5) {
		t.Fatal("a write with nothing new")
	}
	// A waiting turn is stepped 20 times a second: a step with nothing to
	// write allocates nothing.
	if n := testing.AllocsPerRun(100, func() { s.mirrorStep(st, at(5)) }); n != 0 {
		t.Fatalf("a step with nothing to write allocated %v times", n)
	}
	if !step(3 + int(time.Second/mirrorGrid)) {
		t.Fatal("no sign of life after a heartbeat without frames")
	}
	tr.add(frame{data: []byte(`{"type":"finish"}`)}, frame{data: []byte("[DONE]")})
	tr.finish()
	n := 4 + int(time.Second/mirrorGrid)
	if w := s.mirrorStep(st, at(n)); w == nil {
		t.Fatal("the end not written at the first point after it")
	}
}

// TestBudgetExceededOnEveryDoor: a turn refused for its key's budget is
// 429 budget_exceeded, with the limit, what was spent and when it resets
// in the message, on the API's routes (turnStartError, with Retry-After)
// and on the edges' (ErrorStatus: A2A, AG-UI, MCP), wherever it is
// wrapped.
func TestBudgetExceededOnEveryDoor(t *testing.T) {
	resets := time.Now().Add(90 * time.Minute)
	err := fmt.Errorf("starting: %w", &spend.ExceededError{Limit: spend.LimitDay, Max: 3000, Used: 3120, Resets: resets})
	e := turnStartError(err)
	if e.Status != http.StatusTooManyRequests || e.Code != "budget_exceeded" || e.RetryAfter < 89*time.Minute || e.RetryAfter > 90*time.Minute ||
		!strings.Contains(e.Message, "TOKENS_PER_OWNER_PER_DAY") || !strings.Contains(e.Message, "3120") || !strings.Contains(e.Message, resets.UTC().Format(time.RFC3339)) {
		t.Errorf("turnStartError = %+v", e)
	}
	if status, code, msg := ErrorStatus(err); status != http.StatusTooManyRequests || code != "budget_exceeded" || msg != e.Message {
		t.Errorf("ErrorStatus = %d %s %q", status, code, msg)
	}
}
