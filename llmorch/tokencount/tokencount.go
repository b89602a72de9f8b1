// Package tokencount counts tokens the way OpenAI's models do, with their
// BPE vocabularies embedded in the binary (github.com/tiktoken-go/tokenizer,
// a maintained pure-Go port of tiktoken): nothing is downloaded at run
// time. o200k_base serves GPT-4o, GPT-4.1, GPT-4.5, GPT-5, the o-series and
// gpt-oss; cl100k_base GPT-4 and GPT-3.5. Other families (Anthropic's,
// whose tokenizer is not published, and models served under other names)
// have none here: the runtime estimates them and reconciles the estimate
// with the provider's reports (llmorch.TokenCounter).
//
// A vocabulary is loaded on first use (tens of milliseconds, some megabytes
// of memory), not at start.
package tokencount

import (
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"
)

// Counter counts the tokens of a text with one vocabulary. It is safe for
// concurrent use.
type Counter struct {
	name string
	load func() *codec.Codec
}

// Encoding names the counter's vocabulary, such as "o200k_base".
func (c *Counter) Encoding() string { return c.name }

// CountTokens returns the number of tokens of text.
func (c *Counter) CountTokens(text string) int {
	if text == "" {
		return 0
	}
	n, err := c.load().Count(text)
	if err != nil {
		// The codec fails only on text it cannot split, which a string
		// never is; count it by its length rather than as nothing.
		return (len(text) + 3) / 4
	}
	return n
}

var (
	o200k  = &Counter{name: "o200k_base", load: sync.OnceValue(codec.NewO200kBase)}
	cl100k = &Counter{name: "cl100k_base", load: sync.OnceValue(codec.NewCl100kBase)}
)

// The model name prefixes of each vocabulary, longest match first where
// they overlap (gpt-4o before gpt-4).
var families = []struct {
	prefix  string
	counter *Counter
}{
	{"gpt-4o", o200k}, {"chatgpt-4o", o200k}, {"gpt-4.1", o200k}, {"gpt-4.5", o200k}, {"gpt-5", o200k},
	{"o1", o200k}, {"o3", o200k}, {"o4", o200k}, {"gpt-oss", o200k},
	{"gpt-4", cl100k}, {"gpt-3.5", cl100k}, {"text-embedding-3", cl100k}, {"text-embedding-ada", cl100k},
}

// ForModel returns the counter of an OpenAI model by its name ("gpt-4o-mini",
// "openai/gpt-4.1" as routers name it), or false when its family has none.
func ForModel(model string) (*Counter, bool) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, f := range families {
		if strings.HasPrefix(name, f.prefix) {
			return f.counter, true
		}
	}
	return nil, false
}
