package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// errorBody is an error answer: {"error": {"code", "message"}}, and under
// /v1 OpenAI's shape {"error": {"message", "type", "param", "code"}}, which
// OpenAI clients raise as their own error objects.
type errorBody struct {
	Error  *apiError
	openAI bool
}

func (b errorBody) MarshalJSON() ([]byte, error) {
	if !b.openAI {
		return json.Marshal(map[string]map[string]string{"error": {"code": b.Error.Code, "message": b.Error.Message}})
	}
	var param *string
	if b.Error.Param != "" {
		param = &b.Error.Param
	}
	return json.Marshal(map[string]any{"error": map[string]any{
		"message": b.Error.Message, "type": openAIErrorType(b.Error.Status), "param": param, "code": b.Error.Code}})
}

// openAIErrorType is OpenAI's error type for a status.
func openAIErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// isOpenAIPath reports whether a request is for the OpenAI-compatible API.
func isOpenAIPath(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// abortWith answers e and stops the handler chain.
func abortWith(c *gin.Context, e *apiError) {
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	c.AbortWithStatusJSON(e.Status, errorBody{Error: e, openAI: isOpenAIPath(c.Request.URL.Path)})
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

// bodyError maps an error of a wire parser: a refused parameter names it,
// a body that does not decode says where.
func bodyError(err error) *apiError {
	var pe *wire.ParamError
	if errors.As(err, &pe) {
		return newParamError(http.StatusBadRequest, pe.Code, pe.Param, "%s", pe.Message)
	}
	return newError(http.StatusBadRequest, "invalid_json", "%s", err.Error())
}

// parseBody reads the request's body and parses it with one of the wire
// parsers; false when it failed, which is answered.
func parseBody[T any](c *gin.Context, parse func([]byte) (T, error)) (T, bool) {
	var zero T
	data, e := readBody(c.Request)
	if e != nil {
		abortWith(c, e)
		return zero, false
	}
	body, err := parse(data)
	if err != nil {
		abortWith(c, bodyError(err))
		return zero, false
	}
	return body, true
}

// readBody reads the request body (bounded by the body limit installed by
// the middleware) and checks that it is UTF-8 text. The body read to its
// end is closed: net/http then knows it is consumed, instead of trying to
// drain it when the answer starts (on a stream, deep in the first flush).
func readBody(r *http.Request) ([]byte, *apiError) {
	data, err := io.ReadAll(r.Body)
	if err == nil {
		_ = r.Body.Close()
	}
	if err != nil {
		var (
			mbe *http.MaxBytesError
			ne  net.Error
		)
		switch {
		case errors.As(err, &mbe):
			return nil, newError(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over the limit of %d bytes", mbe.Limit)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, newError(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive within the server's read timeout (READ_TIMEOUT)")
		}
		return nil, newError(http.StatusBadRequest, "unreadable_body", "the request body could not be read")
	}
	if err := wire.CheckUTF8(data); err != nil {
		return nil, newError(http.StatusBadRequest, "invalid_message", "%s", err.Error())
	}
	return data, nil
}

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
