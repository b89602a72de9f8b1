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

// TestFallbackModel: with the provider unreachable, the configured fallback
// (here the offline model) answers instead; a bad fallback name is refused.
func TestFallbackModel(t *testing.T) {
	t.Setenv("LLM_PROVIDER", "openai")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("LLM_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("LLM_FALLBACK_PROVIDER", "offline")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tpl := &template.Template{AgentID: "a", Name: "A", Nodes: []string{"llm.openai"}}
	m, err := modelFactory(&serveConfig{}, nil, log)(tpl)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	req := llmorch.Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "[offline:echo] answered by the fallback"}}}
	for ev, err := range m.Stream(context.Background(), req) {
		if err != nil {
			t.Fatalf("the fallback did not take over: %v", err)
		}
		if ev.Kind == chat.KindTextDelta {
			text.WriteString(ev.Text)
		}
	}
	if text.String() != "answered by the fallback" {
		t.Fatalf("answer %q", text.String())
	}

	t.Setenv("LLM_FALLBACK_PROVIDER", "carrier-pigeon")
	if _, err := modelFactory(&serveConfig{}, nil, log)(tpl); err == nil || !strings.Contains(err.Error(), "LLM_FALLBACK_PROVIDER") {
		t.Fatalf("bad fallback name: %v", err)
	}
}
