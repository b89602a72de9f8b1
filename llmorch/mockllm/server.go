// Package mockllm is a mock model server speaking the OpenAI chat
// completions and Anthropic messages wire formats over real HTTP. It replays
// scripted responses, including the malformed tool-call streams some
// OpenAI-compatible servers send, rate limits and broken connections, and it
// records every request it received so that tests can assert what a client
// sent. It backs the provider tests, the benchmarks and the
// `agentdock mockllm` load-test server.
//
// Routes: POST /v1/chat/completions (and /chat/completions) for OpenAI,
// POST /v1/messages (and /messages) for Anthropic. Scripts are served from a
// FIFO queue (Enqueue); when it is empty the default script answers, which
// by default is an instant text answer with usage, for load tests.
package mockllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody bounds a request body; larger ones are answered 413.
const maxBody = 16 << 20

// DefaultScript is what the server answers when nothing is queued and no
// default was configured.
var DefaultScript = Script{
	Text:  []string{"Hello", " from", " mockllm."},
	Usage: &Usage{Input: 12, Output: 3},
}

// Config configures a server started with ListenAndServe.
type Config struct {
	// Queue answers the first requests, one script each, in order (as
	// Enqueue does); then Default answers.
	Queue []Script
	// Default answers every request (zero: DefaultScript).
	Default *Script
	// Respond, when set, answers in place of Default: the script it
	// returns for each request, so that concurrent conversations each
	// get the answer their own history calls for. It must be safe for
	// concurrent use.
	Respond func(Request) Script
	// MaxRecorded bounds the requests kept for Requests (newest kept;
	// 0: 1000; negative: none kept), so that a load test does not grow
	// without limit.
	MaxRecorded int
	// PrefixCache answers every request's usage as a provider's prompt
	// cache would (Prefix; Request.Prefix records it): the input tokens
	// of the request and those of its longest start in common with an
	// earlier request, whatever the script says. Each model has a cache
	// of its own, as at a provider: a request shares only with earlier
	// requests to its model. It keeps every request the server received:
	// for one conversation at a time, not for load.
	PrefixCache bool
}

// Option configures New.
type Option func(*Config)

// WithDefault sets the script that answers when the queue is empty.
func WithDefault(s Script) Option { return func(c *Config) { c.Default = &s } }

// WithResponder answers the requests the queue does not with respond
// (see Config.Respond).
func WithResponder(respond func(Request) Script) Option {
	return func(c *Config) { c.Respond = respond }
}

// WithMaxRecorded bounds the requests kept (see Config.MaxRecorded).
func WithMaxRecorded(n int) Option { return func(c *Config) { c.MaxRecorded = n } }

// WithPrefixCache makes the server answer usage as a prompt cache would
// (see Config.PrefixCache).
func WithPrefixCache() Option { return func(c *Config) { c.PrefixCache = true } }

// Server is a running mock server.
type Server struct {
	handler *handler
	srv     *http.Server
	ln      net.Listener
	done    chan struct{}
}

// New starts a server on a free loopback port. It panics only if no
// loopback port can be opened, which leaves a test nothing to run against.
func New(opts ...Option) *Server {
	var cfg Config
	for _, o := range opts {
		o(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("mockllm: listen on loopback: %v", err))
	}
	s := &Server{handler: newHandler(cfg), ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return s
}

// URL is the server's base URL without a path, e.g. http://127.0.0.1:41234.
// OpenAI clients want URL()+"/v1" as their base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server, cutting open streams.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
}

// Enqueue queues scripts; each request takes the oldest.
func (s *Server) Enqueue(scripts ...Script) { s.handler.enqueue(scripts...) }

// Pending returns how many queued scripts were not used yet.
func (s *Server) Pending() int { return s.handler.pending() }

// Requests returns a copy of the requests received, oldest first.
func (s *Server) Requests() []Request { return s.handler.requests() }

