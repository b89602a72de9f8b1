package tokencount

import "testing"

// TestForModel: each OpenAI family gets its vocabulary, counts are
// tiktoken's, and other families get none.
func TestForModel(t *testing.T) {
	for _, tc := range []struct {
		model, encoding string
	}{
		{"gpt-4o-mini", "o200k_base"}, {"openai/gpt-4.1", "o200k_base"}, {"gpt-5", "o200k_base"}, {"o3-mini", "o200k_base"},
		{"gpt-4-turbo", "cl100k_base"}, {"gpt-3.5-turbo", "cl100k_base"},
		{"claude-sonnet-4", ""}, {"llama3.1", ""},
	} {
		c, ok := ForModel(tc.model)
		if got := ""; ok {
			got = c.Encoding()
			if got != tc.encoding {
				t.Errorf("%s: %s, want %s", tc.model, got, tc.encoding)
			}
		} else if tc.encoding != "" {
			t.Errorf("%s: no counter, want %s", tc.model, tc.encoding)
		}
	}
	// Counts as tiktoken gives them.
	for _, tc := range []struct {
		enc, text string
		want      int
	}{
		{"o200k_base", "hello world", 2},
		{"cl100k_base", "hello world", 2},
		{"o200k_base", "", 0},
		{"cl100k_base", "tiktoken is great!", 6},
	} {
		c := o200k
		if tc.enc == "cl100k_base" {
			c = cl100k
		}
		if got := c.CountTokens(tc.text); got != tc.want {
			t.Errorf("%s %q: %d tokens, want %d", tc.enc, tc.text, got, tc.want)
		}
	}
}

func BenchmarkCountTokens(b *testing.B) {
	text := "The quick brown fox jumps over the lazy dog; the results were: {\"city\": \"Paris\", \"temperature\": 21}.\n"
	o200k.CountTokens(text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		o200k.CountTokens(text)
	}
}
