package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/gin-gonic/gin"
)

// apiError is an error answered as JSON {"error":{"code","message"}}. The
// message is always safe to show: it never carries a raw provider or store
// error.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error *apiError `json:"error"`
}

// abortWith answers e and stops the handler chain.
func abortWith(c *gin.Context, e *apiError) {
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	c.AbortWithStatusJSON(e.Status, errorBody{Error: e})
}

// turnStartError maps the errors an agent returns before a turn starts to
// their HTTP answer. Anything unknown is a 500 whose message does not leak
// the cause (the cause is logged by the caller).
func turnStartError(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, agent.ErrInvalidMessage):
		// The agent's message says what was wrong and carries no content.
		return newError(http.StatusBadRequest, "invalid_message", "%s", err.Error())
	case errors.Is(err, agent.ErrWrongAgent):
		return newError(http.StatusConflict, "session_agent_mismatch", "the session belongs to another agent; start a new session for this one")
	case errors.Is(err, session.ErrBusy):
		return newError(http.StatusConflict, "session_busy", "a turn is already running on this session; wait for it to finish or resume its stream")
	case errors.Is(err, session.ErrNotFound):
		return newError(http.StatusNotFound, "session_not_found", "no such session")
	case errors.Is(err, session.ErrUnavailable):
		return errStoreDown()
	}
	return newError(http.StatusInternalServerError, "internal_error", "the turn could not be started")
}

func errStoreDown() *apiError {
	return newError(http.StatusServiceUnavailable, llmorch.CodeStoreUnavailable, "the session store is unavailable; try again shortly")
}

// storeError maps a session store error of a read or delete.
func storeError(err error) *apiError {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return newError(http.StatusNotFound, "session_not_found", "no such session")
	case errors.Is(err, session.ErrUnavailable):
		return errStoreDown()
	case errors.Is(err, session.ErrCorrupt):
		return newError(http.StatusInternalServerError, "session_corrupt", "the session's stored data could not be read")
	}
	return newError(http.StatusInternalServerError, "internal_error", "the session could not be read")
}

// decodeJSON reads the request body (bounded by the body limit installed by
// the middleware) into v. Syntax and type errors say where, by line and
// column; unknown fields are allowed because the AI SDK and OpenAI clients
// send fields this server does not use.
func decodeJSON(r *http.Request, v any) *apiError {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return newError(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over the limit of %d bytes", mbe.Limit)
		}
		return newError(http.StatusBadRequest, "unreadable_body", "the request body could not be read")
	}
	if err := wire.Unmarshal(data, v); err != nil {
		return newError(http.StatusBadRequest, "invalid_json", "%s", err.Error())
	}
	return nil
}
