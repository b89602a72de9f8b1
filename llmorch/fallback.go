package llmorch

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/agentdock-go/agentdock/chat"
)

// Failures of a model call that retrying will not cure soon. A model
// (package provider's) marks such a failure with one of them (errors.Is),
// after its own retries; a fallback chain (Fallbacks) then hands the call
// to its next model.
var (
	// ErrModelUnavailable: the provider is down or overloaded (5xx, a
	// connection that fails, no answer in time) after the model's retries,
	// or it rate-limits the call for longer than the call may wait
	// (Request.RetryWait).
	ErrModelUnavailable = errors.New("the model cannot answer now")
	// ErrContextLength: the request is longer than the model's context.
	// Only a model with a larger context (Candidate.ContextWindow) may
	// answer it instead.
	ErrContextLength = errors.New("the request is longer than the model's context")
)

// Candidate is one model of a fallback chain.
type Candidate struct {
	Model Model
	// Config is the key of the model's configuration in the template
	// ("llm.backup"); empty for a model the server configures.
	Config string
	// ContextWindow is the model's context in tokens (0: unknown). A call
	// that fails for its length goes to a later candidate only when both
	// windows are known and that one's is larger.
	ContextWindow int
}

// Ref names the candidate's model.
func (c Candidate) Ref() chat.ModelRef {
	info := c.Model.Info()
	return chat.ModelRef{Config: c.Config, Provider: info.Provider, Model: info.Model}
}

// Fallbacks returns a model that streams each call from the first
// candidate and, when that fails before its first output with an error
// retrying will not cure soon (ErrModelUnavailable; ErrContextLength, for
// a candidate with a larger context), from the next, and so on. Before
// the next candidate's first event it yields a chat.KindFallback event
// naming both and the error. A failure after output started, a cancelled
// call, or any other error ends the call as it is: replaying a
// half-given answer from another model would garble it, and a request the
// provider refused would be refused again.
//
// Every candidate but the last is called with Request.RetryWait set to
// retryWait (when positive): a rate limit that asks for a longer wait
// goes to the next model at once instead of holding the call.
//
// Info and CountTokens are the first candidate's. With one candidate,
// Fallbacks returns its model.
func Fallbacks(retryWait time.Duration, candidates ...Candidate) Model {
	if len(candidates) == 1 {
		return candidates[0].Model
	}
	return &chain{candidates: candidates, retryWait: retryWait}
}

type chain struct {
	candidates []Candidate
	retryWait  time.Duration
}

func (c *chain) Info() Info { return c.candidates[0].Model.Info() }

// CountTokens counts as the first candidate does (TokenCounter), or
// estimates.
func (c *chain) CountTokens(text string) int {
	if tc, ok := c.candidates[0].Model.(TokenCounter); ok {
		return tc.CountTokens(text)
	}
	return EstimateTokens(text)
}

func (c *chain) Stream(ctx context.Context, req Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		var failed []error
		for i := 0; i < len(c.candidates); {
			cand := c.candidates[i]
			r := req
			last := i == len(c.candidates)-1
			if !last && c.retryWait > 0 && (r.RetryWait <= 0 || c.retryWait < r.RetryWait) {
				r.RetryWait = c.retryWait
			}
			var err error
			emitted := false
			for ev, e := range cand.Model.Stream(ctx, r) {
				if e != nil {
					err = e
					break
				}
				emitted = true
				if !yield(ev, nil) {
					return
				}
			}
			if err == nil {
				return
			}
			next := -1
			if !emitted && ctx.Err() == nil {
				next = c.next(i, err)
			}
			if next < 0 {
				yield(chat.Event{}, chainFailure(err, failed))
				return
			}
			failed = append(failed, err)
			fb := &chat.Fallback{From: cand.Ref(), To: c.candidates[next].Ref(), Error: *publicError(err)}
			if !yield(chat.Event{Kind: chat.KindFallback, Fallback: fb}, nil) {
				return
			}
			i = next
		}
	}
}

// next is the candidate that takes a call candidate i failed with err, -1
// for none.
func (c *chain) next(i int, err error) int {
	switch {
	case errors.Is(err, ErrModelUnavailable):
		if i+1 < len(c.candidates) {
			return i + 1
		}
	case errors.Is(err, ErrContextLength):
		w := c.candidates[i].ContextWindow
		for j := i + 1; j < len(c.candidates); j++ {
			if w > 0 && c.candidates[j].ContextWindow > w {
				return j
			}
		}
	}
	return -1
}

// chainFailure is the error of a call whose last model failed with err
// after the earlier ones failed with before: a *chat.Error with the last
// one's code that says what each failed with, wrapping them all (a
// cancellation stays errors.Is context.Canceled).
func chainFailure(err error, before []error) error {
	if len(before) == 0 {
		return err
	}
	ce := *publicError(err)
	for i := len(before) - 1; i >= 0; i-- {
		ce.Message += " (after a fallback from " + publicError(before[i]).Message + ")"
	}
	return &chainError{ce: &ce, errs: append([]error{err}, before...)}
}

type chainError struct {
	ce   *chat.Error
	errs []error
}

func (e *chainError) Error() string { return e.ce.Error() }

// Unwrap gives the combined *chat.Error first (errors.As finds it), then
// each model's error, the last model's first.
func (e *chainError) Unwrap() []error { return append([]error{e.ce}, e.errs...) }
