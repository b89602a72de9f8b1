package faults

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The control agent asks before it thinks, and searches freely: the tests
// of a person's control of a turn (issue 14) stop its turns and answer its
// approvals on either of two replicas.
const controlAgent = "control"

const controlTemplate = `{
  "agentId": "control",
  "name": "Control",
  "personality": ["You answer briefly."],
  "nodes": ["llm.openai", "think", "search"],
  "nodeConfigurations": {"llm.openai": {"model": "mock-model", "maxTokens": 256}},
  "options": {"maxSteps": 4, "requireApproval": ["think"]}
}
`

// controlTemplates writes the control agent's template into a new
// directory for TEMPLATES_DIR.
func controlTemplates(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, controlAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, controlAgent, "template.json"), []byte(controlTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// controlReplicas starts two replicas on one redis-server serving the
// control agent; the search tool's SearXNG is search (nil: none).
func controlReplicas(t testing.TB, m *mockllm.Server, search *httptest.Server) (a, b *serverProc) {
	t.Helper()
	dir := controlTemplates(t)
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms", "SESSION_LOCK_TTL=2s", "TEMPLATES_DIR="+dir)
	if search != nil {
		env = append(env, "SEARXNG_URL="+search.URL)
	}
	return startServer(t, env...), startServer(t, env...)
}

// postJSON posts body to base+path and returns the status and the body.
func postJSON(t testing.TB, base, path string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(http.MethodPost, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

func stopTurn(t testing.TB, base, sid string) (int, string) {
	t.Helper()
	return postJSON(t, base, "/api/sessions/"+sid+"/stop", nil)
}

// answer posts the plain approvals shape and returns the stream.
func answer(t *testing.T, base, sid string, answers ...map[string]any) *stream {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"sessionId": sid, "approvals": answers})
	req, err := http.NewRequest(http.MethodPost, base+"/api/chat/"+controlAgent, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return open(t, req)
}

func framesOf(frames []frame, typ string) []frame {
	var out []frame
	for _, f := range frames {
		if f.Type() == typ {
			out = append(out, f)
		}
	}
	return out
}

// requireStopped checks a stopped turn's end: an abort frame with the
// user's reason, then finish and [DONE], and no error frame.
func requireStopped(t *testing.T, frames []frame) {
	t.Helper()
	requireEnd(t, frames)
	n := len(frames)
	if frames[n-3].Type() != "abort" || frames[n-3].Field("reason") != "stopped by the user" {
		t.Fatalf("the stream does not end with abort, finish, [DONE]: %s", dataOf(frames[max(0, n-5):]))
	}
	if errs := errorTexts(frames); len(errs) > 0 {
		t.Fatalf("a stopped turn has error frames: %v", errs)
	}
}

// TestStopAcrossReplicas: a running turn is stopped through the replica
// running it or the other one: the stream ends with abort, finish and
// [DONE] within a second, the partial answer is saved, and the session
// takes the next turn at once, on either replica.
func TestStopAcrossReplicas(t *testing.T) {
	m := newModel(t)
	a, b := controlReplicas(t, m, nil)
	for _, tc := range []struct {
		name string
		stop *serverProc
	}{{"same replica", a}, {"other replica", b}} {
		t.Run(tc.name, func(t *testing.T) {
			sid := session.NewID()
			m.Enqueue(paced(400, 20*time.Millisecond))
			s := chat(t, a.URL(), controlAgent, sid, "a long answer please")
			before := s.Until("text-delta", 10*time.Second)
			for range 5 {
				f, err := s.Next(5 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				before = append(before, f)
			}
			sent := time.Now()
			if status, body := stopTurn(t, tc.stop.URL(), sid); status != http.StatusAccepted || !strings.Contains(body, s.Header.Get("X-Turn-Id")) {
				t.Fatalf("stop: %d %s, want 202 naming the turn", status, body)
			}
			rest := s.All(10 * time.Second)
			all := append(before, rest...)
			requireStopped(t, all)
			var abortAt time.Time
			for _, f := range rest {
				if f.Type() == "abort" {
					abortAt = f.At
				}
			}
			if took := abortAt.Sub(sent); took > time.Second {
				t.Errorf("the abort frame came %v after the stop request; the bound is 1 s", took)
			}
			partial := textOf(all)
			if partial == "" || len(partial) >= len(strings.Join(paced(400, 0).Text, "")) {
				t.Fatalf("the answer was not cut: %d bytes", len(partial))
			}
			// The partial answer is saved and the session is free at once.
			view, _, raw := getSession(t, b.URL(), sid)
			if n := len(view.Messages); n != 2 || view.Messages[1].Content != partial {
				t.Fatalf("the saved history %s, want the user message and the partial answer %q", raw, partial)
			}
			m.Enqueue(mockllm.TextScript("Next."))
			next := chat(t, b.URL(), controlAgent, sid, "next")
			if reason := requireEnd(t, next.All(10*time.Second)); reason != "stop" {
				t.Fatalf("the next turn finished %q", reason)
			}
			// Right after [DONE], the replica that did not run the turn
			// knows it ended (its session's turn marker is clear), although
			// the shared log learns of the end a batch later.
			requireNothingRunning(t, a, sid)
		})
	}
	t.Run("unknown session", func(t *testing.T) {
		if status, body := stopTurn(t, b.URL(), session.NewID()); status != http.StatusNotFound || !strings.Contains(body, "session_not_found") {
			t.Fatalf("stop of an unknown session: %d %s", status, body)
		}
	})
}

// TestStopRightAfterDoneElsewhere: the replica running a turn reaches
// Redis slowly (every reply 200 ms late), so the shared log learns of the
// turn's end well after the client's [DONE]. A stop and a delete sent to
// the other replica right after [DONE] find no turn running: the session's
// turn marker, cleared by the turn's last write, says so before the log.
func TestStopRightAfterDoneElsewhere(t *testing.T) {
	m := newModel(t)
	dir := controlTemplates(t)
	rs := redistest.Start(t)
	env := append(modelEnv(m), "HEARTBEAT=2s", "SESSION_LOCK_TTL=5s", "TEMPLATES_DIR="+dir)
	other := startServer(t, append(env, "SESSION_STORE="+rs.URL())...)
	slow := startServer(t, append(env, "SESSION_STORE=redis://"+lateReplies(t, rs.Addr(), 200*time.Millisecond)+"/0")...)

	sid := session.NewID()
	m.Enqueue(mockllm.TextScript("A short ", "answer."))
	s := chat(t, slow.URL(), controlAgent, sid, "hello")
	if reason := requireEnd(t, s.All(20*time.Second)); reason != "stop" {
		t.Fatalf("the turn finished %q", reason)
	}
	requireNothingRunning(t, other, sid)
	req, _ := http.NewRequest(http.MethodDelete, other.URL()+"/api/sessions/"+sid, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusOK {
		t.Fatalf("delete right after [DONE], on the other replica: %d, want it deleted", res.StatusCode)
	}
}

// requireNothingRunning checks, right after a turn's [DONE] on the other
// replica, that p finds no turn of the session running: a stop answers 204
// and the session's view shows no running turn.
func requireNothingRunning(t *testing.T, p *serverProc, sid string) {
	t.Helper()
	if status, body := stopTurn(t, p.URL(), sid); status != http.StatusNoContent {
		t.Fatalf("stop right after [DONE], on the other replica: %d %s, want 204", status, body)
	}
	if view, _, raw := getSession(t, p.URL(), sid); view.Turn != nil && view.Turn.Running {
		t.Fatalf("the session's view right after [DONE], on the other replica: %s, want no running turn", raw)
	}
}

// lateReplies is a TCP proxy to target whose replies each arrive delay
// late (requests go through at once): a slow network to Redis for one
// replica. It returns the proxy's address.
func lateReplies(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(r, c); r.Close() }()
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := r.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestStopDuringToolCall: a stop that arrives while a tool runs (a web
// search whose service does not answer) cancels the tool's request, starts
// no other tool and no model call, and ends the stream with abort.
func TestStopDuringToolCall(t *testing.T) {
	var (
		mu        sync.Mutex
		requests  int
		cancelled = make(chan struct{}, 4)
		arrived   = make(chan struct{}, 4)
	)
	search := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-time.After(20 * time.Second):
		}
	}))
	defer search.Close()
	m := newModel(t)
	a, b := controlReplicas(t, m, search)
	sid := session.NewID()
	m.Enqueue(mockllm.ToolScript(
		mockllm.ToolCall{ID: "call_s1", Name: "search", Arguments: `{"query":"slow one"}`},
		mockllm.ToolCall{ID: "call_s2", Name: "search", Arguments: `{"query":"never starts"}`},
	), mockllm.TextScript("never said"))
	s := chat(t, a.URL(), controlAgent, sid, "search twice")
	before := s.Until("tool-input-available", 10*time.Second)
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the search service got no request")
	}
	calls := len(m.Requests())
	if status, body := stopTurn(t, b.URL(), sid); status != http.StatusAccepted {
		t.Fatalf("stop: %d %s", status, body)
	}
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("the running tool's request was not cancelled")
	}
	frames := append(before, s.All(10*time.Second)...)
	requireStopped(t, frames)
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	n := requests
	mu.Unlock()
	if n != 1 {
		t.Fatalf("the search service got %d requests; the second call must not start", n)
	}
	if got := len(m.Requests()); got != calls {
		t.Fatalf("the model was called %d more times after the stop", got-calls)
	}
	view, _, raw := getSession(t, a.URL(), sid)
	if probs := checkHistory(view.Messages); len(probs) > 0 {
		t.Fatalf("the history after a stop mid-tool: %v\n%s", probs, raw)
	}
	m.Enqueue(mockllm.TextScript("Fine."))
	requireEnd(t, chat(t, b.URL(), controlAgent, sid, "next").All(10*time.Second))
}

