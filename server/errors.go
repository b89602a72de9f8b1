package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/gin-gonic/gin"
)

// apiError is an error answered as JSON {"error":{"code","message"}}: the
// runtime's Problem, which every door answers alike.
type apiError = turns.Problem

// newError formats an error answer (turns.NewProblem).
func newError(status int, code, format string, args ...any) *apiError {
	return turns.NewProblem(status, code, format, args...)
}

// newParamError is newError naming the request field at fault.
func newParamError(status int, code, param, format string, args ...any) *apiError {
	return turns.ParamProblem(status, code, param, format, args...)
}

// abortWith answers e and stops the handler chain.
func abortWith(c *gin.Context, e *apiError) {
	door.WriteProblem(c.Writer, c.Request, e)
	c.Abort()
}

// storeError maps a session store error of a read or delete.
func storeError(err error) *apiError {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return newError(http.StatusNotFound, "session_not_found", "no such session")
	case errors.Is(err, session.ErrUnavailable):
		return turns.ErrStoreDown()
	case errors.Is(err, session.ErrCorrupt):
		return newError(http.StatusInternalServerError, "session_corrupt", "the session's stored data could not be read")
	}
	return newError(http.StatusInternalServerError, "internal_error", "the session could not be read")
}

// decodeJSON reads the request body (bounded by the body limit installed by
// the middleware) into v. Syntax and type errors say where, by line and
// column; unknown fields are allowed because the AI SDK sends fields this
// server does not use (the OpenAI endpoints check theirs: readBody and
// the wire parsers).
func decodeJSON(r *http.Request, vs ...any) *apiError {
	data, e := readBody(r)
	if e != nil {
		return e
	}
	for _, v := range vs {
		if err := wire.Unmarshal(data, v); err != nil {
			return newError(http.StatusBadRequest, "invalid_json", "%s", err.Error())
		}
	}
	return nil
}

// bodyError describes an error of a wire parser (door.BodyProblem).
func bodyError(err error) *apiError { return door.BodyProblem(err) }

// readBody reads the request body (door.ReadBody).
func readBody(r *http.Request) ([]byte, *apiError) { return door.ReadBody(r) }

func errBadSessionID(where string) *apiError { return turns.ErrBadSessionID(where) }

// answerStartError answers an error that kept a turn from starting.
func (s *Server) answerStartError(c *gin.Context, agentID string, err error) {
	e := turns.Describe(err)
	if e.Status >= 500 {
		s.log.Error("starting a turn", "agent", agentID, "err", err)
	}
	abortWith(c, e)
}

// mustJSON marshals values whose types cannot fail to marshal (no channels,
// no funcs; RawMessage inputs are validated before).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("server: marshalling a stream chunk: " + err.Error())
	}
	return b
}
