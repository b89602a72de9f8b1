package mockllm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp, string(data)
}

// dataLines returns the data payloads of an SSE body.
func dataLines(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestBadRequests(t *testing.T) {
	s := New()
	defer s.Close()
	cases := []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"not JSON", "/v1/chat/completions", "{oops", 400, "not a JSON request object"},
		{"no model", "/v1/chat/completions", `{"messages":[]}`, 400, `\"model\" is required`},
		{"no messages", "/v1/chat/completions", `{"model":"m"}`, 400, `\"messages\" is required`},
		{"bad content", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":5}]}`, 400, "messages[0]"},
		{"bad tool", "/v1/chat/completions", `{"model":"m","messages":[],"tools":[{"type":"x"}]}`, 400, "tools[0]"},
		{"anthropic without max_tokens", "/v1/messages", `{"model":"m","messages":[]}`, 400, `\"max_tokens\" is required`},
		{"anthropic bad role", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`, 400, "role"},
		{"anthropic tool_use without id", "/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"x"}]}]}`, 400, "tool_use needs id"},
		{"unknown route", "/v1/embeddings", `{}`, 404, "no route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, s.URL()+tc.path, tc.body)
			if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) || !json.Valid([]byte(body)) {
				t.Errorf("status %d body %s; want %d containing %q", resp.StatusCode, body, tc.status, tc.want)
			}
		})
	}
	resp, err := http.Get(s.URL() + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d bad requests recorded", n)
	}
}

