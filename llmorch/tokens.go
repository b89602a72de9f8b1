package llmorch

import (
	"hash/maphash"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
)

// TokenCounter is a Model that counts tokens with its provider's tokenizer
// (package provider does for OpenAI's models). A Service counts its
// requests with it for the context budget (ContextPolicy); a model that
// is not one is counted by EstimateTokens. Either way the count is
// reconciled with the input tokens the provider reports for the requests
// it counted.
type TokenCounter interface {
	CountTokens(text string) int
}

// EstimateTokens estimates the tokens of s for a model whose tokenizer is
// not at hand: about four bytes a token for text in a Latin script (the
// usual rate of BPE tokenizers), and a token a character beyond it, where
// they spend more.
func EstimateTokens(s string) int {
	if s == "" {
		return 0
	}
	ascii := 0
	runes := 0
	for _, r := range s {
		runes++
		if r < utf8.RuneSelf {
			ascii++
		}
	}
	return (ascii+3)/4 + runes - ascii
}

// Per-item overheads of a request, as OpenAI's chat format counts them:
// each message's role and separators, and each tool's framing.
const (
	messageOverhead = 4
	toolOverhead    = 8
)

// tokenCount counts a service's requests. Counting with a BPE tokenizer
// costs about as much as a turn's own work for a history of a few
// thousand tokens, and a session's requests repeat the same messages call
// after call and turn after turn: counts of longer texts are kept (by a
// hash of the text) so that each text is counted once while it is in use.
type tokenCount struct {
	counter TokenCounter // nil: EstimateTokens
	// wire is the provider whose image tokens are counted (Info).
	wire  string
	cache tokenCache
	// ratios are the latest reports' input tokens over the count of the
	// same request: tokenizers differ by provider, requests carry framing
	// the count does not see, and the share of each varies with what a
	// request holds. The largest of them scales a count, so that a
	// request is not taken for smaller than the provider will count it.
	mu     sync.Mutex
	ratios [reconciled]float64
	next   int
}

// reconciled is how many of the latest reports the ratio is taken from.
const reconciled = 16

func newTokenCount(m Model) *tokenCount {
	c := &tokenCount{wire: m.Info().Provider}
	c.counter, _ = m.(TokenCounter)
	c.cache.seed = maphash.MakeSeed()
	return c
}

// minCached is the shortest text whose count is cached: shorter ones are
// cheaper to count than to look up.
const minCached = 64

func (c *tokenCount) text(s string) int {
	if len(s) < minCached {
		return c.count(s)
	}
	if n, ok := c.cache.get(s); ok {
		return n
	}
	n := c.count(s)
	c.cache.put(s, n)
	return n
}

func (c *tokenCount) count(s string) int {
	if c.counter == nil {
		return EstimateTokens(s)
	}
	return c.counter.CountTokens(s)
}

// message counts one message as a request carries it.
func (c *tokenCount) message(m chat.Message) int {
	n := messageOverhead + c.text(m.Content)
	for _, a := range m.Attachments {
		n += c.attachment(a)
	}
	for _, call := range m.ToolCalls {
		n += messageOverhead + c.text(call.Name) + c.text(string(call.Arguments))
	}
	return n
}

// fixed counts what a request carries besides its messages: the system
// prompt, the note and the tools.
func (c *tokenCount) fixed(req Request) int {
	n := c.text(req.System) + c.text(req.Note) + messageOverhead
	for _, t := range req.Tools {
		n += toolOverhead + c.text(t.Name) + c.text(t.Description) + c.text(string(t.Parameters))
	}
	return n
}

// request counts a whole request.
func (c *tokenCount) request(req Request) int {
	n := c.fixed(req)
	for _, m := range req.Messages {
		n += c.message(m)
	}
	return n
}

// Bounds of the reconciliation: a provider's count differs from ours by
// its tokenizer and framing, never by more than that; a report outside
// them is a provider that does not report (or a mock), and is ignored.
const (
	minRatio = 0.5
	maxRatio = 2.0
)

// reconcile takes a provider's input tokens for a request counted as
// counted.
func (c *tokenCount) reconcile(counted int, reported int64) {
	if counted <= 0 || reported <= 0 {
		return
	}
	r := float64(reported) / float64(counted)
	if r < minRatio || r > maxRatio {
		return
	}
	c.mu.Lock()
	c.ratios[c.next%reconciled] = r
	c.next++
	c.mu.Unlock()
}

// provider is what the provider would count for a request counted as n:
// n scaled by the largest recent ratio (n itself before any report).
func (c *tokenCount) provider(n int) int {
	c.mu.Lock()
	r := 0.0
	for _, x := range c.ratios {
		r = max(r, x)
	}
	c.mu.Unlock()
	if r == 0 {
		return n
	}
	return int(math.Ceil(float64(n) * r))
}

// tokenCache keeps counts of texts by their hash, in two generations: a
// full one is dropped whole when the next fills up, so that the texts in
// use stay and the cache's size is bounded without bookkeeping per entry.
type tokenCache struct {
	seed     maphash.Seed
	mu       sync.Mutex
	cur, old map[uint64]int32
}

// tokenCacheSize bounds each generation: at a few hundred bytes a
// message, far more than the histories of the sessions that run at once.
const tokenCacheSize = 1 << 16

func (t *tokenCache) key(s string) uint64 {
	// The length in the key too: two texts of one hash but different
	// lengths are told apart.
	return maphash.String(t.seed, s) ^ uint64(len(s))<<48
}

func (t *tokenCache) get(s string) (int, bool) { return t.getKey(t.key(s)) }

func (t *tokenCache) getKey(k uint64) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, ok := t.cur[k]; ok {
		return int(n), true
	}
	if n, ok := t.old[k]; ok {
		t.putLocked(k, n)
		return int(n), true
	}
	return 0, false
}

func (t *tokenCache) put(s string, n int) { t.putKey(t.key(s), n) }

func (t *tokenCache) putKey(k uint64, n int) {
	t.mu.Lock()
	t.putLocked(k, int32(min(n, math.MaxInt32)))
	t.mu.Unlock()
}

func (t *tokenCache) putLocked(k uint64, n int32) {
	if t.cur == nil || len(t.cur) >= tokenCacheSize {
		t.old, t.cur = t.cur, make(map[uint64]int32, 1024)
	}
	t.cur[k] = n
}
