package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxResponse bounds a search response body; real ones are tens of KiB.
const maxResponse = 4 << 20

// maxErrorBody bounds what is read of an error response.
const maxErrorBody = 16 << 10

// userAgent identifies the runtime to search services.
const userAgent = "agentdock-go/search"

// client sends one backend's requests and turns every failure into an error
// that names the service and never contains the secret.
type client struct {
	http    *http.Client
	display string // "Tavily", "Brave Search", ...
	keyVar  string // the environment variable holding the key, for hints
	secret  string
	// userAgent replaces the default User-Agent (Wikimedia asks for one
	// that says who calls and how to reach them).
	userAgent string
	// unreachable ends the error of a request that found no server: what
	// to check.
	unreachable string
}

// do sends req and decodes a 2xx JSON answer into out.
func (c *client) do(req *http.Request, out any) error {
	req.Header.Set("User-Agent", orDefault(c.userAgent, userAgent))
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(req.Context(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return c.statusError(resp, body)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return c.transportError(req.Context(), err)
	}
	if len(body) > maxResponse {
		return fmt.Errorf("%s sent a response larger than %d bytes", c.display, maxResponse)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s returned a response that is not the expected JSON: %s", c.display, c.redact(err.Error()))
	}
	return nil
}

// transportError describes a failed exchange without the request URL, which
// can hold the query.
func (c *client) transportError(ctx context.Context, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return fmt.Errorf("request to %s was cancelled: %w", c.display, context.Canceled)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s did not answer in time: %w", c.display, context.DeadlineExceeded)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := fmt.Sprintf("%s could not be reached: %s", c.display, c.redact(err.Error()))
	if c.unreachable != "" {
		msg += " (" + c.unreachable + ")"
	}
	return errors.New(msg)
}

func (c *client) statusError(resp *http.Response, body []byte) error {
	msg := fmt.Sprintf("%s answered HTTP %s", c.display, resp.Status)
	if detail := errorDetail(body); detail != "" {
		msg += ": " + detail
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		if c.keyVar != "" {
			msg += " (check " + c.keyVar + ")"
		}
	case http.StatusTooManyRequests:
		msg += " (rate limit or quota reached; try again " + retryAfter(resp.Header.Get("Retry-After")) + ")"
	}
	return &StatusError{Service: c.display, StatusCode: resp.StatusCode, msg: c.redact(msg)}
}

// retryAfter says when to try again from a Retry-After header in seconds:
// "in 30 s", or "later" when it is absent or a date.
func retryAfter(h string) string {
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n > 0 {
		return "in " + strconv.Itoa(n) + " s"
	}
	return "later"
}

// StatusError is a non-2xx answer from a search service.
type StatusError struct {
	Service    string
	StatusCode int
	msg        string
}

func (e *StatusError) Error() string { return e.msg }

func isForbidden(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.StatusCode == http.StatusForbidden
}

// errorDetail extracts a short message from an error body: the usual JSON
// fields of the services' error objects, else the start of the text.
func errorDetail(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		for _, k := range []string{"detail", "message", "error"} {
			if s := messageIn(obj[k]); s != "" {
				return oneLine(s, 200)
			}
		}
	}
	if bytes.HasPrefix(body, []byte("<")) {
		return "" // an HTML error page says nothing useful in one line
	}
	return oneLine(string(body), 200)
}

// messageIn finds a message in a string or in the nested error objects the
// services use ({"detail": {"error": "..."}}, {"error": {"detail": "..."}}).
func messageIn(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		for _, k := range []string{"error", "detail", "message"} {
			if s := messageIn(t[k]); s != "" {
				return s
			}
		}
	}
	return ""
}

func (c *client) redact(s string) string {
	if c.secret == "" {
		return s
	}
	return strings.ReplaceAll(s, c.secret, "[redacted]")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
