package door

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/turns"
)

// What the HTTP doors share of reading a request and answering an error.

// WriteProblem answers p as JSON: {"error": {"code", "message"}}, and under
// /v1 OpenAI's shape {"error": {"message", "type", "param", "code"}}, which
// OpenAI clients raise as their own error objects. Retry-After goes with a
// problem that says when to try again, and x-should-retry: false with one
// a retry cannot cure (Retryable).
func WriteProblem(w http.ResponseWriter, r *http.Request, p *turns.Problem) {
	if !Retryable(p.Code) {
		w.Header().Set("X-Should-Retry", "false")
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((p.RetryAfter+time.Second-1)/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(ProblemBody(p, IsOpenAIPath(r.URL.Path)))
}

// ProblemBody is p's JSON answer, in OpenAI's shape when openAI is set.
func ProblemBody(p *turns.Problem, openAI bool) any {
	if !openAI {
		return map[string]map[string]string{"error": {"code": p.Code, "message": p.Message}}
	}
	var param *string
	if p.Param != "" {
		param = &p.Param
	}
	return map[string]any{"error": map[string]any{"message": p.Message, "type": OpenAIErrorType(p.Status), "param": param, "code": p.Code}}
}

// OpenAIErrorType is OpenAI's error type for a status.
func OpenAIErrorType(status int) string {
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

// IsOpenAIPath reports whether a request is for the OpenAI-compatible API.
func IsOpenAIPath(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// ReadBody reads the request body (bounded by the server's body limit) and
// checks that it is UTF-8 text. The body read to its end is closed:
// net/http then knows it is consumed, instead of trying to drain it when
// the answer starts (on a stream, deep in the first flush).
func ReadBody(r *http.Request) ([]byte, *turns.Problem) {
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
			return nil, turns.NewProblem(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over the limit of %d bytes", mbe.Limit)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, turns.NewProblem(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive within the server's read timeout (READ_TIMEOUT)")
		}
		return nil, turns.NewProblem(http.StatusBadRequest, "unreadable_body", "the request body could not be read")
	}
	if err := wire.CheckUTF8(data); err != nil {
		return nil, turns.NewProblem(http.StatusBadRequest, "invalid_message", "%s", err.Error())
	}
	return data, nil
}

// BodyProblem describes an error of a wire parser: a refused parameter
// names it, a body that does not decode says where.
func BodyProblem(err error) *turns.Problem {
	var pe *wire.ParamError
	if errors.As(err, &pe) {
		return turns.ParamProblem(http.StatusBadRequest, pe.Code, pe.Param, "%s", pe.Message)
	}
	return turns.NewProblem(http.StatusBadRequest, "invalid_json", "%s", err.Error())
}

// ParseBody reads the request's body and parses it with one of the wire
// parsers; false when it failed, which is answered.
func ParseBody[T any](w http.ResponseWriter, r *http.Request, parse func([]byte) (T, error)) (T, bool) {
	var zero T
	data, p := ReadBody(r)
	if p != nil {
		WriteProblem(w, r, p)
		return zero, false
	}
	body, err := parse(data)
	if err != nil {
		WriteProblem(w, r, BodyProblem(err))
		return zero, false
	}
	return body, true
}

// MaxIdempotencyKey bounds an idempotency key, which the session keeps.
const MaxIdempotencyKey = 256

// IdempotencyKey is a request's Idempotency-Key header as the turn's key
// (agent.Input.Key, "key:" and the header), "" without one.
func IdempotencyKey(r *http.Request) (string, *turns.Problem) {
	h := r.Header.Get("Idempotency-Key")
	if h == "" {
		return "", nil
	}
	if len(h) > MaxIdempotencyKey || !Printable(h) {
		return "", turns.ParamProblem(http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key", "the Idempotency-Key header must be 1 to %d printable ASCII characters", MaxIdempotencyKey)
	}
	return "key:" + h, nil
}

// Printable reports whether s is printable ASCII.
func Printable(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// StartError answers an error that kept a turn from starting, logging one
// that is the server's fault.
func StartError(w http.ResponseWriter, r *http.Request, log *slog.Logger, agentID string, err error) {
	p := turns.Describe(err)
	if p.Status >= 500 {
		log.Error("starting a turn", "agent", agentID, "err", err)
	}
	WriteProblem(w, r, p)
}
