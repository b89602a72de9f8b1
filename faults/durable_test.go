package faults

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// uiBody is an AI SDK Chat request body: the conversation so far, its
// last message the user's with messageID.
func uiBody(chatID, messageID, text string) []byte {
	b, _ := json.Marshal(map[string]any{"id": chatID, "trigger": "submit-message", "messages": []any{
		map[string]any{"id": messageID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}},
	}})
	return b
}

// postUI posts an AI SDK body, with extra headers (name, value, ...).
func postUI(t testing.TB, base string, body []byte, headers ...string) *stream {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/chat/"+agentID, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return open(t, req)
}

func userMessages(msgs []adchat.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == adchat.RoleUser {
			n++
		}
	}
	return n
}

// TestReplicaSameBodyTwice: the AI SDK body posted to A, then the same
// body posted to B (a client retrying through the load balancer), gives
// one turn and one model call: B streams A's turn.
func TestReplicaSameBodyTwice(t *testing.T) {
	m := newModel(t)
	a, b := replicas(t, m)
	m.Enqueue(mockllm.TextScript("Only ", "once."))
	chatID := session.NewID()
	body := uiBody(chatID, "msg-1", "hello")
	first := postUI(t, a.URL(), body)
	if first.Status != http.StatusOK {
		t.Fatalf("first post: %d %s", first.Status, first.Body)
	}
	text := textOf(first.All(10 * time.Second))
	second := postUI(t, b.URL(), body)
	if second.Status != http.StatusOK || second.Header.Get("X-Turn-Id") != first.Header.Get("X-Turn-Id") {
		t.Fatalf("second post on B: %d %s, turn %q want %q", second.Status, second.Body, second.Header.Get("X-Turn-Id"), first.Header.Get("X-Turn-Id"))
	}
	if got := textOf(second.All(10 * time.Second)); got != text || text != "Only once." {
		t.Fatalf("the retry streamed %q, the turn %q", got, text)
	}
	if n := len(m.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want 1", n)
	}
	view, _, raw := getSession(t, b.URL(), chatID)
	if userMessages(view.Messages) != 1 {
		t.Fatalf("the session: %s", raw)
	}
}

