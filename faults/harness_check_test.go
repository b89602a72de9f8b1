package faults

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// TestHarnessTurn: the harness's own path works end to end before any fault
// is injected: the binary serves the faults template against the mock
// model, a turn with a tool call streams start ... finish, [DONE] with the
// model's text, and the session keeps a consistent history. Every fault
// test relies on this baseline.
func TestHarnessTurn(t *testing.T) {
	m := newModel(t)
	m.Enqueue(
		mockllm.ToolScript(mockllm.ToolCall{ID: "call_1", Name: "think", Arguments: `{"topic":"t","reasoning":"r"}`}),
		mockllm.TextScript("All", " done."),
	)
	srv := startServer(t, modelEnv(m)...)
	const sid = "harness-session-1"
	frames := chat(t, srv.URL(), agentID, sid, "hello").All(10 * time.Second)
	if reason := requireEnd(t, frames); reason != "stop" {
		t.Errorf("finish reason %q, want stop", reason)
	}
	if got := textOf(frames); got != "All done." {
		t.Errorf("text %q, want %q", got, "All done.")
	}
	if errs := errorTexts(frames); len(errs) > 0 {
		t.Errorf("error frames: %q", errs)
	}
	view, status, raw := getSession(t, srv.URL(), sid)
	if status != http.StatusOK {
		t.Fatalf("GET session: %d %s", status, raw)
	}
	if probs := checkHistory(view.Messages); len(probs) > 0 {
		t.Errorf("inconsistent history: %s\n%s", strings.Join(probs, "; "), raw)
	}
	if len(view.Messages) != 4 { // user, assistant call, tool, assistant text
		t.Errorf("%d messages, want 4: %s", len(view.Messages), raw)
	}
	if n := len(m.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}
