// Package sessiontest is the conformance suite of session.Store: every store
// (memory, Redis, and any later one) must pass Run, so that the agent and the
// HTTP server can rely on one behaviour whatever the store. Its benchmark
// helpers (BenchSerial, BenchParallel) measure every store the same way.
package sessiontest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// Option adjusts the suite.
type Option func(*options)

type options struct{ realClock, noQuotas bool }

// NoQuotas tells the suite that the store does not enforce the owners'
// quotas (Config.SessionsPerOwner, Config.BytesPerOwner): its quota cases
// then check that the store never refuses a write for them, rather than
// that it does. A store saying so must say it in its documentation too.
func NoQuotas() Option { return func(o *options) { o.noQuotas = true } }

// RealClock tells the suite that the store keeps time itself (Redis expires
// keys on the server) and ignores Config.Now: the suite then waits on the
// wall clock where it would otherwise move its test clock. The TTLs stay
// short, so this costs about two seconds.
func RealClock() Option { return func(o *options) { o.realClock = true } }

// Run runs the suite. open returns a new store for cfg; the suite closes it.
// Config.Now is the suite's clock: a store that honours it (the memory
// store) sees time move without waiting; pass RealClock otherwise.
func Run(t *testing.T, open func(t *testing.T, cfg session.Config) session.Store, opts ...Option) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	h := &harness{open: open, opts: o}
	// Not parallel: it loads the machine, and the tests that follow wait on
	// clocks.
	t.Run("Concurrency", h.concurrency)
	// Not parallel either: the queue's test waits for tickets to expire,
	// and the parallel tests' timing is List's (which a session of the
	// keyless owner's, made by another test as it lists, would upset).
	t.Run("Queue", h.queue)
	t.Run("QueueNotices", h.queueNotices)
	t.Run("Requests", h.requests)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"NotFound", h.notFound},
		{"Create", h.create},
		{"UpdateCreatesAndVersions", h.updateCreates},
		{"UpdateErrorLeavesState", h.updateError},
		{"UpdateKeepsHistory", h.updateKeepsHistory},
		{"Delete", h.delete},
		{"SlidingTTL", h.slidingTTL},
		{"History", h.history},
		{"HistoryKeepsWholeTurns", h.wholeTurns},
		{"BusyAtOnce", h.busyAtOnce},
		{"BusyWaits", h.busyWaits},
		{"LeaseExpiryFreesSession", h.leaseExpiry},
		{"ExtendKeepsLease", h.extend},
		{"Fencing", h.fencing},
		{"Closed", h.closed},
		{"QuotaSessionsPerOwner", h.quotaSessions},
		{"QuotaBytesPerOwner", h.quotaBytes},
		{"QuotaFreedByExpiry", h.quotaExpiry},
		{"Claim", h.claim},
		{"ClaimWaits", h.claimWaits},
		{"ClaimStart", h.claimStart},
		{"UpdateAppend", h.updateAppend},
		{"TurnMarker", h.turnMarker},
		{"WriteReleasesLease", h.writeReleases},
		{"UpdateAppendFencedOrFailed", h.updateAppendRefused},
		{"UpdateAppendDropLastAnswer", h.dropLastAnswer},
		{"UpdateAppendSinceSummary", h.sinceSummary},
		{"RegenerateRestoresTheState", h.regenerate},
		{"UpdateAppendDropLastTurn", h.dropLastTurn},
		{"Approvals", h.approvals},
		{"ApprovalsExpireWithTheSession", h.approvalsExpire},
		{"Title", h.title},
		{"List", h.list},
		{"Journal", h.journal},
		{"Ledger", h.ledger},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

type harness struct {
	open func(t *testing.T, cfg session.Config) session.Store
	opts options
}

// clock is the suite's Config.Now: the wall clock plus an offset that
// advance moves (or, with RealClock, the wall clock and a real wait).
type clock struct {
	real   bool
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) advance(d time.Duration) {
	if c.real {
		time.Sleep(d)
		return
	}
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// store opens a store with cfg and the suite's clock.
func (h *harness) store(t *testing.T, cfg session.Config) (session.Store, *clock) {
	t.Helper()
	c := &clock{real: h.opts.realClock}
	cfg.Now = c.Now
	s := h.open(t, cfg)
	t.Cleanup(func() { s.Close() })
	return s, c
}

// must(call())(t) returns call's value or fails t with its error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// lock takes the lease of session id whoever owns it (session.Lock), or,
// when there is none, creates it for the keyless owner with Claim.
func lock(ctx context.Context, s session.Store, id string) (session.Lease, error) {
	_, l, err := session.Lock(ctx, s, id)
	if errors.Is(err, session.ErrNotFound) {
		_, l, err = s.Claim(ctx, id)
	}
	return l, err
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

var testEngine = orchestration.MustNew(&orchestration.Spec{}, orchestration.Config{
	Tools:        []string{"search", "fetch", "think"},
	HistoryLimit: 10000,
})

// apply returns an Update function applying ev through the engine.
func apply(ev orchestration.Input) func(*orchestration.State) error {
	return func(s *orchestration.State) error {
		next, d := testEngine.Apply(*s, ev)
		if d.Refused {
			return errors.New("refused: " + d.Reason)
		}
		*s = next
		return nil
	}
}

func (h *harness) notFound(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	_, err := s.Get(ctx, id)
	wantErr(t, "Get", err, session.ErrNotFound)
	_, err = s.Messages(ctx, id, 0)
	wantErr(t, "Messages", err, session.ErrNotFound)
	wantErr(t, "Delete", s.Delete(ctx, id), session.ErrNotFound)
	_, _, err = session.Lock(ctx, s, id)
	wantErr(t, "session.Lock", err, session.ErrNotFound)
	// None of them created the session.
	_, err = s.Get(ctx, id)
	wantErr(t, "Get after the failed calls", err, session.ErrNotFound)
	if p, ok := s.(session.Pinger); ok {
		if err := p.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	}
}

func (h *harness) create(t *testing.T) {
	s, c := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	before := c.Now().Add(-time.Second)
	got, l, err := s.Claim(ctx, id, session.WithOwner("key-a"), session.WithAgent("agent-1"))
	if err != nil {
		t.Fatalf("Claim on a new session: %v", err)
	}
	if got.ID != id || got.Owner != "key-a" || got.Agent != "agent-1" || got.Version != 0 {
		t.Fatalf("new session = %+v, want ID %s, owner key-a, agent agent-1, version 0", got, id)
	}
	if got.CreatedAt.Before(before) || !reflectZeroState(got.State) {
		t.Fatalf("new session: CreatedAt %v (want after %v), state %+v (want empty)", got.CreatedAt, before, got.State)
	}
	must(0, l.Release(ctx))(t)
	again, _, err := s.Claim(ctx, id, session.WithOwner("key-b"), session.WithAgent("agent-2"))
	wantErr(t, "Claim by another owner", err, session.ErrForeign)
	if again.Owner != "key-a" || again.Agent != "agent-1" || !again.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("existing session changed by another owner's Claim: %+v, was %+v", again, got)
	}
	// session.Lock takes the lease of a session whoever owns it, and
	// returns it as Claim does.
	locked, l, err := session.Lock(ctx, s, id)
	if err != nil {
		t.Fatalf("session.Lock on another owner's session: %v", err)
	}
	if locked.Owner != "key-a" || locked.Agent != "agent-1" || !locked.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("session.Lock returned %+v, want the session %+v", locked, got)
	}
	_, _, err = session.Lock(ctx, s, id)
	wantErr(t, "session.Lock on a locked session", err, session.ErrBusy)
	_, _, err = s.Claim(ctx, id, session.WithOwner("key-a"), session.WithAgent("agent-1"))
	wantErr(t, "the owner's Claim while session.Lock holds the lease", err, session.ErrBusy)
	must(0, l.Release(ctx))(t)
	// Owner and agent from the other creating writes.
	for name, create := range map[string]func(id string) error{
		"Update": func(id string) error {
			_, err := session.Update(ctx, s, id, apply(orchestration.ToolUsed("think")), session.WithOwner("key-c"), session.WithAgent("agent-3"))
			return err
		},
		"AppendMessages": func(id string) error {
			return session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, session.WithOwner("key-c"), session.WithAgent("agent-3"))
		},
	} {
		id := session.NewID()
		if err := create(id); err != nil {
			t.Fatalf("%s creating a session: %v", name, err)
		}
		got := must(s.Get(ctx, id))(t)
		if got.Owner != "key-c" || got.Agent != "agent-3" {
			t.Fatalf("%s created %+v, want owner key-c, agent agent-3", name, got)
		}
	}
}

func reflectZeroState(s orchestration.State) bool {
	return s.ActiveStep == "" && s.SequenceIndex == 0 && s.RecentlyUsedTools.Len() == 0 &&
		s.LastUserMessage == "" && s.UserMessages == 0 && s.TurnToolUses == 0 && s.TokenUsage.IsZero()
}

func (h *harness) updateCreates(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	first := must(session.Update(ctx, s, id, apply(orchestration.UserMessage("hello"))))(t)
	if first.Version != 1 || first.State.UserMessages != 1 || first.State.LastUserMessage != "hello" {
		t.Fatalf("first Update = %+v, want version 1 and the user message applied", first)
	}
	second := must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithOwner("intruder")))(t)
	if second.Version != 2 || !second.State.RecentlyUsedTools.Equal("search") || second.Owner != "" {
		t.Fatalf("second Update = %+v, want version 2, tools [search], owner unchanged (empty)", second)
	}
	got := must(s.Get(ctx, id))(t)
	if got.Version != 2 || got.State.LastUserMessage != "hello" || !got.State.RecentlyUsedTools.Equal("search") {
		t.Fatalf("Get after two updates = %+v", got)
	}
	// A returned session shares nothing that its holder can change with the
	// store: its history can only be extended into a new one, which leaves
	// the stored one as it was, even when it is extended twice from the same
	// version (each extension keeps its own entry).
	mine := got.State.RecentlyUsedTools.Append("mutated", 100)
	other := got.State.RecentlyUsedTools.Append("again", 100)
	if again := must(s.Get(ctx, id))(t); !again.State.RecentlyUsedTools.Equal("search") {
		t.Fatalf("extending a returned state's history changed the stored one: %v", again.State.RecentlyUsedTools)
	}
	if !mine.Equal("search", "mutated") || !other.Equal("search", "again") {
		t.Fatalf("two extensions of one history: %v and %v, want [search mutated] and [search again]", mine, other)
	}
	// Nor does the store's next write change what a holder has.
	third := must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch"))))(t)
	if !third.State.RecentlyUsedTools.Equal("search", "fetch") || !mine.Equal("search", "mutated") || !got.State.RecentlyUsedTools.Equal("search") {
		t.Fatalf("after another Update: stored %v, a holder's %v and %v; want [search fetch], [search mutated], [search]",
			third.State.RecentlyUsedTools, mine, got.State.RecentlyUsedTools)
	}
}

