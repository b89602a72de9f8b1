package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// Kind selects the script the mock answers a request with. It travels in the
// user message as a marker ("[lt:<kind>:<id>]"), which the runtime forwards
// to the model unchanged, so that one mock behind one LLM_BASE_URL serves
// every phase and every request can be matched with the client's turn.
type Kind string

const (
	// KindStream answers with Timing's chunks at Timing's pace.
	KindStream Kind = "stream"
	// KindInstant answers with Timing's chunk count and no delay.
	KindInstant Kind = "instant"
	// KindIdle sends the response headers and then nothing until the
	// harness releases it: a turn that keeps its stream open, for memory.
	KindIdle Kind = "idle"
	// KindTool calls the think tool once, then (on the request carrying
	// the tool result) answers like KindStream.
	KindTool Kind = "tool"
)

// Timing is the mock model's pace.
type Timing struct {
	// TTFT is the time to the first content chunk after the request.
	TTFT time.Duration
	// InterToken is the delay before every later chunk.
	InterToken time.Duration
	// Chunks is the number of text chunks of an answer.
	Chunks int
}

func (t Timing) validate() error {
	switch {
	case t.TTFT < 0 || t.InterToken < 0:
		return fmt.Errorf("mock timing: negative delay (ttft %v, inter-token %v)", t.TTFT, t.InterToken)
	case t.Chunks < 1:
		return fmt.Errorf("mock timing: %d chunks; want at least 1", t.Chunks)
	}
	return nil
}

// firstChunk is what the first content chunk of a Chunks script carries
// (mockllm generates "tok0 ", "tok1 ", ...).
var firstChunk = []byte(`"tok0 "`)

// arrival is what the mock saw of one marked turn, on the harness's
// monotonic clock.
type arrival struct {
	// recv is when the first model request of the turn reached the
	// handler (headers read, body not yet).
	recv time.Time
	// first is when the first content chunk was handed to the connection.
	first time.Time
	calls int
}

// mockFront is the mock model as the runtime and the direct client see it:
// one loopback HTTP server that timestamps each request and hands it to the
// mockllm handler of the request's Kind.
type mockFront struct {
	srv *http.Server
	ln  net.Listener
	// subs own the mockllm handlers; their own listeners stay unused.
	subs     []*mockllm.Server
	handlers map[Kind]http.Handler
	answer   http.Handler // the tool kind's second call

	idleMu      sync.Mutex
	idleCtx     context.Context
	releaseIdle context.CancelFunc

	mu       sync.Mutex
	arrivals map[string]*arrival
	samples  map[Kind][]byte
	unmarked int
	done     chan struct{}

	// conns is the state of each connection to the mock (the server's
	// pooled model connections and direct clients'), for closing the idle
	// ones and counting them.
	connMu sync.Mutex
	conns  map[net.Conn]http.ConnState
}

func startMock(t Timing) (*mockFront, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	usage := &mockllm.Usage{Input: 40, Output: t.Chunks}
	paced := mockllm.Script{Chunks: t.Chunks, TimeToFirstToken: t.TTFT, InterTokenDelay: t.InterToken, Usage: usage}
	instant := mockllm.Script{Chunks: t.Chunks, Usage: usage}
	// Idle: headers go out, then the first chunk waits longer than any
	// run; releasing cancels the request context, which ends the wait.
	idle := mockllm.Script{Chunks: 1, TimeToFirstToken: 24 * time.Hour, Usage: usage}
	tool := mockllm.Script{
		ToolCalls: []mockllm.ToolCall{{ID: "call_lt", Name: "think",
			Arguments: `{"topic":"load","reasoning":"**Problem** none. **Conclusion** answer."}`}},
		TimeToFirstToken: t.TTFT, Usage: &mockllm.Usage{Input: 40, Output: 12},
	}
	m := &mockFront{handlers: map[Kind]http.Handler{}, arrivals: map[string]*arrival{}, samples: map[Kind][]byte{}, done: make(chan struct{})}
	m.idleCtx, m.releaseIdle = context.WithCancel(context.Background())
	sub := func(s mockllm.Script) http.Handler {
		srv := mockllm.New(mockllm.WithDefault(s), mockllm.WithMaxRecorded(-1))
		m.subs = append(m.subs, srv)
		return srv.Handler()
	}
	m.handlers[KindStream] = sub(paced)
	m.handlers[KindInstant] = sub(instant)
	m.handlers[KindIdle] = sub(idle)
	m.handlers[KindTool] = sub(tool)
	m.answer = m.handlers[KindStream]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.closeSubs()
		return nil, fmt.Errorf("mock model: listen on loopback: %w", err)
	}
	m.ln = ln
	m.conns = map[net.Conn]http.ConnState{}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second, ConnState: m.connState}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// URL is the mock's base URL; OpenAI clients want URL()+"/v1".
func (m *mockFront) URL() string { return "http://" + m.ln.Addr().String() }

