package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	oar "github.com/openai/openai-go/v3/responses"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
)

// TestCachedUsageAtTheEdges: the cached input a provider reports (here
// over the OpenAI wire, inside its prompt tokens) reaches every edge in
// that edge's shape: the official client reads /v1 chat completions'
// prompt_tokens_details.cached_tokens and the Responses API's
// input_tokens_details.cached_tokens, and the session's usage carries the
// cache reads (GET /api/sessions/:id).
func TestCachedUsageAtTheEdges(t *testing.T) {
	mock := mockllm.New(mockllm.WithDefault(mockllm.Script{Text: []string{"Done."}, Usage: &mockllm.Usage{Input: 3000, Output: 4, CacheRead: 2048}}))
	defer mock.Close()
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{model: model})
	client := e.openai()

	cc, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "explorer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if u := cc.Usage; u.PromptTokens != 3000 || u.PromptTokensDetails.CachedTokens != 2048 || u.TotalTokens != 3004 {
		t.Errorf("chat completion usage %s, want 3000 prompt tokens of which 2048 cached", u.RawJSON())
	}

	r, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input("hello")})
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Usage; u.InputTokens != 3000 || u.InputTokensDetails.CachedTokens != 2048 {
		t.Errorf("response usage %s, want 3000 input tokens of which 2048 cached", u.RawJSON())
	}

	sid := r.Conversation.ID
	if sid == "" {
		t.Fatalf("the response names no conversation: %s", r.RawJSON())
	}
	res := e.do(http.MethodGet, "/api/sessions/"+sid, "")
	defer res.Body.Close()
	var view struct {
		Usage map[string]int64 `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&view); err != nil {
		t.Fatal(err)
	}
	if view.Usage["prompt"] != 3000 || view.Usage["cacheRead"] != 2048 || view.Usage["cacheWrite"] != 0 {
		t.Errorf("session usage %v, want prompt 3000, cacheRead 2048", view.Usage)
	}
}
