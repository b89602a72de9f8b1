// Package door is what the doors of the server share: the protocols
// (A2A, AG-UI, MCP and the others) that run an agent's turns through the
// turn runtime (package turns), each a translator from its requests to
// turns.Input and from chat.Event to its bytes. A door gives its routes
// (Routes), which package server serves behind the API's own checks (the
// API keys, the rate limit, same-origin POSTs, the body limit), and reads
// the caller from the request (Owner).
//
// It imports neither gin nor the server, so that a door runs on the
// runtime alone (the MCP server over stdio, say) and an embedder links
// only the doors it serves.
package door

import (
	"context"
	"net/http"

	"github.com/agentdock-go/agentdock/turns"
)

// A Door is a protocol served beside the API over the same turns.
type Door interface {
	// Routes returns the door's routes; the server calls it once, with
	// the runtime the door runs its turns on.
	Routes(rt *turns.Runtime) []Route
}

// A Closer is a Door with work of its own that outlives a turn (the A2A
// door records a task's end): the server's Shutdown calls Close once the
// turns have ended.
type Closer interface {
	Close(ctx context.Context) error
}

// Route is one route of a door: a method (or "*" for every method) and a
// path in gin's syntax ("/a2a/*rest"; the parameters reach the handler as
// the request's PathValue).
type Route struct {
	Method  string
	Path    string
	Handler http.Handler
}

type ownerKey struct{}

// WithOwner is ctx carrying the caller's owner (the fingerprint of its API
// key), as the server sets it for a door's handler.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner returns the owner of a request a door serves (WithOwner): ""
// without API keys, the anonymous owner.
func Owner(r *http.Request) string {
	o, _ := r.Context().Value(ownerKey{}).(string)
	return o
}
