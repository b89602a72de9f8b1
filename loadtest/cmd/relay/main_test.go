package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

func TestRelayModel(t *testing.T) {
	// chunk is one OpenAI chunk's SSE frame.
	chunk := func(content, finish string) string {
		choice := map[string]any{"index": 0, "delta": map[string]string{"content": content}}
		if finish != "" {
			choice["finish_reason"] = finish
		}
		return "data: " + mustJSON(map[string]any{"choices": []any{choice}}) + "\n\n"
	}
	crlf := func(frame string) string {
		return strings.ReplaceAll(strings.Replace(frame, "data: ", "data:", 1), "\n", "\r\n")
	}
	tests := []struct {
		name, stream string
		deltas       []string
		finish       string
		wantErr      string
	}{
		{"text", ": keep-alive\n\n" + chunk("a", "") + chunk("b \"c\"", "") + chunk("", "stop") +
			`data: {"choices":[],"usage":{"prompt_tokens":3}}` + "\n\n" + "data: [DONE]\n\n", []string{"a", `b "c"`}, "stop", ""},
		{"length, CRLF lines, no space after data:", crlf(chunk("x", "length")) + crlf("data: [DONE]\n\n"), []string{"x"}, "length", ""},
		{"tool calls", chunk("", "tool_calls") + "data: [DONE]\n\n", nil, "tool-calls", ""},
		{"no finish reason", chunk("x", "") + "data: [DONE]\n\n", []string{"x"}, "other", ""},
		{"in-band error", chunk("x", "") + `data: {"error":{"message":"overloaded"}}` + "\n\n", []string{"x"}, "other", "overloaded"},
		{"cut before [DONE]", chunk("x", ""), []string{"x"}, "other", "ended before [DONE]"},
		{"not JSON", "data: {oops\n\n", nil, "other", "not JSON"},
		{"a line longer than the buffer", chunk(strings.Repeat("y", 10000), "stop") + "data: [DONE]\n\n", []string{strings.Repeat("y", 10000)}, "stop", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			finish, err := relayModel(strings.NewReader(tc.stream), func(d string) error { got = append(got, d); return nil })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if finish != tc.finish || strings.Join(got, "|") != strings.Join(tc.deltas, "|") {
				t.Fatalf("%d deltas (%.40q) finish %q; want %d (%.40q) %q", len(got), got, finish, len(tc.deltas), tc.deltas, tc.finish)
			}
		})
	}
	// A failed write to the client stops the relaying.
	gone := errors.New("client gone")
	_, err := relayModel(strings.NewReader(chunk("a", "")+chunk("b", "")), func(string) error { return gone })
	if !errors.Is(err, gone) {
		t.Fatalf("err = %v, want the write's", err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestReadRequest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	req, err := readRequest("")
	if err != nil || req.Model != "mock-model" || len(req.Messages) != 1 {
		t.Fatalf("default request %+v, %v", req, err)
	}
	req, err = readRequest(write("ok.json", `{"model":"m","messages":[{"role":"system","content":"s"}],"tools":[{"type":"function"}],"stream_options":{"include_usage":true},"max_completion_tokens":9,"temperature":0.5}`))
	if err != nil || req.Model != "m" || req.MaxCompletionTokens != 9 || *req.Temperature != 0.5 || string(req.Tools) != `[{"type":"function"}]` {
		t.Fatalf("request %+v, %v", req, err)
	}
	for name, body := range map[string]string{
		"unknown.json": `{"model":"m","parallel_tool_calls":false}`,
		"nomodel.json": `{"messages":[]}`,
		"bad.json":     `{`,
	} {
		if _, err := readRequest(write(name, body)); err == nil {
			t.Errorf("%s: %s accepted", name, body)
		}
	}
	if _, err := readRequest(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// frames reads an SSE body's data payloads.
func frames(t *testing.T, body io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// serveRelay serves a relay of base, with the key "k", to model over real
// HTTP until the test ends; it returns the relay and its URL.
func serveRelay(t *testing.T, model *mockllm.Server, base modelRequest) (*relay, string) {
	t.Helper()
	rl := &relay{client: &http.Client{Transport: newTransport()}, url: model.URL() + "/v1/chat/completions", key: "k", base: base}
	srv := httptest.NewServer(rl.handler())
	t.Cleanup(srv.Close)
	return rl, srv.URL
}

// TestChat relays a scripted model stream over real HTTP: the model gets
// the fixed request plus the user's message, the client the AI SDK frames.
func TestChat(t *testing.T) {
	model := mockllm.New(mockllm.WithDefault(mockllm.Script{Chunks: 3}))
	defer model.Close()
	base, err := readRequest("")
	if err != nil {
		t.Fatal(err)
	}
	base.Tools = json.RawMessage(`[{"type":"function","function":{"name":"think","parameters":{"type":"object"}}}]`)
	rl, url := serveRelay(t, model, base)

	resp, err := http.Post(url+"/api/chat/loadtest", "application/json", strings.NewReader(`{"message":"hello [lt:stream:1]","sessionId":"session-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Vercel-Ai-Ui-Message-Stream") != "v1" {
		t.Fatalf("status %s, headers %v", resp.Status, resp.Header)
	}
	got := frames(t, resp.Body)
	var types []string
	for _, f := range got[:len(got)-1] {
		var c uiChunk
		if err := json.Unmarshal([]byte(f), &c); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		types = append(types, c.Type+":"+c.Delta+c.FinishReason)
	}
	want := "start: text-start: text-delta:tok0  text-delta:tok1  text-delta:tok2  text-end: finish:stop"
	if strings.Join(types, " ") != want || got[len(got)-1] != "[DONE]" {
		t.Fatalf("frames %q, want %s and [DONE]", types, want)
	}

	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	r := reqs[0]
	if !r.Stream || r.Model != "mock-model" || r.System != "You answer briefly." || len(r.Messages) != 1 || r.Messages[0].Text != "hello [lt:stream:1]" ||
		len(r.Tools) != 1 || r.Tools[0].Name != "think" || r.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("model request %+v", r)
	}
	// The fixed part is not changed by a request.
	if len(rl.base.Messages) != 1 {
		t.Fatalf("the fixed messages grew to %d", len(rl.base.Messages))
	}

	for _, bad := range []string{`{`, `{"sessionId":"x"}`} {
		resp, err := http.Post(url+"/api/chat/loadtest", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte(`"invalid_body"`)) {
			t.Errorf("%s: %s %s", bad, resp.Status, b)
		}
	}
}

// TestChatModelFails: a model that answers with an error status gets a 502
// JSON error; one that breaks mid-stream ends the stream with an error frame.
func TestChatModelFails(t *testing.T) {
	model := mockllm.New()
	defer model.Close()
	model.Enqueue(mockllm.Script{Status: http.StatusTooManyRequests}, mockllm.Script{Chunks: 2, Fail: mockllm.FailErrorEvent, FailAfter: 1})
	_, url := serveRelay(t, model, defaultRequest)
	post := func() *http.Response {
		resp, err := http.Post(url+"/api/chat/a", "application/json", strings.NewReader(`{"message":"hi"}`))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post()
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !bytes.Contains(b, []byte("429")) {
		t.Fatalf("model 429: %s %s", resp.Status, b)
	}
	resp = post()
	got := frames(t, resp.Body)
	resp.Body.Close()
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, `"type":"error"`) || !strings.Contains(joined, `"finishReason":"error"`) || got[len(got)-1] != "[DONE]" {
		t.Fatalf("frames:\n%s", joined)
	}
}

func TestMetrics(t *testing.T) {
	rec := httptest.NewRecorder()
	metrics(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, name := range []string{"go_goroutines ", "go_memstats_heap_inuse_bytes ", "go_memstats_stack_inuse_bytes ", "go_memstats_heap_objects "} {
		if !strings.Contains(rec.Body.String(), "\n"+name) && !strings.HasPrefix(rec.Body.String(), name) {
			t.Errorf("no %s in\n%s", name, rec.Body)
		}
	}
}

// BenchmarkRelayModel is the relay's reading of a model stream alone, on
// the bytes of the load harness's 64-chunk turn: the floor that
// llmorch/provider's BenchmarkParseStream compares with.
func BenchmarkRelayModel(b *testing.B) {
	srv := mockllm.New(mockllm.WithDefault(mockllm.Script{Chunks: 64, Usage: &mockllm.Usage{Input: 40, Output: 64}}), mockllm.WithMaxRecorded(-1))
	defer srv.Close()
	res, err := http.Post(srv.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("mock: %d %v", res.StatusCode, err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		deltas := 0
		if _, err := relayModel(bytes.NewReader(body), func(string) error { deltas++; return nil }); err != nil || deltas != 64 {
			b.Fatalf("%d deltas, %v", deltas, err)
		}
	}
}

// TestChatEndKeepsConnection: a client that stops reading at [DONE] (the
// harness) keeps its connection: the closing frames leave with the
// response's end.
func TestChatEndKeepsConnection(t *testing.T) {
	model := mockllm.New(mockllm.WithDefault(mockllm.Script{Chunks: 3}))
	defer model.Close()
	_, url := serveRelay(t, model, defaultRequest)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for i := range 3 {
		reused := false
		req, _ := http.NewRequest(http.MethodPost, url+"/api/chat/loadtest", strings.NewReader(`{"message":"hello","sessionId":"session-1"}`))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("turn %d: the stream ended before [DONE]: %v", i+1, err)
			}
			if line == "data: [DONE]\n" {
				break
			}
		}
		resp.Body.Close()
		if i > 0 && !reused {
			t.Fatalf("turn %d: a new connection; the one before was left unfinished at [DONE]", i+1)
		}
	}
}
