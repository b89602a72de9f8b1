package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/turns"
)

const exploreBody = `{"message":"Please explore options for a team offsite","sessionId":"%s"}`

func exploreFor(sid string) string { return strings.Replace(exploreBody, "%s", sid, 1) }

// startAndCut starts an explorer turn on the session and disconnects after
// its first n frames, which it returns with the turn's ID.
func startAndCut(t *testing.T, e *env, sid string, n int) (turnID string, first []sseEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/api/chat/explorer", strings.NewReader(exploreFor(sid)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := newSSEReader(res.Body)
	for len(first) < n {
		ev, ok := r.next()
		if !ok {
			t.Fatalf("stream ended after %d frames", len(first))
		}
		first = append(first, ev)
	}
	return res.Header.Get("X-Turn-Id"), first
}

// TestResumeAfterDisconnect cuts the connection after n frames and resumes
// with Last-Event-ID: the frames n+1..end come, no duplicate and no gap, and
// together they are exactly the turn's stream.
func TestResumeAfterDisconnect(t *testing.T) {
	e := newEnv(t, envOptions{delay: 2 * time.Millisecond})
	for _, n := range []int{1, 7, 40} {
		sid := "resume-session-" + strings.Repeat("x", n%5+1)
		turnID, first := startAndCut(t, e, sid, n)

		res2 := e.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", first[n-1].ID)
		if res2.StatusCode != http.StatusOK || res2.Header.Get("X-Turn-Id") != turnID {
			t.Fatalf("resume: status %d turn %q", res2.StatusCode, res2.Header.Get("X-Turn-Id"))
		}
		rest := newSSEReader(res2.Body).all()
		res2.Body.Close()
		all := append(first, rest...)
		_, _, text := checkTurnStream(t, turnID, all, 1)

		e.waitIdle(sid)
		var sv sessionView
		getJSON(t, e.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
		if got := sv.Messages[len(sv.Messages)-1].Content; got != text {
			t.Fatalf("n=%d: the streamed answer differs from the saved one", n)
		}
		// Everything was replayed: 204.
		res3 := e.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", all[len(all)-1].ID)
		res3.Body.Close()
		if res3.StatusCode != http.StatusNoContent {
			t.Fatalf("resume after the last frame: %d, want 204", res3.StatusCode)
		}
	}
}

func TestResumeRules(t *testing.T) {
	// The turn must still run when it is resumed without Last-Event-ID:
	// 25 ms per word keeps it running for a second or more.
	e := newEnv(t, envOptions{delay: 25 * time.Millisecond})
	// No turn at all: 204.
	res := e.do(http.MethodGet, "/api/sessions/never-used-session/stream", "")
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("unknown session: %d", res.StatusCode)
	}
	var eb errBodyT
	getJSON(t, e.do(http.MethodGet, "/api/sessions/bad!/stream", ""), http.StatusBadRequest, &eb)
	for _, lei := range []string{"nocolon", "abcdefgh12:x", "abcdefgh12:-1", "bad id:1"} {
		getJSON(t, e.do(http.MethodGet, "/api/sessions/some-session-1/stream", "", "Last-Event-ID", lei), http.StatusBadRequest, &eb)
		if eb.Error.Code != "invalid_last_event_id" {
			t.Fatalf("%q: %+v", lei, eb.Error)
		}
	}

	// Without Last-Event-ID while the turn runs: from its first frame.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/api/chat/explorer", strings.NewReader(exploreFor("running-session")))
	req.Header.Set("Content-Type", "application/json")
	post, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	turnID := post.Header.Get("X-Turn-Id")
	pr := newSSEReader(post.Body)
	pr.next()
	res = e.do(http.MethodGet, "/api/sessions/running-session/stream", "")
	evs := newSSEReader(res.Body).all()
	res.Body.Close()
	checkTurnStream(t, turnID, evs, 1)
	// The Last-Event-ID of another session's turn is as unknown as any:
	// 204, as for a session with nothing running.
	res = e.do(http.MethodGet, "/api/sessions/other-session-1/stream", "", "Last-Event-ID", wire.EventID(turnID, 1))
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("another session's Last-Event-ID: %d, want 204", res.StatusCode)
	}
	// Ahead of the turn.
	getJSON(t, e.do(http.MethodGet, "/api/sessions/running-session/stream", "", "Last-Event-ID", wire.EventID(turnID, 1_000_000)), http.StatusBadRequest, &eb)
	// Finished, no Last-Event-ID: 204 (the answer is in the history).
	res = e.do(http.MethodGet, "/api/sessions/running-session/stream", "")
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("finished turn without Last-Event-ID: %d", res.StatusCode)
	}
	post.Body.Close()
}

