package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// TestOnlyOpenAIConfigured: with OPENAI_API_KEY and OPENAI_BASE_URL alone
// (a scripted model server), every shipped agent answers through it,
// including those whose template names another provider, and the log
// names each agent's provider and model, and why when it is not the
// template's own.
func TestOnlyOpenAIConfigured(t *testing.T) {
	const answer = "Answered by the scripted model."
	mock := mockllm.New(mockllm.WithDefault(mockllm.Script{Text: strings.Fields(answer)}))
	t.Cleanup(mock.Close)
	clearConfigEnv(t)
	for _, k := range []string{"ANTHROPIC_API_KEY", "LLM_PROVIDER", "LLM_BASE_URL", "LLM_MODEL", "OPENAI_MODEL"} {
		t.Setenv(k, "")
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", mock.URL()+"/v1")
	addr := freeAddr(t)
	t.Setenv("ADDR", addr)
	cfg, err := loadServeConfig(nil, testConfigEnv(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, cfg, nil, log) }()
	base := "http://" + addr
	waitHealthy(t, base, func() error {
		select {
		case err := <-served:
			return fmt.Errorf("serve returned %v", err)
		default:
			return nil
		}
	})
	ids := shippedAgents(t)
	for _, id := range ids {
		res, err := http.Post(base+"/api/chat/"+id, "application/json", strings.NewReader(`{"message":"Hello there"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"delta":"Answered`) {
			t.Errorf("%s answered %d without the scripted model:\n%s", id, res.StatusCode, body)
		}
		if !strings.Contains(logs.String(), "msg=model agent="+id+" provider=openai model=gpt-4o-mini") {
			t.Errorf("the log does not name %s's model:\n%s", id, logs.String())
		}
	}
	if n := len(mock.Requests()); n < len(ids) {
		t.Errorf("the scripted model got %d requests for %d agents", n, len(ids))
	}
	if !strings.Contains(logs.String(), `agent=cognitive-reasoner provider=openai model=gpt-4o-mini why="the template names anthropic, which has no ANTHROPIC_API_KEY; openai is the only provider configured"`) {
		t.Errorf("the log does not say why cognitive-reasoner uses openai:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "OFFLINE") {
		t.Errorf("an agent stayed offline:\n%s", logs.String())
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// shippedAgents are the IDs of the embedded templates.
func shippedAgents(t *testing.T) []string {
	t.Helper()
	agents, err := loadAgents(t.Context(), "", agent.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range agents.List() {
		ids = append(ids, a.ID())
	}
	if len(ids) < 3 {
		t.Fatalf("shipped agents %v", ids)
	}
	return ids
}
