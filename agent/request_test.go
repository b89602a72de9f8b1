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
// with its idempotency key (the turn's first write) and dies, its lease
// left to expire. The client's retry of the request, once the lease
// expired, is told which turn the request started (agent.DuplicateError)
// and stores nothing: the session keeps the message once. On the memory
// store and on Redis.
func TestRequestRetriedAfterDeath(t *testing.T) {
	stores := map[string]func(t *testing.T) session.Store{
		"memory": func(t *testing.T) session.Store {
			return session.NewMemory(session.Config{LockTTL: 300 * time.Millisecond, LockWait: 5 * time.Second})
		},
		"redis": func(t *testing.T) session.Store {
			srv := redistest.Start(t)
			s, err := redisstore.New(redisstore.Config{URL: srv.URL(), Config: session.Config{LockTTL: 300 * time.Millisecond, LockWait: 5 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			defer store.Close()
			model := newGatedModel()
			n := gatedNode(t, store, agent.Config{}, model)
			id := session.NewID()
			ctx := t.Context()

			// The dead replica's turn: claimed, its first write made, never
			// released.
			_, lease, err := store.Claim(ctx, id, session.WithAgent("plain"))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := store.UpdateAppend(ctx, id, func(s *orchestration.State) error { s.UserMessages++; return nil },
				[]chat.Message{{Role: chat.RoleUser, Content: "book the flight"}}, 0,
				session.WithLease(lease), session.WithTurn("deadturn1"), session.WithRequest("msg:m1", "deadturn1")); err != nil {
				t.Fatal(err)
			}

			var got error
			for _, err := range n.Run(ctx, id, agent.Input{Text: "book the flight", Key: "msg:m1"}) {
				got = err
				break
			}
			dup, ok := errors.AsType[*agent.DuplicateError](got)
			if !ok || dup.Request.Turn != "deadturn1" || !errors.Is(got, agent.ErrDuplicate) {
				t.Fatalf("the retry: %v, want the dead turn's DuplicateError", got)
			}
			msgs, err := store.Messages(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 {
				t.Fatalf("after the retry the history is %d messages, want the one user message", len(msgs))
			}
			select {
			case <-model.started:
				t.Fatal("the retry called the model")
			default:
			}
			// The session is free again for a new request.
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
		})
	}
}