// held runs a turn on p whose model makes calls; it returns the approval
// IDs of the tool-approval-request frames, in order, after checking the
// turn ended waiting (finish tool-calls).
func held(t *testing.T, p *serverProc, m *mockllm.Server, sid string, calls ...mockllm.ToolCall) []string {
	t.Helper()
	m.Enqueue(mockllm.ToolScript(calls...))
	frames := chat(t, p.URL(), controlAgent, sid, "think about it").All(10 * time.Second)
	if reason := requireEnd(t, frames); reason != "tool-calls" {
		t.Fatalf("the turn finished %q, want tool-calls (waiting for approval): %s", reason, dataOf(frames))
	}
	var ids []string
	for i, f := range frames {
		if f.Type() != "tool-approval-request" {
			continue
		}
		if prev := frames[i-1]; prev.Type() != "tool-input-available" || prev.Field("toolCallId") != f.Field("toolCallId") {
			t.Fatalf("the approval request does not follow its call's input: %s", dataOf(frames))
		}
		ids = append(ids, f.Field("approvalId"))
	}
	return ids
}

func thinkAbout(id string) mockllm.ToolCall {
	return mockllm.ToolCall{ID: id, Name: "think", Arguments: `{"topic":"approval","reasoning":"**Problem** ask first"}`}
}

