package session_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// Update and AppendMessages write through any Store's UpdateAppend: the
// state alone, or the history alone.
func ExampleUpdate() {
	ctx := context.Background()
	store := session.NewMemory(session.Config{})
	defer store.Close()
	id := session.NewID()
	s, err := session.Update(ctx, store, id, func(st *orchestration.State) error {
		st.ActiveStep = "research"
		return nil
	}, session.WithOwner("alice"))
	if err != nil {
		panic(err)
	}
	if err := session.AppendMessages(ctx, store, id, []chat.Message{{Role: chat.RoleUser, Content: "hi"}}); err != nil {
		panic(err)
	}
	msgs, _ := store.Messages(ctx, id, 0)
	fmt.Println(s.Owner, s.State.ActiveStep, len(msgs))
	// Output: alice research 1
}

// Lock takes the lease of a session whoever owns it, as a recovery does
// for the session's owner; a missing session is ErrNotFound, not created.
func ExampleLock() {
	ctx := context.Background()
	store := session.NewMemory(session.Config{})
	defer store.Close()
	id := session.NewID()
	_, _, err := session.Lock(ctx, store, id)
	fmt.Println(errors.Is(err, session.ErrNotFound))

	if _, err := session.Update(ctx, store, id, func(*orchestration.State) error { return nil }, session.WithOwner("alice")); err != nil {
		panic(err)
	}
	s, lease, err := session.Lock(ctx, store, id)
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	_, _, err = store.Claim(ctx, id, session.WithOwner("alice"))
	fmt.Println(s.Owner, errors.Is(err, session.ErrBusy))
	// Output:
	// true
	// alice true
}