// TestDisconnectDoesNotCancelTurn: the client goes away after two frames;
// the turn finishes and its whole answer is in the session history, the
// same answer an uninterrupted turn gives.
func TestDisconnectDoesNotCancelTurn(t *testing.T) {
	e := newEnv(t, envOptions{delay: 2 * time.Millisecond})
	_, whole := e.streamChat("explorer", exploreFor("uninterrupted-1"))
	_, _, want := checkTurnStream(t, eventTurn(whole[0].ID), whole, 1)

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/api/chat/explorer", strings.NewReader(exploreFor("interrupted-1")))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := newSSEReader(res.Body)
	r.next()
	r.next()
	cancel()
	res.Body.Close()
	e.waitIdle("interrupted-1")
	var sv sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/interrupted-1", ""), http.StatusOK, &sv)
	last := sv.Messages[len(sv.Messages)-1]
	if last.Role != chat.RoleAssistant || last.Content != want {
		t.Fatalf("saved answer %q, want the full answer %q", last.Content, want)
	}
	if sv.Turn == nil || sv.Turn.Running {
		t.Fatalf("turn %+v", sv.Turn)
	}
}

func eventTurn(id string) string { tid, _, _ := strings.Cut(id, ":"); return tid }

// finalFrames resumes a finished turn from its start and returns its chunk
// types.
func (e *env) finalTypes(sid string) []string {
	e.t.Helper()
	e.waitIdle(sid)
	turnID := e.latestTurnID(sid)
	res := e.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", wire.EventID(turnID, 0))
	defer res.Body.Close()
	evs := newSSEReader(res.Body).all()
	types, _, _ := checkTurnStream(e.t, turnID, evs, 1)
	return types
}

// The timing tests below give the offline model a pause per word far longer
// than the limit under test, so that on a loaded machine the limit still
// fires long before the turn could end by itself; cancellation interrupts
// the pause, so the tests stay short.
const slowWord = time.Second

