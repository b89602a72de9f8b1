package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestPrefixCache posts three requests of one conversation to a server
// with a prefix cache: the second adds messages after the first's (its
// whole start is shared and cached), the third changes the tools array
// (nothing is shared from the start, though the messages could be).
func TestPrefixCache(t *testing.T) {
	srv := New(WithPrefixCache(), WithDefault(Script{Text: []string{"ok"}, Usage: &Usage{Output: 2}}))
	defer srv.Close()
	tool := func(name string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}
	}
	long := strings.Repeat("a long system prompt. ", 400) // about 2,200 tokens
	system := map[string]any{"role": "system", "content": long}
	user := map[string]any{"role": "user", "content": "hello"}
	answer := map[string]any{"role": "assistant", "content": "hi there"}
	bodies := []map[string]any{
		{"model": "m", "tools": []any{tool("a"), tool("b")}, "messages": []any{system, user}},
		{"model": "m", "tools": []any{tool("a"), tool("b")}, "messages": []any{system, user, answer, user}},
		{"model": "m", "tools": []any{tool("b")}, "messages": []any{system, user, answer, user}},
	}
	for i, b := range bodies {
		data, _ := json.Marshal(b)
		res, err := http.Post(srv.URL()+"/v1/chat/completions", "application/json", strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		p := *srv.Requests()[i].Prefix
		if out.Usage.PromptTokens != p.InputTokens || out.Usage.PromptTokensDetails.CachedTokens != p.CachedTokens {
			t.Errorf("request %d: usage %+v, want the prefix's %+v", i, out.Usage, p)
		}
		if p.CachedTokens%cacheBlock != 0 || p.CachedTokens > 0 && p.CachedTokens < minCached {
			t.Errorf("request %d: %d cached tokens, not a cache's count", i, p.CachedTokens)
		}
		switch i {
		case 0:
			if p.Shared != 0 || p.Shareable != 0 || p.CachedTokens != 0 {
				t.Errorf("first request: %+v, want nothing shared or cached", p)
			}
		case 1:
			if p.Shareable == 0 || p.Fraction() != 1 || p.CachedTokens < 2000 {
				t.Errorf("second request: %+v (fraction %v), want its whole shareable start shared and cached", p, p.Fraction())
			}
		case 2:
			if p.Shareable < p.Bytes/2 || p.Fraction() > 0.01 || p.CachedTokens != 0 {
				t.Errorf("third request: %+v (fraction %v), want the messages shareable but nothing shared: the tools changed", p, p.Fraction())
			}
		}
	}
}