// Handler returns the server's HTTP handler, for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// ListenAndServe serves the mock on addr until ctx is done, then shuts down:
// the listener and every connection that is not answering a request close
// at once, open streams are cut after five seconds. It is the body of the
// `agentdock mockllm` subcommand.
func ListenAndServe(ctx context.Context, addr string, cfg Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mockllm: listen on %s: %w", addr, err)
	}
	var conns connStates
	srv := &http.Server{Handler: newHandler(cfg), ReadHeaderTimeout: 10 * time.Second, ConnState: conns.track}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mockllm: serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(shutdownCtx) }()
	// Shutdown closes idle connections, but waits up to five seconds for
	// one that sent no request yet (a client's spare connection, which
	// Go's Transport and others open): closed now, as nothing will come
	// of it.
	conns.closeIdle()
	if err := <-shut; err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}

// connStates follows a server's connections, for closing the ones that
// are not answering a request when it shuts down.
type connStates struct {
	mu sync.Mutex
	m  map[net.Conn]http.ConnState
}

func (c *connStates) track(conn net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[net.Conn]http.ConnState{}
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(c.m, conn)
	default:
		c.m[conn] = s
	}
}

// closeIdle closes the connections waiting for a request, new or kept
// alive.
func (c *connStates) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn, s := range c.m {
		if s == http.StateNew || s == http.StateIdle {
			_ = conn.Close()
		}
	}
}

type handler struct {
	def         Script
	respond     func(Request) Script
	maxRecorded int
	seq         atomic.Int64

	mu       sync.Mutex
	queue    []Script
	recorded []Request
	cache    map[string]*prefixCache // Config.PrefixCache, by model
}

func newHandler(cfg Config) *handler {
	h := &handler{def: DefaultScript, maxRecorded: cfg.MaxRecorded, respond: cfg.Respond}
	if cfg.Default != nil {
		h.def = *cfg.Default
	}
	if h.maxRecorded == 0 {
		h.maxRecorded = 1000
	}
	h.queue = append(h.queue, cfg.Queue...)
	if cfg.PrefixCache {
		h.cache = map[string]*prefixCache{}
	}
	return h
}

func (h *handler) enqueue(scripts ...Script) {
	h.mu.Lock()
	h.queue = append(h.queue, scripts...)
	h.mu.Unlock()
}

func (h *handler) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queue)
}

func (h *handler) requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.recorded...)
}

// take records req, with its Prefix under a prefix cache, and returns
// the script that answers it.
func (h *handler) take(req *Request) Script {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cache != nil {
		c := h.cache[req.Model]
		if c == nil {
			c = &prefixCache{}
			h.cache[req.Model] = c
		}
		p := c.observe(req.API, req.Body)
		req.Prefix = &p
	}
	if h.maxRecorded > 0 {
		if len(h.recorded) >= h.maxRecorded {
			n := copy(h.recorded, h.recorded[1:])
			h.recorded = h.recorded[:n]
		}
		h.recorded = append(h.recorded, *req)
	}
	if len(h.queue) == 0 {
		if h.respond != nil {
			r := *req
			h.mu.Unlock()
			defer h.mu.Lock()
			return h.respond(r)
		}
		return h.def
	}
	s := h.queue[0]
	h.queue[0] = Script{}
	h.queue = h.queue[1:]
	return s
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api string
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/v1/chat/completions", "/chat/completions":
		api = APIOpenAI
	case "/v1/messages", "/messages":
		api = APIAnthropic
	default:
		writeError(w, APIOpenAI, http.StatusNotFound, "no route for "+r.URL.Path, 0)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, api, http.StatusMethodNotAllowed, "use POST", 0)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, api, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody), 0)
			return
		}
		writeError(w, api, http.StatusBadRequest, "reading body: "+err.Error(), 0)
		return
	}
	req, err := decodeRequest(api, body)
	req.Path, req.Header = r.URL.Path, r.Header.Clone()
	if err != nil {
		writeError(w, api, http.StatusBadRequest, "invalid request: "+err.Error(), 0)
		return
	}
	script := h.take(&req)
	if script.Status != 0 && script.Status != http.StatusOK {
		msg := script.ErrorMessage
		if msg == "" {
			msg = fmt.Sprintf("scripted %d %s", script.Status, http.StatusText(script.Status))
		}
		writeError(w, api, script.Status, msg, script.RetryAfter)
		return
	}
	id := h.seq.Add(1)
	r2 := render{api: api, req: &req, s: &script, id: id}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(r2.whole())
		return
	}
	stream(w, r, &r2)
}

