package llmorch

import "context"

// Prefetcher is a Model that can send a call's request ahead of the call.
//
// A turn's first model call waits for the session's claim, which with a
// remote store is a round trip. When the store can foresee what the claim
// will return (session.WithForesight), the service sends the first call's
// request at once (Service.Prefetch) and the claim's round trip overlaps
// the provider's time to the first token. The call itself, made once the
// claim holds, takes the answer only when its request is the one sent,
// byte for byte; otherwise the prefetched request is cancelled and the call
// goes out as usual. Nothing of a prefetched answer reaches the turn
// before its claim holds.
type Prefetcher interface {
	// Prefetch sends req's request now and keeps the answer unread. It
	// returns nil when req cannot be sent ahead (it would fail, or the
	// model sends nothing over the network).
	Prefetch(ctx context.Context, req Request) Prefetched
}

// Prefetched is a request sent ahead of its call (Prefetcher). The model
// that sent it recognises it in the context of the call (WithPrefetched).
type Prefetched interface {
	// Drop cancels the request and frees its answer, unless a call took
	// it. It may be called more than once, and after the call took it.
	Drop()
}

type prefetchedKey struct{}

// WithPrefetched returns ctx carrying p, for the model call that may take
// it.
func WithPrefetched(ctx context.Context, p Prefetched) context.Context {
	return context.WithValue(ctx, prefetchedKey{}, p)
}

// PrefetchedFrom returns the prefetched request ctx carries, if any.
func PrefetchedFrom(ctx context.Context) Prefetched {
	p, _ := ctx.Value(prefetchedKey{}).(Prefetched)
	return p
}

// Prefetch sends the request of turn's first model call ahead of the turn
// (Prefetcher), for StreamWithOrchestration to take when it runs a turn
// whose Prefetched is the result and whose first request is the same. It
// returns nil when the model cannot prefetch or the turn does not start
// with a model call (it carries out approvals first). turn is what the
// caller expects the turn to be; nothing is written or emitted.
func (s *Service) Prefetch(ctx context.Context, turn Turn) Prefetched {
	pf, ok := s.cfg.Model.(Prefetcher)
	if !ok || len(turn.Answers) > 0 {
		return nil
	}
	r := &run{s: s, turn: turn, state: turn.State, messages: turn.History}
	req, _ := r.request(r.available(), s.cfg.Budget.MaxSteps < 1)
	return pf.Prefetch(ctx, *req)
}

// CanPrefetch reports whether the service's model can send requests ahead
// (Prefetcher).
func (s *Service) CanPrefetch() bool {
	_, ok := s.cfg.Model.(Prefetcher)
	return ok
}