func (h *harness) updateError(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search"))))(t)
	boom := errors.New("boom")
	var left orchestration.State
	_, err := session.Update(ctx, s, id, func(st *orchestration.State) error {
		// Half done: the history extended (in the array the stored
		// version shares, when it can be), then a failure.
		st.RecentlyUsedTools = st.RecentlyUsedTools.Append("half-done", 100)
		st.TurnToolUses = 99
		left = *st
		return boom
	})
	if err != boom {
		t.Fatalf("Update with a failing fn returned %v, want fn's error as is", err)
	}
	got := must(s.Get(ctx, id))(t)
	if got.Version != 1 || !got.State.RecentlyUsedTools.Equal("search") || got.State.TurnToolUses != 1 {
		t.Fatalf("a failed Update changed the session: %+v", got)
	}
	// The next write builds on the stored state, and leaves what the failed
	// fn made as it was.
	next := must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch"))))(t)
	if !next.State.RecentlyUsedTools.Equal("search", "fetch") || !left.RecentlyUsedTools.Equal("search", "half-done") {
		t.Fatalf("after a failed Update, the next one stored %v (want [search fetch]) and the failed fn's state became %v", next.State.RecentlyUsedTools, left.RecentlyUsedTools)
	}
	// A failed fn creates nothing.
	other := session.NewID()
	if _, err := session.Update(ctx, s, other, func(*orchestration.State) error { return boom }); err != boom {
		t.Fatalf("Update with a failing fn on a new session: %v", err)
	}
	_, err = s.Get(ctx, other)
	wantErr(t, "Get after a failed creating Update", err, session.ErrNotFound)
}

// updateKeepsHistory: a write without messages (session.Update) leaves
// the history as it was, whatever it does to the state.
func (h *harness) updateKeepsHistory(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	must(session.Update(ctx, s, id, apply(orchestration.UserMessage("hi")), session.WithOwner("o"), session.WithAgent("a")))(t)
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "hi"}, {Role: chat.RoleAssistant, Content: "hello"}}
	if err := session.AppendMessages(ctx, s, id, msgs); err != nil {
		t.Fatal(err)
	}
	before := must(s.Get(ctx, id))(t)
	reset := func(st *orchestration.State) error { *st = orchestration.State{}; return nil }
	must(session.Update(ctx, s, id, reset))(t)
	got := must(s.Get(ctx, id))(t)
	if !reflectZeroState(got.State) || got.Version != before.Version+1 || got.Owner != "o" || got.Agent != "a" {
		t.Fatalf("after an Update emptying the state: %+v, want empty state, version %d, owner and agent kept", got, before.Version+1)
	}
	if hist := must(s.Messages(ctx, id, 0))(t); !slices.EqualFunc(hist, msgs, msgEqual) {
		t.Fatalf("an Update without messages changed the history: %+v", hist)
	}
}

func (h *harness) delete(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("think"))))(t)
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleUser, Content: "x"}}); err != nil {
		t.Fatal(err)
	}
	must(lock(ctx, s, id))(t)
	if err := s.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Get(ctx, id)
	wantErr(t, "Get after Delete", err, session.ErrNotFound)
	_, err = s.Messages(ctx, id, 0)
	wantErr(t, "Messages after Delete", err, session.ErrNotFound)
	fresh, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatalf("Claim after Delete (the lease must be gone too): %v", err)
	}
	l.Release(ctx)
	// The new session under the same ID starts empty.
	if fresh.Version != 0 || !reflectZeroState(fresh.State) {
		t.Fatalf("Claim after Delete found %+v, want a new empty session", fresh)
	}
	if hist := must(s.Messages(ctx, id, 0))(t); len(hist) != 0 {
		t.Fatalf("history survived Delete: %+v", hist)
	}
}

func (h *harness) slidingTTL(t *testing.T) {
	const ttl = 500 * time.Millisecond
	const step = 250 * time.Millisecond // < ttl: each access keeps the session
	s, c := h.store(t, session.Config{TTL: ttl})
	ctx := t.Context()
	id := session.NewID()
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search"))))(t)
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleUser, Content: "q"}}); err != nil {
		t.Fatal(err)
	}
	// Alternate state and history accesses, each within the TTL of the
	// previous one but together well past the TTL of the first.
	accesses := []struct {
		name string
		fn   func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, id); return err }},
		{"Messages", func() error { _, err := s.Messages(ctx, id, 1); return err }},
		{"Claim", func() error {
			got, l, err := s.Claim(ctx, id)
			if err != nil {
				return err
			}
			if !got.State.RecentlyUsedTools.Equal("search") {
				return errors.New("recreated")
			}
			return l.Release(ctx)
		}},
		{"Messages", func() error { _, err := s.Messages(ctx, id, 0); return err }},
	}
	for i, a := range accesses {
		c.advance(step)
		if err := a.fn(); err != nil {
			t.Fatalf("access %d (%s) %v after the previous one: %v", i, a.name, step, err)
		}
	}
	if hist := must(s.Messages(ctx, id, 0))(t); len(hist) != 1 {
		t.Fatalf("history lost while the session was in use: %+v", hist)
	}
	c.advance(ttl + 300*time.Millisecond)
	_, err := s.Get(ctx, id)
	wantErr(t, "Get after the TTL without access", err, session.ErrNotFound)
	_, err = s.Messages(ctx, id, 0)
	wantErr(t, "Messages after the TTL without access", err, session.ErrNotFound)
}

func (h *harness) history(t *testing.T) {
	s, _ := h.store(t, session.Config{MaxMessages: 10})
	ctx := t.Context()
	id := session.NewID()
	rich := chat.Message{
		Role:      chat.RoleAssistant,
		Content:   "calling",
		ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: []byte(`{"q":"go"}`)}},
	}
	tool := chat.Message{Role: chat.RoleTool, Content: "result", ToolCallID: "c1", ToolName: "search", IsError: true}
	var all []chat.Message
	all = append(all, rich, tool)
	for i := range 13 {
		all = append(all, chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("m%02d", i)})
	}
	// Appended in batches of varying size.
	for i := 0; i < len(all); {
		n := min(1+i%4, len(all)-i)
		if err := session.AppendMessages(ctx, s, id, all[i:i+n]); err != nil {
			t.Fatalf("AppendMessages: %v", err)
		}
		if i == 0 {
			if got := must(s.Messages(ctx, id, 0))(t); !slices.EqualFunc(got, all[:n], msgEqual) {
				t.Fatalf("first batch round trip: got %+v, want %+v", got, all[:n])
			}
		}
		i += n
	}
	want := all[len(all)-10:]
	for _, tc := range []struct {
		limit int
		want  []chat.Message
	}{{0, want}, {-1, want}, {3, want[7:]}, {10, want}, {50, want}} {
		if got := must(s.Messages(ctx, id, tc.limit))(t); !slices.EqualFunc(got, tc.want, msgEqual) {
			t.Fatalf("Messages(limit %d) = %+v, want %+v", tc.limit, got, tc.want)
		}
	}
}

// wholeTurns: beyond MaxMessages the oldest whole turns go; the history
// never starts inside a turn (with a tool result whose call is gone), and
// the newest turn stays whole even when it alone is over the cap, whether
// it grows by AppendMessages or by UpdateAppend.
func (h *harness) wholeTurns(t *testing.T) {
	const maxMessages = 6
	s, _ := h.store(t, session.Config{MaxMessages: maxMessages})
	ctx := t.Context()
	id := session.NewID()
	n := 0
	turn := func(steps int) []chat.Message {
		n++
		msgs := []chat.Message{{Role: chat.RoleUser, Content: fmt.Sprintf("question %d", n)}}
		for i := range steps {
			callID := fmt.Sprintf("t%dc%d", n, i)
			msgs = append(msgs,
				chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: callID, Name: "think", Arguments: []byte(`{}`)}}},
				chat.Message{Role: chat.RoleTool, Content: "r", ToolCallID: callID, ToolName: "think"})
		}
		return append(msgs, chat.Message{Role: chat.RoleAssistant, Content: fmt.Sprintf("answer %d", n)})
	}
	var all []chat.Message
	for i, steps := range []int{1, 0, 2, 0, 0, 5, 1, 0} {
		msgs := turn(steps)
		// The user message first (as a turn starts), then the rest one
		// step at a time, alternating the two ways of appending.
		for j := 0; j < len(msgs); {
			k := j + 1
			if j > 0 {
				k = min(j+2, len(msgs))
			}
			var err error
			if (i+j)%2 == 0 {
				err = session.AppendMessages(ctx, s, id, msgs[j:k])
			} else {
				_, _, err = s.UpdateAppend(ctx, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 1})), msgs[j:k], 0)
			}
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			all = keepTurns(append(all, msgs[j:k]...), maxMessages)
			got := must(s.Messages(ctx, id, 0))(t)
			if !slices.EqualFunc(got, all, msgEqual) {
				t.Fatalf("turn %d after %d messages: history\n%+v\nwant\n%+v", i, k, got, all)
			}
			if len(got) > 0 && got[0].Role != chat.RoleUser {
				t.Fatalf("turn %d: the history starts inside a turn: %+v", i, got[0])
			}
			j = k
		}
	}
}

// keepTurns is the trimming rule, written independently of the stores:
// split the history into turns (each starting at a user message) and drop
// the oldest while more than max messages remain, never the newest.
func keepTurns(msgs []chat.Message, max int) []chat.Message {
	var turns [][]chat.Message
	for _, m := range msgs {
		if m.Role == chat.RoleUser || len(turns) == 0 {
			turns = append(turns, nil)
		}
		turns[len(turns)-1] = append(turns[len(turns)-1], m)
	}
	total := len(msgs)
	for len(turns) > 1 && total > max {
		total -= len(turns[0])
		turns = turns[1:]
	}
	var out []chat.Message
	for _, tm := range turns {
		out = append(out, tm...)
	}
	return out
}

