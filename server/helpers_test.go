package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turns"
)

// env is a server on a real loopback listener with the real agent package,
// the cognitive tools and the offline model.
type env struct {
	t     testing.TB
	srv   *Server
	http  *httptest.Server
	store session.Store
	base  string
	// log is the turn log the env's replica shares (replica), nil for a
	// single server.
	log turnlog.Log
}

type envOptions struct {
	delay time.Duration // the offline model's delay between words
	cfg   func(*Config)
	// rt adjusts the runtime's configuration.
	rt func(*turns.Config)
	// budget bounds the agents' turns.
	budget llmorch.Budget
	// store is the session store (default: a new memory store); the env
	// closes it.
	store session.Store
	// log is the shared turn log (replica); journal: the turns keep a
	// journal, so that another replica can take them over (as
	// cmd/server configures a deployment with Redis).
	log     turnlog.Log
	journal bool
	// model answers every agent (default: the offline model).
	model llmorch.Model
	// templates is the directory of the agents' templates (default
	// testdata/templates).
	templates string
	// tools are added to the cognitive tools.
	tools []tools.Tool
	// connState is the HTTP server's ConnState hook, set before it starts
	// (setting it later races with the accept loop).
	connState func(net.Conn, http.ConnState)
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	var store session.Store = session.NewMemory(session.Config{})
	if o.store != nil {
		store = o.store
	}
	reg, err := tools.NewRegistry(append(tools.CognitiveTools(), o.tools...)...)
	if err != nil {
		t.Fatal(err)
	}
	dir := "testdata/templates"
	if o.templates != "" {
		dir = o.templates
	}
	results, err := template.LoadPath(dir, template.Config{Provided: reg.Names()})
	if err != nil {
		t.Fatal(err)
	}
	var loaded []*template.Loaded
	for _, r := range results {
		if r.Loaded == nil {
			t.Fatalf("template %s did not load: %v", r.File, r.Diagnostics)
		}
		loaded = append(loaded, r.Loaded)
	}
	var model llmorch.Model = offline.New(offline.Config{Delay: o.delay})
	if o.model != nil {
		model = o.model
	}
	var streamed agent.StreamReader
	if o.journal && o.log != nil {
		streamed = turns.StreamedSteps(o.log)
	}
	agents, err := agent.NewSet(agent.Options{
		Store:         store,
		ToolsFor:      func(*template.Loaded) tools.Toolbox { return reg },
		Models:        func(*template.Template) (llmorch.Model, error) { return model, nil },
		Logger:        slog.New(slog.DiscardHandler),
		Budget:        o.budget,
		StreamedSteps: streamed,
	}, loaded)
	if err != nil {
		t.Fatal(err)
	}
	rcfg := turns.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler)}
	if o.rt != nil {
		o.rt(&rcfg)
	}
	rt, err := turns.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ConnState = o.connState
	hs.Start()
	e := &env{t: t, srv: s, http: hs, store: store, base: hs.URL, log: o.log}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
		store.Close()
	})
	return e
}

// do sends a request and returns the response; the caller closes its body.
func (e *env) do(method, path string, body string, headers ...string) *http.Response {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// getJSON decodes a response body, checking the status.
func getJSON(t testing.TB, res *http.Response, status int, v any) {
	t.Helper()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", res.Request.Method, res.Request.URL.Path, res.StatusCode, status, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
	}
}

type errBodyT struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// sseEvent is one SSE event as a client parses it.
// sseEvent is one SSE event as an EventSource sees it: ID is the stream's
// last event ID when it comes (the event's own when it has one, HasID).
// The server puts the ID of a turn's event on the last chunk it maps to.
type sseEvent struct {
	ID, Data string
	HasID    bool
}

// sseReader parses an SSE body.
type sseReader struct {
	sc       *bufio.Scanner
	comments int
	lastID   string
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &sseReader{sc: sc}
}

// next returns the next event; ok is false at the end of the body.
func (r *sseReader) next() (ev sseEvent, ok bool) {
	var data []string
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if data != nil {
				ev.Data = strings.Join(data, "\n")
				if ev.HasID {
					r.lastID = ev.ID
				} else {
					ev.ID = r.lastID
				}
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			r.comments++
		case strings.HasPrefix(line, "id:"):
			ev.ID, ev.HasID = strings.TrimSpace(strings.TrimPrefix(line, "id:")), true
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return ev, false
}

func (r *sseReader) all() []sseEvent {
	var out []sseEvent
	for {
		ev, ok := r.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// chunkType returns the "type" of a UI stream chunk ("[DONE]" for the end).
func chunkType(t testing.TB, data string) string {
	t.Helper()
	if data == "[DONE]" {
		return data
	}
	var c struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("frame data is not JSON: %q: %v", data, err)
	}
	return c.Type
}

func jsonBody(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return b.String()
}

// waitIdle waits until the session's latest turn finished.
func (e *env) waitIdle(sessionID string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// sessionID may be a store key (session.Key of an owner).
		if sess, err := e.store.Get(context.Background(), sessionID); err == nil {
			if st, _ := e.srv.rt.Latest(context.Background(), sess); st != nil && !st.Running {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("the turn of session %s did not finish", sessionID)
}

func mustAgent(t *testing.T, e *env, id string) *agent.Agent {
	t.Helper()
	n, ok := e.srv.rt.Agents().Get(id)
	if !ok {
		t.Fatalf("no agent %s", id)
	}
	return n
}

// latestTurnID is the ID of the session's latest turn (of the anonymous
// owner), once it finished.
func (e *env) latestTurnID(sessionID string) string {
	e.t.Helper()
	e.waitIdle(sessionID)
	sess, err := e.srv.rt.Session(context.Background(), "", sessionID)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := e.srv.rt.Latest(context.Background(), sess)
	if err != nil || st == nil {
		e.t.Fatalf("no latest turn of %s: %v", sessionID, err)
	}
	return st.ID
}