// writeError answers with status and an error body in api's shape.
func writeError(w http.ResponseWriter, api string, status int, msg string, retryAfter time.Duration) {
	if retryAfter > 0 {
		secs := (retryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", fmt.Sprint(int64(secs)))
		w.Header().Set("retry-after-ms", fmt.Sprint(retryAfter.Milliseconds()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body any
	if api == APIAnthropic {
		body = map[string]any{"type": "error", "error": map[string]string{"type": anthropicErrorType(status), "message": msg}}
	} else {
		body = map[string]any{"error": map[string]any{"message": msg, "type": openAIErrorType(status), "code": openAIErrorCode(status)}}
	}
	_ = json.NewEncoder(w).Encode(body)
}

func openAIErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status == http.StatusUnauthorized:
		return "invalid_request_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func openAIErrorCode(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case http.StatusUnauthorized:
		return "invalid_api_key"
	default:
		return ""
	}
}

func anthropicErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == 529:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}

// frame is one SSE event of a streamed response.
type frame struct {
	event string // Anthropic's event name; empty for OpenAI
	data  []byte
	// content marks the frames that carry output; delays and failures count
	// only these.
	content bool
}

// stream writes r's frames with the script's delays, flushing each, and
// breaks the response where the script says.
func stream(w http.ResponseWriter, req *http.Request, r *render) {
	frames := r.frames()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	var timer *time.Timer
	wait := func(d time.Duration) bool {
		if d <= 0 {
			return true
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			return true
		case <-req.Context().Done():
			timer.Stop()
			return false
		}
	}
	s := r.s
	content := 0
	var buf []byte
	for i, f := range frames {
		isLast := i == len(frames)-1
		if s.Fail != FailNone && content == s.FailAfter && (f.content || isTail(frames[i:])) {
			r.fail(w, rc)
			return
		}
		if f.content {
			d := s.InterTokenDelay
			if content == 0 {
				d = s.TimeToFirstToken
			}
			if !wait(d) {
				return
			}
			content++
		}
		buf = buf[:0]
		if f.event != "" {
			buf = append(buf, "event: "...)
			buf = append(buf, f.event...)
			buf = append(buf, '\n')
		}
		buf = append(buf, "data: "...)
		buf = append(buf, f.data...)
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return
		}
		// Flushing every frame is what real servers do and what makes the
		// client see deltas one by one; an instant load-test stream flushes
		// once at the end instead, as it would arrive in one read anyway.
		if s.InterTokenDelay > 0 || s.TimeToFirstToken > 0 || isLast {
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

// isTail reports whether no content frame is left, i.e. the remaining
// frames only end the response (a failure after all content fires here).
func isTail(frames []frame) bool {
	for _, f := range frames {
		if f.content {
			return false
		}
	}
	return true
}

// fail breaks the response the way the script says.
func (r *render) fail(w http.ResponseWriter, rc *http.ResponseController) {
	if r.s.Fail == FailErrorEvent {
		var f frame
		if r.api == APIAnthropic {
			f = frame{event: "error", data: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)}
		} else {
			f = frame{data: []byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":500}}`)}
		}
		var buf []byte
		if f.event != "" {
			buf = append(buf, "event: "+f.event+"\n"...)
		}
		buf = append(buf, "data: "...)
		buf = append(buf, f.data...)
		buf = append(buf, "\n\n"...)
		_, _ = w.Write(buf)
		_ = rc.Flush()
		return
	}
	_ = rc.Flush()
	// ErrAbortHandler is net/http's sanctioned way to cut a response: the
	// connection closes without the chunked terminator, so the client sees
	// an unexpected EOF, and the server logs nothing.
	panic(http.ErrAbortHandler)
}