func msgEqual(a, b chat.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID &&
		a.ToolName == b.ToolName && a.IsError == b.IsError && a.NotRun == b.NotRun && a.Denied == b.Denied &&
		(a.Summary == nil) == (b.Summary == nil) && (a.Summary == nil || *a.Summary == *b.Summary) &&
		slices.EqualFunc(a.ToolCalls, b.ToolCalls, func(x, y chat.ToolCall) bool {
			return x.ID == y.ID && x.Name == y.Name && string(x.Arguments) == string(y.Arguments)
		})
}

func (h *harness) busyAtOnce(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	a := must(lock(ctx, s, id))(t)
	if a.SessionID() != id || len(a.Token()) < 16 {
		t.Fatalf("lease: session %q token %q", a.SessionID(), a.Token())
	}
	_, err := lock(ctx, s, id)
	wantErr(t, "second Lock", err, session.ErrBusy)
	// Other sessions are independent.
	other := must(lock(ctx, s, session.NewID()))(t)
	defer other.Release(ctx)
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	b := must(lock(ctx, s, id))(t)
	if b.Token() == a.Token() {
		t.Fatal("a new lease reused the old token")
	}
	b.Release(ctx)
}

func (h *harness) busyWaits(t *testing.T) {
	s, _ := h.store(t, session.Config{LockWait: 5 * time.Second})
	ctx := t.Context()
	id := session.NewID()
	a := must(lock(ctx, s, id))(t)
	released := make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(released)
		a.Release(context.Background())
	}()
	b, err := lock(ctx, s, id)
	if err != nil {
		t.Fatalf("Lock with LockWait while the holder releases: %v", err)
	}
	select {
	case <-released:
	default:
		t.Fatal("Lock returned before the holder released")
	}
	b.Release(ctx)

	// Bounded wait: a holder that does not release gives ErrBusy.
	short, _ := h.store(t, session.Config{LockWait: 100 * time.Millisecond})
	id2 := session.NewID()
	held := must(lock(ctx, short, id2))(t)
	_, err = lock(ctx, short, id2)
	wantErr(t, "Lock with a short LockWait on a held session", err, session.ErrBusy)
	held.Release(ctx)

	// The caller's context ends the wait early.
	long, _ := h.store(t, session.Config{LockWait: time.Hour})
	id3 := session.NewID()
	held = must(lock(ctx, long, id3))(t)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := lock(cctx, long, id3); err == nil {
		t.Fatal("Lock whose context ended returned a lease on a held session")
	}
	held.Release(ctx)
}

func (h *harness) leaseExpiry(t *testing.T) {
	const lockTTL = 300 * time.Millisecond
	s, c := h.store(t, session.Config{LockTTL: lockTTL})
	ctx := t.Context()
	id := session.NewID()
	must(lock(ctx, s, id))(t) // the holder "dies": no Release, no Extend
	_, err := lock(ctx, s, id)
	wantErr(t, "Lock on a held session", err, session.ErrBusy)
	c.advance(lockTTL + 200*time.Millisecond)
	l, err := lock(ctx, s, id)
	if err != nil {
		t.Fatalf("Lock after the holder's lease expired: %v", err)
	}
	l.Release(ctx)
}

func (h *harness) extend(t *testing.T) {
	const lockTTL = 500 * time.Millisecond
	s, c := h.store(t, session.Config{LockTTL: lockTTL})
	ctx := t.Context()
	id := session.NewID()
	before := c.Now()
	a := must(lock(ctx, s, id))(t)
	first := a.Expiry()
	if first.Before(before.Add(lockTTL)) || first.After(c.Now().Add(lockTTL)) {
		t.Fatalf("Expiry of a new lease = %v, want LockTTL after the Lock call (%v)", first, before.Add(lockTTL))
	}
	c.advance(300 * time.Millisecond)
	if err := a.Extend(ctx); err != nil {
		t.Fatalf("Extend a live lease: %v", err)
	}
	if !a.Expiry().After(first) {
		t.Fatalf("Expiry after Extend = %v, not later than before it (%v)", a.Expiry(), first)
	}
	c.advance(300 * time.Millisecond) // past the first TTL, within the extended one
	_, err := lock(ctx, s, id)
	wantErr(t, "Lock on an extended lease", err, session.ErrBusy)
	if _, err := session.Update(ctx, s, id, apply(orchestration.ToolUsed("think")), session.WithLease(a)); err != nil {
		t.Fatalf("Update with an extended lease: %v", err)
	}
	a.Release(ctx)
}

func (h *harness) fencing(t *testing.T) {
	const lockTTL = 300 * time.Millisecond
	s, c := h.store(t, session.Config{LockTTL: lockTTL})
	ctx := t.Context()
	id := session.NewID()
	a := must(lock(ctx, s, id))(t)
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithLease(a)))(t)
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleUser, Content: "from a"}}, session.WithLease(a)); err != nil {
		t.Fatalf("AppendMessages with a live lease: %v", err)
	}
	c.advance(lockTTL + 200*time.Millisecond) // a stalls; its lease expires
	b := must(lock(ctx, s, id))(t)

	before := must(s.Get(ctx, id))(t)
	histBefore := must(s.Messages(ctx, id, 0))(t)
	calls := 0
	_, err := session.Update(ctx, s, id, func(st *orchestration.State) error {
		calls++
		return apply(orchestration.ToolUsed("fetch"))(st)
	}, session.WithLease(a))
	wantErr(t, "Update by the superseded holder", err, session.ErrFenced)
	err = session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleAssistant, Content: "stale"}}, session.WithLease(a))
	wantErr(t, "AppendMessages by the superseded holder", err, session.ErrFenced)
	wantErr(t, "Extend by the superseded holder", a.Extend(ctx), session.ErrFenced)

	after := must(s.Get(ctx, id))(t)
	if after.Version != before.Version || !after.State.RecentlyUsedTools.Equal(before.State.RecentlyUsedTools.Slice()...) {
		t.Fatalf("a fenced Update was applied (fn ran %d times): before %+v, after %+v", calls, before, after)
	}
	if hist := must(s.Messages(ctx, id, 0))(t); !slices.EqualFunc(hist, histBefore, msgEqual) {
		t.Fatalf("a fenced AppendMessages was applied: %+v", hist)
	}
	// a's Release must not free b's lease.
	a.Release(ctx)
	_, err = lock(ctx, s, id)
	wantErr(t, "Lock after the superseded holder released", err, session.ErrBusy)
	// b writes normally.
	got := must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch")), session.WithLease(b)))(t)
	if !got.State.RecentlyUsedTools.Equal("search", "fetch") {
		t.Fatalf("the new holder's Update: %+v", got.State)
	}
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleAssistant, Content: "from b"}}, session.WithLease(b)); err != nil {
		t.Fatalf("AppendMessages by the new holder: %v", err)
	}
	if n := len(must(s.Messages(ctx, id, 0))(t)); n != 2 {
		t.Fatalf("history has %d messages, want 2", n)
	}
	b.Release(ctx)
	// A released lease fences too.
	_, err = session.Update(ctx, s, id, apply(orchestration.ToolUsed("think")), session.WithLease(b))
	wantErr(t, "Update with a released lease", err, session.ErrFenced)
}

func (h *harness) closed(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.Get(ctx, session.NewID())
	wantErr(t, "Get on a closed store", err, session.ErrUnavailable)
	if p, ok := s.(session.Pinger); ok {
		wantErr(t, "Ping on a closed store", p.Ping(ctx), session.ErrUnavailable)
	}
}

