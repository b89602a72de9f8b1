package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/redis/go-redis/v9"
)

// The hostile-input tests (issue 13): what a model or a client sends must
// not lose, break or hold a session. Each runs the real binary and checks
// what the client saw and what the session holds afterwards.

// TestThousandToolCalls: a model answer with 1,000 tool calls runs the
// first MAX_TOOL_CALLS (16), refuses the next and drops the rest; the
// history keeps the turn's user message and stays small; the next turn
// sends the model the whole conversation.
func TestThousandToolCalls(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	const sid = "thousand-calls-1"
	calls := make([]mockllm.ToolCall, 1000)
	for i := range calls {
		calls[i] = mockllm.ToolCall{ID: fmt.Sprintf("call_%04d", i), Name: "think", Arguments: `{"topic":"t","reasoning":"r"}`}
	}
	m.Enqueue(mockllm.Script{ToolCalls: calls, ArgPieces: 1}, mockllm.TextScript("Done thinking."))
	r := runTurn(t, srv.URL(), sid, "think a lot")
	if l := limitsOf(r.frames); len(l) != 1 || l[0] != "maxToolCalls" || r.reason != "stop" || len(r.errs) > 0 {
		t.Fatalf("limits %q, finish %q, errors %q", l, r.reason, r.errs)
	}
	ran, refused := 0, 0
	for _, f := range r.frames {
		switch f.Type() {
		case "tool-output-available":
			ran++
		case "tool-output-error":
			refused++
		}
	}
	if ran != 16 || refused != 1 {
		t.Fatalf("%d calls ran and %d were refused; want 16 and 1", ran, refused)
	}
	view := requireConsistent(t, srv.URL(), sid)
	msgs := view.Messages
	if len(msgs) != 1+1+17+1 || msgs[0].Role != "user" || msgs[0].Content != "think a lot" || msgs[len(msgs)-1].Content != "Done thinking." {
		t.Fatalf("history of %d messages, first %+v", len(msgs), msgs[0])
	}
	if n := view.State.RecentlyUsedTools.Len(); n != 16 {
		t.Fatalf("%d tools recorded, want 16", n)
	}
	// The next turn: the model gets the whole conversation.
	before := len(m.Requests())
	m.Enqueue(mockllm.TextScript("Again."))
	if r := runTurn(t, srv.URL(), sid, "and now?"); r.reason != "stop" {
		t.Fatalf("the next turn: %q %q", r.reason, r.errs)
	}
	req := m.Requests()[before]
	if n := len(req.Messages); n != len(msgs)+1 || req.Messages[0].Text != "think a lot" { // the history, the new message
		t.Fatalf("the next turn sent the model %d messages (the first %+v), want the %d of the history and the new one", n, req.Messages[0], len(msgs))
	}
}

// TestEndlessAnswer: a model that streams without end is cut at the output
// budget: the client gets the maxOutputBytes limit and finish "length",
// the session stays under 1 MiB, and the next turn runs at once.
func TestEndlessAnswer(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	const sid = "endless-answer-1"
	// 500,000 deltas, about 4 MB: far past the budget, as good as endless.
	m.Enqueue(mockllm.Script{Chunks: 500_000})
	start := time.Now()
	r := runTurn(t, srv.URL(), sid, "go on forever")
	if l := limitsOf(r.frames); len(l) != 1 || l[0] != "maxOutputBytes" || r.reason != "length" || len(r.errs) > 0 {
		t.Fatalf("limits %q, finish %q, errors %q", l, r.reason, r.errs)
	}
	if n := len(textOf(r.frames)); n != 256<<10 {
		t.Fatalf("the client got %d bytes of text, want the budget of %d", n, 256<<10)
	}
	t.Logf("the endless answer was cut after %v", time.Since(start).Round(time.Millisecond))
	_, status, raw := getSession(t, srv.URL(), sid)
	if status != http.StatusOK || len(raw) >= 1<<20 {
		t.Fatalf("the session: %d, %d bytes; want under 1 MiB", status, len(raw))
	}
	next := tryChat(t, srv.URL(), agentID, sid, "short one please")
	if next.Status != http.StatusOK {
		t.Fatalf("the next turn: %d %s", next.Status, next.Body)
	}
	if f := next.All(15 * time.Second); requireEnd(t, f) != "stop" {
		t.Fatalf("the next turn: %s", dataOf(f))
	}
}

// rawHTTP writes req on a new connection, in pieces every gap when pieces
// is set, and returns the answer's status and JSON error code, and when
// the answer came.
func rawHTTP(t *testing.T, addr, head string, body []string, gap time.Duration, wait time.Duration) (status int, code string, took time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *http.Response
		err error
	}
	got := make(chan answer, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		got <- answer{res, err}
	}()
	var a answer