// lastToolResults returns the tool results of the model's latest request.
func lastToolResults(m *mockllm.Server) []mockllm.ToolResult {
	reqs := m.Requests()
	var out []mockllm.ToolResult
	for _, msg := range reqs[len(reqs)-1].Messages {
		out = append(out, msg.ToolResults...)
	}
	return out
}

type pendingView struct {
	PendingApprovals []struct {
		ApprovalID string `json:"approvalId"`
		ToolCallID string `json:"toolCallId"`
		ToolName   string `json:"toolName"`
	} `json:"pendingApprovals"`
}

func pendingOn(t *testing.T, p *serverProc, sid string) pendingView {
	t.Helper()
	_, status, raw := getSession(t, p.URL(), sid)
	var v pendingView
	if status != http.StatusOK || json.Unmarshal([]byte(raw), &v) != nil {
		t.Fatalf("GET session: %d %s", status, raw)
	}
	return v
}

// TestApprovalAcrossReplicas: a call held for approval on replica A is
// answered on replica B: approved, it runs there, is recorded and the
// model goes on with its result; denied, it neither runs nor is recorded
// and the model hears the reason. Unknown and answered IDs are refused,
// a new message denies what waits, and parallel calls are answered
// together.
func TestApprovalAcrossReplicas(t *testing.T) {
	m := newModel(t)
	a, b := controlReplicas(t, m, nil)

	t.Run("approve", func(t *testing.T) {
		sid := session.NewID()
		ids := held(t, a, m, sid, thinkAbout("call_t1"))
		if len(ids) != 1 || ids[0] == "" {
			t.Fatalf("approval IDs %v", ids)
		}
		if v := pendingOn(t, b, sid); len(v.PendingApprovals) != 1 || v.PendingApprovals[0].ApprovalID != ids[0] || v.PendingApprovals[0].ToolName != "think" {
			t.Fatalf("B's view of the pending approvals: %+v", v)
		}
		view, _, _ := getSession(t, b.URL(), sid)
		if view.State.RecentlyUsedTools.Len() != 0 {
			t.Fatalf("a held call was recorded: %v", view.State.RecentlyUsedTools)
		}
		if status, body := answer(t, b.URL(), sid, map[string]any{"id": "approval-nope", "approved": true}).Status, ""; status != http.StatusBadRequest {
			t.Fatalf("an unknown approval ID: %d %s", status, body)
		}
		m.Enqueue(mockllm.TextScript("I thought", " it through."))
		frames := answer(t, b.URL(), sid, map[string]any{"id": ids[0], "approved": true}).All(10 * time.Second)
		if reason := requireEnd(t, frames); reason != "stop" {
			t.Fatalf("the answering turn finished %q: %s", reason, dataOf(frames))
		}
		outs := framesOf(frames, "tool-output-available")
		if len(outs) != 1 || outs[0].Field("toolCallId") != "call_t1" || textOf(frames) != "I thought it through." {
			t.Fatalf("the answering turn: %s", dataOf(frames))
		}
		res := lastToolResults(m)
		if len(res) != 1 || res[0].CallID != "call_t1" || res[0].IsError {
			t.Fatalf("the model's tool results: %+v", res)
		}
		view, _, raw := getSession(t, a.URL(), sid)
		if !view.State.RecentlyUsedTools.Equal("think") || len(checkHistory(view.Messages)) > 0 {
			t.Fatalf("after the approval the session is %s", raw)
		}
		// Answered twice, on either replica.
		s := answer(t, a.URL(), sid, map[string]any{"id": ids[0], "approved": true})
		if s.Status != http.StatusConflict || !strings.Contains(s.Body, "approval_answered") {
			t.Fatalf("a second answer: %d %s, want 409 approval_answered", s.Status, s.Body)
		}
	})

	t.Run("deny", func(t *testing.T) {
		sid := session.NewID()
		ids := held(t, b, m, sid, thinkAbout("call_t2"))
		m.Enqueue(mockllm.TextScript("Understood."))
		frames := answer(t, a.URL(), sid, map[string]any{"id": ids[0], "approved": false, "reason": "not worth the tokens"}).All(10 * time.Second)
		requireEnd(t, frames)
		denied := framesOf(frames, "tool-output-denied")
		if len(denied) != 1 || denied[0].Field("toolCallId") != "call_t2" || len(framesOf(frames, "tool-output-available")) > 0 {
			t.Fatalf("the answering turn: %s", dataOf(frames))
		}
		res := lastToolResults(m)
		if len(res) != 1 || !strings.Contains(res[0].Content, "not worth the tokens") || !strings.Contains(res[0].Content, "declined") {
			t.Fatalf("the model heard %+v", res)
		}
		view, _, raw := getSession(t, b.URL(), sid)
		if view.State.RecentlyUsedTools.Len() != 0 || len(checkHistory(view.Messages)) > 0 {
			t.Fatalf("a denied call was recorded: %s", raw)
		}
	})

	t.Run("new message denies", func(t *testing.T) {
		sid := session.NewID()
		ids := held(t, a, m, sid, thinkAbout("call_t3"))
		m.Enqueue(mockllm.TextScript("Sure."))
		requireEnd(t, chat(t, b.URL(), controlAgent, sid, "forget that, say hi").All(10*time.Second))
		reqs := m.Requests()
		msgs := reqs[len(reqs)-1].Messages
		var heard []string
		for _, msg := range msgs {
			for _, r := range msg.ToolResults {
				heard = append(heard, r.Content)
			}
		}
		// The new message is the last one the model got (the call's note
		// follows its text).
		if len(heard) != 1 || !strings.Contains(heard[0], "the user sent a new message") || !strings.HasPrefix(msgs[len(msgs)-1].Text, "forget that, say hi\n\n## Now") {
			t.Fatalf("the model got %+v", msgs)
		}
		if v := pendingOn(t, a, sid); len(v.PendingApprovals) != 0 {
			t.Fatalf("still pending: %+v", v)
		}
		s := answer(t, a.URL(), sid, map[string]any{"id": ids[0], "approved": true})
		if s.Status != http.StatusConflict {
			t.Fatalf("answering a call the new message denied: %d %s", s.Status, s.Body)
		}
	})

	t.Run("parallel calls", func(t *testing.T) {
		sid := session.NewID()
		ids := held(t, a, m, sid, thinkAbout("call_p1"), mockllm.ToolCall{ID: "call_ps", Name: "search", Arguments: `{"query":"q"}`}, thinkAbout("call_p2"))
		if len(ids) != 2 {
			t.Fatalf("approval IDs %v, want two (search needs none)", ids)
		}
		s := answer(t, b.URL(), sid, map[string]any{"id": ids[1], "approved": true})
		if s.Status != http.StatusBadRequest || !strings.Contains(s.Body, "approvals_incomplete") {
			t.Fatalf("a partial answer: %d %s", s.Status, s.Body)
		}
		m.Enqueue(mockllm.TextScript("Done."))
		frames := answer(t, b.URL(), sid, map[string]any{"id": ids[1], "approved": false}, map[string]any{"id": ids[0], "approved": true}).All(10 * time.Second)
		requireEnd(t, frames)
		var order []string
		for _, f := range frames {
			if typ := f.Type(); typ == "tool-output-available" || typ == "tool-output-denied" {
				order = append(order, typ+" "+f.Field("toolCallId"))
			}
		}
		if !slices.Equal(order, []string{"tool-output-available call_p1", "tool-output-denied call_p2"}) {
			t.Fatalf("answers carried out as %v", order)
		}
		view, _, raw := getSession(t, a.URL(), sid)
		if !view.State.RecentlyUsedTools.Equal("search", "think") || len(checkHistory(view.Messages)) > 0 {
			t.Fatalf("the session after the answers: %s", raw)
		}
		if res := lastToolResults(m); len(res) != 3 {
			t.Fatalf("the model got %d tool results, want 3: %+v", len(res), res)
		}
	})
}