// concurrency runs 32 goroutines x 200 events on one session: every tool use
// and every token must be counted exactly once.
func (h *harness) concurrency(t *testing.T) {
	const workers, events = 32, 200
	s, _ := h.store(t, session.Config{MaxMessages: 10000})
	ctx := t.Context()
	id := session.NewID()
	tools := testEngine.Tools()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Go(func() {
			for i := range events {
				ev := orchestration.UsageReported(chat.Usage{Prompt: int64(g + 1), Completion: int64(i)})
				if i%2 == 0 {
					ev = orchestration.ToolUsed(tools[(g+i)%len(tools)])
				}
				if _, err := session.Update(ctx, s, id, apply(ev)); err != nil {
					errs <- fmt.Errorf("worker %d event %d: %w", g, i, err)
					return
				}
				if i%20 == 0 {
					m := chat.Message{Role: chat.RoleTool, Content: fmt.Sprintf("%d/%d", g, i)}
					if err := session.AppendMessages(ctx, s, id, []chat.Message{m}); err != nil {
						errs <- fmt.Errorf("worker %d append %d: %w", g, i, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := must(s.Get(ctx, id))(t)
	var prompt, completion int64
	for g := range workers {
		for i := 1; i < events; i += 2 {
			prompt += int64(g + 1)
			completion += int64(i)
		}
	}
	want := chat.Usage{Prompt: prompt, Completion: completion, Total: prompt + completion}
	if got.State.TokenUsage != want {
		t.Errorf("token usage = %+v, want %+v", got.State.TokenUsage, want)
	}
	if n := got.State.RecentlyUsedTools.Len(); n != workers*events/2 {
		t.Errorf("tool history has %d entries, want %d", n, workers*events/2)
	}
	if got.State.TurnToolUses != workers*events/2 {
		t.Errorf("turn tool uses = %d, want %d", got.State.TurnToolUses, workers*events/2)
	}
	// One version per write: per event, and per append unless the store
	// appends without touching the state (an Appender).
	wantVersion := int64(workers * events)
	if _, ok := s.(session.Appender); !ok {
		wantVersion += workers * events / 20
	}
	if got.Version != wantVersion {
		t.Errorf("version = %d, want %d (one per write)", got.Version, wantVersion)
	}
	hist := must(s.Messages(ctx, id, 0))(t)
	if len(hist) != workers*events/20 {
		t.Errorf("history has %d messages, want %d", len(hist), workers*events/20)
	}
	seen := make(map[string]bool, len(hist))
	for _, m := range hist {
		if seen[m.Content] {
			t.Errorf("message %q appended twice", m.Content)
		}
		seen[m.Content] = true
	}
}

func (h *harness) claim(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	sess, l, err := s.Claim(ctx, id, session.WithOwner("alice"), session.WithAgent("planner"))
	if err != nil {
		t.Fatalf("Claim of a new session: %v", err)
	}
	if sess.ID != id || sess.Owner != "alice" || sess.Agent != "planner" || l == nil || l.SessionID() != id {
		t.Fatalf("Claim of a new session: %+v, lease %v", sess, l)
	}
	got := must(s.Get(ctx, id))(t)
	if got.Owner != "alice" || got.Agent != "planner" {
		t.Fatalf("the claimed session was stored as %+v", got)
	}
	_, err = lock(ctx, s, id)
	wantErr(t, "Lock on a claimed session", err, session.ErrBusy)
	_, _, err = s.Claim(ctx, id, session.WithOwner("alice"), session.WithAgent("planner"))
	wantErr(t, "Claim on a claimed session", err, session.ErrBusy)
	// The lease fences writes.
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithLease(l)))(t)

	// Another owner or another agent: the session comes back with
	// ErrForeign and no lease is taken, not even when the session is free.
	must(0, l.Release(ctx))(t)
	for _, tc := range []struct {
		name  string
		owner string
		agent string
	}{{"another owner", "mallory", "planner"}, {"no owner", "", "planner"}, {"another agent", "alice", "coder"}} {
		got, l, err := s.Claim(ctx, id, session.WithOwner(tc.owner), session.WithAgent(tc.agent))
		wantErr(t, "Claim by "+tc.name, err, session.ErrForeign)
		if l != nil || got.Owner != "alice" || got.Agent != "planner" {
			t.Fatalf("Claim by %s: lease %v, session %+v; want no lease and the stored session", tc.name, l, got)
		}
	}
	b := must(lock(ctx, s, id))(t) // no foreign Claim left a lease behind
	must(0, b.Release(ctx))(t)

	// An existing session keeps its state; one bound to no agent is
	// anyone's of its owner.
	sess, l, err = s.Claim(ctx, id, session.WithOwner("alice"), session.WithAgent("planner"))
	if err != nil || !sess.State.RecentlyUsedTools.Equal("search") || sess.Version != got.Version+1 {
		t.Fatalf("Claim of an existing session: %+v, %v", sess, err)
	}
	must(0, l.Release(ctx))(t)
	free := session.NewID()
	must(session.Update(ctx, s, free, apply(orchestration.ToolUsed("fetch")), session.WithOwner("bob")))(t)
	sess, l, err = s.Claim(ctx, free, session.WithOwner("bob"), session.WithAgent("coder"))
	if err != nil || sess.Agent != "" {
		t.Fatalf("Claim of a session bound to no agent: %+v, %v", sess, err)
	}
	must(0, l.Release(ctx))(t)
}

func (h *harness) claimWaits(t *testing.T) {
	s, _ := h.store(t, session.Config{LockWait: 5 * time.Second})
	ctx := t.Context()
	id := session.NewID()
	a := must(lock(ctx, s, id))(t)
	released := make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(released)
		a.Release(context.Background())
	}()
	_, b, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatalf("Claim with LockWait while the holder releases: %v", err)
	}
	select {
	case <-released:
	default:
		t.Fatal("Claim returned before the holder released")
	}
	b.Release(ctx)
}

// claimStart checks a session.Starter's ClaimStart (stores that are not
// one have nothing to check): the claim is Claim's, and the write plan
// returns is made under the new lease, with the claim or by the caller
// after it, with the same result either way.
func (h *harness) claimStart(t *testing.T) {
	s, _ := h.store(t, session.Config{LockWait: 100 * time.Millisecond})
	st, ok := s.(session.Starter)
	if !ok {
		t.Skipf("%T is not a session.Starter", s)
	}
	ctx := t.Context()
	id := session.NewID()
	opts := []session.UpdateOption{session.WithOwner("alice"), session.WithAgent("planner")}
	user := func(c string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: c} }
	// turn starts a turn with message the way the agent does, and ends it.
	turn := func(message string, wantHistory int) session.Session {
		t.Helper()
		var planned []session.Session
		sess, l, started, err := st.ClaimStart(ctx, id, func(s session.Session) (session.Write, bool) {
			planned = append(planned, s)
			return session.Write{Update: apply(orchestration.UserMessage(message)), Messages: []chat.Message{user(message)}, Window: -1,
				Options: []session.UpdateOption{session.WithTurn("t-" + message)}}, true
		}, opts...)
		if err != nil {
			t.Fatalf("ClaimStart %q: %v", message, err)
		}
		if len(planned) > 1 {
			t.Fatalf("ClaimStart %q called plan %d times, want at most once", message, len(planned))
		}
		if len(planned) == 1 && (planned[0].ID != id || planned[0].Owner != "alice" || planned[0].Turn != "") {
			t.Fatalf("ClaimStart %q planned on %+v", message, planned[0])
		}
		if started == nil {
			// The caller's write, as after Claim.
			stored, hist, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage(message)), []chat.Message{user(message)}, -1,
				session.WithLease(l), session.WithTurn("t-"+message))
			if err != nil {
				t.Fatalf("the write after ClaimStart %q: %v", message, err)
			}
			started = &session.Started{Session: stored, History: hist}
		}
		if sess.ID != id || sess.Owner != "alice" || sess.Agent != "planner" {
			t.Fatalf("ClaimStart %q returned the session %+v", message, sess)
		}
		if got := started.Session; got.Turn != "t-"+message || got.State.LastUserMessage != message || len(started.History) != wantHistory {
			t.Fatalf("ClaimStart %q: stored %+v with a history of %d, want turn t-%s and %d messages before it", message, got, len(started.History), message, wantHistory)
		}
		// The lease holds the session.
		_, _, err = s.Claim(ctx, id, opts...)
		wantErr(t, "Claim during the turn", err, session.ErrBusy)
		got := must(s.Get(ctx, id))(t)
		if got.Version != started.Session.Version || got.Turn != "t-"+message {
			t.Fatalf("after ClaimStart %q the store has %+v, want %+v", message, got, started.Session)
		}
		// The turn's last write frees it.
		return must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithLease(l), session.WithTurn(""), session.WithRelease()))(t)
	}
	turn("one", 0)
	turn("two", 1)
	// A write between turns (another caller's Update) is not
	// lost: the next turn starts from it.
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch"))))(t)
	end := turn("three", 2)
	if !end.State.RecentlyUsedTools.Equal("search", "search", "fetch", "search") || end.State.UserMessages != 3 {
		t.Fatalf("after three turns: %+v", end.State)
	}
	if msgs := must(s.Messages(ctx, id, 0))(t); len(msgs) != 3 {
		t.Fatalf("history after three turns: %+v", msgs)
	}

	// A plan that declines: the claim alone.
	sess, l, started, err := st.ClaimStart(ctx, id, func(session.Session) (session.Write, bool) { return session.Write{}, false }, opts...)
	if err != nil || started != nil || sess.Version != end.Version || l == nil {
		t.Fatalf("ClaimStart declined: %+v, %v, started %v", sess, err, started)
	}
	// Busy: nothing is written.
	_, _, _, err = st.ClaimStart(ctx, id, func(s session.Session) (session.Write, bool) {
		return session.Write{Update: apply(orchestration.UserMessage("busy")), Messages: []chat.Message{user("busy")}}, true
	}, opts...)
	wantErr(t, "ClaimStart on a busy session", err, session.ErrBusy)
	must(0, l.Release(ctx))(t)
	// Another owner: ErrForeign, no lease, nothing written.
	_, l, _, err = st.ClaimStart(ctx, id, func(s session.Session) (session.Write, bool) {
		return session.Write{Update: apply(orchestration.UserMessage("mallory")), Messages: []chat.Message{user("mallory")}}, true
	}, session.WithOwner("mallory"), session.WithAgent("planner"))
	wantErr(t, "ClaimStart by another owner", err, session.ErrForeign)
	if l != nil {
		t.Fatal("ClaimStart by another owner took a lease")
	}
	if got := must(s.Get(ctx, id))(t); got.Version != end.Version {
		t.Fatalf("after the refused ClaimStarts the session is %+v, want version %d", got, end.Version)
	}
	if msgs := must(s.Messages(ctx, id, 0))(t); len(msgs) != 3 {
		t.Fatalf("the refused ClaimStarts wrote to the history: %+v", msgs)
	}
}

// turnMarker: WithTurn sets and clears Session.Turn with Update and
// UpdateAppend, other writes keep it, and Claim and Get show it.
func (h *harness) turnMarker(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	_, l, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	sess, _, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("hi")), []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 0, session.WithLease(l), session.WithTurn("turn-0001"))
	if err != nil || sess.Turn != "turn-0001" {
		t.Fatalf("UpdateAppend WithTurn: %+v, %v", sess, err)
	}
	if sess, err = session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 1})), session.WithLease(l)); err != nil || sess.Turn != "turn-0001" {
		t.Fatalf("Update without WithTurn: %+v, %v", sess, err)
	}
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleAssistant, Content: "partial"}}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The next turn finds the marker the last one left.
	sess, l, err = s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil || sess.Turn != "turn-0001" {
		t.Fatalf("Claim after a turn that left its marker: %+v, %v", sess, err)
	}
	if sess, err = session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 1})), session.WithLease(l), session.WithTurn("")); err != nil || sess.Turn != "" {
		t.Fatalf("Update WithTurn(\"\"): %+v, %v", sess, err)
	}
	if got := must(s.Get(ctx, id))(t); got.Turn != "" {
		t.Fatalf("Get after the marker was cleared: %+v", got)
	}
	_ = l.Release(ctx)
}

