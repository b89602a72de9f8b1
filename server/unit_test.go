package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
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

func TestParseEventID(t *testing.T) {
	tests := []struct {
		in   string
		turn string
		seq  int64
		ok   bool
	}{
		{"abcdef0123456789:12", "abcdef0123456789", 12, true},
		{"abcdef0123456789:0", "abcdef0123456789", 0, true},
		{"abcdef0123456789", "", 0, false},
		{"abcdef0123456789:", "", 0, false},
		{"abcdef0123456789:-3", "", 0, false},
		{"abcdef0123456789:1:2", "", 0, false},
		{"short:1", "", 0, false},
		{"12", "", 0, false},
	}
	for _, tc := range tests {
		turn, seq, err := parseEventID(tc.in)
		if (err == nil) != tc.ok || turn != tc.turn || seq != tc.seq {
			t.Errorf("parseEventID(%q) = %q, %d, %v", tc.in, turn, seq, err)
		}
		if err == nil && eventID(turn, seq) != tc.in {
			t.Errorf("round trip of %q gave %q", tc.in, eventID(turn, seq))
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"abcdef0123456789:12", "x:1", ":", "a:b:c", "abcdefgh:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		turn, seq, err := parseEventID(s)
		if err != nil {
			return
		}
		if seq < 0 || !strings.HasPrefix(s, turn+":") || strings.Contains(turn, ":") {
			t.Fatalf("%q parsed as %q %d", s, turn, seq)
		}
	})
}

func TestJSONErrorPosition(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{"{\"a\": }", "line 1, column 7"},
		{"{\n\"message\": \"x\",\n  ]\n}", "line 3, column 3"},
		{`{"message": [1]}`, "line 1, column 13: message must be string"},
		{`[1,2]`, "must be"},
	}
	for _, tc := range tests {
		var v chatRequest
		e := jsonError([]byte(tc.body), json.Unmarshal([]byte(tc.body), &v))
		if e.Status != 400 || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%q: %s, want %q", tc.body, e.Message, tc.want)
		}
	}
}

// FuzzChatBody: no body makes the chat body parsing panic, and a body that
// parses yields a message or a clear 400.
func FuzzChatBody(f *testing.F) {
	for _, s := range []string{
		`{"message":"hi"}`, `{"id":"x","messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`, `{"messages":[{"role":"user","content":5}]}`, `{`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var body chatRequest
		if err := json.Unmarshal(data, &body); err != nil {
			if e := jsonError(data, err); e.Status != 400 || e.Message == "" {
				t.Fatalf("json error %+v", e)
			}
			return
		}
		if len(body.Messages) > 0 {
			if _, e := lastUserText(body.Messages); e != nil && (e.Status != 400 || e.Code != "invalid_message") {
				t.Fatalf("error %+v", e)
			}
		}
	})
}

func TestUIMapper(t *testing.T) {
	m := &uiMapper{turnID: "turn1234"}
	session := &chat.Usage{Prompt: 100, Completion: 50}
	usage := func() *chat.Usage { return session }
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
		{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 10, Completion: 5}},
		{Kind: chat.KindStepStart},
		{Kind: chat.KindTextDelta, Text: "Answer"},
		{Kind: chat.KindWarning, Text: "careful"},
		{Kind: chat.KindError, Error: &chat.Error{Code: "model_error", Message: "the model failed"}},
		{Kind: chat.KindDone, FinishReason: chat.FinishError},
	}
	var got []string
	for _, ev := range events {
		for _, it := range m.mapEvent(ev, usage) {
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
		`{"type":"data-usage","data":{"prompt":10,"completion":5,"total":15,"final":false,"session":{"prompt":100,"completion":50,"total":150}}}`,
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
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tr := newTurn("turnabcdef", "sess", "a", "", cancel, 16, 0)
	for i := 0; i < 40; i++ {
		tr.add(item{data: []byte(`{"type":"start-step"}`)})
	}
	if _, _, gap, _ := tr.read(0); !gap {
		t.Fatal("reading from 0 after 40 frames with a cap of 16 must be a gap")
	}
	frames, done, gap, changed := tr.read(30)
	if gap || done || len(frames) != 10 || frames[0].seq != 31 || frames[9].seq != 40 {
		t.Fatalf("read(30): %d frames from %d, gap %v done %v", len(frames), frames[0].seq, gap, done)
	}
	tr.finish()
	select {
	case <-changed:
	default:
		t.Fatal("finish did not wake readers")
	}
	tr.add(item{data: []byte("x")})
	if last, done := tr.state(); last != 40 || !done {
		t.Fatalf("after finish: last %d done %v", last, done)
	}
}

func BenchmarkTurnLogAdd(b *testing.B) {
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tr := newTurn("turnabcdef", "sess", "a", "", cancel, DefaultMaxTurnEvents, 0)
	it := item{data: []byte(`{"type":"text-delta","id":"t-1","delta":"word "}`)}
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
		m.mapEvent(ev, nil)
	}
}
