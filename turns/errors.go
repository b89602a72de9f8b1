package turns

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/spend"
)

// Problem is an error as every door answers it: an HTTP status, a stable
// code, a message that is always safe to show (it never carries a raw
// provider or store error, nor chat content) and, when one field of the
// request is at fault, its name. A door that does not speak HTTP maps the
// status to its own protocol's errors.
type Problem struct {
	Status  int
	Code    string
	Message string
	// Param names the request field at fault (OpenAI's param).
	Param string
	// RetryAfter, when positive, says when to try again.
	RetryAfter time.Duration
}

func (p *Problem) Error() string { return p.Code + ": " + p.Message }

// NewProblem formats a Problem. String arguments (often what the client
// sent: a path, an ID, a header) are clipped to maxEcho bytes, so that an
// answer never carries a large input back.
func NewProblem(status int, code, format string, args ...any) *Problem {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = clip(s)
		}
	}
	return &Problem{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ParamProblem is NewProblem naming the request field at fault.
func ParamProblem(status int, code, param, format string, args ...any) *Problem {
	p := NewProblem(status, code, format, args...)
	p.Param = param
	return p
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

// Errors of Start before a turn starts, besides the agent's and the
// store's (see Describe).
var (
	// ErrShuttingDown: the runtime refuses new turns (Shutdown began).
	ErrShuttingDown = NewProblem(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry on another instance")
	// ErrStartFailed: the turn failed as it started (a panic, logged).
	ErrStartFailed = NewProblem(http.StatusInternalServerError, "internal_error", "the turn could not be started")
	// ErrTurnNotFound: no such turn of the session is kept (never
	// started, another owner's, or no longer kept).
	ErrTurnNotFound = NewProblem(http.StatusNotFound, "turn_not_found", "no such turn of this session is kept")
)

// errQueueFull and errQueueWait refuse a message for a busy session.
func errQueueFull(max int) *Problem {
	return NewProblem(http.StatusConflict, "session_queue_full", "a turn is running on this session and %d messages wait for it already (MAX_QUEUE); wait for them, or send with busy: interrupt", max)
}

var errQueueWait = NewProblem(http.StatusConflict, "session_busy", "a turn is running on this session and the message waited for it longer than QUEUE_WAIT; send it again, or with busy: interrupt")

// ErrBadSessionID describes a session ID that is not one, where names
// where it came from ("the session ID in the path").
func ErrBadSessionID(where string) *Problem {
	return NewProblem(http.StatusBadRequest, "invalid_session_id", "%s is not a valid session ID: want 8 to 128 letters, digits, '-' or '_'", where)
}

// ErrStoreDown describes a session store that does not answer.
func ErrStoreDown() *Problem {
	return NewProblem(http.StatusServiceUnavailable, llmorch.CodeStoreUnavailable, "the session store is unavailable; try again shortly")
}

// Describe maps an error of the runtime (Start, Turn, Stop and the others)
// to the Problem every door answers: the agent's errors before a turn
// starts, the store's, a *chat.Error that ended a turn, or a *Problem as
// it is. Anything unknown is a 500 whose message does not leak the cause
// (the caller logs it).
func Describe(err error) *Problem {
	var (
		p      *Problem
		ce     *chat.Error
		ex     *spend.ExceededError
		qe     *session.QuotaError
		apErr  *agent.ApprovalError
		ctErr  *agent.ClientToolError
		chErr  *agent.ChoiceError
		resErr *agent.ResultError
		atErr  *agent.AttachmentError
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &ce):
		return chatProblem(ce)
	case errors.As(err, &qe):
		return quotaProblem(qe)
	case errors.As(err, &ex):
		// Retry-After says when the budget resets, as the message does.
		p := NewProblem(http.StatusTooManyRequests, "budget_exceeded", "%s", ex.Error())
		p.RetryAfter = max(time.Until(ex.Resets), time.Second)
		return p
	case errors.Is(err, agent.ErrInvalidSessionID):
		return ErrBadSessionID("the session ID")
	case errors.Is(err, agent.ErrInvalidMessage):
		// The agent's message says what was wrong and carries no content.
		return NewProblem(http.StatusBadRequest, "invalid_message", "%s", err.Error())
	case errors.Is(err, agent.ErrNotLastMessage):
		return NewProblem(http.StatusConflict, "regenerate_conflict", "only the answer to the session's last user message can be regenerated, and the request's last user message is not that one")
	case errors.As(err, &apErr):
		return approvalProblem(apErr)
	case errors.As(err, &ctErr):
		return ParamProblem(http.StatusBadRequest, "invalid_request", fmt.Sprintf("tools[%d]", ctErr.Index), "%s", ctErr.Msg)
	case errors.As(err, &chErr):
		return ParamProblem(http.StatusBadRequest, "invalid_request", "tool_choice", "%s", chErr.Msg)
	case errors.As(err, &resErr):
		return NewProblem(http.StatusBadRequest, "invalid_tool_results", "%s", resErr.Msg)
	case errors.As(err, &atErr):
		return NewProblem(http.StatusBadRequest, "unsupported_attachment", "%s", atErr.Msg)
	case errors.Is(err, agent.ErrInstructions):
		return NewProblem(http.StatusBadRequest, "instructions_refused", "%s", err.Error())
	case errors.Is(err, agent.ErrKeyReused):
		var reused *agent.KeyReusedError
		errors.As(err, &reused)
		return NewProblem(http.StatusConflict, "idempotency_key_reused", "this request's idempotency key (its Idempotency-Key, or its message ID) already started turn %s on the session with another request; send a new request with a new key", reused.Request.Turn)
	case errors.Is(err, agent.ErrDuplicate):
		var dup *agent.DuplicateError
		errors.As(err, &dup)
		return NewProblem(http.StatusConflict, "duplicate_request", "this request's idempotency key already started turn %s on the session; its answer is in the session's history", dup.Request.Turn)
	case errors.Is(err, agent.ErrWrongAgent):
		return NewProblem(http.StatusConflict, "session_agent_mismatch", "the session belongs to another agent; start a new session for this one")
	case errors.Is(err, session.ErrBusy):
		return NewProblem(http.StatusConflict, "session_busy", "a turn is already running on this session; wait for it to finish or resume its stream")
	case errors.Is(err, session.ErrNotFound):
		return NewProblem(http.StatusNotFound, "session_not_found", "no such session")
	case errors.Is(err, session.ErrUnavailable):
		return ErrStoreDown()
	case errors.Is(err, session.ErrCorrupt):
		return NewProblem(http.StatusInternalServerError, "session_corrupt", "the session's stored data could not be read")
	}
	return NewProblem(http.StatusInternalServerError, "internal_error", "the turn could not be started")
}

// quotaProblem describes a session its owner may not create: 429
// quota_exceeded naming the quota, without Retry-After, since only the
// owner's deletions or the sessions' expiry free a place.
func quotaProblem(qe *session.QuotaError) *Problem {
	if qe.Limit == session.QuotaBytes && qe.Adding > 0 && qe.Used < qe.Max {
		return NewProblem(http.StatusTooManyRequests, "quota_exceeded", "the sessions of this API key hold %d bytes and this message %d more, past its quota (BYTES_PER_OWNER) of %d: send less, or delete sessions (DELETE /api/sessions/{id})", qe.Used, qe.Adding, qe.Max)
	}
	if qe.Limit == session.QuotaBytes {
		return NewProblem(http.StatusTooManyRequests, "quota_exceeded", "the sessions of this API key hold %d bytes, its quota (BYTES_PER_OWNER) is %d: no turn or session starts until sessions are deleted (DELETE /api/sessions/{id}) or expire", qe.Used, qe.Max)
	}
	return NewProblem(http.StatusTooManyRequests, "quota_exceeded", "this API key holds %d sessions, its quota (SESSIONS_PER_OWNER): delete sessions (DELETE /api/sessions/{id}) or wait for them to expire before starting a new one", qe.Used)
}

// approvalProblem describes an answer that does not fit the session's
// waiting calls.
func approvalProblem(e *agent.ApprovalError) *Problem {
	param := "approvals"
	if e.Index >= 0 {
		param = "approvals[" + strconv.Itoa(e.Index) + "].id"
	}
	switch {
	case errors.Is(e, agent.ErrUnknownApproval):
		return ParamProblem(http.StatusBadRequest, "unknown_approval", param, "%s", e.Msg)
	case errors.Is(e, agent.ErrApprovalAnswered):
		return ParamProblem(http.StatusConflict, "approval_answered", param, "%s", e.Msg)
	case errors.Is(e, agent.ErrApprovalsIncomplete):
		return ParamProblem(http.StatusBadRequest, "approvals_incomplete", param, "%s", e.Msg)
	}
	return ParamProblem(http.StatusBadRequest, "invalid_approval", param, "%s", e.Msg)
}

// chatProblem gives the HTTP status of an error that ended a turn or a
// stream.
func chatProblem(e *chat.Error) *Problem {
	status := http.StatusBadGateway
	switch e.Code {
	case llmorch.CodeStoreUnavailable, ErrShutdown.Code, ErrHandedOver.Code:
		status = http.StatusServiceUnavailable
	case "turn_timeout", "timeout":
		status = http.StatusGatewayTimeout
	case "rate_limited":
		status = http.StatusTooManyRequests
	case "internal_error", ErrGap.Code, llmorch.CodeLeaseLost:
		status = http.StatusInternalServerError
	case ErrTurnGone.Code:
		status = http.StatusGone
	case llmorch.CodeInvalidOutput:
		// The request's response format was not met, also after a repair:
		// a 4xx that no client retries (a retry would bill the turn again).
		status = http.StatusUnprocessableEntity
	}
	return &Problem{Status: status, Code: e.Code, Message: e.Message}
}

// Over reports whether e, an error that ended the reading of a turn's
// events (Turn.Next), means that the turn is surely over and its session
// free: its events are no longer kept (its session was deleted, say), or
// it was abandoned and what it streamed saved under its lease. Otherwise
// (the shared log unreadable, the shutdown of this replica, events
// dropped) the turn may still hold its session: a client told it
// finished would be refused its next message, and may resume instead.
func Over(e *chat.Error) bool { return e == ErrTurnGone || e.Code == errAbandoned.Code }