// journal: WithJournal changes the running turn's journal in the write
// that carries it, on the session's copy: a function that refuses the
// write leaves the session as it was and its error is returned as is. A
// new turn starts with an empty journal; clearing the marker drops it; a
// journal lives and is read back whole with the session.
func (h *harness) journal(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	// The session is the owner's (session.Key), so that it is in no
	// other owner's list.
	id := session.Key("o", session.NewID())
	_, l, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	count := func(j *session.Journal) error { j.Writes++; return nil }
	sess, _, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("hi")), []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 0,
		session.WithLease(l), session.WithTurn("turn-0001"), session.WithJournal(count))
	if err != nil || sess.Journal == nil || sess.Journal.Writes != 1 {
		t.Fatalf("the turn's first write: %+v, %v; want a journal of one write", sess, err)
	}
	step := &session.JournalStep{Text: "let me look", Calls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: []byte(`{"q":"go"}`)}, {ID: "c2", Name: "think", Arguments: []byte(`{}`)}},
		Invalid: map[string]string{"c2": "unknown tool"}, Offer: orchestration.Offer{Tools: []string{"search"}, Step: "research"}, Usage: chat.Usage{Prompt: 7}, Output: 12}
	if _, err := session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{})), session.WithLease(l), session.WithJournal(func(j *session.Journal) error {
		j.Writes++
		j.Step = step
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	result := chat.ToolResult{CallID: "c1", Name: "search", Content: "found", Type: "search_results"}
	refused := errors.New("lost writes")
	if _, err := session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithLease(l), session.WithJournal(func(j *session.Journal) error {
		j.Step.Results = append(j.Step.Results, result)
		return refused
	})); !errors.Is(err, refused) {
		t.Fatalf("a journal function that refuses the write: %v; want its error", err)
	}
	got := must(s.Get(ctx, id))(t)
	if j := got.Journal; j == nil || j.Writes != 2 || j.Step == nil || len(j.Step.Results) != 0 || got.State.RecentlyUsedTools.Equal("search") {
		t.Fatalf("after a refused write: %+v; want the journal of two writes, no result, no tool recorded", got)
	}
	if _, err := session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithLease(l), session.WithJournal(func(j *session.Journal) error {
		j.Writes++
		j.Step.Results = append(j.Step.Results, result)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	got = must(s.Get(ctx, id))(t)
	want := session.Journal{Writes: 3, Step: step}
	want.Step.Results = []chat.ToolResult{result}
	if j := got.Journal; j == nil || j.Writes != want.Writes || j.Step == nil || j.Step.Text != step.Text || len(j.Step.Calls) != 2 ||
		string(j.Step.Calls[0].Arguments) != `{"q":"go"}` || j.Step.Invalid["c2"] != "unknown tool" || j.Step.Offer.Step != "research" ||
		len(j.Step.Offer.Tools) != 1 || j.Step.Usage.Prompt != 7 || j.Step.Output != 12 || len(j.Step.Results) != 1 || !reflect.DeepEqual(j.Step.Results[0], result) {
		t.Fatalf("the journal read back: %+v; want %+v", got.Journal, want)
	}
	// The step's write: the journal goes on without the step.
	if _, _, err := s.UpdateAppend(ctx, id, apply(orchestration.UsageReported(chat.Usage{})), []chat.Message{{Role: chat.RoleAssistant, Content: "let me look"}}, 0,
		session.WithLease(l), session.WithJournal(func(j *session.Journal) error {
			j.Writes++
			j.Steps, j.Frame, j.Step = 1, 9, nil
			return nil
		})); err != nil {
		t.Fatal(err)
	}
	if j := must(s.Get(ctx, id))(t).Journal; j == nil || j.Writes != 4 || j.Steps != 1 || j.Frame != 9 || j.Step != nil {
		t.Fatalf("after the step's write: %+v", j)
	}
	// Another turn starts with an empty journal.
	sess, err = session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{})), session.WithLease(l), session.WithTurn("turn-0002"), session.WithJournal(count))
	if err != nil || sess.Journal == nil || sess.Journal.Writes != 1 || sess.Journal.Steps != 0 {
		t.Fatalf("the next turn's first write: %+v, %v; want a journal of its own", sess.Journal, err)
	}
	// Clearing the marker drops it, after the function ran.
	ran := false
	sess, err = session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{})), session.WithLease(l), session.WithTurn(""),
		session.WithJournal(func(j *session.Journal) error { ran = j.Writes == 1; return nil }))
	if err != nil || sess.Journal != nil || sess.Turn != "" || !ran {
		t.Fatalf("the turn's last write: %+v, %v (the function saw the journal: %v)", sess, err, ran)
	}
	if got := must(s.Get(ctx, id))(t); got.Journal != nil {
		t.Fatalf("Get after the last write: %+v", got.Journal)
	}
	_ = l.Release(ctx)
}

// writeReleases: an Update or UpdateAppend WithRelease applies and frees
// the session in one step; the lease's Release and Extend then do nothing,
// and a later write fenced by it is refused. Without a lease, or when the
// write is refused, nothing is released.
func (h *harness) writeReleases(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	for _, appendToo := range []bool{false, true} {
		id := session.NewID()
		_, l, err := s.Claim(ctx, id, session.WithOwner("o"))
		if err != nil {
			t.Fatal(err)
		}
		// Refused (fn fails): the lease still holds.
		fail := errors.New("no")
		if _, _, err := s.UpdateAppend(ctx, id, func(*orchestration.State) error { return fail }, nil, 0, session.WithLease(l), session.WithRelease()); !errors.Is(err, fail) {
			t.Fatalf("refused write: %v", err)
		}
		wantErr(t, "Claim while the refused write's lease holds", func() error { _, _, err := s.Claim(ctx, id, session.WithOwner("o")); return err }(), session.ErrBusy)
		msg := []chat.Message{{Role: chat.RoleAssistant, Content: "the answer"}}
		if appendToo {
			sess, _, err := s.UpdateAppend(ctx, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 3})), msg, 0, session.WithLease(l), session.WithTurn(""), session.WithRelease())
			if err != nil || sess.State.TokenUsage.Prompt != 3 {
				t.Fatalf("UpdateAppend WithRelease: %+v, %v", sess, err)
			}
		} else if _, err := session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 3})), session.WithLease(l), session.WithRelease()); err != nil {
			t.Fatalf("Update WithRelease: %v", err)
		}
		// The write alone freed the session: it is claimed at once.
		_, l2, err := s.Claim(ctx, id, session.WithOwner("o"))
		if err != nil {
			t.Fatalf("Claim after a write released the lease: %v", err)
		}
		if err := l.Extend(ctx); err != nil {
			t.Fatalf("Extend of a lease a write released: %v", err)
		}
		wantErr(t, "a write fenced by the released lease", func() error {
			_, err := session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 1})), session.WithLease(l))
			return err
		}(), session.ErrFenced)
		// The released lease's Release does not free the next turn's.
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "Claim while the next lease holds", func() error { _, _, err := s.Claim(ctx, id, session.WithOwner("o")); return err }(), session.ErrBusy)
		if appendToo {
			if msgs := must(s.Messages(ctx, id, 0))(t); len(msgs) != 1 || msgs[0].Content != "the answer" {
				t.Fatalf("history after UpdateAppend WithRelease: %+v", msgs)
			}
		}
		_ = l2.Release(ctx)
	}
	// Without a lease WithRelease does nothing.
	id := session.NewID()
	_, l, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Update(ctx, s, id, apply(orchestration.UsageReported(chat.Usage{Prompt: 1})), session.WithRelease()); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Claim after a write WithRelease without a lease", func() error { _, _, err := s.Claim(ctx, id, session.WithOwner("o")); return err }(), session.ErrBusy)
	_ = l.Release(ctx)
}

func (h *harness) updateAppend(t *testing.T) {
	s, _ := h.store(t, session.Config{MaxMessages: 5})
	ctx := t.Context()
	id := session.NewID()
	_, l, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	msg := func(i int) chat.Message {
		role := chat.RoleUser
		if i%2 == 1 {
			role = chat.RoleAssistant
		}
		return chat.Message{Role: role, Content: fmt.Sprintf("message %d", i)}
	}
	var all []chat.Message
	for i := range 4 {
		window := []int{-1, 0, 2, 10}[i]
		sess, hist, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("hi")), []chat.Message{msg(2 * i), msg(2*i + 1)}, window, session.WithLease(l))
		if err != nil {
			t.Fatalf("UpdateAppend %d: %v", i, err)
		}
		want := all
		switch {
		case window == 0:
			want = nil
		case window > 0 && len(want) > window:
			want = want[len(want)-window:]
		}
		if !slices.EqualFunc(hist, want, msgEqual) {
			t.Fatalf("UpdateAppend %d with window %d returned the history %+v, want %+v (as before the append)", i, window, hist, want)
		}
		if sess.Version != int64(i+1) || sess.Owner != "o" {
			t.Fatalf("UpdateAppend %d: session %+v", i, sess)
		}
		all = keepTurns(append(all, msg(2*i), msg(2*i+1)), 5)
		stored := must(s.Messages(ctx, id, 0))(t)
		if !slices.EqualFunc(stored, all, msgEqual) {
			t.Fatalf("after UpdateAppend %d the history is %+v, want %+v (MaxMessages 5)", i, stored, all)
		}
	}
	// It creates a missing session, like Update and AppendMessages.
	fresh := session.NewID()
	sess, hist, err := s.UpdateAppend(ctx, fresh, apply(orchestration.ToolUsed("think")), []chat.Message{msg(0)}, -1, session.WithOwner("p"))
	if err != nil || len(hist) != 0 || sess.Owner != "p" || !sess.State.RecentlyUsedTools.Equal("think") {
		t.Fatalf("UpdateAppend on a missing session: %+v, %+v, %v", sess, hist, err)
	}
	if got := must(s.Messages(ctx, fresh, 0))(t); len(got) != 1 {
		t.Fatalf("history of the created session: %+v", got)
	}
}

