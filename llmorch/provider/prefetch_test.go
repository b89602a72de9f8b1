package provider

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// A request sent ahead is the call's when the call's request is the same:
// the provider sees one request, and the call streams its answer. A call
// with another request drops it and sends its own; a dropped one that no
// call took leaves nothing behind.
func TestPrefetch(t *testing.T) {
	for _, wire := range []string{OpenAI, Anthropic} {
		t.Run(wire, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent(), ignoreShallow, ignoreShallowWork)
			srv := mockllm.New()
			defer srv.Close()
			m, _ := testModel(t, srv, wire)
			ctx := context.Background()

			// Taken: one request, the answer streamed once the call
			// comes.
			srv.Enqueue(mockllm.Script{Text: []string{"sent ", "ahead"}})
			req := userReq("hello")
			p := m.Prefetch(ctx, req)
			if p == nil {
				t.Fatal("Prefetch returned nil")
			}
			same := userReq("hello") // equal, not the same slices
			evs, err := collect(t, m, llmorch.WithPrefetched(ctx, p), same)
			if err != nil || textOf(evs) != "sent ahead" {
				t.Fatalf("taken: %q, %v", textOf(evs), err)
			}
			p.Drop() // after the take: nothing to do
			if n := len(srv.Requests()); n != 1 {
				t.Fatalf("taken: the provider saw %d requests, want 1", n)
			}

			// Another request: the prefetched one is dropped (it may
			// still reach the provider, or not), the call's own is sent
			// and answered.
			srv.Enqueue(mockllm.Script{Text: []string{"answer"}}, mockllm.Script{Text: []string{"answer"}})
			p = m.Prefetch(ctx, userReq("hello"))
			evs, err = collect(t, m, llmorch.WithPrefetched(ctx, p), userReq("hello again"))
			if err != nil || textOf(evs) != "answer" {
				t.Fatalf("not the same request: %q, %v", textOf(evs), err)
			}
			sawOwn := false
			for _, r := range srv.Requests()[1:] {
				sawOwn = sawOwn || strings.Contains(string(r.Body), "hello again")
			}
			if !sawOwn {
				t.Fatal("not the same request: the call's own request was not sent")
			}
			for srv.Pending() > 0 {
				// The dropped request, if it was not sent, leaves its
				// script: take it out of the way.
				collect(t, m, ctx, userReq("flush"))
			}

			// Dropped without a call: the next call sends its own.
			srv.Enqueue(mockllm.Script{Text: []string{"own"}}, mockllm.Script{Text: []string{"own"}})
			p = m.Prefetch(ctx, userReq("x"))
			p.Drop()
			p.Drop()
			evs, err = collect(t, m, ctx, userReq("x"))
			if err != nil || textOf(evs) != "own" {
				t.Fatalf("after a drop: %q, %v", textOf(evs), err)
			}
			if got := m.prefetching.Load(); got != 0 {
				t.Fatalf("%d prefetches still counted as waiting", got)
			}
		})
	}
}

// A prefetched error answer is the call's first attempt: classified and
// retried as if the call had sent it.
func TestPrefetchedErrorIsRetried(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	m, waits := testModel(t, srv, OpenAI)
	srv.Enqueue(mockllm.Script{Status: 503}, mockllm.Script{Text: []string{"second"}})
	ctx := context.Background()
	p := m.Prefetch(ctx, userReq("hi"))
	evs, err := collect(t, m, llmorch.WithPrefetched(ctx, p), userReq("hi"))
	if err != nil || textOf(evs) != "second" || len(*waits) != 1 || len(srv.Requests()) != 2 {
		t.Fatalf("%q, %v; %d waits, %d requests", textOf(evs), err, len(*waits), len(srv.Requests()))
	}
}

// A call cancelled while its prefetched answer streams stops at once.
func TestPrefetchedAnswerEndsWithTheCall(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	m, _ := testModel(t, srv, OpenAI)
	srv.Enqueue(mockllm.Script{Chunks: 1000})
	p := m.Prefetch(context.Background(), userReq("hi"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	var last error
	for ev, err := range m.Stream(llmorch.WithPrefetched(ctx, p), userReq("hi")) {
		if err != nil {
			last = err
			break
		}
		if ev.Kind == chat.KindTextDelta {
			if n++; n == 3 {
				cancel()
			}
		}
	}
	if n > 50 || last == nil {
		t.Fatalf("after the cancel: %d deltas, last error %v", n, last)
	}
}