// ReleaseIdle ends every idle answer and makes later idle requests end at
// once.
func (m *mockFront) ReleaseIdle() {
	m.idleMu.Lock()
	m.releaseIdle()
	m.idleMu.Unlock()
}

// ResetIdle arms the idle kind again after ReleaseIdle.
func (m *mockFront) ResetIdle() {
	m.idleMu.Lock()
	m.idleCtx, m.releaseIdle = context.WithCancel(context.Background())
	m.idleMu.Unlock()
}

func (m *mockFront) Close() {
	m.ReleaseIdle()
	_ = m.srv.Close()
	<-m.done
	m.closeSubs()
}

func (m *mockFront) closeSubs() {
	for _, s := range m.subs {
		s.Close()
	}
}

func (m *mockFront) connState(c net.Conn, st http.ConnState) {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		delete(m.conns, c)
		return
	}
	m.conns[c] = st
}

// CloseIdleConns closes the mock's idle keep-alive connections and returns
// how many there were. Closing them is what a model provider does to a
// pool's idle connections sooner or later; the client's side (the
// server's transport) then ends their read and write goroutines, which it
// would otherwise keep for its IdleConnTimeout.
func (m *mockFront) CloseIdleConns() int {
	m.connMu.Lock()
	n := 0
	for _, st := range m.conns {
		if st == http.StateIdle {
			n++
		}
	}
	m.connMu.Unlock()
	// Turning keep-alives off closes the idle connections; back on, new
	// ones are kept again.
	m.srv.SetKeepAlivesEnabled(false)
	m.srv.SetKeepAlivesEnabled(true)
	return n
}

// take returns and forgets what the mock saw of the turn with this marker
// ID.
func (m *mockFront) take(id string) (arrival, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.arrivals[id]
	if !ok {
		return arrival{}, false
	}
	delete(m.arrivals, id)
	return *a, true
}

// pending reports how many marked turns reached the mock and were not taken.
func (m *mockFront) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.arrivals)
}

// sample returns a request body the runtime sent for kind, to replay it
// straight to the mock.
func (m *mockFront) sample(kind Kind) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.samples[kind]
}

func (m *mockFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	recv := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	kind, id, ok := parseMarker(body)
	if !ok {
		m.mu.Lock()
		m.unmarked++
		m.mu.Unlock()
		http.Error(w, "loadtest mock: no [lt:kind:id] marker in the request", http.StatusBadRequest)
		return
	}
	h := m.handlers[kind]
	if h == nil {
		http.Error(w, fmt.Sprintf("loadtest mock: unknown kind %q", kind), http.StatusBadRequest)
		return
	}
	// The tool turn's second call carries the tool result after the
	// turn's own message (earlier turns' results come before it).
	if kind == KindTool && bytes.Contains(body[bytes.LastIndex(body, []byte("[lt:")):], []byte(`"role":"tool"`)) {
		h = m.answer
	}
	m.mu.Lock()
	a := m.arrivals[id]
	if a == nil {
		a = &arrival{recv: recv}
		m.arrivals[id] = a
	}
	a.calls++
	if _, seen := m.samples[kind]; !seen && r.Header.Get("X-Loadtest-Direct") == "" {
		m.samples[kind] = body
	}
	m.mu.Unlock()
	if kind == KindIdle {
		m.idleMu.Lock()
		ctx := m.idleCtx
		m.idleMu.Unlock()
		merged, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		r = r.WithContext(merged)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.ServeHTTP(&tapWriter{ResponseWriter: w, m: m, id: id}, r)
}

// parseMarker finds the last "[lt:<kind>:<id>]" in a request body: the
// history before the turn's own message carries earlier turns' markers.
func parseMarker(body []byte) (Kind, string, bool) {
	i := bytes.LastIndex(body, []byte("[lt:"))
	if i < 0 {
		return "", "", false
	}
	rest := body[i+4:]
	j := bytes.IndexByte(rest, ']')
	if j < 0 {
		return "", "", false
	}
	kind, id, ok := strings.Cut(string(rest[:j]), ":")
	if !ok || kind == "" || id == "" {
		return "", "", false
	}
	return Kind(kind), id, true
}

func marker(kind Kind, id string) string { return "[lt:" + string(kind) + ":" + id + "]" }

// tapWriter notes when the first content chunk is written. mockllm writes
// one frame per Write and flushes right after it.
type tapWriter struct {
	http.ResponseWriter
	m    *mockFront
	id   string
	seen bool
}

func (w *tapWriter) Write(p []byte) (int, error) {
	if !w.seen && bytes.Contains(p, firstChunk) {
		w.seen = true
		now := time.Now()
		w.m.mu.Lock()
		if a := w.m.arrivals[w.id]; a != nil && a.first.IsZero() {
			a.first = now
		}
		w.m.mu.Unlock()
	}
	return w.ResponseWriter.Write(p)
}

func (w *tapWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *tapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var errNoArrival = errors.New("the mock saw no model request for this turn")