func TestOpenAIStreamWire(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Script{Text: []string{"Hi"}, ToolCalls: []ToolCall{{ID: "a", Name: "f", Arguments: `{"x":1}`}, {Name: "g", Arguments: `{}`}},
		Style: StyleInterleaved | StyleRepeatType | StyleTrailingEmpty, ArgPieces: 2, Usage: &Usage{Input: 3, Output: 4}})
	resp, body := post(t, s.URL()+"/v1/chat/completions",
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"hello"}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"temperature":0.2}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	lines := dataLines(body)
	if lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	var indexes []int
	var typed, usage int
	for _, l := range lines[:len(lines)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index int    `json:"index"`
						Type  string `json:"type"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("chunk %q: %v", l, err)
		}
		if c.Usage != nil {
			usage = c.Usage.TotalTokens
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				indexes = append(indexes, tc.Index)
				if tc.Type != "" {
					typed++
				}
			}
		}
	}
	// Headers of both calls, alternating pieces (two each), then the
	// trailing delta of the last call, the only one without a type.
	want := []int{0, 1, 0, 1, 0, 1, 1}
	if len(indexes) != len(want) || typed != 6 || usage != 7 {
		t.Errorf("indexes %v (want %v), typed %d (want 6), usage %d", indexes, want, typed, usage)
	}
	for i := range want {
		if i < len(indexes) && indexes[i] != want[i] {
			t.Errorf("indexes %v, want %v", indexes, want)
			break
		}
	}
	r := s.Requests()[0]
	if r.System != "sys" || len(r.Messages) != 1 || r.Messages[0].Text != "hello" || r.Temperature == nil || *r.Temperature != 0.2 ||
		!r.IncludeUsage || r.ToolNames()[0] != "f" {
		t.Errorf("recorded %+v", r)
	}
}

func TestAnthropicStreamWire(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Script{Text: []string{"Hi"}, ToolCalls: []ToolCall{{ID: "t1", Name: "f", Arguments: `{"x":1}`}}, Usage: &Usage{Input: 3, Output: 4}})
	_, body := post(t, s.URL()+"/v1/messages", `{"model":"m","max_tokens":10,"stream":true,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"}]}`)
	var types []string
	for _, l := range dataLines(body) {
		var e struct{ Type string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event %q: %v", l, err)
		}
		types = append(types, e.Type)
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	if !strings.Contains(body, "event: message_start\n") || !strings.Contains(body, `"output_tokens":4`) || !strings.Contains(body, `"input_json_delta"`) {
		t.Errorf("body:\n%s", body)
	}
	if s.Requests()[0].System != "sys" {
		t.Errorf("system %q", s.Requests()[0].System)
	}
}

func TestWholeResponses(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Script{Text: []string{"a", "b"}, ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: `{"x":1}`}}, Usage: &Usage{Input: 1, Output: 2}})
	s.Enqueue(Script{Text: []string{"a", "b"}, ToolCalls: []ToolCall{{ID: "c", Name: "f", Arguments: `{"x":1}`}}, Usage: &Usage{Input: 1, Output: 2}})
	_, oa := post(t, s.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	var o struct {
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(oa), &o); err != nil || o.Choices[0].Message.Content != "ab" || o.Choices[0].FinishReason != "tool_calls" ||
		o.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"x":1}` || o.Usage.TotalTokens != 3 {
		t.Errorf("openai whole: %s (%v)", oa, err)
	}
	_, an := post(t, s.URL()+"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	if !strings.Contains(an, `"stop_reason":"tool_use"`) || !strings.Contains(an, `"input":{"x":1}`) || !strings.Contains(an, `"text":"ab"`) {
		t.Errorf("anthropic whole: %s", an)
	}
}

func TestErrorsAndQueue(t *testing.T) {
	s := New(WithDefault(TextScript("default")), WithMaxRecorded(2))
	defer s.Close()
	s.Enqueue(ErrorScript(429, 1500*time.Millisecond), Script{Status: 529, ErrorMessage: "busy"})
	resp, body := post(t, s.URL()+"/v1/chat/completions", `{"model":"m","messages":[]}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("retry-after-ms") != "1500" || !strings.Contains(body, "rate_limit_exceeded") {
		t.Errorf("429: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = post(t, s.URL()+"/v1/messages", `{"model":"m","max_tokens":1,"messages":[]}`)
	if resp.StatusCode != 529 || !strings.Contains(body, `"overloaded_error"`) || !strings.Contains(body, "busy") {
		t.Errorf("529: %d %s", resp.StatusCode, body)
	}
	_, body = post(t, s.URL()+"/v1/chat/completions", `{"model":"m","messages":[]}`)
	if !strings.Contains(body, `"content":"default"`) || s.Pending() != 0 {
		t.Errorf("default: %s", body)
	}
	if reqs := s.Requests(); len(reqs) != 2 || reqs[0].API != APIAnthropic {
		t.Errorf("recorded %d (want the newest 2)", len(reqs))
	}
}

func TestFailures(t *testing.T) {
	s := New()
	defer s.Close()
	s.Enqueue(Script{Text: []string{"a", "b", "c"}, Fail: FailAbort, FailAfter: 2})
	resp, err := http.Post(s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(string(data), `"content":"b"`) || strings.Contains(string(data), `"content":"c"`) {
		t.Errorf("abort: err %v, body %s", err, data)
	}
	s.Enqueue(Script{Text: []string{"a", "b"}, Fail: FailErrorEvent, FailAfter: 1})
	_, body := post(t, s.URL()+"/v1/messages", `{"model":"m","max_tokens":1,"stream":true,"messages":[]}`)
	if !strings.Contains(body, "event: error\n") || strings.Contains(body, "message_stop") {
		t.Errorf("error event: %s", body)
	}
}

func TestListenAndServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ListenAndServe(ctx, addr, Config{Default: &Script{Chunks: 5}}) }()
	var body string
	for range 100 {
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
		if err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(data)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(body, "tok4 ") || len(dataLines(body)) != 8 {
		t.Errorf("load stream: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
	if err := ListenAndServe(t.Context(), "256.0.0.1:1", Config{}); err == nil {
		t.Error("bad address accepted")
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"x"}]}`, true)
	f.Add(`{"model":"m","max_tokens":3,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"r"}]}]}]}`, false)
	f.Add(`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`, true)
	f.Fuzz(func(t *testing.T, body string, openai bool) {
		api := APIAnthropic
		if openai {
			api = APIOpenAI
		}
		req, err := decodeRequest(api, []byte(body))
		if err == nil && req.Model == "" {
			t.Errorf("accepted a request without model: %q", body)
		}
	})
}

// TestListenAndServeClosesIdleConnectionsAtOnce: when ctx ends, the
// connections kept alive after their answers and one that never sent a
// request (a client's spare connection) are closed at once, and the
// address is free again. net/http's Shutdown alone waits five seconds for
// a connection that sent nothing, which is what a quick restart met.
func TestListenAndServeClosesIdleConnectionsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ListenAndServe(ctx, addr, Config{}) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var res *http.Response
	for deadline := time.Now().Add(10 * time.Second); ; {
		if res, err = client.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close() // the connection stays open, idle
	spare, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	// The server has accepted it once it answers another request.
	res, err = client.Get("http://" + addr + "/v1/models")
	if err == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("still shutting down after 4 s: a connection that sent no request held it")
	}
	_ = spare.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := spare.Read(make([]byte, 1)); err == nil {
		t.Fatal("the spare connection is still open")
	}
	again, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address is not free again: %v", err)
	}
	again.Close()
}
