package llmorch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// ContextPolicy is an agent's context budget: before every model call, when
// the request would pass MaxInputTokens (the tools, the system prompt, the
// summary and the messages, as the model's tokenizer counts them and the
// provider's reports reconcile), the oldest whole turns beyond the newest
// KeepTurns are summarized by Summarizer into one summary that the model
// reads in their place.
//
// A turn is a user message and everything after it up to the next one, so
// a tool call and its result are always on the same side of the cut. The
// summary is appended to the history as an entry of its own (chat.
// RoleSummary, with the turns it replaces): the history is never
// rewritten, and the next turns read it and the turns after it only
// (session.SinceSummary). The orchestration's state is not summarized:
// it lives in the session and every condition reads it as before.
//
// A summary that cannot be made (the summarizer fails, answers with an
// error text or too long) is never used: the turn goes on with the
// history's message cap (Turn.Fallback), says so in a chat.KindWarning
// event and logs it, and tries again at the next turn.
type ContextPolicy struct {
	MaxInputTokens int
	// KeepTurns newest turns, the running one included, stay verbatim;
	// fewer when they alone pass MaxInputTokens (the running turn always
	// stays).
	KeepTurns int
	// Summarizer writes the summaries; Prompt replaces
	// DefaultSummaryPrompt.
	Summarizer Model
	Prompt     string
	// Logger logs each compaction and each failure (no content); nil:
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of the context budget (the server's CONTEXT_* settings).
const (
	DefaultMaxInputTokens = 32000
	DefaultKeepTurns      = 4
)

// Validate reports a policy that cannot work.
func (p *ContextPolicy) Validate() error {
	switch {
	case p.MaxInputTokens <= 0:
		return fmt.Errorf("MaxInputTokens must be positive, got %d", p.MaxInputTokens)
	case p.KeepTurns <= 0:
		return fmt.Errorf("KeepTurns must be positive, got %d", p.KeepTurns)
	case p.Summarizer == nil:
		return errors.New("Summarizer is nil")
	}
	return nil
}

// summaryBudget is the most tokens a summary may take: a quarter of the
// budget, and no more than a long answer, so that the turns kept and the
// ones to come have room.
func (p *ContextPolicy) summaryBudget() int {
	return min(p.MaxInputTokens/4, 4096)
}

// ErrTooLong is why Compact could not fit a conversation: its newest turns
// alone pass the budget, and what is before them is too little to be worth
// a summary.
var ErrTooLong = errors.New("the conversation's newest turns alone pass the context budget")

// turnSpans splits msgs into turns: each starts at a user message (a
// prefix before the first one belongs to the first turn). The last turn
// is number last.
func turnSpans(msgs []chat.Message, last int) (starts []int, numbers []int) {
	for i, m := range msgs {
		if m.Role == chat.RoleUser || i == 0 {
			starts = append(starts, i)
		}
	}
	numbers = make([]int, len(starts))
	n := last
	for i := len(starts) - 1; i >= 0; i-- {
		numbers[i] = n
		if msgs[starts[i]].Role == chat.RoleUser {
			n--
		}
	}
	return starts, numbers
}

// summaryMessage is the message a model reads for a summary entry: a user
// message that says what it is, before the turns it does not cover.
func summaryMessage(s *chat.Message) chat.Message {
	from, through := 0, 0
	if s.Summary != nil {
		from, through = s.Summary.From, s.Summary.Through
	}
	return chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf(
		"## Summary of the conversation so far (turns %d to %d; written by the runtime, not by the user)\n%s", from, through, s.Content)}
}

// compaction is the result of compact.
type compaction struct {
	summary  *chat.Message  // the new summary entry
	messages []chat.Message // the turns kept verbatim
	before   int            // the request's count before
	usage    chat.Usage
}

// compact summarizes the oldest turns of msgs (whose last turn is number
// last) beyond the ones kept, folding prev in. fixed is what the request
// costs besides its messages. It returns ErrTooLong when no turn can be
// summarized, and a summarizer's failure as is.
func (s *Service) compact(ctx context.Context, prev *chat.Message, msgs []chat.Message, last, fixed int, force bool) (*compaction, error) {
	p := s.cfg.Context
	starts, numbers := turnSpans(msgs, last)
	// The turns are counted as a request carries them: with the newest
	// attachments only.
	sent := limitAttachments(msgs, s.cfg.MaxAttachments)
	total := make([]int, len(starts)+1) // total[i]: tokens of the turns from i on
	for i := len(starts) - 1; i >= 0; i-- {
		end := len(msgs)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		for _, m := range sent[starts[i]:end] {
			total[i] += s.tokens.message(m)
		}
		total[i] += total[i+1]
	}
	keep := min(p.KeepTurns, len(starts))
	budget := p.summaryBudget()
	for keep > 1 && s.tokens.provider(fixed+budget+total[len(starts)-keep]) > p.MaxInputTokens {
		keep--
	}
	cut := len(starts) - keep
	replaced := total[0] - total[cut]
	if prev != nil {
		replaced += s.tokens.message(summaryMessage(prev))
	}
	// A summary costs a model call and takes room of its own: turns that
	// weigh less than a sixteenth of the budget are not worth one.
	if cut <= 0 || !force && replaced < p.MaxInputTokens/16 {
		return nil, ErrTooLong
	}
	in := SummaryInput{Previous: prev, MaxTokens: budget}
	for i := range cut {
		in.Turns = append(in.Turns, SummaryTurn{Number: numbers[i], Messages: msgs[starts[i]:starts[i+1]]})
	}
	text, usage, err := summarize(ctx, p.Summarizer, p.Prompt, in, s.tokens.text)
	if err != nil {
		return &compaction{usage: usage}, err
	}
	from := numbers[0]
	if prev != nil && prev.Summary != nil {
		from = prev.Summary.From
	}
	info := p.Summarizer.Info()
	by := info.Provider
	if info.Model != "" {
		by += "/" + info.Model
	}
	entry := &chat.Message{Role: chat.RoleSummary, Content: text, Summary: &chat.Summary{
		From: from, Through: numbers[cut-1], Kept: keep, Tokens: s.tokens.text(text), By: by, Usage: usage}}
	return &compaction{summary: entry, messages: msgs[starts[cut]:], usage: usage}, nil
}

// Compacted is a conversation Compact fitted to the budget.
type Compacted struct {
	// Summary is the summary entry made, nil when the conversation fit.
	Summary *chat.Message
	// Messages are the turns kept verbatim, which the model reads after
	// the summary.
	Messages []chat.Message
	// Tokens counts the request the conversation makes now.
	Tokens int
}

// Compact fits a conversation a client holds to the service's context
// budget (POST /v1/responses/compact, say): when the request it would make
// (with the agent's system prompt and tools) passes the budget, its oldest
// turns beyond the kept ones are summarized, as a turn would. prev is the
// summary entry the conversation starts with, if any; msgs must start at
// a user message and their last turn is number last. Nothing is stored.
func (s *Service) Compact(ctx context.Context, prev *chat.Message, msgs []chat.Message, last int) (Compacted, error) {
	if s.cfg.Context == nil {
		return Compacted{Summary: prev, Messages: msgs}, errors.New("llmorch: the agent's context budget is off (options.context)")
	}
	req := Request{System: s.system, Tools: s.cfg.Tools.Specs(s.cfg.Engine.Tools())}
	fixed := s.tokens.fixed(req)
	count := func(sum *chat.Message, msgs []chat.Message) int {
		n := fixed
		if sum != nil {
			n += s.tokens.message(summaryMessage(sum))
		}
		for _, m := range limitAttachments(msgs, s.cfg.MaxAttachments) {
			n += s.tokens.message(m)
		}
		return s.tokens.provider(n)
	}
	n := count(prev, msgs)
	if n <= s.cfg.Context.MaxInputTokens {
		return Compacted{Summary: prev, Messages: msgs, Tokens: n}, nil
	}
	c, err := s.compact(ctx, prev, msgs, last, fixed, false)
	if err != nil {
		return Compacted{Summary: prev, Messages: msgs, Tokens: n}, err
	}
	return Compacted{Summary: c.summary, Messages: c.messages, Tokens: count(c.summary, c.messages)}, nil
}

// Summarize is Compact without the budget's threshold: the turns beyond
// the kept ones are summarized whatever the conversation's size, for a
// client that asks for a compaction (POST /v1/responses/compact). It
// returns ErrTooLong when no turn lies beyond the kept ones.
func (s *Service) Summarize(ctx context.Context, prev *chat.Message, msgs []chat.Message, last int) (Compacted, error) {
	if s.cfg.Context == nil {
		return Compacted{Summary: prev, Messages: msgs}, errors.New("llmorch: the agent's context budget is off (options.context)")
	}
	fixed := s.tokens.fixed(Request{System: s.system, Tools: s.cfg.Tools.Specs(s.cfg.Engine.Tools())})
	c, err := s.compact(ctx, prev, msgs, last, fixed, true)
	if err != nil {
		return Compacted{Summary: prev, Messages: msgs}, err
	}
	n := fixed + s.tokens.message(summaryMessage(c.summary))
	for _, m := range limitAttachments(c.messages, s.cfg.MaxAttachments) {
		n += s.tokens.message(m)
	}
	return Compacted{Summary: c.summary, Messages: c.messages, Tokens: s.tokens.provider(n)}, nil
}

// fit keeps the model call's request within the context budget: when it
// passes it, the turn's oldest turns are summarized (once per turn, if
// that fails) and req is rebuilt. It returns an error only for what ends
// the turn (a cancelled turn, a store that failed).
func (r *run) fit(ctx context.Context, req *Request) error {
	p := r.s.cfg.Context
	if p == nil {
		return nil
	}
	fixed := r.s.tokens.fixed(*req)
	n := fixed
	for _, m := range req.Messages {
		n += r.s.tokens.message(m)
	}
	r.counted = n
	if r.s.tokens.provider(n) <= p.MaxInputTokens || r.compactTried {
		return nil
	}
	r.compactTried = true
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	start := time.Now()
	c, err := r.s.compact(ctx, r.summary, r.messages, r.state.UserMessages, fixed, false)
	switch {
	case errors.Is(err, ErrTooLong):
		log.DebugContext(ctx, "context compaction: nothing worth summarizing, the newest turns alone pass the budget",
			"input_tokens", r.s.tokens.provider(n), "max_input_tokens", p.MaxInputTokens)
		return nil
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		log.WarnContext(ctx, "context compaction failed; the turn goes on with the history's message cap",
			"err", err, "input_tokens", r.s.tokens.provider(n), "max_input_tokens", p.MaxInputTokens)
		if r.turn.Fallback != nil {
			r.messages = r.turn.Fallback(r.messages)
			r.rebuild(req)
		}
		if !r.emit(chat.Event{Kind: chat.KindWarning, Text: "The conversation is longer than this agent's context budget and could not be summarized (" +
			err.Error() + "); the model sees the newest messages only this turn."}) {
			return errStopped
		}
		return nil
	}
	// The summary is appended, with what it cost: the history keeps every
	// message it replaces, and the next turn reads from it on.
	frame := r.position()
	st, _, err := r.s.cfg.Store.UpdateAppend(ctx, r.turn.SessionID, func(*orchestration.State) error { return nil },
		[]chat.Message{*c.summary}, 0, append(r.journal(func(j *session.Journal) { j.Frame = frame }),
			session.WithLease(r.turn.Lease), session.AddSummarizerUsage(c.usage))...)
	if err != nil {
		return &storeFailure{saved: r.saved, err: fmt.Errorf("saving the summary of the conversation: %w", err)}
	}
	r.wrote(st)
	r.summary, r.messages = c.summary, c.messages
	r.rebuild(req)
	after := r.s.tokens.request(*req)
	r.counted = after
	sum := c.summary.Summary
	log.InfoContext(ctx, "context compaction", "from_turn", sum.From, "through_turn", sum.Through, "kept_turns", sum.Kept,
		"input_tokens_before", r.s.tokens.provider(n), "input_tokens_after", r.s.tokens.provider(after),
		"summary_tokens", sum.Tokens, "summarizer", sum.By, "duration", time.Since(start))
	return r.emitOK(chat.Event{Kind: chat.KindCompaction, Compaction: &chat.Compaction{
		Summary: *c.summary, InputBefore: r.s.tokens.provider(n), InputAfter: r.s.tokens.provider(after)}})
}

// rebuild sets req's messages from the run's summary and messages.
func (r *run) rebuild(req *Request) {
	req.Messages = r.requestMessages()
}

// requestMessages are the messages a model call sends: the summary, if
// any, then the turns after it, with the newest attachments only
// (ServiceConfig.MaxAttachments).
func (r *run) requestMessages() []chat.Message {
	msgs := limitAttachments(r.messages, r.s.cfg.MaxAttachments)
	if r.summary == nil {
		return msgs
	}
	out := make([]chat.Message, 0, len(msgs)+1)
	return append(append(out, summaryMessage(r.summary)), msgs...)
}

func (r *run) emitOK(ev chat.Event) error {
	if !r.emit(ev) {
		return errStopped
	}
	return nil
}
