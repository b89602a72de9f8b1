// Command relay is the floor the load harness measures agentdock against: a
// plain Go SSE relay, net/http and encoding/json only, run as its own process
// like `agentdock serve` and driven by the same client, against the same mock
// model, with the same figures.
//
// # What it does per turn
//
// It does the essential work of any chat relay, once and in the plain way:
//
//  1. parses the client's POST /api/chat/{agent} body ({"message": ...,
//     "sessionId": ...}, the body the harness sends the runtime) with
//     encoding/json;
//  2. builds the model request: the fixed part read at start from
//     RELAY_REQUEST (the model, the system message, the tools' declarations
//     and the options the runtime sends for the load-test agent) plus the
//     user's message, encoded with encoding/json;
//  3. POSTs it with streaming to LLM_BASE_URL/chat/completions (an OpenAI
//     chat completions API) through a pooled net/http client;
//  4. reads the model's SSE stream line by line and decodes every data line
//     with encoding/json, then reads the response to its end after [DONE]
//     (as the runtime's provider does), so that its connection is reused;
//  5. writes each text delta to the client as an AI SDK UI message stream
//     frame (the protocol the runtime speaks, so the harness reads both with
//     the same code), encoding each frame with encoding/json, and flushes
//     after every frame;
//  6. ends with text-end, finish (the model's finish reason) and [DONE],
//     written with the response's end in one write (as the runtime does:
//     a client that stops at [DONE] keeps its connection).
//
// # What it skips
//
// Everything the runtime does beyond relaying: no session (sessionId is
// read and ignored) and no history (the model gets the system message and
// this message only, where the runtime adds up to the template's lastN
// earlier messages) unless RELAY_REDIS_URL is set (below), no
// orchestration or tool execution (the tools are declared to the model,
// never run), no turn log (no frame IDs, no resume,
// no replay for reconnecting clients), no usage or orchestration frames, no
// step frames, no logging per request, no metrics per request, no API keys,
// rate limits, security headers or request IDs, no timeouts beyond the
// model connection's header timeout. A model or client error ends the stream
// with one error frame.
//
// # Configuration (environment, as for agentdock serve)
//
//	ADDR            listen address (default 127.0.0.1:8081)
//	LLM_BASE_URL    the OpenAI-compatible API's base URL, e.g. http://127.0.0.1:8090/v1 (required)
//	OPENAI_API_KEY  sent as the bearer token
//	RELAY_REQUEST   JSON file with the fixed part of the model request; unknown fields are refused
//	                (default: model mock-model, system "You answer briefly.")
//	PPROF_ADDR      loopback address for net/http/pprof; empty: off
//	RELAY_REDIS_URL keep sessions in this Redis (redis://host:port/db): the
//	                floor for the Redis store (sessions.go); empty: no sessions
//
// With RELAY_REDIS_URL, sessionId is required and a turn takes its session
// and reads its last 4 messages in one round trip before the model request
// (409 session_busy while another turn holds it), sends them with the
// user's message, and saves the message and the answer, giving the session
// back, in one round trip before the response's closing frames.
//
// It also serves GET /readyz and GET /metrics (the Go runtime gauges the
// harness reads to split memory per stream into heap and stacks).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// modelRequest is an OpenAI chat completions request. RELAY_REQUEST holds
// every field but the user's message; the fields are those the runtime
// sends for the load-test agent.
type modelRequest struct {
	Model               string          `json:"model"`
	Messages            []modelMessage  `json:"messages"`
	Stream              bool            `json:"stream"`
	Tools               json.RawMessage `json:"tools,omitempty"`
	StreamOptions       json.RawMessage `json:"stream_options,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
}

type modelMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// modelChunk is what the relay reads of a streamed chunk.
type modelChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// uiChunk is one frame of the AI SDK UI message stream.
type uiChunk struct {
	Type         string `json:"type"`
	ID           string `json:"id,omitempty"`
	MessageID    string `json:"messageId,omitempty"`
	Delta        string `json:"delta,omitempty"`
	ErrorText    string `json:"errorText,omitempty"`
	FinishReason string `json:"finishReason,omitempty"`
}

// chatRequest is the client's body.
type chatRequest struct {
	Message   string `json:"message"`
	SessionID string `json:"sessionId"`
}

// defaultRequest is the fixed part of the model request without
// RELAY_REQUEST.
var defaultRequest = modelRequest{
	Model:    "mock-model",
	Messages: []modelMessage{{Role: "system", Content: "You answer briefly."}},
}

// relay serves the chat endpoint.
type relay struct {
	client *http.Client
	url    string
	key    string
	base   modelRequest
	// sessions, with RELAY_REDIS_URL, keeps the conversations in Redis
	// (sessions.go); nil: the relay stores nothing.
	sessions *sessions
}

// newTransport pools model connections like agentdock serve's provider
// client does, so that neither redials the model for every turn.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		ResponseHeaderTimeout: 90 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
	}
}

// readRequest reads the fixed part of the model request.
func readRequest(path string) (modelRequest, error) {
	if path == "" {
		return defaultRequest, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return modelRequest{}, fmt.Errorf("RELAY_REQUEST: %w", err)
	}
	var req modelRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return modelRequest{}, fmt.Errorf("RELAY_REQUEST %s: %w (the relay sends only the fields it knows; add a new one to modelRequest)", path, err)
	}
	if req.Model == "" {
		return modelRequest{}, fmt.Errorf("RELAY_REQUEST %s: model is required", path)
	}
	return req, nil
}

func (rl *relay) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat/{agent}", rl.chat)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /metrics", metrics)
	return mux
}

func jsonError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": msg}})
	w.Write(b)
}

func (rl *relay) chat(w http.ResponseWriter, r *http.Request) {
	var in chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		jsonError(w, http.StatusBadRequest, "invalid_body", "the body is not a JSON chat request: "+err.Error())
		return
	}
	if in.Message == "" {
		jsonError(w, http.StatusBadRequest, "invalid_body", "message is required")
		return
	}
	req := rl.base
	req.Messages = req.Messages[:len(req.Messages):len(req.Messages)]
	user := modelMessage{Role: "user", Content: in.Message}
	var (
		answer strings.Builder
		save   func() error // with sessions: saves the turn
	)
	if rl.sessions != nil {
		if in.SessionID == "" {
			jsonError(w, http.StatusBadRequest, "invalid_body", "sessionId is required")
			return
		}
		token := newID()
		history, err := rl.sessions.begin(r.Context(), in.SessionID, token)
		if errors.Is(err, errBusy) {
			jsonError(w, http.StatusConflict, "session_busy", err.Error())
			return
		}
		if err != nil {
			jsonError(w, http.StatusServiceUnavailable, "store_error", err.Error())
			return
		}
		req.Messages = append(req.Messages, history...)
		// save gives the session back with the turn's messages before the
		// response's closing frames, so that the client's next turn finds
		// it free; a turn that ends any other way gives it back here,
		// without them.
		saved := false
		defer func() {
			if !saved {
				rl.sessions.end(context.WithoutCancel(r.Context()), in.SessionID, token)
			}
		}()
		save = func() error {
			saved = true
			return rl.sessions.end(context.WithoutCancel(r.Context()), in.SessionID, token, user, modelMessage{Role: "assistant", Content: answer.String()})
		}
	}
	req.Messages = append(req.Messages, user)
	req.Stream = true
	body, err := json.Marshal(req)
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	mreq, err := http.NewRequestWithContext(r.Context(), http.MethodPost, rl.url, bytes.NewReader(body))
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	mreq.Header.Set("Content-Type", "application/json")
	mreq.Header.Set("Accept", "text/event-stream")
	if rl.key != "" {
		mreq.Header.Set("Authorization", "Bearer "+rl.key)
	}
	resp, err := rl.client.Do(mreq)
	if err != nil {
		jsonError(w, http.StatusBadGateway, "model_error", err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		jsonError(w, http.StatusBadGateway, "model_error", fmt.Sprintf("the model answered %s: %s", resp.Status, strings.TrimSpace(string(b))))
		return
	}

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	w.WriteHeader(http.StatusOK)
	out := frameWriter{w: w, rc: http.NewResponseController(w)}
	id := newID()
	textID := id + "-text"
	out.send(uiChunk{Type: "start", MessageID: id})
	textOpen := false
	finish, err := relayModel(resp.Body, func(delta string) error {
		if !textOpen {
			textOpen = true
			if err := out.send(uiChunk{Type: "text-start", ID: textID}); err != nil {
				return err
			}
		}
		if save != nil {
			answer.WriteString(delta)
		}
		return out.send(uiChunk{Type: "text-delta", ID: textID, Delta: delta})
	})
	if err == nil {
		drainEnd(resp.Body)
	}
	if out.err != nil {
		return // the client is gone
	}
	if save != nil && err == nil {
		err = save()
	}
	// The closing frames are written, not flushed: net/http writes them
	// with the response's end when the handler returns, in one write. A
	// client that stops reading at [DONE] then finds the response complete
	// and keeps the connection, as the runtime's clients do.
	out.last = true
	if textOpen {
		out.send(uiChunk{Type: "text-end", ID: textID})
	}
	if err != nil {
		out.send(uiChunk{Type: "error", ErrorText: "model_error: " + err.Error()})
		finish = "error"
	}
	out.send(uiChunk{Type: "finish", FinishReason: finish})
	out.raw([]byte("[DONE]"))
}

// drainEnd reads the model's response to its end after [DONE], as agentdock
// serve's provider does (llmorch/provider's drainEnd, with the same
// bounds): net/http reuses a connection only when its response was read to
// the end, and the end often comes just after [DONE].
func drainEnd(body io.ReadCloser) {
	t := time.AfterFunc(100*time.Millisecond, func() { body.Close() })
	defer t.Stop()
	var buf [64]byte
	for n := 0; n < 4<<10; {
		k, err := body.Read(buf[:])
		if err != nil {
			return
		}
		n += k
	}
}

// relayModel reads an OpenAI chat completions stream, calls onDelta for every
// text delta, and returns the finish reason in the AI SDK's words.
func relayModel(body io.Reader, onDelta func(string) error) (string, error) {
	br := bufio.NewReader(body)
	finish := "other"
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: copy its start before the
			// buffer is read over.
			head := append([]byte(nil), line...)
			var rest []byte
			rest, err = br.ReadBytes('\n')
			line = append(head, rest...)
		}
		if err != nil {
			if err == io.EOF {
				return finish, errors.New("the model's stream ended before [DONE]")
			}
			return finish, fmt.Errorf("reading the model's stream: %w", err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue // blank lines, comments, event names
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if string(data) == "[DONE]" {
			return finish, nil
		}
		var c modelChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return finish, fmt.Errorf("the model sent a chunk that is not JSON: %w", err)
		}
		if c.Error != nil {
			return finish, fmt.Errorf("the model reported an error: %s", c.Error.Message)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				if err := onDelta(ch.Delta.Content); err != nil {
					return finish, err
				}
			}
			if ch.FinishReason != "" {
				finish = finishReason(ch.FinishReason)
			}
		}
	}
}

// finishReason maps OpenAI's finish reasons to the AI SDK's.
func finishReason(s string) string {
	switch s {
	case "stop", "length":
		return s
	case "content_filter":
		return "content-filter"
	case "tool_calls", "function_call":
		return "tool-calls"
	}
	return "other"
}

// frameWriter writes SSE frames and flushes each (but the closing ones,
// once last is set); after the first failed write (the client went away)
// it writes nothing more.
type frameWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	buf  []byte
	err  error
	last bool
}

func (f *frameWriter) send(c uiChunk) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return f.raw(b)
}

func (f *frameWriter) raw(data []byte) error {
	if f.err != nil {
		return f.err
	}
	f.buf = append(append(append(f.buf[:0], "data: "...), data...), "\n\n"...)
	if _, err := f.w.Write(f.buf); err != nil {
		f.err = err
		return err
	}
	if f.last {
		return nil
	}
	if err := f.rc.Flush(); err != nil {
		f.err = err
	}
	return f.err
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// metrics writes the Go runtime gauges the harness reads, in Prometheus's
// text format and under the names client_golang gives them.
func metrics(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "go_goroutines %d\ngo_memstats_heap_inuse_bytes %d\ngo_memstats_stack_inuse_bytes %d\ngo_memstats_heap_objects %d\n",
		runtime.NumGoroutine(), ms.HeapInuse, ms.StackInuse, ms.HeapObjects)
}

func servePprof(addr string) (*http.Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("PPROF_ADDR %q: want a loopback host:port", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("PPROF_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

func main() {
	if err := run(); err != nil {
		log.Fatal("relay: ", err)
	}
}

func run() error {
	base := strings.TrimRight(os.Getenv("LLM_BASE_URL"), "/")
	if base == "" {
		return errors.New("LLM_BASE_URL is required (the OpenAI-compatible API's base URL, e.g. http://127.0.0.1:8090/v1)")
	}
	req, err := readRequest(os.Getenv("RELAY_REQUEST"))
	if err != nil {
		return err
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8081"
	}
	if p := os.Getenv("PPROF_ADDR"); p != "" {
		ps, err := servePprof(p)
		if err != nil {
			return err
		}
		defer ps.Close()
	}
	rl := &relay{client: &http.Client{Transport: newTransport()}, url: base + "/chat/completions", key: os.Getenv("OPENAI_API_KEY"), base: req}
	if u := os.Getenv("RELAY_REDIS_URL"); u != "" {
		if rl.sessions, err = openSessions(context.Background(), u); err != nil {
			return err
		}
		defer rl.sessions.rc.Close()
	}
	srv := &http.Server{Addr: addr, Handler: rl.handler(), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Printf("relay listening on %s, model %s", ln.Addr(), rl.url)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