// sinceSummary: with session.SinceSummary, a whole-history window starts
// at the turns the latest summary entry keeps verbatim, and the write that stores a summary adds its
// cost to the session's SummarizerUsage.
func (h *harness) sinceSummary(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	_, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	turn := func(n int) []chat.Message {
		return []chat.Message{{Role: chat.RoleUser, Content: fmt.Sprintf("question %d", n)},
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: "think", Arguments: json.RawMessage(`{}`)}}},
			{Role: chat.RoleTool, ToolCallID: fmt.Sprintf("c%d", n), ToolName: "think", Content: "ok"},
			{Role: chat.RoleAssistant, Content: fmt.Sprintf("answer %d", n)}}
	}
	summary := func(through, kept int) chat.Message {
		return chat.Message{Role: chat.RoleSummary, Content: fmt.Sprintf("turns 1-%d", through), Summary: &chat.Summary{From: 1, Through: through, Kept: kept}}
	}
	read := func(what string, want []chat.Message) {
		t.Helper()
		_, hist, err := s.UpdateAppend(ctx, id, apply(orchestration.UsageReported(chat.Usage{})), nil, -1, session.WithLease(l), session.SinceSummary())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.EqualFunc(hist, want, msgEqual) {
			t.Fatalf("%s: the window since the summary is %d messages %+v, want %d %+v", what, len(hist), hist, len(want), want)
		}
	}
	var all []chat.Message
	for n := 1; n <= 5; n++ {
		all = append(all, turn(n)...)
	}
	if err := session.AppendMessages(ctx, s, id, all, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	read("without a summary", all)
	// A summary of turns 1-3 made during turn 5 keeps turns 4 and 5.
	sum := summary(3, 2)
	u := chat.Usage{Prompt: 40, Completion: 10, Total: 50}
	sess, _, err := s.UpdateAppend(ctx, id, apply(orchestration.UsageReported(chat.Usage{})), []chat.Message{sum}, 0,
		session.WithLease(l), session.AddSummarizerUsage(u))
	if err != nil || sess.SummarizerUsage != u || !sess.State.TokenUsage.IsZero() {
		t.Fatalf("storing a summary: %+v, %v; want the summarizer's usage %+v apart from the state's", sess.SummarizerUsage, err, u)
	}
	all = append(all, sum)
	read("after a summary that keeps two turns", all[12:])
	if err := session.AppendMessages(ctx, s, id, turn(6), session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	all = append(all, turn(6)...)
	read("a turn later", all[12:])
	// A later summary keeping one turn wins.
	later := summary(5, 1)
	if err := session.AppendMessages(ctx, s, id, []chat.Message{later}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	all = append(all, later)
	read("after a second summary", all[len(all)-5:])
	if got := must(s.Get(ctx, id))(t); got.SummarizerUsage != u {
		t.Fatalf("the session's summarizer usage is %+v, want %+v", got.SummarizerUsage, u)
	}
	if hist := must(s.Messages(ctx, id, 0))(t); !slices.EqualFunc(hist, all, msgEqual) {
		t.Fatalf("Messages returns %d messages, want the whole history of %d: a summary never hides what it replaces", len(hist), len(all))
	}
	// A summary keeping no turn starts the window at itself; one keeping
	// more turns than the history holds starts it at the beginning.
	if err := session.AppendMessages(ctx, s, id, []chat.Message{summary(6, 0)}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	all = append(all, summary(6, 0))
	read("a summary keeping nothing", all[len(all)-1:])
	if err := session.AppendMessages(ctx, s, id, []chat.Message{summary(6, 99)}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	read("a summary keeping more turns than there are", append(all, summary(6, 99)))
}

func (h *harness) updateAppendRefused(t *testing.T) {
	const lockTTL = 300 * time.Millisecond
	s, c := h.store(t, session.Config{LockTTL: lockTTL})
	ctx := t.Context()
	id := session.NewID()
	_, a, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	must2 := func(_ session.Session, _ []chat.Message, err error) error { return err }
	if err := must2(s.UpdateAppend(ctx, id, apply(orchestration.ToolUsed("search")), []chat.Message{{Role: chat.RoleUser, Content: "a"}}, -1, session.WithLease(a))); err != nil {
		t.Fatal(err)
	}
	before := must(s.Get(ctx, id))(t)

	// fn fails: nothing is written, neither the state nor the messages.
	boom := errors.New("boom")
	err = must2(s.UpdateAppend(ctx, id, func(st *orchestration.State) error {
		st.RecentlyUsedTools = st.RecentlyUsedTools.Append("fetch", 100)
		return boom
	}, []chat.Message{{Role: chat.RoleAssistant, Content: "no"}}, -1, session.WithLease(a)))
	wantErr(t, "UpdateAppend whose fn fails", err, boom)

	// The lease was taken over: fenced, nothing written.
	c.advance(lockTTL + 200*time.Millisecond)
	_, b, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	err = must2(s.UpdateAppend(ctx, id, apply(orchestration.ToolUsed("fetch")), []chat.Message{{Role: chat.RoleAssistant, Content: "stale"}}, -1, session.WithLease(a)))
	wantErr(t, "UpdateAppend by the superseded holder", err, session.ErrFenced)

	after := must(s.Get(ctx, id))(t)
	if after.Version != before.Version || !after.State.RecentlyUsedTools.Equal("search") {
		t.Fatalf("a refused UpdateAppend changed the state: before %+v, after %+v", before, after)
	}
	if hist := must(s.Messages(ctx, id, 0))(t); len(hist) != 1 || hist[0].Content != "a" {
		t.Fatalf("a refused UpdateAppend changed the history: %+v", hist)
	}
	// The new holder writes through its own lease.
	if err := must2(s.UpdateAppend(ctx, id, apply(orchestration.ToolUsed("fetch")), nil, 0, session.WithLease(b))); err != nil {
		t.Fatalf("UpdateAppend by the new holder: %v", err)
	}
}

// dropLastAnswer: DropLastAnswer removes what follows the last user
// message, in the same write as the append, and the window is read after
// it; a history without a user message, or whose last message is the
// user's, loses nothing.
func (h *harness) dropLastAnswer(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	_, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	user := func(c string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: c} }
	call := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "think", Arguments: json.RawMessage(`{}`)}}}
	result := chat.Message{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "think", Content: "thought"}
	answer := func(c string) chat.Message { return chat.Message{Role: chat.RoleAssistant, Content: c} }
	first := []chat.Message{user("one"), answer("first answer"), user("two"), call, result, answer("second answer")}
	if err := session.AppendMessages(ctx, s, id, first, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	sess, hist, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("two")), []chat.Message{answer("regenerated")}, -1, session.WithLease(l), session.DropLastAnswer())
	if err != nil {
		t.Fatal(err)
	}
	if want := first[:3]; !slices.EqualFunc(hist, want, msgEqual) {
		t.Fatalf("the window after dropping the answer is %+v, want %+v", hist, want)
	}
	if sess.State.UserMessages != 1 {
		t.Fatalf("the state was not updated in the same write: %+v", sess.State)
	}
	want := append(slices.Clone(first[:3]), answer("regenerated"))
	if got := must(s.Messages(ctx, id, 0))(t); !slices.EqualFunc(got, want, msgEqual) {
		t.Fatalf("history %+v, want %+v", got, want)
	}
	// The last message is the user's: nothing to drop; a window of 1 is
	// that message.
	if err := session.AppendMessages(ctx, s, id, []chat.Message{user("three")}, session.WithLease(l)); err != nil {
		t.Fatal(err)
	}
	_, hist, err = s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("three")), nil, 1, session.WithLease(l), session.DropLastAnswer())
	if err != nil || !slices.EqualFunc(hist, []chat.Message{user("three")}, msgEqual) {
		t.Fatalf("window %+v, %v", hist, err)
	}
	if got := must(s.Messages(ctx, id, 0))(t); len(got) != 5 {
		t.Fatalf("a history ending with a user message lost messages: %+v", got)
	}
	// No user message at all: nothing is dropped.
	other := session.NewID()
	if err := session.AppendMessages(ctx, s, other, []chat.Message{answer("a"), answer("b")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpdateAppend(ctx, other, apply(orchestration.UserMessage("x")), nil, 0, session.DropLastAnswer()); err != nil {
		t.Fatal(err)
	}
	if got := must(s.Messages(ctx, other, 0))(t); len(got) != 2 {
		t.Fatalf("a history without a user message lost messages: %+v", got)
	}
}

// dropLastTurn: DropLastTurn removes the last user message and what
// follows it, in the same write as the append, and the window is read
// after it; a history of one turn is left empty, and one without a user
// message loses nothing.
func (h *harness) dropLastTurn(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	_, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	user := func(c string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: c} }
	answer := func(c string) chat.Message { return chat.Message{Role: chat.RoleAssistant, Content: c} }
	first := []chat.Message{user("one"), answer("first answer"), user("two"), answer("second answer")}
	must(0, session.AppendMessages(ctx, s, id, first, session.WithLease(l)))(t)
	edited := []chat.Message{user("two, edited")}
	_, hist, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("two, edited")), edited, -1, session.WithLease(l), session.DropLastTurn())
	if err != nil {
		t.Fatal(err)
	}
	if want := first[:2]; !slices.EqualFunc(hist, want, msgEqual) {
		t.Fatalf("the window after dropping the turn is %+v, want %+v", hist, want)
	}
	want := append(slices.Clone(first[:2]), edited...)
	if got := must(s.Messages(ctx, id, 0))(t); !slices.EqualFunc(got, want, msgEqual) {
		t.Fatalf("history %+v, want %+v", got, want)
	}
	// The only turn: the history is what the write appends.
	one := session.NewID()
	must(0, session.AppendMessages(ctx, s, one, []chat.Message{user("only"), answer("a")}))(t)
	if _, hist, err := s.UpdateAppend(ctx, one, apply(orchestration.UserMessage("only, edited")), []chat.Message{user("only, edited")}, -1, session.DropLastTurn()); err != nil || len(hist) != 0 {
		t.Fatalf("window %+v, %v", hist, err)
	}
	if got := must(s.Messages(ctx, one, 0))(t); !slices.EqualFunc(got, []chat.Message{user("only, edited")}, msgEqual) {
		t.Fatalf("history of an edited only turn: %+v", got)
	}
	// No user message at all: nothing is dropped.
	other := session.NewID()
	must(0, session.AppendMessages(ctx, s, other, []chat.Message{answer("a"), answer("b")}))(t)
	if _, _, err := s.UpdateAppend(ctx, other, apply(orchestration.UserMessage("x")), nil, 0, session.DropLastTurn()); err != nil {
		t.Fatal(err)
	}
	if got := must(s.Messages(ctx, other, 0))(t); len(got) != 2 {
		t.Fatalf("a history without a user message lost messages: %+v", got)
	}
}

