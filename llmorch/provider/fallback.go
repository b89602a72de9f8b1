package provider

import (
	"context"
	"iter"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// WithFallback returns a model that streams from primary and, when primary
// fails before yielding anything, streams the same request from fallback.
// A failure after output started, or a cancelled context, is returned as is:
// replaying a half-given answer from another model would garble it. Info
// names the primary.
func WithFallback(primary, fallback llmorch.Model) llmorch.Model {
	return &fallbackModel{primary: primary, fallback: fallback}
}

type fallbackModel struct {
	primary, fallback llmorch.Model
}

func (f *fallbackModel) Info() llmorch.Info { return f.primary.Info() }

// CountTokens counts as the primary model does (llmorch.TokenCounter), or
// estimates.
func (f *fallbackModel) CountTokens(text string) int {
	if c, ok := f.primary.(llmorch.TokenCounter); ok {
		return c.CountTokens(text)
	}
	return llmorch.EstimateTokens(text)
}

func (f *fallbackModel) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		var primaryErr error
		emitted := false
		for ev, err := range f.primary.Stream(ctx, req) {
			if err != nil {
				primaryErr = err
				break
			}
			emitted = true
			if !yield(ev, nil) {
				return
			}
		}
		if primaryErr == nil {
			return
		}
		if emitted || ctx.Err() != nil {
			yield(chat.Event{}, primaryErr)
			return
		}
		for ev, err := range f.fallback.Stream(ctx, req) {
			if err != nil {
				yield(chat.Event{}, &fallbackError{fallback: err, primary: primaryErr})
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// fallbackError is the fallback's failure after the primary's; errors.As
// finds the fallback's *chat.Error first.
type fallbackError struct {
	fallback, primary error
}

func (e *fallbackError) Error() string {
	return e.fallback.Error() + " (fallback, after the primary failed: " + e.primary.Error() + ")"
}

func (e *fallbackError) Unwrap() []error { return []error{e.fallback, e.primary} }
