package agent_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestRequestRetriedAfterDeath: a replica stores a turn's user message
// with its idempotency key (the turn's first write) and dies. The
// client's retry of the request, while the dead turn's lease holds (the
// session is busy) or once it expired, is told which turn the request
// started (agent.DuplicateError), stores nothing and leaves the dead
// turn's marker for a replica to take the turn over (its answer is not
// recovered as empty); the same key with another message is refused
// (agent.KeyReusedError). The session keeps the message once. On the
// memory store and on Redis.
func TestRequestRetriedAfterDeath(t *testing.T) {
	stores := map[string]func(t *testing.T, cfg session.Config) session.Store{
		"memory": func(t *testing.T, cfg session.Config) session.Store { return session.NewMemory(cfg) },
		"redis": func(t *testing.T, cfg session.Config) session.Store {
			srv := redistest.Start(t)
			s, err := redisstore.New(redisstore.Config{URL: srv.URL(), Config: cfg})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	leases := map[string]session.Config{
		// The retry waits for the dead turn's lease, which expires.
		"after the lease expired": {LockTTL: 300 * time.Millisecond, LockWait: 5 * time.Second},
		// The retry finds the session busy.
		"while the lease holds": {LockTTL: time.Minute, LockWait: 50 * time.Millisecond},
	}
	for name, open := range stores {
		for when, cfg := range leases {
			t.Run(name+"/"+when, func(t *testing.T) {
				store := open(t, cfg)
				defer store.Close()
				model := newGatedModel()
				n := gatedNode(t, store, agent.Options{}, model)
				ctx := t.Context()

				// What the agent records of the request, from a turn of
				// another session.
				model.proceed <- struct{}{}
				probe := session.NewID()
				for _, err := range n.Run(ctx, probe, agent.Input{Text: "book the flight", Key: "msg:m0"}) {
					if err != nil {
						t.Fatal(err)
					}
				}
				<-model.started
				ps, _ := store.Get(ctx, probe)
				r0, _ := ps.RequestOf("msg:m0")
				if r0.Digest == "" {
					t.Fatalf("the request was recorded without a digest: %+v", r0)
				}

				// The dead replica's turn: claimed, its first write made,
				// never released.
				id := session.NewID()
				_, lease, err := store.Claim(ctx, id, session.WithAgent("plain"))
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := store.UpdateAppend(ctx, id, func(s *orchestration.State) error { s.UserMessages++; return nil },
					[]chat.Message{{Role: chat.RoleUser, Content: "book the flight"}}, 0,
					session.WithLease(lease), session.WithTurn("deadturn1"), session.WithRequest("msg:m1", "deadturn1", r0.Digest),
					session.WithJournal(func(j *session.Journal) error { j.Writes = 1; return nil })); err != nil {
					t.Fatal(err)
				}

				first := func(message string) error {
					for _, err := range n.Run(ctx, id, agent.Input{Text: message, Key: "msg:m1"}) {
						return err
					}
					return nil
				}
				got := first("book the flight")
				dup, ok := errors.AsType[*agent.DuplicateError](got)
				if !ok || dup.Request.Turn != "deadturn1" || !errors.Is(got, agent.ErrDuplicate) {
					t.Fatalf("the retry: %v, want the dead turn's DuplicateError", got)
				}
				got = first("book the train")
				reused, ok := errors.AsType[*agent.KeyReusedError](got)
				if !ok || reused.Request.Turn != "deadturn1" || !errors.Is(got, agent.ErrKeyReused) {
					t.Fatalf("the key with another message: %v, want KeyReusedError", got)
				}
				msgs, err := store.Messages(ctx, id, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) != 1 {
					t.Fatalf("after the retries the history is %d messages, want the one user message", len(msgs))
				}
				if sess, _ := store.Get(ctx, id); sess.Turn != "deadturn1" || sess.Journal == nil {
					t.Fatalf("after the retries the session's turn is %q (journal %+v): the dead turn must be left to be taken over", sess.Turn, sess.Journal)
				}
				select {
				case <-model.started:
					t.Fatal("a retry called the model")
				default:
				}
				if cfg.LockTTL > time.Second {
					return // the session stays busy
				}
				// The session is free again for a new request, which
				// recovers the dead turn first.
				model.proceed <- struct{}{}
				var last chat.Event
				for ev, err := range n.Run(ctx, id, agent.Input{Text: "and a hotel", Key: "msg:m2"}) {
					if err != nil {
						t.Fatal(err)
					}
					last = ev
				}
				if last.Kind != chat.KindDone || last.FinishReason != chat.FinishStop {
					t.Fatalf("the next request ended %v %q", last.Kind, last.FinishReason)
				}
				sess, _ := store.Get(ctx, id)
				if r, ok := sess.RequestOf("msg:m2"); !ok || r.UserMessages != 2 {
					t.Fatalf("the next request's key: %+v %v", r, ok)
				}
				hist, _ := store.Messages(ctx, id, 0)
				if _, err := agent.AnswerTo(sess, hist, dup.Request); !errors.Is(err, agent.ErrTurnInterrupted) {
					t.Fatalf("the dead turn's answer: %v, want ErrTurnInterrupted", err)
				}
			})
		}
	}
}

// TestAnswerTo: the stored answer of a request's turn is what follows its
// user message up to the next one; a turn that saved no answer, or has not
// ended, is interrupted; a message the history dropped is gone.
func TestAnswerTo(t *testing.T) {
	user := func(s string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: s} }
	said := func(s string) chat.Message { return chat.Message{Role: chat.RoleAssistant, Content: s} }
	call := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search"}}}
	result := chat.Message{Role: chat.RoleTool, ToolCallID: "c1", Content: "found"}
	req := session.Request{Key: "key:1", Turn: "t1", UserMessages: 1}
	for _, tc := range []struct {
		name    string
		hist    []chat.Message
		users   int
		running string
		want    int
		err     error
	}{
		{name: "answered", hist: []chat.Message{user("a"), call, result, said("done")}, users: 1, want: 3},
		{name: "answered, then another turn", hist: []chat.Message{user("a"), said("one"), user("b"), said("two")}, users: 2, want: 1},
		{name: "no answer", hist: []chat.Message{user("a")}, users: 1, err: agent.ErrTurnInterrupted},
		{name: "no answer, then another turn", hist: []chat.Message{user("a"), user("b"), said("two")}, users: 2, err: agent.ErrTurnInterrupted},
		{name: "still marked running", hist: []chat.Message{user("a"), said("so far")}, users: 1, running: "t1", want: 1, err: agent.ErrTurnInterrupted},
		{name: "dropped from the history", hist: []chat.Message{user("b"), said("two")}, users: 2, err: agent.ErrAnswerGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := session.Session{Turn: tc.running, State: orchestration.State{UserMessages: tc.users}}
			got, err := agent.AnswerTo(sess, tc.hist, req)
			if !errors.Is(err, tc.err) || err == nil && tc.err != nil || len(got) != tc.want {
				t.Fatalf("AnswerTo: %d messages, %v; want %d, %v", len(got), err, tc.want, tc.err)
			}
		})
	}
}