// waitIdle waits until p reports no turn running on the session.
func waitIdle(t *testing.T, p *serverProc, sid string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		view, status, raw := getSession(t, p.URL(), sid)
		if status == http.StatusOK && (view.Turn == nil || !view.Turn.Running) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's turn still runs after 5 s: %s", raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestV1ClientCloseStopsTurn: on /v1 a client that closes its streaming
// connection stops its turn (the /api streams survive a disconnect by
// design): the partial answer is saved and the session is free.
func TestV1ClientCloseStopsTurn(t *testing.T) {
	m := newModel(t)
	p := startServer(t, modelEnv(m)...)
	sid := session.NewID()
	m.Enqueue(paced(400, 20*time.Millisecond))
	body, _ := json.Marshal(map[string]any{"model": agentID, "stream": true, "messages": []map[string]string{{"role": "user", "content": "long"}}})
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-Id", sid)
	s := open(t, req)
	if s.Status != http.StatusOK {
		t.Fatalf("POST /v1/chat/completions: %d %s", s.Status, s.Body)
	}
	for range 10 {
		if _, err := s.Next(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	waitIdle(t, p, sid)
	view, _, raw := getSession(t, p.URL(), sid)
	full := strings.Join(paced(400, 0).Text, "")
	if len(view.Messages) != 2 || view.Messages[1].Content == "" || len(view.Messages[1].Content) >= len(full) {
		t.Fatalf("after the client closed its stream the session is %s", raw)
	}
	m.Enqueue(mockllm.TextScript("Free."))
	requireEnd(t, chat(t, p.URL(), agentID, sid, "next").All(10*time.Second))
}
