package wire

import "github.com/agentdock-go/agentdock/chat"

// Usage is a usage event on the wire (the AI SDK stream's data-usage, the
// OpenAI endpoints' extension): the model call's tokens, or the turn's
// (Final), and the session's so far.
type Usage struct {
	Totals
	Final   bool    `json:"final"`
	Session *Totals `json:"session,omitempty"`
	// Model is the model that answered the step's call; Models, on the
	// turn's final usage, the turn's usage by model.
	Model  *chat.ModelRef `json:"model,omitempty"`
	Models []ModelUsage   `json:"models,omitempty"`
}

// ModelUsage is the usage of one model of a turn.
type ModelUsage struct {
	chat.ModelRef
	Usage Totals `json:"usage"`
	Calls int    `json:"calls"`
}

// Totals is a token count as clients read it: prompt counts the
// cached input too, cacheRead and cacheWrite the parts of it the
// provider's prompt cache served and stored (absent when none).
type Totals struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
	CacheRead  int64 `json:"cacheRead,omitempty"`
	CacheWrite int64 `json:"cacheWrite,omitempty"`
	// Cost is what the tokens cost when the server prices the models
	// (MODEL_PRICES; absent otherwise).
	Cost float64 `json:"cost,omitempty"`
	// Regenerated, in a session's usage, is the part of it spent on
	// answers that were dropped and given again (absent when none).
	Regenerated *Totals `json:"regenerated,omitempty"`
	// Summarizer, in a session's usage, is what the summaries of its
	// history cost, apart from the agent's model calls above (absent when
	// none).
	Summarizer *Totals `json:"summarizer,omitempty"`
}

// TotalsOf is u on the wire.
func TotalsOf(u chat.Usage) Totals {
	return Totals{Prompt: u.Prompt, Completion: u.Completion, Total: TotalOf(u), CacheRead: u.CacheRead, CacheWrite: u.CacheWrite, Cost: u.Cost}
}

// CompactionInfo is a chat.Compaction on the wire: the turns a summary
// replaces for the model from now on, the summary and what it saved.
type CompactionInfo struct {
	From        int    `json:"from"`
	Through     int    `json:"through"`
	Kept        int    `json:"kept"`
	Tokens      int    `json:"tokens"`
	By          string `json:"by,omitempty"`
	InputBefore int    `json:"inputBefore"`
	InputAfter  int    `json:"inputAfter"`
	Usage       Totals `json:"usage"`
	Summary     string `json:"summary"`
}

// CompactionOf is c on the wire.
func CompactionOf(c *chat.Compaction) *CompactionInfo {
	out := &CompactionInfo{Summary: c.Summary.Content, InputBefore: c.InputBefore, InputAfter: c.InputAfter}
	if s := c.Summary.Summary; s != nil {
		out.From, out.Through, out.Kept, out.Tokens, out.By, out.Usage = s.From, s.Through, s.Kept, s.Tokens, s.By, TotalsOf(s.Usage)
	}
	return out
}

// TotalOf is u's total: Prompt+Completion when the provider reported none.
func TotalOf(u chat.Usage) int64 {
	if u.Total == 0 {
		return u.Prompt + u.Completion
	}
	return u.Total
}
