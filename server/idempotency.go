package server

import (
	"net/http"
	"unicode"

	"github.com/agentdock-go/agentdock/server/internal/wire"
)

// maxIdempotencyKey bounds an idempotency key, which the session keeps.
const maxIdempotencyKey = 256

// idempotencyKey is a request's idempotency key (agent.Input.Key): its
// Idempotency-Key header, else, for a chat request that sends a new
// message, the AI SDK's ID of that message. The two are kept apart
// ("key:", "msg:"), so that one never matches the other. A regenerate or
// an edit resends a message ID that already started a turn, to have it
// answered again: it has no key but its header's.
func idempotencyKey(r *http.Request, body *wire.ChatRequest) (string, *apiError) {
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if len(h) > maxIdempotencyKey || !printable(h) {
			return "", newParamError(http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key", "the Idempotency-Key header must be 1 to %d printable ASCII characters", maxIdempotencyKey)
		}
		return "key:" + h, nil
	}
	if body == nil || body.Trigger == "regenerate-message" || body.Edits() {
		return "", nil
	}
	if id := body.LastUserID(); id != "" && len(id) <= maxIdempotencyKey && printable(id) {
		return "msg:" + id, nil
	}
	return "", nil
}

func printable(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
