package server

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
)

// webhookCall is one call a receiver got.
type webhookCall struct {
	id, signature string
	timestamp     int64
	body          []byte
	valid         bool
}

// receiver is a webhook receiver on loopback that checks each call's
// signature as a Standard Webhooks library does, and answers 500 to the
// first call of each event.
type receiver struct {
	*httptest.Server
	key   []byte
	mu    sync.Mutex
	calls []webhookCall
	got   chan webhookCall
}

func newReceiver(t *testing.T, key []byte) *receiver {
	r := &receiver{key: key, got: make(chan webhookCall, 16)}
	seen := map[string]bool{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		ts, _ := strconv.ParseInt(req.Header.Get("webhook-timestamp"), 10, 64)
		c := webhookCall{id: req.Header.Get("webhook-id"), signature: req.Header.Get("webhook-signature"), timestamp: ts, body: body}
		// The signature: v1, base64 HMAC-SHA256 of id.timestamp.body.
		want := SignWebhook(key, c.id, ts, body)
		c.valid = hmac.Equal([]byte(want), []byte(c.signature)) && time.Since(time.Unix(ts, 0)) < 5*time.Minute
		r.mu.Lock()
		r.calls = append(r.calls, c)
		first := !seen[c.id]
		seen[c.id] = true
		r.mu.Unlock()
		r.got <- c
		if first {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// next waits for the receiver's next call.
func (r *receiver) next(t *testing.T) webhookCall {
	t.Helper()
	select {
	case c := <-r.got:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook call")
	}
	return webhookCall{}
}

// TestBackgroundWebhook: a background chat run answers 202 with its turn,
// runs with no client, shows its status, and calls its webhook when it
// ends: the call is signed, and after the receiver's 500 it comes again
// (same webhook-id, signed again). A cancelled run's webhook says so; a
// webhook on a host not allowed is refused.
func TestBackgroundWebhook(t *testing.T) {
	key := []byte("a test secret of the deployment")
	rcv := newReceiver(t, key)
	host := mustURL(t, rcv.URL).Host
	e, mock := scriptedEnv(t, envOptions{cfg: func(c *Config) {
		c.WebhookHosts = []string{host}
		c.WebhookSecret = "whsec_" + base64.StdEncoding.EncodeToString(key)
		c.WebhookBackoff = 50 * time.Millisecond
	}})
	mock.Enqueue(mockllm.Script{Text: []string{"Done ", "in ", "the ", "background."}, InterTokenDelay: 50 * time.Millisecond})
	sid := session.NewID()
	var acc backgroundAccepted
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"sessionId":"`+sid+`","message":"work alone","background":true,"webhook":"`+rcv.URL+`/hook"}`), http.StatusAccepted, &acc)
	if acc.TurnID == "" || acc.SessionID != sid || acc.Status != "running" {
		t.Fatalf("202 body %+v", acc)
	}
	var st turnStatus
	getJSON(t, e.do(http.MethodGet, acc.StatusURL, ""), http.StatusOK, &st)
	if st.ID != acc.TurnID || (st.Status != "running" && st.Status != "finished") {
		t.Fatalf("status %+v", st)
	}

	first, second := rcv.next(t), rcv.next(t)
	if !first.valid || !second.valid || first.id != second.id || first.id == "" {
		t.Fatalf("calls: first %+v, second %+v: want both signed, the same webhook-id", first, second)
	}
	var ev struct {
		Type string
		Data turnOutcome
	}
	if err := json.Unmarshal(second.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "turn.completed" || ev.Data.TurnID != acc.TurnID || ev.Data.Status != "completed" || ev.Data.FinishReason != "stop" || ev.Data.Text != "Done in the background." {
		t.Fatalf("webhook event %s", second.body)
	}
	getJSON(t, e.do(http.MethodGet, acc.StatusURL, ""), http.StatusOK, &st)
	if st.Status != "finished" {
		t.Fatalf("status after the webhook: %+v", st)
	}
	// The stream, by resume, from its first frame.
	res := e.do(http.MethodGet, acc.StreamURL, "", "Last-Event-ID", acc.TurnID+":0")
	evs := newSSEReader(res.Body).all()
	res.Body.Close()
	if got := streamTextOf(evs); got != "Done in the background." {
		t.Fatalf("the run's stream: %q", got)
	}
	// A cancelled run.
	words := make([]string, 100)
	for i := range words {
		words[i] = "w "
	}
	mock.Enqueue(mockllm.Script{Text: words, InterTokenDelay: 50 * time.Millisecond})
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"sessionId":"`+sid+`","message":"a long one","background":true,"webhook":"`+rcv.URL+`/hook"}`), http.StatusAccepted, &acc)
	time.Sleep(200 * time.Millisecond)
	res = e.do(http.MethodPost, acc.CancelURL, "")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", res.StatusCode)
	}
	rcv.next(t)
	c := rcv.next(t)
	if err := json.Unmarshal(c.body, &ev); err != nil || ev.Data.Status != "cancelled" || ev.Data.TurnID != acc.TurnID {
		t.Fatalf("the cancelled run's webhook: %s", c.body)
	}

	var eb errBodyT
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"sessionId":"`+sid+`","message":"x","background":true,"webhook":"http://169.254.169.254/latest"}`), http.StatusBadRequest, &eb)
	if eb.Error.Code != "invalid_webhook" {
		t.Fatalf("a webhook off the allowed hosts: %+v", eb.Error)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
