package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// runMock runs `agentdock mockllm ARGS...` through dispatch, with ctx (run
// has none, and the serving test must stop the mock).
func runMock(ctx context.Context, args ...string) (int, string) {
	var out bytes.Buffer
	code := dispatch(ctx, append([]string{"mockllm"}, args...), &out, &out)
	return code, out.String()
}

func TestMockLLMFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--ttft", "-5ms"}, "--ttft -5ms: want a duration from 0 to 10m0s"},
		{[]string{"--inter-token", "-1s"}, "--inter-token -1s: want a duration from 0"},
		{[]string{"--ttft", "1h"}, "--ttft 1h0m0s: want a duration from 0 to 10m0s"},
		{[]string{"--chunks", "-1"}, "--chunks -1: want 0 (the default answer) to 100000"},
		{[]string{"--chunks", "1000001"}, "--chunks 1000001"},
		{[]string{"--input-tokens", "-3"}, "--input-tokens -3"},
		{[]string{"--addr", ""}, "--addr: empty"},
		{[]string{"--ttft", "fast"}, `invalid value "fast" for flag -ttft`},
		{[]string{"--chunks", "64", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--chunks", "64", "--prefix-cache"}, "--prefix-cache and --chunks"},
		// Every wrong flag is reported, not only the first.
		{[]string{"--ttft", "-1ms", "--chunks", "-2"}, "--chunks -2"},
	}
	for _, tc := range tests {
		code, out := runMock(context.Background(), tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("mockllm %q: exit %d, output %q; want exit 2 and %q", tc.args, code, out, tc.want)
		}
	}
}

func TestMockLLMUsage(t *testing.T) {
	code, out := runMock(context.Background(), "-h")
	if code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	for _, want := range []string{"usage: agentdock mockllm", "-ttft duration", "-inter-token duration", "-chunks int", "-addr string", "LLM_BASE_URL=http://127.0.0.1:8090/v1"} {
		if !strings.Contains(out, want) {
			t.Errorf("usage lacks %q:\n%s", want, out)
		}
	}
}

func TestMockLLMScript(t *testing.T) {
	o, err := parseMockLLM([]string{"--ttft", "100ms", "--inter-token", "10ms", "--chunks", "64"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := o.script()
	if s.Chunks != 64 || s.TimeToFirstToken != 100*time.Millisecond || s.InterTokenDelay != 10*time.Millisecond || s.Usage.Output != 64 || s.Usage.Input != 40 {
		t.Fatalf("script %+v (usage %+v)", s, s.Usage)
	}
	// Without --chunks the default answer is paced as asked, and the
	// package's default script is not changed.
	o, err = parseMockLLM([]string{"--inter-token", "5ms", "--input-tokens", "7"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s = o.script()
	if len(s.Text) != 3 || s.InterTokenDelay != 5*time.Millisecond || s.Usage.Input != 7 {
		t.Fatalf("default script %+v (usage %+v)", s, s.Usage)
	}
	if o2, _ := parseMockLLM(nil, io.Discard); o2.script().Usage.Input != 40 || s.Usage == o2.script().Usage {
		t.Fatal("the scripts share the default's Usage")
	}
}

// TestMockLLMServesPaced starts the subcommand on a loopback port and reads
// one streamed answer: the chunk count, the usage and the scripted wait
// before the first chunk are the flags'.
func TestMockLLMServesPaced(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := runMock(ctx, "--addr", addr, "--ttft", "50ms", "--inter-token", "1ms", "--chunks", "5")
		done <- result{code, out}
	}()
	defer func() {
		cancel()
		r := <-done
		if r.code != 0 || !strings.Contains(r.out, "5 chunks, first after 50ms, then 1ms apart") {
			t.Errorf("mockllm exited %d:\n%s", r.code, r.out)
		}
	}()

	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	var resp *http.Response
	var sent time.Time
	for deadline := time.Now().Add(10 * time.Second); ; {
		sent = time.Now()
		resp, err = http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mock did not answer on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	var chunks []string
	var first time.Time
	usage, doneSeen := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
		case d == "[DONE]":
			doneSeen = true
		case strings.Contains(d, `"content":"tok`):
			if first.IsZero() {
				first = time.Now()
			}
			chunks = append(chunks, d)
		case strings.Contains(d, `"prompt_tokens":40`) && strings.Contains(d, `"completion_tokens":5`):
			usage = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 5 || !doneSeen || !usage {
		t.Fatalf("%d chunks, [DONE] %v, usage %v; want 5 chunks, [DONE] and usage 40/5", len(chunks), doneSeen, usage)
	}
	// A lower bound only: the scripted wait is the knob's effect, and a
	// busy machine can only make it longer.
	if wait := first.Sub(sent); wait < 50*time.Millisecond {
		t.Fatalf("first chunk %v after the request; --ttft asked for 50ms", wait)
	}
}

// TestMockLLMPrefixCache: with --prefix-cache the second of two requests
// with the same long start is answered with that start as cached tokens.
func TestMockLLMPrefixCache(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		_, out := runMock(ctx, "--addr", addr, "--prefix-cache")
		done <- out
	}()
	defer func() {
		cancel()
		if out := <-done; !strings.Contains(out, "usage as a prompt cache counts it") {
			t.Errorf("mockllm said:\n%s", out)
		}
	}()
	system := strings.Repeat("You answer briefly. ", 400)
	body := `{"model":"m","messages":[{"role":"system","content":"` + system + `"},{"role":"user","content":"hi"}]}`
	cached := make([]int, 2)
	for i := range cached {
		var resp *http.Response
		for deadline := time.Now().Add(10 * time.Second); ; {
			resp, err = http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the mock did not answer on %s: %v", addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var out struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		err := json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		cached[i] = out.Usage.PromptTokensDetails.CachedTokens
		if out.Usage.PromptTokens < 2000 {
			t.Fatalf("request %d: %d prompt tokens for a start of 2,000", i+1, out.Usage.PromptTokens)
		}
	}
	if cached[0] != 0 || cached[1] < 1024 {
		t.Errorf("cached tokens %v, want none, then the shared start", cached)
	}
}
