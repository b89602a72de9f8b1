package responses_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/session"
)

// A server stores a response under its caller's key; another caller's
// lookup of the same ID finds nothing.
func Example() {
	store, _ := responses.NewMemory(responses.Config{})
	ctx := context.Background()
	body, _ := json.Marshal(map[string]string{"id": "resp_0123456789abcdef", "object": "response", "status": "completed"})
	_ = store.Put(ctx, session.Key("alice", "resp_0123456789abcdef"), responses.Record{SessionID: "conv-42-abcdef", UserMessages: 1, Response: body})

	rec, err := store.Get(ctx, session.Key("alice", "resp_0123456789abcdef"))
	fmt.Println(rec.SessionID, err)
	_, err = store.Get(ctx, session.Key("bob", "resp_0123456789abcdef"))
	fmt.Println(err)
	// Output:
	// conv-42-abcdef <nil>
	// response not found
}
