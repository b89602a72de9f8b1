package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/gin-gonic/gin"
)

// apiError is an error answered as JSON {"error":{"code","message"}}. The
// message is always safe to show: it never carries a raw provider or store
// error.
type apiError struct {
	Status  int
	Code    string
	Message string
	// Param names the request field at fault, for the OpenAI shape.
	Param string
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// newError formats an error answer. String arguments (often what the
// client sent: a path, an ID, a header) are clipped to maxEcho bytes, so
// that an answer never carries a large input back.
func newError(status int, code, format string, args ...any) *apiError {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = clip(s)
		}
	}
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// maxEcho bounds the part of a client's input an error message repeats.
const maxEcho = 200

// clip shortens s to at most maxEcho bytes (at a character boundary),
// marking the cut with "...".
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	n := maxEcho - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// newParamError is newError naming the request field at fault.
func newParamError(status int, code, param, format string, args ...any) *apiError {
	e := newError(status, code, format, args...)
	e.Param = param
	return e
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

// turnStartError maps the errors an agent returns before a turn starts to
// their HTTP answer. Anything unknown is a 500 whose message does not leak
// the cause (the cause is logged by the caller).
func turnStartError(err error) *apiError {
	var qe *session.QuotaError
	if errors.As(err, &qe) {
		return quotaError(qe)
	}
	var (
		ae     *apiError
		apErr  *agent.ApprovalError
		ctErr  *agent.ClientToolError
		chErr  *agent.ChoiceError
		resErr *agent.ResultError
		atErr  *agent.AttachmentError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, agent.ErrInvalidSessionID):
		return errBadSessionID("the session ID")
	case errors.Is(err, agent.ErrInvalidMessage):
		// The agent's message says what was wrong and carries no content.
		return newError(http.StatusBadRequest, "invalid_message", "%s", err.Error())
	case errors.Is(err, agent.ErrNotLastMessage):
		return newError(http.StatusConflict, "regenerate_conflict", "only the answer to the session's last user message can be regenerated, and the request's last user message is not that one")
	case errors.As(err, &apErr):
		return approvalError(apErr)
	case errors.As(err, &ctErr):
		return newParamError(http.StatusBadRequest, "invalid_request", fmt.Sprintf("tools[%d]", ctErr.Index), "%s", ctErr.Msg)
	case errors.As(err, &chErr):
		return newParamError(http.StatusBadRequest, "invalid_request", "tool_choice", "%s", chErr.Msg)
	case errors.As(err, &resErr):
		return newError(http.StatusBadRequest, "invalid_tool_results", "%s", resErr.Msg)
	case errors.As(err, &atErr):
		return newError(http.StatusBadRequest, "unsupported_attachment", "%s", atErr.Msg)
	case errors.Is(err, agent.ErrInstructions):
		return newError(http.StatusBadRequest, "instructions_refused", "%s", err.Error())
	case errors.Is(err, agent.ErrDuplicate):
		var dup *agent.DuplicateError
		errors.As(err, &dup)
		return newError(http.StatusConflict, "duplicate_request", "this request's Idempotency-Key already started turn %s on the session; its answer is in the session's history", dup.Request.Turn)
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

// quotaError answers a session its owner may not create: 429
// quota_exceeded naming the quota, without Retry-After, since only the
// owner's deletions or the sessions' expiry free a place.
func quotaError(qe *session.QuotaError) *apiError {
	if qe.Limit == session.QuotaBytes && qe.Adding > 0 && qe.Used < qe.Max {
		return newError(http.StatusTooManyRequests, "quota_exceeded", "the sessions of this API key hold %d bytes and this message %d more, past its quota (BYTES_PER_OWNER) of %d: send less, or delete sessions (DELETE /api/sessions/{id})", qe.Used, qe.Adding, qe.Max)
	}
	if qe.Limit == session.QuotaBytes {
		return newError(http.StatusTooManyRequests, "quota_exceeded", "the sessions of this API key hold %d bytes, its quota (BYTES_PER_OWNER) is %d: no turn or session starts until sessions are deleted (DELETE /api/sessions/{id}) or expire", qe.Used, qe.Max)
	}
	return newError(http.StatusTooManyRequests, "quota_exceeded", "this API key holds %d sessions, its quota (SESSIONS_PER_OWNER): delete sessions (DELETE /api/sessions/{id}) or wait for them to expire before starting a new one", qe.Used)
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

func errBadSessionID(where string) *apiError {
	return newError(http.StatusBadRequest, "invalid_session_id", "%s is not a valid session ID: want 8 to 128 letters, digits, '-' or '_'", where)
}

// errShuttingDown answers a turn that arrives as the server shuts down.
func errShuttingDown() *apiError {
	return newError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry on another instance")
}

// answerStartError answers an error that kept a turn from starting.
func (s *Server) answerStartError(c *gin.Context, agentID string, err error) {
	e := turnStartError(err)
	if e.Status >= 500 {
		s.log.Error("starting a turn", "agent", agentID, "err", err)
	}
	abortWith(c, e)
}

// approvalError maps an answer that does not fit the session's waiting
// calls.
func approvalError(e *agent.ApprovalError) *apiError {
	param := "approvals"
	if e.Index >= 0 {
		param = "approvals[" + strconv.Itoa(e.Index) + "].id"
	}
	switch {
	case errors.Is(e, agent.ErrUnknownApproval):
		return newParamError(http.StatusBadRequest, "unknown_approval", param, "%s", e.Msg)
	case errors.Is(e, agent.ErrApprovalAnswered):
		return newParamError(http.StatusConflict, "approval_answered", param, "%s", e.Msg)
	case errors.Is(e, agent.ErrApprovalsIncomplete):
		return newParamError(http.StatusBadRequest, "approvals_incomplete", param, "%s", e.Msg)
	}
	return newParamError(http.StatusBadRequest, "invalid_approval", param, "%s", e.Msg)
}

// turnErrorStatus gives the HTTP status of an error that ended a turn.
func turnErrorStatus(e *chat.Error) *apiError {
	status := http.StatusBadGateway
	switch e.Code {
	case llmorch.CodeStoreUnavailable, "server_shutdown":
		status = http.StatusServiceUnavailable
	case "turn_timeout", "timeout":
		status = http.StatusGatewayTimeout
	case "rate_limited":
		status = http.StatusTooManyRequests
	case "internal_error", "stream_gap", llmorch.CodeLeaseLost:
		status = http.StatusInternalServerError
	}
	return &apiError{Status: status, Code: e.Code, Message: e.Message}
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