func TestDisconnectGraceCancelsTurn(t *testing.T) {
	e := newEnv(t, envOptions{delay: slowWord, rt: func(c *turns.Config) { c.DisconnectGrace = 50 * time.Millisecond }})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/api/chat/plain", strings.NewReader(`{"message":"tell me a long story","sessionId":"grace-session"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	newSSEReader(res.Body).next()
	cancel()
	res.Body.Close()
	types := e.finalTypes("grace-session")
	tail := strings.Join(types[len(types)-3:], ",")
	if tail != "error,finish,[DONE]" {
		t.Fatalf("stream ends %s", tail)
	}
	tr, err := e.srv.rt.Turn(t.Context(), "", "grace-session", e.latestTurnID("grace-session"))
	if err != nil {
		t.Fatal(err)
	}
	var last *chat.Error
	for ev, err := range tr.Events(t.Context(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == chat.KindError {
			last = ev.Error
		}
	}
	if last == nil || last.Code != "client_gone" {
		t.Fatalf("error event %+v", last)
	}
}

// TestTurnTimeout: a turn that reaches its time budget ends cleanly: a
// data-limit frame naming the budget, finish "other", [DONE], the partial
// answer saved and the session free at once.
func TestTurnTimeout(t *testing.T) {
	e := newEnv(t, envOptions{delay: slowWord, budget: llmorch.Budget{TurnTimeout: 300 * time.Millisecond}})
	_, evs := e.streamChat("plain", `{"message":"tell me a long story","sessionId":"timeout-session"}`)
	n := len(evs)
	if chunkType(t, evs[n-2].Data) != "finish" || evs[n-1].Data != "[DONE]" || !strings.Contains(evs[n-2].Data, `"finishReason":"other"`) {
		t.Fatalf("stream ends %v", evs[max(n-3, 0):])
	}
	var limit struct {
		Data struct{ Name, Value, Message string }
	}
	for _, ev := range evs {
		if chunkType(t, ev.Data) == "data-limit" {
			if err := json.Unmarshal([]byte(ev.Data), &limit); err != nil {
				t.Fatal(err)
			}
		}
		if chunkType(t, ev.Data) == "error" {
			t.Fatalf("a budget is not an error: %s", ev.Data)
		}
	}
	if limit.Data.Name != "turnTimeout" || limit.Data.Value != "300ms" || !strings.Contains(limit.Data.Message, "TURN_TIMEOUT") {
		t.Fatalf("limit %+v", limit.Data)
	}
	var sess struct {
		Messages []chat.Message `json:"messages"`
		Turn     struct{ Running bool }
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions/timeout-session", ""), http.StatusOK, &sess)
	if len(sess.Messages) != 2 || sess.Messages[1].Role != chat.RoleAssistant || sess.Messages[1].Content == "" || sess.Turn.Running {
		t.Fatalf("session after the timeout: %+v", sess)
	}
	// The session takes the next turn at once.
	res, _ := e.streamChat("plain", `{"message":"again","sessionId":"timeout-session"}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("next turn: %d", res.StatusCode)
	}
}

// TestHeartbeatAndWriteTimeout: a stream longer than the http.Server's
// WriteTimeout is not cut, and idle gaps carry heartbeat comments.
func TestHeartbeatAndWriteTimeout(t *testing.T) {
	// A word every 100 ms: each pause outlasts the write timeout and holds
	// many heartbeat intervals.
	e := newEnv(t, envOptions{delay: 100 * time.Millisecond, cfg: func(c *Config) {
		c.Heartbeat = 5 * time.Millisecond
		c.WriteTimeout = 50 * time.Millisecond
	}})
	ln := newLocalListener(t)
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	res, err := http.Post("http://"+ln.Addr().String()+"/api/chat/plain", "application/json", strings.NewReader(`{"message":"hello","sessionId":"heartbeat-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start := time.Now()
	r := newSSEReader(res.Body)
	evs := r.all()
	checkTurnStream(t, res.Header.Get("X-Turn-Id"), evs, 1)
	if time.Since(start) < 50*time.Millisecond {
		t.Skip("the turn was shorter than the write timeout; the check proves nothing")
	}
	if r.comments == 0 {
		t.Fatal("no heartbeat comment")
	}
}

// TestShutdownEndsStreams: with the memory store (no replica to hand
// turns to), Serve's shutdown refuses new turns and waits for the running
// ones: a turn that ends within ShutdownTimeout finishes stop; one still
// running when the time is nearly up is cancelled, and its stream gets
// the server_shutdown error, finish and [DONE], the partial answer saved.
func TestShutdownEndsStreams(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		timeout time.Duration
		finish  string
	}{
		// About a second of words, waited for up to 10 s (half the
		// timeout): ample on a loaded machine.
		{name: "a turn that ends in time", delay: 20 * time.Millisecond, timeout: 20 * time.Second, finish: "stop"},
		// A minute of words, cancelled after 1 s.
		{name: "a turn too long", delay: slowWord, timeout: 2 * time.Second, finish: "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{delay: tc.delay, cfg: func(c *Config) { c.ShutdownTimeout = tc.timeout }})
			ln := newLocalListener(t)
			ctx, stop := context.WithCancel(t.Context())
			served := make(chan error, 1)
			go func() { served <- e.srv.Serve(ctx, ln) }()
			res, err := http.Post("http://"+ln.Addr().String()+"/api/chat/plain", "application/json", strings.NewReader(`{"message":"tell me a long story","sessionId":"shutdown-1"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			// Stop once the answer is being written.
			r := newSSEReader(res.Body)
			for {
				ev, ok := r.next()
				if !ok {
					t.Fatal("the stream ended before the first text delta")
				}
				if chunkType(t, ev.Data) == "text-delta" {
					break
				}
			}
			stop()
			rest := r.all()
			n := len(rest)
			if n < 2 || chunkType(t, rest[n-2].Data) != "finish" || rest[n-1].Data != "[DONE]" {
				t.Fatalf("stream ends %v", rest)
			}
			var fin struct{ FinishReason string }
			_ = json.Unmarshal([]byte(rest[n-2].Data), &fin)
			if fin.FinishReason != tc.finish {
				t.Fatalf("finish %q, want %q: %v", fin.FinishReason, tc.finish, rest)
			}
			if tc.finish == "other" && (n < 3 || !strings.Contains(rest[n-3].Data, "server_shutdown")) {
				t.Fatalf("stream ends %v", rest)
			}
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			msgs, err := e.store.Messages(t.Context(), "shutdown-1", 0)
			if err != nil {
				t.Fatal(err)
			}
			if last := msgs[len(msgs)-1]; last.Role != chat.RoleAssistant || last.Content == "" {
				t.Fatalf("partial answer not saved: %+v", msgs)
			}
			var ae *apiError
			if _, err := e.srv.rt.Start(t.Context(), turns.Input{Input: agent.Text("hi"), Agent: "plain", Session: "after-shutdown"}); !errors.As(err, &ae) || ae.Status != 503 {
				t.Fatalf("want 503, got %v", err)
			}
		})
	}
}

// TestShutdownClosesUnusedConnections: a connection that never sent a
// request (a browser's preconnect, a spare in a client's pool) does not
// hold up Serve's shutdown. net/http alone waits 5 s for such a
// connection, longer than this server's ShutdownTimeout, and Serve would
// return its deadline error.
func TestShutdownClosesUnusedConnections(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.ShutdownTimeout = 2 * time.Second }})
	ln := newLocalListener(t)
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	unused, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	// A request on a later connection: the server accepts in order, so it
	// has accepted the unused one when this is answered.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get("http://" + ln.Addr().String() + "/api/agents")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	stop()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_ = unused.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := unused.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the unused connection is still open after the shutdown: read %d, %v", n, err)
	}
}

// countingListener counts the Write calls on the connections it accepts:
// each is one write system call on the server's side of the socket.
// seen, when set, gets each write's bytes.
type countingListener struct {
	net.Listener
	writes atomic.Int64
	seen   func(p []byte)
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	if c.l.seen != nil {
		c.l.seen(p)
	}
	return c.Conn.Write(p)
}

// TestReplayCoalescesWrites replays a finished turn whole over real HTTP:
// its frames are all in the turn's log at once, and they leave in fewer
// writes than frames (flushWriter skips the flush of an event another one
// follows), every one of them intact and in order.
func TestReplayCoalescesWrites(t *testing.T) {
	e := newEnv(t, envOptions{})
	sid := "coalesce-session"
	res := e.do(http.MethodPost, "/api/chat/explorer", exploreFor(sid))
	live := newSSEReader(res.Body).all()
	res.Body.Close()
	turnID := res.Header.Get("X-Turn-Id")
	e.waitIdle(sid)
	if len(live) < 20 {
		t.Fatalf("the turn has %d frames; the test needs a longer one", len(live))
	}

	l := &countingListener{Listener: newLocalListener(t)}
	hs := httptest.NewUnstartedServer(e.srv.Handler())
	hs.Listener = l
	hs.Start()
	defer hs.Close()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/sessions/"+sid+"/stream", nil)
	req.Header.Set("Last-Event-ID", turnID+":0")
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	replay := newSSEReader(res2.Body).all()
	res2.Body.Close()
	if len(replay) != len(live) {
		t.Fatalf("replay from the start: %d frames, want %d", len(replay), len(live))
	}
	for i, ev := range replay {
		if ev.ID != live[i].ID || ev.Data != live[i].Data {
			t.Fatalf("replayed frame %d is %s %s, the live one was %s %s", i, ev.ID, ev.Data, live[i].ID, live[i].Data)
		}
	}
	writes := l.writes.Load()
	t.Logf("%d frames replayed in %d writes", len(replay), writes)
	if writes >= int64(len(replay)) {
		t.Fatalf("%d frames took %d writes: the flushes were not coalesced", len(replay), writes)
	}
}

func newLocalListener(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestStreamEndKeepsConnection: a client that stops reading a stream at
// its [DONE] finds the response complete and keeps its connection for the
// next request. [DONE] leaves in the same write as the response's end
// (sseConn.Flush, turn.addLast): had it been flushed alone, the end
// would follow after r3labs' session ended, the client would close the
// connection unfinished and open a new one. Live streams, replays and /v1
// streams each run three times over one client connection.
func TestStreamEndKeepsConnection(t *testing.T) {
	e := newEnv(t, envOptions{delay: time.Millisecond})
	// Every write with a [DONE] must end the response (the chunked
	// encoding's last chunk): checked on the wire, whatever the client
	// managed to read before it stopped.
	var (
		mu      sync.Mutex
		dones   int
		alone   []string
		done    = []byte("data: [DONE]")
		lastEnd = []byte("\r\n0\r\n\r\n")
	)
	l := &countingListener{Listener: newLocalListener(t), seen: func(p []byte) {
		if !bytes.Contains(p, done) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		dones++
		if !bytes.HasSuffix(p, lastEnd) {
			alone = append(alone, fmt.Sprintf("%q", p[max(0, len(p)-80):]))
		}
	}}
	var accepted atomic.Int64
	hs := httptest.NewUnstartedServer(e.srv.Handler())
	hs.Listener = l
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	hs.Start()
	defer hs.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	// untilDone sends a request and reads its stream up to [DONE], then
	// closes the body without reading on; it reports whether the request
	// went over a connection used before, and the turn's ID.
	untilDone := func(method, path, body string, headers ...string) (reused bool, turnID string) {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("%s %s: %s: %s", method, path, res.Status, b)
		}
		rd := newSSEReader(res.Body)
		for {
			ev, ok := rd.next()
			if !ok {
				t.Fatalf("%s %s: the stream ended before [DONE]", method, path)
			}
			if ev.Data == "[DONE]" {
				return reused, res.Header.Get("X-Turn-Id")
			}
		}
	}

	check := func(what string, i int, reused bool) {
		t.Helper()
		if i > 0 && !reused {
			t.Errorf("%s %d: a new connection; the one before was left unfinished at [DONE]", what, i+1)
		}
	}
	sid := "keepconn-session"
	var lastTurn string
	for i := range 3 {
		reused, turnID := untilDone(http.MethodPost, "/api/chat/explorer", exploreFor(sid))
		check("live turn", i, reused)
		e.waitIdle(sid)
		lastTurn = turnID
	}
	for i := range 3 {
		reused, _ := untilDone(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", lastTurn+":0")
		check("replay", i+1, reused)
	}
	for i := range 3 {
		v1 := "keepconn-v1-" + strconv.Itoa(i)
		body := `{"model":"plain","stream":true,"messages":[{"role":"user","content":"hello"}]}`
		reused, _ := untilDone(http.MethodPost, "/v1/chat/completions", body, "X-Session-Id", v1)
		check("/v1 stream", i+1, reused)
		e.waitIdle(v1)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the server accepted %d connections for 9 streams read to [DONE], want 1", n)
	}
	hs.Close() // every handler has returned: their writes are all in
	mu.Lock()
	defer mu.Unlock()
	if dones != 9 || len(alone) > 0 {
		t.Fatalf("%d writes carried a [DONE], want 9, each with the response's end; without it: %v", dones, alone)
	}
}
