package mockllm

import (
	"bytes"
	"encoding/json"
)

// Prefix is what a prompt cache makes of one request, as WithPrefixCache
// computes it. The request is taken in the order providers cache it: the
// tools, then the system prompt, then the messages, each item as its JSON
// on the wire (Anthropic's cache_control markers left out, since they do
// not change what is cached).
type Prefix struct {
	// Bytes is the size of the request's items.
	Bytes int
	// Shared is how many of them, from the start, are the same as in the
	// previous request; Shareable how many bytes the two requests hold in
	// common at all (the tools and messages both send, wherever they
	// are): the most a request could share with the one before it. The
	// first request shares nothing and could share nothing.
	Shared, Shareable int
	// Cached is the longest start the request has in common with any
	// earlier request: what a prefix cache holds of it.
	Cached int
	// InputTokens and CachedTokens are Bytes and Cached in tokens (four
	// bytes a token); CachedTokens follows OpenAI's rule: nothing under
	// 1,024 tokens, then whole blocks of 128 tokens. On Anthropic nothing
	// is cached unless the request marks a cache breakpoint, and
	// WriteTokens is what the request adds after its cached start.
	InputTokens, CachedTokens, WriteTokens int
}

// Fraction is the share of what could be shared that is: Shared over
// Shareable (0 when nothing could be).
func (p Prefix) Fraction() float64 {
	if p.Shareable == 0 {
		return 0
	}
	return float64(min(p.Shared, p.Shareable)) / float64(p.Shareable)
}

// Prompt caching as providers describe it: a hit needs a start of at
// least minCached tokens and is counted in blocks of cacheBlock tokens.
const (
	minCached  = 1024
	cacheBlock = 128
)

func tokens(b int) int { return (b + 3) / 4 }

// prefixCache keeps what it takes to compute Prefix: every earlier
// request's items, of one model. It is the handler's, under its lock.
type prefixCache struct {
	seen [][]byte // every earlier request, its items joined
	prev [][]byte // the previous request's items
}

// observe computes the Prefix of a request and remembers it.
func (c *prefixCache) observe(api string, body []byte) Prefix {
	items := cacheItems(api, body)
	joined := bytes.Join(items, nil)
	p := Prefix{Bytes: len(joined), InputTokens: tokens(len(joined))}
	if c.prev != nil {
		p.Shared = commonStart(joined, bytes.Join(c.prev, nil))
		held := map[string]int{}
		for _, it := range c.prev {
			held[string(it)]++
		}
		for _, it := range items {
			if held[string(it)] > 0 {
				held[string(it)]--
				p.Shareable += len(it)
			}
		}
	}
	for _, s := range c.seen {
		p.Cached = max(p.Cached, commonStart(joined, s))
	}
	if t := tokens(p.Cached); t >= minCached && t <= p.InputTokens {
		p.CachedTokens = minCached + (t-minCached)/cacheBlock*cacheBlock
	}
	if api == APIAnthropic {
		if !bytes.Contains(body, []byte(`"cache_control"`)) {
			p.CachedTokens = 0
		} else {
			p.WriteTokens = p.InputTokens - p.CachedTokens
		}
	}
	c.seen = append(c.seen, joined)
	c.prev = items
	return p
}

// commonStart is the length of the longest common start of a and b.
func commonStart(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// cacheItems are a request's tools, system prompt and messages, in that
// order, each its JSON (a body that does not decode has none).
func cacheItems(api string, body []byte) [][]byte {
	var raw struct {
		Tools    []json.RawMessage `json:"tools"`
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	var items [][]byte
	for _, t := range raw.Tools {
		items = append(items, unmarked(t))
	}
	if api == APIAnthropic && len(raw.System) > 0 {
		if text, err := anthropicText(raw.System); err == nil {
			items = append(items, []byte(text))
		}
	}
	for _, m := range raw.Messages {
		items = append(items, unmarked(m))
	}
	return items
}

// unmarked is b without Anthropic's cache_control markers.
func unmarked(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte(`"cache_control":{"type":"ephemeral"},`), nil)
	return bytes.ReplaceAll(b, []byte(`,"cache_control":{"type":"ephemeral"}`), nil)
}
