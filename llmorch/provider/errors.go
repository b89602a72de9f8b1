package provider

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// callError is a failed call: a safe *chat.Error plus, for cancellation,
// the context error (or llmorch.ErrOutputLimit), so that errors.As and
// errors.Is both work. It never
// holds a transport or langchaingo error: those can carry URLs, keys or
// response bodies.
type callError struct {
	ce         *chat.Error
	ctxErr     error
	retryable  bool
	retryAfter time.Duration
}

func (e *callError) Error() string { return e.ce.Error() }

// Unwrap gives the *chat.Error, the context's error when the call was
// cancelled, and, for a failure that retrying will not cure soon (it
// reaches the caller after the retries), llmorch.ErrModelUnavailable or
// llmorch.ErrContextLength, which a fallback chain reads.
func (e *callError) Unwrap() []error {
	errs := []error{e.ce}
	if e.ctxErr != nil {
		return append(errs, e.ctxErr)
	}
	switch e.ce.Code {
	case CodeUnavailable, CodeRateLimited, CodeTimeout:
		errs = append(errs, llmorch.ErrModelUnavailable)
	case CodeContextLength:
		errs = append(errs, llmorch.ErrContextLength)
	}
	return errs
}

func (m *model) fail(code string, retryable bool, format string, args ...any) *callError {
	return &callError{
		ce:        &chat.Error{Code: code, Message: m.info.Provider + " " + m.info.Model + ": " + fmt.Sprintf(format, args...)},
		retryable: retryable,
	}
}

// outputLimit ends a stream that reached the request's MaxOutputBytes: not
// a failure of the provider, so it is never retried (output was yielded).
func (m *model) outputLimit() *callError {
	e := m.fail(CodeOutputLimit, false, "the answer reached the turn's output budget")
	e.ctxErr = llmorch.ErrOutputLimit
	return e
}

// ctxFailure describes why ctx ended.
func (m *model) ctxFailure(ctx context.Context) *callError {
	err := ctx.Err()
	var e *callError
	if errors.Is(err, context.DeadlineExceeded) {
		e = m.fail(CodeTimeout, false, "the call ran out of time")
	} else {
		e = m.fail(CodeCancelled, false, "the call was cancelled")
	}
	e.ctxErr = err
	return e
}

// statusFailure classifies a non-200 response.
func (m *model) statusFailure(st *callState) *callError {
	detail := fmt.Sprintf("HTTP %d", st.status)
	if st.errType != "" {
		detail += ", " + st.errType
	}
	var e *callError
	switch s := st.status; {
	case s == http.StatusTooManyRequests:
		e = m.fail(CodeRateLimited, true, "rate limited by the provider (%s)", detail)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e = m.fail(CodeAuth, false, "the provider refused the credentials (%s)", detail)
	case s == http.StatusRequestTimeout || s >= 500:
		e = m.fail(CodeUnavailable, true, "the provider is unavailable (%s)", detail)
	case st.contextLength && (s == http.StatusBadRequest || s == http.StatusRequestEntityTooLarge):
		e = m.fail(CodeContextLength, false, "the request is longer than the model's context (%s)", detail)
	case s == http.StatusNotFound:
		e = m.fail(CodeProviderError, false, "the provider does not know this model or endpoint (%s)", detail)
	default:
		e = m.fail(CodeProviderError, false, "the provider rejected the request (%s)", detail)
	}
	e.retryAfter = st.retryAfter
	return e
}

// sendFailure classifies an error from sending the request or reading the
// stream. The description names the kind of failure only.
func (m *model) sendFailure(err error, during string) *callError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return m.fail(CodeTimeout, true, "no response from the provider in time %s", during)
	}
	return m.fail(CodeUnavailable, true, "%s %s", connProblem(err), during)
}

func connProblem(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr):
		return "the provider's host name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the provider refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the provider reset the connection"
	case errors.As(err, &certErr), errors.As(err, &recErr):
		return "the TLS connection to the provider failed"
	case errors.Is(err, errLineTooLong):
		return "the provider sent an over-long stream line"
	default:
		return "the connection to the provider failed"
	}
}
