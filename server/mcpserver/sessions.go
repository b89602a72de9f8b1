package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The JSON-RPC error codes of the edge's own refusals, in the range the
// spec leaves to servers.
const (
	codeSessionNotFound = -32001
	codeTooManySessions = -32002
)

// sessionTable holds the edge's MCP sessions: each one's owner, and how
// many each holder (an owner, or a client address for the anonymous owner)
// has, so that an initialize past a cap is refused before the SDK builds
// anything. It learns of a session from the Mcp-Session-Id of the answer
// that opened it (bind), and of its end from a DELETE (drop) or, for a
// session the SDK closed by itself (idle, or initialization failed), from
// the server's live sessions, read when a cap would refuse (sync).
type sessionTable struct {
	maxTotal, maxPerHolder int
	// live yields the IDs of the sessions the SDK holds.
	live func(yield func(string) bool)

	mu       sync.Mutex
	sessions map[string]tableEntry
	held     map[string]int // holder -> sessions, bound and reserved
	total    int
	synced   time.Time
	now      func() time.Time
}

type tableEntry struct{ owner, holder string }

// syncEvery bounds how often a refusal reads the SDK's live sessions: a
// flood of refused initialize requests costs a map lookup each.
const syncEvery = time.Second

func newSessionTable(maxTotal, maxPerHolder int, live iter.Seq[string]) *sessionTable {
	return &sessionTable{maxTotal: maxTotal, maxPerHolder: maxPerHolder, live: live,
		sessions: map[string]tableEntry{}, held: map[string]int{}, now: time.Now}
}

// capError is a refused reservation.
type capError struct {
	total bool // MaxSessions, else SessionsPerOwner
	max   int
}

func (e *capError) message(idle time.Duration) string {
	if e.total {
		return fmt.Sprintf("the server holds %d MCP sessions, the most it may (MCP_MAX_SESSIONS); try again later, or call without a session (protocol 2026-07-28)", e.max)
	}
	return fmt.Sprintf("this key (or, without API keys, this address) holds %d MCP sessions, the most it may (MCP_SESSIONS_PER_OWNER); end one with DELETE /mcp, or wait for one to be idle for %s", e.max, idle)
}

// reserve takes a place for a session of holder, or says which cap is
// reached.
func (t *sessionTable) reserve(holder string) *capError {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.full(holder); err != nil {
		if now := t.now(); now.Sub(t.synced) >= syncEvery {
			t.synced = now
			t.sync()
		}
		if err := t.full(holder); err != nil {
			return err
		}
	}
	t.held[holder]++
	t.total++
	return nil
}

// full reports the cap holder is at. t.mu is held.
func (t *sessionTable) full(holder string) *capError {
	switch {
	case t.maxTotal > 0 && t.total >= t.maxTotal:
		return &capError{total: true, max: t.maxTotal}
	case t.maxPerHolder > 0 && t.held[holder] >= t.maxPerHolder:
		return &capError{max: t.maxPerHolder}
	}
	return nil
}

// sync drops the sessions the SDK no longer holds. t.mu is held.
func (t *sessionTable) sync() {
	alive := make(map[string]bool, len(t.sessions))
	for id := range t.live {
		alive[id] = true
	}
	for id := range t.sessions {
		if !alive[id] {
			t.dropLocked(id)
		}
	}
}

// bind makes holder's reservation the session id of owner; false when the
// session is bound already (the reservation is left to release).
func (t *sessionTable) bind(holder, owner, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.sessions[id]; ok {
		return false
	}
	t.sessions[id] = tableEntry{owner: owner, holder: holder}
	return true
}

// release gives back a reservation no session took.
func (t *sessionTable) release(holder string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unhold(holder)
}

// ownerOf is the owner of session id, if the table holds it.
func (t *sessionTable) ownerOf(id string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.sessions[id]
	return e.owner, ok
}

// drop forgets session id, which ended.
func (t *sessionTable) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropLocked(id)
}

func (t *sessionTable) dropLocked(id string) {
	if e, ok := t.sessions[id]; ok {
		delete(t.sessions, id)
		t.unhold(e.holder)
	}
}

func (t *sessionTable) unhold(holder string) {
	t.total--
	if t.held[holder]--; t.held[holder] <= 0 {
		delete(t.held, holder)
	}
}

// len is how many sessions are held or reserved.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// clientAddr is the peer's address, without its port.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// peeked is what the edge reads of a POST body before the SDK does: the
// request's ID, for the error that refuses it, and whether it is an
// initialize (one in a batch, before 2025-06-18).
type peeked struct {
	id         json.RawMessage
	initialize bool
}

// peek reads r's body (bounded by the API's body limit before the edge)
// and puts it back for the SDK.
func peek(r *http.Request) peeked {
	var p peeked
	if r.Method != http.MethodPost || r.Body == nil {
		return p
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		// The SDK reads what is left and answers the error itself.
		return p
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var list []message
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		_ = json.Unmarshal(b, &list)
	} else {
		var m message
		if json.Unmarshal(b, &m) == nil {
			list = []message{m}
		}
	}
	for _, m := range list {
		if m.Method == "initialize" {
			p.initialize = true
		}
		if p.id == nil && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) {
			p.id = m.ID
		}
	}
	return p
}

// peekID is the request ID of r's body, when it is one request.
func peekID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost {
		return nil
	}
	return peek(r).id
}

// writeError answers a JSON-RPC error response: the request's id (null
// when unknown), the code and the message, with the HTTP status.
func writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// rpcErrors is the response writer the SDK answers through: a protocol
// error it answers as plain text (http.Error) is answered as a JSON-RPC
// error instead, as every other door of the API answers JSON; onHead, when
// set, sees the status before the head is written.
type rpcErrors struct {
	http.ResponseWriter
	id     json.RawMessage
	onHead func(status int)
	status int
	// plain holds the text of a plain-text error, written by finish.
	plain     *bytes.Buffer
	wroteHead bool
}

func (w *rpcErrors) WriteHeader(status int) {
	if w.wroteHead {
		return
	}
	w.wroteHead, w.status = true, status
	if w.onHead != nil {
		w.onHead(status)
	}
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.plain = &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *rpcErrors) Write(p []byte) (int, error) {
	if !w.wroteHead {
		w.WriteHeader(http.StatusOK)
	}
	if w.plain != nil {
		if w.plain.Len() < 4096 {
			w.plain.Write(p[:min(len(p), 4096-w.plain.Len())])
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush and Unwrap let the SDK stream through the writer.
func (w *rpcErrors) Flush() {
	if w.plain != nil {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *rpcErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the JSON-RPC error of a plain-text answer.
func (w *rpcErrors) finish() {
	if w.plain == nil {
		return
	}
	msg := strings.TrimSpace(w.plain.String())
	code := -32600 // Invalid Request
	switch {
	case w.status == http.StatusNotFound:
		code = codeSessionNotFound
	case strings.HasPrefix(msg, "malformed payload"):
		code = -32700 // Parse error
	case w.status >= 500:
		code = -32603 // Internal error
	}
	writeError(w.ResponseWriter, w.status, w.id, code, msg)
}