send:
	for _, piece := range body {
		select {
		case a = <-got:
			break send
		case <-time.After(gap):
		}
		if _, err := io.WriteString(c, piece); err != nil {
			break
		}
	}
	if a.res == nil && a.err == nil {
		a = <-got
	}
	if a.err != nil {
		t.Fatalf("no answer within %v: %v", wait, a.err)
	}
	defer a.res.Body.Close()
	took = time.Since(start)
	var eb struct{ Error struct{ Code string } }
	if err := json.NewDecoder(a.res.Body).Decode(&eb); err != nil {
		t.Fatalf("answer %d is not a JSON error: %v", a.res.StatusCode, err)
	}
	return a.res.StatusCode, eb.Error.Code, took
}

// TestHostileClients: a body sent one byte a second is cut at READ_TIMEOUT;
// with API keys a keyless POST whose body never completes gets its 401 at
// once; a cross-site text/plain POST and a body that is not UTF-8 are
// refused without a turn; a client-chosen session ID under another key is
// another session.
func TestHostileClients(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, append(modelEnv(m), "READ_TIMEOUT=3s")...)
	addr := strings.TrimPrefix(srv.URL(), "http://")

	t.Run("slow body", func(t *testing.T) {
		body := `{"message":"slowly","sessionId":"slow-body-session"}`
		pieces := strings.Split(body, "")
		status, code, took := rawHTTP(t, addr, fmt.Sprintf("POST /api/chat/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", agentID, addr, len(body)), pieces, time.Second, 30*time.Second)
		if status != http.StatusRequestTimeout || code != "request_timeout" {
			t.Fatalf("%d %s after %v", status, code, took)
		}
		t.Logf("cut after %v (READ_TIMEOUT 3s; the body needed %d s)", took.Round(time.Millisecond), len(body))
		if took > 10*time.Second {
			t.Errorf("the slow body was answered after %v, not within a few seconds of READ_TIMEOUT", took)
		}
	})

	t.Run("cross-site text/plain", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/api/chat/"+agentID, strings.NewReader(`{"message":"hi","sessionId":"cross-site-session"}`))
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		req.Header.Set("Origin", "https://attacker.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-site POST: %d", res.StatusCode)
		}
		if _, status, _ := getSession(t, srv.URL(), "cross-site-session"); status != http.StatusNotFound {
			t.Fatalf("the refused POST left a session: %d", status)
		}
	})

	t.Run("invalid UTF-8", func(t *testing.T) {
		res, err := http.Post(srv.URL()+"/api/chat/"+agentID, "application/json", strings.NewReader("{\"message\":\"caf\xe9\",\"sessionId\":\"utf8-session-1\"}"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_message"`) || !strings.Contains(string(b), "line 1, column 16") {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
		if _, status, _ := getSession(t, srv.URL(), "utf8-session-1"); status != http.StatusNotFound {
			t.Fatalf("the refused POST left a session: %d", status)
		}
	})

	keyed := startServer(t, append(modelEnv(m), "API_KEYS=key-one,key-two", "API_KEY_SECRET=hostile-test")...)
	t.Run("keyless unfinished body", func(t *testing.T) {
		kaddr := strings.TrimPrefix(keyed.URL(), "http://")
		status, code, took := rawHTTP(t, kaddr, "POST /api/chat/"+agentID+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"mess", nil, 0, 10*time.Second)
		if status != http.StatusUnauthorized || code != "unauthorized" {
			t.Fatalf("%d %s", status, code)
		}
		t.Logf("401 after %v (READ_TIMEOUT is 30 s here)", took.Round(time.Millisecond))
	})

	t.Run("one ID under two keys", func(t *testing.T) {
		turn := func(key, msg string) *stream {
			req, _ := http.NewRequest(http.MethodPost, keyed.URL()+"/api/chat/"+agentID, strings.NewReader(`{"message":"`+msg+`","sessionId":"shared-client-id"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Api-Key", key)
			return open(t, req)
		}
		get := func(key string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, keyed.URL()+"/api/sessions/shared-client-id", nil)
			req.Header.Set("X-Api-Key", key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return res.StatusCode, string(b)
		}
		if st, _ := get("key-two"); st != http.StatusNotFound {
			t.Fatalf("before any turn: %d", st)
		}
		m.Enqueue(mockllm.TextScript("for one"))
		if s := turn("key-one", "from one"); s.Status != http.StatusOK || requireEnd(t, s.All(10*time.Second)) != "stop" {
			t.Fatalf("key-one's turn: %d %s", s.Status, s.Body)
		}
		// key-two: the same ID is unknown (as any absent ID), then its own.
		if st, body := get("key-two"); st != http.StatusNotFound || !strings.Contains(body, "session_not_found") {
			t.Fatalf("key-two reading key-one's ID: %d %s", st, body)
		}
		m.Enqueue(mockllm.TextScript("for two"))
		if s := turn("key-two", "from two"); s.Status != http.StatusOK || requireEnd(t, s.All(10*time.Second)) != "stop" {
			t.Fatalf("key-two's turn: %d %s", s.Status, s.Body)
		}
		st1, one := get("key-one")
		st2, two := get("key-two")
		if st1 != http.StatusOK || st2 != http.StatusOK || !strings.Contains(one, "from one") || strings.Contains(one, "from two") ||
			!strings.Contains(two, "from two") || strings.Contains(two, "from one") {
			t.Fatalf("key-one's session %d %s\nkey-two's %d %s", st1, one, st2, two)
		}
	})
}

// TestRedisPausedMidTurn: redis-server paused (SIGSTOP) while a turn
// streams, for longer than its round-trip timeouts: the turn's writes are
// resent until Redis answers, so the turn ends as it would have (finish
// stop, no error frame, nothing that invites a retry) with its answer and
// usage saved exactly once. The slow variant pauses 10 s.
func TestRedisPausedMidTurn(t *testing.T) {
	pauses := []time.Duration{3 * time.Second}
	if testingSlow() {
		pauses = append(pauses, 10*time.Second)
	}
	for _, pause := range pauses {
		t.Run(pause.String(), func(t *testing.T) {
			rs := redistest.Start(t)
			m := newModel(t)
			srv := startServer(t, append(modelEnv(m), "SESSION_STORE="+rs.URL(), "REDIS_DIAL_TIMEOUT=200ms", "REDIS_READ_TIMEOUT=500ms", "REDIS_WRITE_TIMEOUT=500ms")...)
			const sid = "redis-pause-session"
			answer := slowText(40)
			answer.Usage = &mockllm.Usage{Input: 11, Output: 7}
			m.Enqueue(answer)
			s := chat(t, srv.URL(), agentID, sid, "pause me")
			frames := s.Until("text-delta", 10*time.Second)
			rs.Pause()
			resumed := make(chan struct{})
			go func() {
				time.Sleep(pause)
				rs.Resume()
				close(resumed)
			}()
			frames = append(frames, s.All(pause+30*time.Second)...)
			<-resumed
			if reason, errs := requireEnd(t, frames), errorTexts(frames); reason != "stop" || len(errs) > 0 {
				t.Fatalf("finish %q, errors %q; the answer was saved, so no error may invite a retry", reason, errs)
			}
			view := requireConsistent(t, srv.URL(), sid)
			want := strings.Join(answer.Text, "")
			if n := len(view.Messages); n != 2 || view.Messages[1].Content != want {
				raw, _ := json.Marshal(view.Messages)
				t.Fatalf("history %s; want the question and the whole answer once", raw)
			}
			if u := view.State.TokenUsage; u.Prompt != 11 || u.Completion != 7 {
				t.Fatalf("usage %+v, want it counted once", u)
			}
		})
	}
}

// testingSlow reports whether the slow variants run (AGENTDOCK_SLOW_FAULTS=1).
func testingSlow() bool { return os.Getenv("AGENTDOCK_SLOW_FAULTS") == "1" }

// TestRedisLosesDataMidTurn: redis-server killed mid-turn and back empty
// (no persistence): the turn's lease is gone with the data, so its writes
// are refused; the client is told so by an error frame, never a quiet
// "other" finish, and the session takes the next turn.
func TestRedisLosesDataMidTurn(t *testing.T) {
	rs := redistest.Start(t)
	m := newModel(t)
	srv := startServer(t, append(modelEnv(m), "SESSION_STORE="+rs.URL(), "REDIS_DIAL_TIMEOUT=200ms", "REDIS_READ_TIMEOUT=500ms", "REDIS_WRITE_TIMEOUT=500ms")...)
	const sid = "redis-lost-session"
	m.Enqueue(slowText(60))
	s := chat(t, srv.URL(), agentID, sid, "lose it")
	frames := s.Until("text-delta", 10*time.Second)
	killRedis(t, rs)
	rs.Restart()
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rc.Close()
	if err := rc.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	frames = append(frames, s.All(30*time.Second)...)
	reason, errs := requireEnd(t, frames), errorTexts(frames)
	if reason != "error" || len(errs) != 1 || !(strings.HasPrefix(errs[0], "session_lease_lost:") || strings.HasPrefix(errs[0], "store_unavailable:")) {
		t.Fatalf("finish %q, errors %q; want one error frame saying the turn lost the session or the store", reason, errs)
	}
	t.Logf("error frame: %s", errs[0])
	m.Enqueue(mockllm.TextScript("Fresh", " start."))
	if r := runTurn(t, srv.URL(), sid, "again"); r.reason != "stop" || len(r.errs) > 0 || textOf(r.frames) != "Fresh start." {
		t.Fatalf("the next turn: %q %q %q", r.reason, r.errs, textOf(r.frames))
	}
}