// regenerate: what a regenerated answer starts from survives the store.
// The write that drops an answer and applies orchestration.Regenerate
// gives the state that applying the message gave before the answer ran,
// also when the answer's tools pushed the turn's earlier tools out of a
// short tool history, and keeps what the answer spent; the marks of tool
// messages whose calls did not run come back as they were written.
func (h *harness) regenerate(t *testing.T) {
	engine := orchestration.MustNew(&orchestration.Spec{Steps: []orchestration.Step{
		{Name: "Eval", Conditions: []orchestration.Condition{{Type: orchestration.CondMessageContains, Value: "eval"}},
			Sequence: []orchestration.Group{{"search"}, {"fetch"}}},
	}}, orchestration.Config{Tools: []string{"search", "fetch", "think"}, HistoryLimit: 2})
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	_, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	step := func(ev orchestration.Input) func(*orchestration.State) error {
		return func(st *orchestration.State) error { *st, _ = engine.Apply(*st, ev); return nil }
	}
	write := func(ev orchestration.Input, msgs ...chat.Message) session.Session {
		t.Helper()
		sess, _, err := s.UpdateAppend(ctx, id, step(ev), msgs, 0, session.WithLease(l))
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	user := func(c string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: c} }
	calls := func(names ...string) chat.Message {
		m := chat.Message{Role: chat.RoleAssistant}
		for _, n := range names {
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: "id-" + n, Name: n, Arguments: json.RawMessage(`{}`)})
		}
		return m
	}
	result := func(n string) chat.Message {
		return chat.Message{Role: chat.RoleTool, ToolCallID: "id-" + n, ToolName: n, Content: "r"}
	}
	write(orchestration.UserMessage("hello"), user("hello"))
	write(orchestration.ToolUsed("think"), calls("think"), result("think"))
	write(orchestration.ToolUsed("think"), calls("think"), result("think"))
	started := write(orchestration.UserMessage("eval this"), user("eval this"))
	refused := chat.Message{Role: chat.RoleTool, ToolCallID: "id-fetch", ToolName: "fetch", Content: "Refused: …", IsError: true, NotRun: true}
	declined := chat.Message{Role: chat.RoleTool, ToolCallID: "id-think", ToolName: "think", Content: "Not run: …", IsError: true, NotRun: true, Denied: true}
	write(orchestration.ToolUsed("search"), calls("search", "fetch", "think"), result("search"), refused, declined)
	write(orchestration.ToolUsed("fetch"), calls("fetch"), result("fetch"))
	answered := write(orchestration.UsageReported(chat.Usage{Prompt: 40, Completion: 2}))
	if !answered.State.RecentlyUsedTools.Equal("search", "fetch") || answered.State.SequenceIndex != 2 {
		t.Fatalf("after the answer: %+v", answered.State)
	}
	if got := must(s.Messages(ctx, id, 0))(t); len(got) < 10 || !msgEqual(got[8], refused) || !msgEqual(got[9], declined) {
		t.Fatalf("the results of calls that did not run came back as %+v", got)
	}

	got, hist, err := s.UpdateAppend(ctx, id, step(orchestration.Regenerate("eval this")), nil, -1, session.WithLease(l), session.DropLastAnswer())
	if err != nil {
		t.Fatal(err)
	}
	st, want := got.State, started.State
	if st.ActiveStep != want.ActiveStep || st.SequenceIndex != want.SequenceIndex || !st.RecentlyUsedTools.Equal(want.RecentlyUsedTools.Slice()...) ||
		st.UserMessages != want.UserMessages || st.TurnToolUses != want.TurnToolUses || st.LastUserMessage != want.LastUserMessage {
		t.Fatalf("after regenerate %+v, when the answer started %+v", st, want)
	}
	if st.RegeneratedUsage != (chat.Usage{Prompt: 40, Completion: 2, Total: 42}) || st.TokenUsage != answered.State.TokenUsage {
		t.Fatalf("usage %+v, regenerated %+v: want the answer's spend kept and reported", st.TokenUsage, st.RegeneratedUsage)
	}
	if n := len(hist); n == 0 || !msgEqual(hist[n-1], user("eval this")) {
		t.Fatalf("the history after dropping the answer: %+v", hist)
	}
	// The restored state is what a later read gets.
	if again := must(s.Get(ctx, id))(t).State; !again.RecentlyUsedTools.Equal("think", "think") || again.TurnStart == nil || again.TurnStart.Tools != 2 {
		t.Fatalf("stored state %+v", again)
	}
}

func pending(id, tool string) session.Approval {
	return session.Approval{ID: id, Status: session.ApprovalPending,
		Call:        chat.ToolCall{ID: "call-" + id, Name: tool, Arguments: []byte(`{"q":"x"}`)},
		RequestedAt: time.Now().UTC().Truncate(time.Millisecond)}
}

// approvals: WithApprovals changes a session's approvals in the same atomic
// write as its state (and messages), fenced by the lease like them; a
// failing function or a stale lease writes nothing; every read returns
// them, Claim included, and a write without WithApprovals keeps them.
func (h *harness) approvals(t *testing.T) {
	const lockTTL = 300 * time.Millisecond
	s, c := h.store(t, session.Config{LockTTL: lockTTL})
	ctx := t.Context()
	id := session.NewID()
	_, a, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	set := func(list ...session.Approval) session.UpdateOption {
		return session.WithApprovals(func(cur []session.Approval) ([]session.Approval, error) { return append(cur, list...), nil })
	}
	p1, p2 := pending("a1", "search"), pending("a2", "fetch")
	sess, hist, err := s.UpdateAppend(ctx, id, apply(orchestration.UserMessage("hi")),
		[]chat.Message{{Role: chat.RoleUser, Content: "hi"}, {Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{p1.Call, p2.Call}}}, 0,
		session.WithLease(a), set(p1, p2))
	if err != nil || len(hist) != 0 {
		t.Fatalf("UpdateAppend with approvals: %v", err)
	}
	if len(sess.Approvals) != 2 || sess.Approvals[0].ID != "a1" || sess.Approvals[1].Call.Name != "fetch" {
		t.Fatalf("UpdateAppend returned the approvals %+v", sess.Approvals)
	}
	got := must(s.Get(ctx, id))(t)
	if len(got.Approvals) != 2 || string(got.Approvals[0].Call.Arguments) != `{"q":"x"}` || !got.Approvals[0].RequestedAt.Equal(p1.RequestedAt) {
		t.Fatalf("Get returned the approvals %+v", got.Approvals)
	}
	if pend := got.PendingApprovals(); len(pend) != 2 {
		t.Fatalf("PendingApprovals = %+v", pend)
	}
	// A write without WithApprovals keeps them.
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search")), session.WithLease(a)))(t)
	if err := session.AppendMessages(ctx, s, id, []chat.Message{{Role: chat.RoleTool, ToolCallID: "call-a1", Content: "r"}}, session.WithLease(a)); err != nil {
		t.Fatal(err)
	}
	if n := len(must(s.Get(ctx, id))(t).Approvals); n != 2 {
		t.Fatalf("a write without WithApprovals left %d approvals, want 2", n)
	}
	// Update answers one; the function gets a copy it may change.
	answer := session.WithApprovals(func(cur []session.Approval) ([]session.Approval, error) {
		for i := range cur {
			if cur[i].ID == "a1" {
				cur[i].Status, cur[i].Reason = session.ApprovalDenied, "not now"
			}
		}
		return cur, nil
	})
	sess = must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch")), session.WithLease(a), answer))(t)
	if sess.Approvals[0].Status != session.ApprovalDenied || sess.Approvals[0].Reason != "not now" || sess.Approvals[1].Status != session.ApprovalPending {
		t.Fatalf("after answering a1: %+v", sess.Approvals)
	}
	if pend := must(s.Get(ctx, id))(t).PendingApprovals(); len(pend) != 1 || pend[0].ID != "a2" {
		t.Fatalf("PendingApprovals after answering a1 = %+v", pend)
	}
	before := must(s.Get(ctx, id))(t)

	// A failing approvals function aborts the whole write.
	boom := errors.New("unknown approval")
	_, err = session.Update(ctx, s, id, apply(orchestration.ToolUsed("think")), session.WithLease(a),
		session.WithApprovals(func([]session.Approval) ([]session.Approval, error) { return nil, boom }))
	wantErr(t, "Update whose approvals function fails", err, boom)
	_, _, err = s.UpdateAppend(ctx, id, apply(orchestration.ToolUsed("think")), []chat.Message{{Role: chat.RoleAssistant, Content: "no"}}, 0, session.WithLease(a),
		session.WithApprovals(func([]session.Approval) ([]session.Approval, error) { return nil, boom }))
	wantErr(t, "UpdateAppend whose approvals function fails", err, boom)
	if after := must(s.Get(ctx, id))(t); after.Version != before.Version || len(after.Approvals) != 2 || after.State.RecentlyUsedTools.Len() != before.State.RecentlyUsedTools.Len() {
		t.Fatalf("a failed write changed the session: before %+v, after %+v", before, after)
	}

	// A write without WithApprovals keeps them, even one that empties
	// the state; Claim returns them.
	a.Release(ctx)
	must(session.Update(ctx, s, id, func(st *orchestration.State) error { *st = orchestration.State{}; return nil }))(t)
	claimed, b, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed.Approvals) != 2 || claimed.PendingApprovals()[0].ID != "a2" {
		t.Fatalf("Claim after a write without approvals returned the approvals %+v", claimed.Approvals)
	}
	// A superseded lease's approvals write is fenced.
	c.advance(lockTTL + 200*time.Millisecond)
	_, bb, err := s.Claim(ctx, id, session.WithOwner("o"))
	if err != nil {
		t.Fatal(err)
	}
	defer bb.Release(ctx)
	_, err = session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch")), session.WithLease(b), answer)
	wantErr(t, "an approvals write by the superseded holder", err, session.ErrFenced)
	// Clearing them.
	cleared := must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("fetch")), session.WithLease(bb),
		session.WithApprovals(func([]session.Approval) ([]session.Approval, error) { return nil, nil })))(t)
	if len(cleared.Approvals) != 0 || len(must(s.Get(ctx, id))(t).Approvals) != 0 {
		t.Fatalf("cleared approvals: %+v", cleared.Approvals)
	}
	// Delete removes them with the session.
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(ctx, id)
	wantErr(t, "Get after Delete", err, session.ErrNotFound)
}

// approvalsExpire: a session's pending approvals go when the session
// expires; a new session of the same ID has none.
func (h *harness) approvalsExpire(t *testing.T) {
	const ttl = time.Second
	s, c := h.store(t, session.Config{TTL: ttl})
	ctx := t.Context()
	id := session.NewID()
	must(session.Update(ctx, s, id, apply(orchestration.UserMessage("hi")),
		session.WithApprovals(func([]session.Approval) ([]session.Approval, error) {
			return []session.Approval{pending("x1", "search")}, nil
		})))(t)
	if n := len(must(s.Get(ctx, id))(t).Approvals); n != 1 {
		t.Fatalf("%d approvals, want 1", n)
	}
	c.advance(ttl + 300*time.Millisecond)
	_, err := s.Get(ctx, id)
	wantErr(t, "Get after the TTL", err, session.ErrNotFound)
	fresh, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if fresh.Version != 0 || len(fresh.Approvals) != 0 {
		t.Fatalf("the session after expiry: version %d (want a new one), approvals %+v", fresh.Version, fresh.Approvals)
	}
}

