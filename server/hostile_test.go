package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveEnv runs e's server through Serve on a loopback listener, as the
// binary does (ReadTimeout, the JSON answers to malformed requests), and
// returns its address.
func serveEnv(t *testing.T, e *env) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return ln.Addr().String()
}

// rawRequest writes req on a new connection and reads the answer within
// wait; the answer's status, its JSON error and how long it took.
func rawRequest(t *testing.T, addr, req string, wait time.Duration) (status int, eb errBodyT, took time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", wait, err)
	}
	defer res.Body.Close()
	took = time.Since(start)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("answer %d with Content-Type %q, want JSON", res.StatusCode, ct)
	}
	if err := json.NewDecoder(res.Body).Decode(&eb); err != nil {
		t.Fatalf("answer %d: %v", res.StatusCode, err)
	}
	return res.StatusCode, eb, took
}

// TestSlowBodyIsCut: a body that trickles in is cut at ReadTimeout with
// 408, while a stream that outlasts ReadTimeout is not.
func TestSlowBodyIsCut(t *testing.T) {
	e := newEnv(t, envOptions{delay: 30 * time.Millisecond, cfg: func(c *Config) { c.ReadTimeout = time.Second }})
	addr := serveEnv(t, e)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"message":"hello there","sessionId":"slow-body-1"}`
	fmt.Fprintf(c, "POST /api/chat/plain HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, len(body))
	start := time.Now()
	answered := make(chan *http.Response, 1)
	go func() {
		res, _ := http.ReadResponse(bufio.NewReader(c), nil)
		answered <- res
	}()
	var res *http.Response
send:
	for i := 0; i < len(body); i++ {
		select {
		case res = <-answered:
			break send
		case <-time.After(300 * time.Millisecond):
		}
		if _, err := c.Write([]byte{body[i]}); err != nil {
			break
		}
	}
	if res == nil {
		select {
		case res = <-answered:
		case <-time.After(10 * time.Second):
			t.Fatal("the slow body was never cut")
		}
	}
	if res == nil || res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("answer %v after %v, want 408", res, time.Since(start))
	}
	var eb errBodyT
	_ = json.NewDecoder(res.Body).Decode(&eb)
	if eb.Error.Code != "request_timeout" {
		t.Fatalf("%+v", eb.Error)
	}
	// A turn streaming for longer than ReadTimeout is not cut.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/chat/plain", strings.NewReader(`{"message":"tell me a long story","sessionId":"slow-body-2"}`))
	req.Header.Set("Content-Type", "application/json")
	sres, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	evs := newSSEReader(sres.Body).all()
	sres.Body.Close()
	took := time.Since(start)
	if n := len(evs); n == 0 || evs[n-1].Data != "[DONE]" || !strings.Contains(evs[n-2].Data, `"finishReason":"stop"`) {
		t.Fatalf("the stream ended %v", evs[max(0, len(evs)-2):])
	}
	if took < 1500*time.Millisecond {
		t.Logf("the stream took %v; it should outlast the 1s ReadTimeout to prove anything (slower offline delay?)", took)
	}
}

// TestUnauthenticatedBodyIsNotRead: with API keys, a keyless POST whose
// body never completes gets its 401 at once, not after the body or the
// read timeout.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	e, _ := keyEnv(t, nil)
	addr := serveEnv(t, e)
	for _, path := range []string{"/api/chat/plain", "/v1/chat/completions"} {
		status, eb, _ := rawRequest(t, addr, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"mess", 5*time.Second)
		if status != http.StatusUnauthorized || eb.Error.Code != "unauthorized" {
			t.Fatalf("%s: %d %+v", path, status, eb.Error)
		}
	}
}

// TestCrossSiteRequests: a browser POST from another site is refused (the
// "simple" text/plain one that needs no preflight included), a same-origin
// one and one from a CORS_ORIGINS origin pass, and non-JSON bodies get
// 415.
func TestCrossSiteRequests(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.CORSOrigins = []string{"https://app.example"} }})
	host := strings.TrimPrefix(e.base, "http://")
	body := `{"message":"hi","sessionId":"cross-site-1"}`
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"cross-site text/plain", []string{"Content-Type", "text/plain", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "cross_origin_denied"},
		{"cross-site JSON, Origin only", []string{"Origin", "https://evil.example"}, http.StatusForbidden, "cross_origin_denied"},
		{"same-site but another origin", []string{"Origin", "https://other.app.example", "Sec-Fetch-Site", "same-site"}, http.StatusForbidden, "cross_origin_denied"},
		{"text/plain without Origin", []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eb errBodyT
			getJSON(t, e.do(http.MethodPost, "/api/chat/plain", body, tc.headers...), tc.status, &eb)
			if eb.Error.Code != tc.code {
				t.Fatalf("%+v", eb.Error)
			}
		})
	}
	// No turn ran.
	if _, err := e.store.Get(t.Context(), "cross-site-1"); err == nil {
		t.Fatal("a refused request started a turn")
	}
	for i, hdr := range [][]string{
		{"Origin", "http://" + host},
		{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-origin", "Origin", "https://proxy.public.example"},
		{"Content-Type", "application/json; charset=utf-8"},
	} {
		res, _ := e.streamChat("plain", fmt.Sprintf(`{"message":"hi","sessionId":"cross-site-ok-%d"}`, i), hdr...)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%v: %d", hdr, res.StatusCode)
		}
	}
}

// TestInvalidUTF8IsRefused: a message that is not UTF-8 text, raw or as a
// lone surrogate escape, is 400 invalid_message with its position, on the
// chat and the OpenAI endpoints.
func TestInvalidUTF8IsRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct{ path, body, where string }{
		{"/api/chat/plain", "{\"message\":\"caf\xe9\"}", "line 1, column 16"},
		{"/api/chat/plain", "{\"id\":\"utf8-session\",\"messages\":[{\"role\":\"user\",\n\"parts\":[{\"type\":\"text\",\"text\":\"\\udc00\"}]}]}", "line 2, column 33"},
		{"/v1/chat/completions", "{\"model\":\"plain\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "line 1, column 56"},
	} {
		var eb errBodyT
		getJSON(t, e.do(http.MethodPost, tc.path, tc.body), http.StatusBadRequest, &eb)
		if eb.Error.Code != "invalid_message" || !strings.Contains(eb.Error.Message, tc.where) {
			t.Errorf("%q: %+v, want invalid_message at %s", tc.body, eb.Error, tc.where)
		}
	}
}

// TestErrorsAreJSON: every error under /api and /v1 is JSON with a code,
// OpenAI's shape under /v1, echoes at most ~200 bytes of the input and
// names no Go type; net/http's own answers to malformed requests too.
func TestErrorsAreJSON(t *testing.T) {
	e := newEnv(t, envOptions{})
	long := strings.Repeat("a", 100<<10)
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodGet, "/api/nothing/here", "", http.StatusNotFound},
		{http.MethodGet, "/api/agents/", "", http.StatusNotFound},
		{http.MethodPost, "/api/chat/plain/", `{"message":"x"}`, http.StatusNotFound},
		{http.MethodGet, "/api/agents/" + long, "", http.StatusNotFound},
		{http.MethodGet, "/v1/nothing", "", http.StatusNotFound},
		{http.MethodPut, "/v1/chat/completions", `{}`, http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/chat/completions", `{"model":"` + long + `","messages":[{"role":"user","content":"x"}]}`, http.StatusNotFound},
		{http.MethodPost, "/v1/chat/completions", `{"model":"plain","messages":"x"}`, http.StatusBadRequest},
		{http.MethodPost, "/api/chat/plain", `{"messages":{"role":"user"}}`, http.StatusBadRequest},
		{http.MethodGet, "/api/sessions/some-session/stream", "", 0}, // 204: no error
	} {
		res := e.do(tc.method, tc.path, tc.body)
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if tc.status == 0 {
			continue
		}
		name := tc.method + " " + clip(tc.path)
		if res.StatusCode != tc.status || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %q: %s", name, res.StatusCode, res.Header.Get("Content-Type"), clip(string(data)))
			continue
		}
		var body struct {
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal(data, &body); err != nil || body.Error["code"] == "" || body.Error["message"] == "" {
			t.Errorf("%s: %s", name, clip(string(data)))
		}
		if _, hasType := body.Error["type"]; hasType != strings.HasPrefix(tc.path, "/v1") {
			t.Errorf("%s: OpenAI's shape %v: %s", name, hasType, data)
		}
		if len(data) > 600 || strings.Contains(string(data), "wire.") || strings.Contains(string(data), "server.") || strings.Contains(string(data), "[]") {
			t.Errorf("%s: %d bytes: %s", name, len(data), clip(string(data)))
		}
	}

	addr := serveEnv(t, e)
	for _, raw := range []string{
		"GET /api/agents HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 2<<20) + "\r\n\r\n",
		"GET /api/agents HTTP/1.1\r\n\r\n",
		"GET /api/agents HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
	} {
		status, eb, _ := rawRequest(t, addr, raw, 5*time.Second)
		if status < 400 || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Errorf("%q: %d %+v", clip(raw), status, eb.Error)
		}
	}
}

// clip shortens what a test prints of a body or a path.
func clip(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:197] + "..."
}
