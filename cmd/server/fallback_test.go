package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/template"
)

// TestFallbackModel: with the provider unreachable, the server's fallback
// (here the offline model), every model's default fallback, answers
// instead; a bad fallback name is refused with the other settings.
func TestFallbackModel(t *testing.T) {
	t.Setenv("LLM_PROVIDER", "openai")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("LLM_BASE_URL", "http://127.0.0.1:1/v1")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := &serveConfig{FallbackProvider: "offline"}
	tpl := &template.Template{AgentID: "a", Name: "A", Nodes: []string{"llm.openai"}}
	m, err := modelFactory(cfg, nil, log)(tpl)
	if err != nil {
		t.Fatal(err)
	}
	fbs, err := defaultFallbacks(cfg, nil, log)
	if err != nil || len(fbs) != 1 {
		t.Fatalf("fallbacks %v, %v", fbs, err)
	}
	chain := llmorch.Fallbacks(0, append([]llmorch.Candidate{{Model: m, Config: "llm.openai"}}, fbs...)...)
	var text strings.Builder
	var fb *chat.Fallback
	req := llmorch.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "[offline:echo] answered by the fallback"}}}
	for ev, err := range chain.Stream(context.Background(), req) {
		if err != nil {
			t.Fatalf("the fallback did not take over: %v", err)
		}
		switch ev.Kind {
		case chat.KindTextDelta:
			text.WriteString(ev.Text)
		case chat.KindFallback:
			fb = ev.Fallback
		}
	}
	if text.String() != "answered by the fallback" || fb == nil || fb.From.Config != "llm.openai" || fb.To.Provider != "offline" {
		t.Fatalf("answer %q, fallback %+v", text.String(), fb)
	}

	env := osConfigEnv()
	env.lookup = func(k string) (string, bool) {
		if k == "LLM_FALLBACK_PROVIDER" {
			return "carrier-pigeon", true
		}
		return "", false
	}
	if _, err := loadServeConfig(nil, env, io.Discard); err == nil || !strings.Contains(err.Error(), "LLM_FALLBACK_PROVIDER") {
		t.Fatalf("bad fallback name: %v", err)
	}
}