// TestReplicaRetryAfterKill: replica A stores the user message of an AI
// SDK request and is SIGKILLed while the answer streams; the client posts
// the same body to B. B does not start the turn again: it answers with
// A's turn (what A streamed, then A's turn cut or taken over by B), every
// model call is of that turn, and the session holds the user message once.
func TestReplicaRetryAfterKill(t *testing.T) {
	m := newModel(t)
	a, b := replicas(t, m)
	m.Enqueue(paced(200, 20*time.Millisecond))
	chatID := session.NewID()
	body := uiBody(chatID, "msg-1", "a long one")
	first := postUI(t, a.URL(), body)
	if first.Status != http.StatusOK {
		t.Fatalf("first post: %d %s", first.Status, first.Body)
	}
	first.Until("text-delta", 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	a.Kill()
	first.Close()

	retry := postUI(t, b.URL(), body)
	if retry.Status != http.StatusOK || retry.Header.Get("X-Turn-Id") != first.Header.Get("X-Turn-Id") {
		t.Fatalf("the retry on B: %d %s, turn %q want A's %q", retry.Status, retry.Body, retry.Header.Get("X-Turn-Id"), first.Header.Get("X-Turn-Id"))
	}
	frames := retry.All(30 * time.Second)
	requireEnd(t, frames)
	// B starts no turn of its own: every model call is of A's turn, A's
	// own and, when B takes the turn over once A's lease expired, the
	// call it makes again (a turn taken over with no step under way calls
	// the model again); each has the user message once. When B's takeover
	// calls the model is a race with the end of the retry's stream.
	reqs := m.Requests()
	if len(reqs) < 1 || len(reqs) > 2 {
		t.Fatalf("the model was called %d times, want A's call and at most B's takeover of it (the retry ran the turn again)", len(reqs))
	}
	for i, r := range reqs {
		if n := strings.Count(string(r.Body), `"role":"user","content":"a long one`); n != 1 {
			t.Fatalf("model call %d has the user message %d times, want once: %s", i+1, n, r.Body)
		}
	}
	// Once the dead turn's lease expired, the session is B's to use: its
	// history has the message once, with A's partial answer.
	deadline := time.Now().Add(20 * time.Second)
	for {
		view, status, raw := getSession(t, b.URL(), chatID)
		if status == http.StatusOK && (view.Turn == nil || !view.Turn.Running) && len(view.Messages) >= 1 {
			if n := userMessages(view.Messages); n != 1 {
				t.Fatalf("%d user messages stored, want 1: %s", n, raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session: %d %s", status, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.Enqueue(mockllm.TextScript("Next."))
	next := postUI(t, b.URL(), uiBody(chatID, "msg-2", "and now"))
	if got := textOf(next.All(30 * time.Second)); got != "Next." {
		t.Fatalf("the next message on B: %q", got)
	}
}

// TestReplicaBusy: on two replicas, a message sent to B while A streams
// a turn is answered after it (enqueue, the chat API's default), and one
// sent with busy interrupt is answered at once, A's turn stopped with its
// partial answer saved.
func TestReplicaBusy(t *testing.T) {
	m := newModel(t)
	a, b := replicas(t, m)
	sid := session.NewID()

	m.Enqueue(paced(20, 20*time.Millisecond), mockllm.TextScript("Queued answer."))
	s := chat(t, a.URL(), agentID, sid, "first")
	head := s.Until("text-delta", 10*time.Second)
	queued := chat(t, b.URL(), agentID, sid, "second")
	if got := textOf(queued.All(30 * time.Second)); got != "Queued answer." {
		t.Fatalf("the queued message's answer: %q", got)
	}
	firstFrames := append(head, s.All(10*time.Second)...)
	if requireEnd(t, firstFrames) != "stop" {
		t.Fatalf("the first turn did not finish: %s", dataOf(firstFrames))
	}
	view, _, raw := getSession(t, b.URL(), sid)
	if len(view.Messages) != 4 || view.Messages[2].Content != "second" || view.Messages[3].Content != "Queued answer." || view.Messages[1].Content != textOf(firstFrames) {
		t.Fatalf("after enqueue: %s", raw)
	}

	m.Enqueue(paced(500, 20*time.Millisecond), mockllm.TextScript("At once."))
	long := chat(t, a.URL(), agentID, sid, "a long one")
	head = long.Until("text-delta", 10*time.Second)
	start := time.Now()
	now := tryChatBusy(t, b.URL(), agentID, sid, "stop that", "interrupt")
	if now.Status != http.StatusOK {
		t.Fatalf("interrupt: %d %s", now.Status, now.Body)
	}
	if got := textOf(now.All(30 * time.Second)); got != "At once." {
		t.Fatalf("the interrupting message's answer: %q", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the interrupting message was answered after %v; the running turn had 10 s to go", d)
	}
	longFrames := append(head, long.All(10*time.Second)...)
	requireEnd(t, longFrames)
	view, _, raw = getSession(t, b.URL(), sid)
	n := len(view.Messages)
	if n != 8 || view.Messages[n-4].Content != "a long one" || !strings.HasPrefix(view.Messages[n-3].Content, "w0 ") || view.Messages[n-1].Content != "At once." {
		t.Fatalf("after interrupt: %s", raw)
	}
}

// TestBackgroundWebhook: a background run through the binary answers 202,
// runs with no client and calls its webhook when it ends, signed with
// WEBHOOK_SECRET; the receiver's 500 is followed by a retry.
func TestBackgroundWebhook(t *testing.T) {
	m := newModel(t)
	const secret = "a deployment's webhook secret"
	var (
		mu    sync.Mutex
		calls []string // "status valid" per call
		ids   []string
	)
	got := make(chan []byte, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		valid := hmac.Equal([]byte(server.SignWebhook([]byte(secret), r.Header.Get("webhook-id"), ts, body)), []byte(r.Header.Get("webhook-signature")))
		mu.Lock()
		first := len(calls) == 0
		calls = append(calls, strconv.FormatBool(valid))
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		got <- body
	}))
	t.Cleanup(rcv.Close)
	host := strings.TrimPrefix(rcv.URL, "http://")
	rs := redistest.Start(t)
	p := startServer(t, append(modelEnv(m), "SESSION_STORE="+rs.URL(), "WEBHOOK_HOSTS="+host, "WEBHOOK_SECRET="+secret)...)
	m.Enqueue(paced(5, 20*time.Millisecond))
	sid := session.NewID()
	res, err := http.Post(p.URL()+"/api/chat/"+agentID, "application/json", strings.NewReader(`{"sessionId":"`+sid+`","message":"alone","background":true,"webhook":"`+rcv.URL+`/hook"}`))
	if err != nil {
		t.Fatal(err)
	}
	var acc struct{ TurnID, StatusURL string }
	json.NewDecoder(res.Body).Decode(&acc)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || acc.TurnID == "" {
		t.Fatalf("background: %d %+v", res.StatusCode, acc)
	}
	var body []byte
	select {
	case body = <-got:
	case <-time.After(30 * time.Second):
		t.Fatalf("no webhook; server log:\n%s", logTail(p.Log(), 40))
	}
	var ev struct {
		Type string
		Data struct{ TurnID, Status, Text string }
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data.TurnID != acc.TurnID || ev.Data.Status != "completed" || ev.Data.Text != "w0 w1 w2 w3 w4 " {
		t.Fatalf("webhook body %s", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[0] != "true" || calls[1] != "true" || ids[0] != ids[1] {
		t.Fatalf("webhook calls: signatures valid %v, ids %v; want 2 valid calls, one id", calls, ids)
	}
	t.Logf("webhook: called %d times (a 500, then a retry), signatures valid", len(calls))
}
