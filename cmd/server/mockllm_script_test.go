package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/provider"
)

// startMock runs `agentdock mockllm ARGS... --addr <free port>` until the
// test ends, waits until it answers, and returns its address and a function
// that stops it and returns its output.
func startMock(t *testing.T, args ...string) (addr string, stop func() string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan string, 1)
	go func() {
		code, out := runMock(ctx, append(args, "--addr", addr)...)
		if code != 0 {
			out += "\n(exit code " + string(rune('0'+code)) + ")"
		}
		done <- out
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case out := <-done:
			t.Fatalf("mockllm exited:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mock did not listen on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var out string
	stopped := false
	stop = func() string {
		if !stopped {
			cancel()
			out, stopped = <-done, true
		}
		return out
	}
	t.Cleanup(func() { stop() })
	return addr, stop
}

// TestMockLLMServesScript: `mockllm --script` serves the file's answers in
// order over real HTTP: a streamed answer with tool calls that the real
// OpenAI provider parses into calls with their arguments, the answers'
// usage (given or estimated), a non-streamed answer for curl, and then a
// text saying the script is used up.
func TestMockLLMServesScript(t *testing.T) {
	addr, stop := startMock(t, "--script", "testdata/answers.json", "--inter-token", "1ms")
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "scripted", APIKey: "x", BaseURL: "http://" + addr + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	req := llmorch.Request{
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "Critique the argument that remote work improves productivity"}},
		Tools: []chat.ToolSpec{
			{Name: "critique", Description: "c", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "debate", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
	}
	stream := func() (text string, calls []chat.ToolCall, usage chat.Usage, deltas int) {
		t.Helper()
		for ev, err := range model.Stream(t.Context(), req) {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch ev.Kind {
			case chat.KindTextDelta:
				text += ev.Text
				deltas++
			case chat.KindToolCall:
				calls = append(calls, *ev.ToolCall)
			case chat.KindUsage:
				usage = *ev.Usage
			case chat.KindError:
				t.Fatalf("invalid call: %+v", ev)
			}
		}
		return
	}

	text, calls, usage, deltas := stream()
	if text != "Mode: EvaluationMode." || deltas != 2 {
		t.Errorf("first answer: text %q in %d deltas, want the script's two words", text, deltas)
	}
	if len(calls) != 2 || calls[0].Name != "critique" || calls[1].Name != "debate" || calls[1].ID != "call_debate" || calls[0].ID == "" {
		t.Fatalf("first answer's calls: %+v", calls)
	}
	var args struct{ Subject, Analysis string }
	if err := json.Unmarshal(calls[0].Arguments, &args); err != nil || args.Subject != "remote work" || !strings.Contains(args.Analysis, "onboarding") {
		t.Errorf("critique's arguments arrived as %s (%v)", calls[0].Arguments, err)
	}
	if usage.Prompt <= 0 || usage.Completion <= 0 || usage.Total != usage.Prompt+usage.Completion {
		t.Errorf("first answer's estimated usage: %+v", usage)
	}

	text, calls, usage, _ = stream()
	if text != "The verdict: it depends on the work." || len(calls) != 0 || usage != (chat.Usage{Prompt: 120, Completion: 9, Total: 129}) {
		t.Errorf("second answer: %q, %v, usage %+v", text, calls, usage)
	}

	// The third as curl would ask: not streamed.
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var whole struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			Prompt int `json:"prompt_tokens"`
			Total  int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &whole); err != nil || len(whole.Choices) != 1 || whole.Choices[0].Message.Content != "Asked without streaming." || whole.Usage.Total <= whole.Usage.Prompt {
		t.Errorf("non-streamed answer: %s", body)
	}

	text, _, _, _ = stream()
	if !strings.Contains(text, "all 3 answers of testdata/answers.json were served") {
		t.Errorf("after the script: %q", text)
	}
	if out := stop(); !strings.Contains(out, "the 3 answers of testdata/answers.json in order") {
		t.Errorf("start-up line:\n%s", out)
	}
}

// TestMockLLMScriptFromTranscript: a transcript is a script too: its turns'
// answers, in order.
func TestMockLLMScriptFromTranscript(t *testing.T) {
	file := filepath.Join(testenv.ModuleRoot(), "templates", "cognitive-reasoner", "tests", "modes.json")
	o, err := parseMockLLM([]string{"--script", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	q := o.queue()
	if len(q) != 10 {
		t.Fatalf("%d scripts, want the transcript's 4+5+1 answers", len(q))
	}
	var names []string
	for _, s := range q[:4] {
		for _, c := range s.ToolCalls {
			names = append(names, c.Name)
		}
	}
	if !slices.Equal(names, []string{"critique", "debate", "reflect"}) || !strings.HasPrefix(q[3].Text[0], "## ") {
		t.Fatalf("first turn's answers: calls %v, last text %q", names, q[3].Text)
	}
}

func TestMockLLMScriptErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--script", "testdata/no-such.json"}, "--script: testdata/no-such.json: stat testdata/no-such.json: no such file"},
		{[]string{"--script", "testdata/answers.json", "--chunks", "3"}, "--script and --chunks: give one answer source"},
		{[]string{"--script", "testdata/mismatch.json"}, `--script: testdata/mismatch.json: line 1, column 1: no model answers here: want a transcript (with "turns"), {"model": [answers]} or a list of answers`},
		{[]string{"--script", "testdata/bad-answers.json"}, "--script: testdata/bad-answers.json: line 3, column 49: [1].toolCalls[0].arguments: arguments must be a JSON object"},
	} {
		code, out := runMock(context.Background(), tc.args...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("mockllm %q: exit %d, output %q; want exit 2 and %q", tc.args, code, out, tc.want)
		}
	}
}
