package provider

import (
	"context"
	"io"
	"reflect"
	"sync"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentdock-go/agentdock/internal/shallow"
	"github.com/agentdock-go/agentdock/llmorch"
)

// Prefetch implements llmorch.Prefetcher: it builds req's request as
// Stream would and sends it from another goroutine, which waits for the
// provider's headers. The first attempt of a Stream whose context carries the result
// takes the answer when its request is equal to req (same messages, tools,
// settings): the model turns equal requests into the same bytes.
func (m *model) Prefetch(ctx context.Context, req llmorch.Request) llmorch.Prefetched {
	if m.prefetching.Add(1) > maxPrefetching {
		m.prefetching.Add(-1)
		return nil
	}
	sent := false
	defer func() {
		if !sent {
			m.prefetching.Add(-1)
		}
	}()
	var st callState
	msgs, opts, err := m.convert(req, &st)
	if err != nil {
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &prefetch{m: m, req: req, cancel: cancel, done: make(chan struct{})}
	sctx := withState(pctx, &st)
	// langchaingo builds the request (and the transport takes it) deep on
	// a kept coroutine, as for a call; the wait for the provider's
	// headers is on a kept goroutine (package shallow): a new goroutine
	// per turn would grow a stack and leave it to the next garbage
	// collection.
	_, _ = shallow.Call(func() (*llms.ContentResponse, error) {
		return m.llm.GenerateContent(sctx, msgs, opts...)
	})
	if st.req == nil {
		cancel()
		return nil
	}
	sent = true
	shallow.Go(func() {
		defer m.prefetching.Add(-1)
		defer p.finish(&st)
		if pctx.Err() == nil {
			st.send(sctx)
		}
	})
	return p
}

// maxPrefetching bounds a model's requests sent ahead and waiting for
// their headers. Each waits on a goroutine of its own; past the bound, a
// burst of turns (or a provider slow to answer) would hold one more
// goroutine per turn, so turns then wait for their claims as without
// prefetching.
const maxPrefetching = 16

// prefetch is a request sent ahead of its call.
type prefetch struct {
	m      *model
	req    llmorch.Request    // what was sent
	cancel context.CancelFunc // ends the request: it was dropped, or its taker is done
	done   chan struct{}      // closed once the answer's headers came (or the send failed)

	mu       sync.Mutex
	st       callState // the answer, once finished
	finished bool
	taken    bool
	dropped  bool
}

func (p *prefetch) finish(st *callState) {
	p.mu.Lock()
	p.st, p.finished = *st, true
	if p.dropped && st.body != nil {
		_ = st.body.Close()
	}
	p.mu.Unlock()
	close(p.done)
}

// Drop implements llmorch.Prefetched.
func (p *prefetch) Drop() {
	p.mu.Lock()
	if p.taken || p.dropped {
		p.mu.Unlock()
		return
	}
	p.dropped = true
	if p.finished && p.st.body != nil {
		_ = p.st.body.Close()
	}
	p.mu.Unlock()
	p.cancel()
}

// take hands the prefetched answer to st, the first attempt of a call
// whose request is the one prefetched (prefetchFor); false, the prefetch
// dropped, when ctx ends first. The answer's body then reads under ctx:
// its request ends when ctx does, or when the attempt releases st.
func (p *prefetch) take(ctx context.Context, st *callState) bool {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.Drop()
		return false
	}
	p.mu.Lock()
	if p.dropped || p.taken || p.st.body == nil && p.st.status == 0 && p.st.sendErr == nil {
		// Dropped, or nothing was sent (langchaingo failed to build it).
		p.mu.Unlock()
		p.Drop()
		return false
	}
	p.taken = true
	a := p.st
	p.mu.Unlock()
	st.status, st.retryAfter, st.errType, st.sendErr = a.status, a.retryAfter, a.errType, a.sendErr
	st.contentType = a.contentType
	if a.body != nil {
		// The request's own context is the prefetch's: a read after the
		// call's ends fails at once, as the call's own request would,
		// rather than parse what is buffered; and a read blocked then
		// ends with the request (AfterFunc).
		st.body = &ctxBody{ctx: ctx, ReadCloser: a.body}
	}
	stop := context.AfterFunc(ctx, p.cancel)
	st.release = func() {
		stop()
		p.cancel()
	}
	return true
}

// prefetchFor returns the request ctx carries that m sent ahead, if it is
// req; one that is not is dropped.
func (m *model) prefetchFor(ctx context.Context, req llmorch.Request) *prefetch {
	p, ok := llmorch.PrefetchedFrom(ctx).(*prefetch)
	if !ok || p.m != m {
		return nil
	}
	if !reflect.DeepEqual(p.req, req) {
		p.Drop()
		return nil
	}
	return p
}

// ctxBody is a prefetched answer's body read by a call: it fails once the
// call's context ended.
type ctxBody struct {
	ctx context.Context
	io.ReadCloser
}

func (b *ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.ReadCloser.Read(p)
}
