package llmorch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// byResults is a model that answers from the history it is sent, as a
// real one would: with n tool results in it, it makes the calls
// calls[n] (IDs; "look-" ones call lookup, the others charge), or, with
// none listed, answers "done". A model call made again after a takeover
// thus makes the same calls again.
type byResults struct {
	mu    sync.Mutex
	calls map[int][]string
	reqs  int
}

func (m *byResults) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "by-results"} }

func (m *byResults) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		results := 0
		for _, msg := range req.Messages {
			if msg.Role == chat.RoleTool {
				results++
			}
		}
		m.mu.Lock()
		m.reqs++
		ids := m.calls[results]
		m.mu.Unlock()
		if !yield(chat.Event{Kind: chat.KindTextDelta, Text: "step "}, nil) {
			return
		}
		for _, id := range ids {
			name := "charge"
			if id[:5] == "look-" {
				name = "lookup"
			}
			call := chat.ToolCall{ID: id, Name: name, Arguments: argsFor[name]}
			if !yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &call}, nil) {
				return
			}
		}
		if len(ids) == 0 {
			yield(chat.Event{Kind: chat.KindTextDelta, Text: "done"}, nil)
		}
		yield(chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 10, Completion: 2}}, nil)
	}
}

// crashing is a store that the writes of a dead replica no longer reach:
// a write under a lease marked dead fails, as the process that would
// have made it is gone.
type crashing struct {
	session.Store
	mu   sync.Mutex
	dead map[session.Lease]bool
}

func (c *crashing) kill(l session.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead[l] = true
}

func (c *crashing) UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...session.UpdateOption) (session.Session, []chat.Message, error) {
	c.mu.Lock()
	dead := c.dead[session.Options(opts...).Lease]
	c.mu.Unlock()
	if dead {
		return session.Session{}, nil, fmt.Errorf("the replica died: %w", session.ErrUnavailable)
	}
	return c.Store.UpdateAppend(ctx, id, fn, msgs, window, opts...)
}

// TestTakenOverAgainRunsNoCallTwice: a turn whose replica dies during a
// tool call is taken over, and the replica that took it over dies during
// another call: the second takeover goes on from the journal as the
// first one left it. Each call of a tool that is not idempotent ran at
// most once across the replicas (the call a death interrupted is
// reported interrupted once and for all, whichever replica later goes
// on; an idempotent one runs again), every call has one result in the
// saved history, and the turn finishes stop.
func TestTakenOverAgainRunsNoCallTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls map[int][]string
		// kills are the calls during which the replica running the turn
		// dies, in order.
		kills []string
		// interrupted are the calls the model reads as interrupted.
		interrupted []string
	}{
		{name: "calls of two steps", calls: map[int][]string{0: {"pay-1"}, 1: {"pay-2"}}, kills: []string{"pay-1", "pay-2"},
			interrupted: []string{"pay-1", "pay-2"}},
		{name: "the first and the last call of a step", calls: map[int][]string{0: {"pay-1", "pay-2", "pay-3"}}, kills: []string{"pay-1", "pay-3"},
			interrupted: []string{"pay-1", "pay-3"}},
		{name: "two calls of a step, then one of the next", calls: map[int][]string{0: {"pay-1", "pay-2", "pay-3"}, 3: {"pay-4"}}, kills: []string{"pay-2", "pay-3", "pay-4"},
			interrupted: []string{"pay-2", "pay-3", "pay-4"}},
		{name: "an idempotent call, then a charge after it", calls: map[int][]string{0: {"look-1", "pay-1"}, 2: {"pay-2"}}, kills: []string{"look-1", "pay-1", "pay-2"},
			interrupted: []string{"pay-1", "pay-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &byResults{calls: tc.calls}
			store := &crashing{dead: map[session.Lease]bool{}}
			f, fx := journalFixture(t, model, func(s session.Store) session.Store { store.Store = s; return store })
			ctx := context.Background()
			var frames int64
			turn := f.startJournaled(t, "pay", &frames)
			lease := turn.Lease
			kills := tc.kills
			fx.during = func(id string) {
				if len(kills) > 0 && kills[0] == id {
					kills = kills[1:]
					store.kill(lease)
				}
			}
			var evs []chat.Event
			for run := 0; ; run++ {
				evs = nil
				for ev := range f.svc.StreamWithOrchestration(ctx, turn) {
					frames++
					evs = append(evs, ev)
				}
				store.mu.Lock()
				died := store.dead[lease]
				store.mu.Unlock()
				if !died {
					break
				}
				if run > len(tc.kills) {
					t.Fatal("more deaths than kills")
				}
				// The dead replica's lease expired; another replica takes
				// the turn over from its journal.
				_ = lease.Release(ctx)
				_, l, err := f.store.Claim(ctx, f.id)
				if err != nil {
					t.Fatal(err)
				}
				lease = l
				sess, _ := f.store.Get(ctx, f.id)
				hist, _ := f.store.Messages(ctx, f.id, 0)
				if sess.Turn == "" || sess.Journal == nil {
					t.Fatalf("after death %d the session has no running turn: %+v", run+1, sess)
				}
				turn.Lease, turn.State, turn.History, turn.Resume = l, sess.State, hist, sess.Journal
			}
			if len(kills) > 0 {
				t.Fatalf("the turn never reached the calls %v", kills)
			}
			if last := evs[len(evs)-1]; last.Kind != chat.KindDone || last.FinishReason != chat.FinishStop {
				t.Fatalf("the last takeover ended %+v", last)
			}
			msgs, _ := f.store.Messages(ctx, f.id, 0)
			raw, _ := json.Marshal(msgs)
			results := map[string][]chat.Message{}
			var called []string
			for _, m := range msgs {
				for _, c := range m.ToolCalls {
					called = append(called, c.ID)
				}
				if m.Role == chat.RoleTool {
					results[m.ToolCallID] = append(results[m.ToolCallID], m)
				}
			}
			for _, id := range called {
				if n := fx.count(id); n > 1 && id[:5] != "look-" {
					t.Errorf("call %s ran %d times", id, n)
				}
				rs := results[id]
				if len(rs) != 1 {
					t.Errorf("call %s has %d results in the history: %s", id, len(rs), raw)
					continue
				}
				interrupted := false
				for _, i := range tc.interrupted {
					interrupted = interrupted || i == id
				}
				if got := rs[0].NotRun && rs[0].Content != "" && rs[0].IsError; got != interrupted {
					t.Errorf("call %s: result %+v; want interrupted %v", id, rs[0], interrupted)
				}
			}
			want := 0
			for _, ids := range tc.calls {
				want += len(ids)
			}
			if len(called) != want {
				t.Errorf("the history holds %d calls, want %d: %s", len(called), want, raw)
			}
			if sess, _ := f.store.Get(ctx, f.id); sess.Turn != "" || sess.Journal != nil {
				t.Errorf("after the turn: marker %q journal %+v", sess.Turn, sess.Journal)
			}
		})
	}
}
