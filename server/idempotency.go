package server

import (
	"net/http"

	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
)

// idempotencyKey is a request's idempotency key (agent.Input.Key): its
// Idempotency-Key header, else, for a chat request that sends a new
// message, the AI SDK's ID of that message. The two are kept apart
// ("key:", "msg:"), so that one never matches the other. A regenerate or
// an edit resends a message ID that already started a turn, to have it
// answered again: it has no key but its header's.
func idempotencyKey(r *http.Request, body *wire.ChatRequest) (string, *apiError) {
	if key, p := door.IdempotencyKey(r); key != "" || p != nil {
		return key, p
	}
	if body == nil || body.Trigger == "regenerate-message" || body.Edits() {
		return "", nil
	}
	if id := body.LastUserID(); id != "" && len(id) <= door.MaxIdempotencyKey && door.Printable(id) {
		return "msg:" + id, nil
	}
	return "", nil
}