// title: WithTitle names a session in the write that carries it, and ""
// takes the name back; other writes keep it.
func (h *harness) title(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.NewID()
	noop := func(*orchestration.State) error { return nil }
	if got := must(session.Update(ctx, s, id, noop, session.WithTitle("Offsite plan")))(t); got.Title != "Offsite plan" {
		t.Fatalf("Update WithTitle stored %q", got.Title)
	}
	must(session.Update(ctx, s, id, apply(orchestration.ToolUsed("search"))))(t)
	if got := must(s.Get(ctx, id))(t); got.Title != "Offsite plan" {
		t.Fatalf("a later write changed the title to %q", got.Title)
	}
	must(session.Update(ctx, s, id, noop, session.WithTitle("")))(t)
	if got := must(s.Get(ctx, id))(t); got.Title != "" {
		t.Fatalf("the title was not taken back: %q", got.Title)
	}
}

// list: a Lister lists each owner's sessions and no one else's, the most
// recently written first, page by page, titled by their first user message
// or the title a person gave them; a deleted session leaves the list. A
// store without Lister skips it.
func (h *harness) list(t *testing.T) {
	st, clk := h.store(t, session.Config{})
	s, ok := st.(session.Lister)
	if !ok {
		t.Skip("the store does not list sessions (it does not implement session.Lister)")
	}
	ctx := t.Context()
	create := func(owner, text string) string {
		id := session.NewID()
		key := session.Key(owner, id)
		_, l, err := s.Claim(ctx, key, session.WithOwner(owner), session.WithAgent("planner"))
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		must(0, session.AppendMessages(ctx, s, key, []chat.Message{{Role: chat.RoleUser, Content: text}, {Role: chat.RoleAssistant, Content: "ok"}}, session.WithLease(l)))(t)
		must(0, l.Release(ctx))(t)
		clk.advance(20 * time.Millisecond)
		return id
	}
	var alice []string
	for i := range 5 {
		alice = append(alice, create("alice", fmt.Sprintf("alice's question %d\nwith a second line", i)))
	}
	bob := create("bob", "bob's question")
	keyless := create("", "a keyless question")

	var got []session.Summary
	cursor := ""
	for pages := 0; ; pages++ {
		p := must(s.List(ctx, "alice", cursor, 2))(t)
		if len(p.Sessions) > 2 || pages > 3 {
			t.Fatalf("page %d has %d sessions", pages, len(p.Sessions))
		}
		got = append(got, p.Sessions...)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if len(got) != 5 {
		t.Fatalf("alice's list has %d sessions: %+v", len(got), got)
	}
	for i, sum := range got {
		n := 4 - i // newest first
		if sum.ID != alice[n] || sum.Key != session.Key("alice", alice[n]) || sum.Agent != "planner" ||
			sum.Title != fmt.Sprintf("alice's question %d with a second line", n) || sum.CreatedAt.IsZero() || sum.UpdatedAt.Before(sum.CreatedAt) {
			t.Fatalf("alice's session %d: %+v", i, sum)
		}
	}
	if p := must(s.List(ctx, "bob", "", 10))(t); len(p.Sessions) != 1 || p.Sessions[0].ID != bob || p.Next != "" {
		t.Fatalf("bob's list: %+v", p)
	}
	// The keyless owner's list is shared with the suite's other tests,
	// which run beside this one: it has keyless, and no one else's.
	p := must(s.List(ctx, "", "", session.MaxListed))(t)
	if !slices.ContainsFunc(p.Sessions, func(x session.Summary) bool { return x.ID == keyless }) ||
		slices.ContainsFunc(p.Sessions, func(x session.Summary) bool { return x.ID == bob || slices.Contains(alice, x.ID) }) {
		t.Fatalf("the keyless owner's list: %+v", p)
	}
	if p := must(s.List(ctx, "mallory", "", 10))(t); len(p.Sessions) != 0 {
		t.Fatalf("an owner without sessions lists %+v", p)
	}

	// A renamed session is written last: it comes first, under its name.
	clk.advance(20 * time.Millisecond)
	must(session.Update(ctx, s, session.Key("alice", alice[1]), func(*orchestration.State) error { return nil }, session.WithTitle("Offsite plan")))(t)
	must(0, s.Delete(ctx, session.Key("alice", alice[4])))(t)
	p = must(s.List(ctx, "alice", "", 10))(t)
	if len(p.Sessions) != 4 || p.Sessions[0].ID != alice[1] || p.Sessions[0].Title != "Offsite plan" || slices.ContainsFunc(p.Sessions, func(x session.Summary) bool { return x.ID == alice[4] }) {
		t.Fatalf("after a rename and a delete: %+v", p.Sessions)
	}
	_, err := s.List(ctx, "alice", "not-a-cursor!", 10)
	wantErr(t, "List with a bad cursor", err, session.ErrBadCursor)
}

// requests: WithRequest records an idempotency key with the turn's first
// write, and RequestOf finds it with the turn, its user message count and
// the request's digest.
func (h *harness) requests(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	ctx := t.Context()
	id := session.Key("requests", session.NewID())
	_, lease, err := s.Claim(ctx, id, session.WithOwner("requests"))
	if err != nil {
		t.Fatal(err)
	}
	inc := func(st *orchestration.State) error { st.UserMessages++; return nil }
	stored, _, err := s.UpdateAppend(ctx, id, inc, []chat.Message{{Role: chat.RoleUser, Content: "one"}}, 0,
		session.WithLease(lease), session.WithOwner("requests"), session.WithTurn("turn-1"), session.WithRequest("msg:1", "turn-1", "sha256:d1"))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := stored.RequestOf("msg:1"); !ok || r.Turn != "turn-1" || r.UserMessages != 1 || r.Digest != "sha256:d1" {
		t.Fatalf("the write returned requests %+v", stored.Requests)
	}
	got := must(s.Get(ctx, id))(t)
	if r, ok := got.RequestOf("msg:1"); !ok || r.Turn != "turn-1" || r.UserMessages != 1 || r.Digest != "sha256:d1" {
		t.Fatalf("Get returned requests %+v", got.Requests)
	}
	if _, ok := got.RequestOf("msg:2"); ok {
		t.Fatal("a key never recorded was found")
	}
}

// queue: a Queuer keeps tickets in order, bounded, renewed and dropped
// when not renewed.
func (h *harness) queue(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	q, ok := s.(session.Queuer)
	if !ok {
		t.Skip("the store keeps no queues (not a session.Queuer)")
	}
	ctx := t.Context()
	id := session.NewID()
	const long = time.Minute
	for i, ticket := range []string{"a", "b", "c"} {
		if pos, err := q.Enqueue(ctx, id, ticket, 3, long); err != nil || pos != i {
			t.Fatalf("Enqueue %s: %d, %v; want %d", ticket, pos, err, i)
		}
	}
	_, err := q.Enqueue(ctx, id, "d", 3, long)
	wantErr(t, "Enqueue on a full queue", err, session.ErrQueueFull)
	if pos, err := q.Enqueue(ctx, id, "b", 3, long); err != nil || pos != 1 {
		t.Fatalf("Enqueue of a queued ticket: %d, %v", pos, err)
	}
	if err := q.Leave(ctx, id, "a"); err != nil {
		t.Fatal(err)
	}
	if pos, err := q.Position(ctx, id, "c", long); err != nil || pos != 1 {
		t.Fatalf("Position of c after a left: %d, %v", pos, err)
	}
	if pos, err := q.Position(ctx, id, "a", long); err != nil || pos != -1 {
		t.Fatalf("Position of a ticket that left: %d, %v", pos, err)
	}
	if n, err := q.Queued(ctx, id); err != nil || n != 2 {
		t.Fatalf("Queued: %d, %v", n, err)
	}
	if n, err := q.Queued(ctx, session.NewID()); err != nil || n != 0 {
		t.Fatalf("Queued of another session: %d, %v", n, err)
	}
	// A ticket not renewed within its ttl is dropped (on the wall clock:
	// Redis expires with its own).
	other := session.NewID()
	if _, err := q.Enqueue(ctx, other, "x", 3, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, other, "y", 3, long); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if pos, err := q.Position(ctx, other, "y", long); err != nil || pos != 0 {
		t.Fatalf("Position after the ticket before expired: %d, %v", pos, err)
	}
}

// queueNotices: a Notifier names the first ticket of a session's queue
// when the session's lease is released (Release, or a write WithRelease)
// and when the first ticket leaves, to its watchers only, and not after
// they stopped.
func (h *harness) queueNotices(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	n, ok := s.(session.Notifier)
	if !ok {
		t.Skip("the store tells no queue moves (not a session.Notifier)")
	}
	ctx := t.Context()
	id, other := session.NewID(), session.NewID()
	heard := make(chan string, 16)
	stop := n.Watch(id, func(first string) { heard <- first })
	stopOther := n.Watch(other, func(first string) { heard <- "other:" + first })
	defer stopOther()
	expect := func(what, want string) {
		t.Helper()
		select {
		case got := <-heard:
			if got != want {
				t.Fatalf("%s: heard %q, want %q", what, got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: heard nothing in 5 s, want %q", what, want)
		}
	}
	_, l, err := s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, ticket := range []string{"a", "b", "c"} {
		if _, err := n.Enqueue(ctx, id, ticket, 8, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	must(0, l.Release(ctx))(t)
	expect("a release", "a")
	must(0, n.Leave(ctx, id, "b"))(t) // not the first: no notice
	must(0, n.Leave(ctx, id, "a"))(t)
	expect("the first leaving", "c")
	_, l, err = s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpdateAppend(ctx, id, func(*orchestration.State) error { return nil }, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}, 0, session.WithLease(l), session.WithRelease()); err != nil {
		t.Fatal(err)
	}
	expect("a write that releases", "c")
	stop()
	_, l, err = s.Claim(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	must(0, l.Release(ctx))(t)
	// A release without tickets waiting tells nobody.
	_, l, err = s.Claim(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	must(0, l.Release(ctx))(t)
	select {
	case got := <-heard:
		t.Fatalf("heard %q after the watch stopped, or without a ticket", got)
	case <-time.After(200 * time.Millisecond):
	}
}
