package provider

import (
	"testing"

	"github.com/agentdock-go/agentdock/llmorch"
)

// TestTokenCounter: an OpenAI model of a family with a published tokenizer
// counts its requests with it; others leave counting to the estimate.
func TestTokenCounter(t *testing.T) {
	for _, tc := range []struct {
		provider, model string
		counts          bool
	}{
		{OpenAI, "gpt-4o-mini", true},
		{OpenAI, "llama3.1", false},
		{Anthropic, "claude-sonnet-4-20250514", false},
	} {
		m, err := New(Config{Provider: tc.provider, Model: tc.model, APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		c, ok := m.(llmorch.TokenCounter)
		if ok != tc.counts {
			t.Errorf("%s %s: a token counter %v, want %v", tc.provider, tc.model, ok, tc.counts)
		}
		if ok && c.CountTokens("hello world") != 2 {
			t.Errorf("%s: counts %d tokens in \"hello world\"", tc.model, c.CountTokens("hello world"))
		}
		if m.Info().Model != tc.model {
			t.Errorf("%s: Info %+v", tc.model, m.Info())
		}
	}
}
