package faults

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// TestWebhookOutlivesItsReplica: a key with a webhook secret of its own
// starts a background run on replica A of two sharing Redis, with the
// default configuration, and A dies (SIGKILL) before its webhook call is
// made; replica B makes it, signed with the key's secret and naming the
// key's owner, with the turn's whole answer as the session saved it.
// Two ways to die:
//   - the receiver is down (it holds A's call without answering) when A
//     dies: B makes the call again with A's webhook-id, once A's hold on
//     it lapsed;
//   - A dies while the run streams: B takes the call up, follows the run
//     to its end (taking the turn over) and makes it.
//
// The test prints how long after the kill the receiver got the call.
func TestWebhookOutlivesItsReplica(t *testing.T) {
	for _, tc := range []struct {
		name string
		// down: the receiver holds the first call, and A dies during it;
		// else A dies during the run.
		down bool
	}{
		{name: "the receiver down", down: true},
		{name: "during the run"},
	} {
		t.Run(tc.name, func(t *testing.T) { webhookOutlivesReplica(t, tc.down) })
	}
}

func webhookOutlivesReplica(t *testing.T, down bool) {
	const (
		keySecret     = "webhook replica test"
		webhookSecret = "the-key-own-webhook-secret"
	)
	type call struct {
		id, owner, status, text, turn string
		valid                         bool
		at                            time.Time
	}
	var (
		mu     sync.Mutex
		calls  []call
		victim *serverProc
		killed time.Time
	)
	got := make(chan call, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		var ev struct {
			Owner string
			Data  struct{ TurnID, Status, Text string }
		}
		_ = json.Unmarshal(body, &ev)
		c := call{id: r.Header.Get("webhook-id"), owner: ev.Owner, status: ev.Data.Status, text: ev.Data.Text, turn: ev.Data.TurnID, at: time.Now(),
			valid: hmac.Equal([]byte(server.SignWebhook([]byte(webhookSecret), r.Header.Get("webhook-id"), ts, body)), []byte(r.Header.Get("webhook-signature")))}
		mu.Lock()
		calls = append(calls, c)
		first, p := len(calls) == 1, victim
		mu.Unlock()
		if down && first {
			// Down: the call gets no answer, and its replica dies
			// meanwhile.
			p.Kill()
			mu.Lock()
			killed = time.Now()
			mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		got <- c
	}))
	t.Cleanup(rcv.Close)
	keys := filepath.Join(t.TempDir(), "keys")
	line := "key-alpha webhook-secret=" + webhookSecret + " webhook-hosts=" + strings.TrimPrefix(rcv.URL, "http://") + "\n"
	if err := os.WriteFile(keys, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(keySecret))
	mac.Write([]byte("key-alpha"))
	owner := hex.EncodeToString(mac.Sum(nil)[:16])

	// A short answer when the receiver is down (the run ends, then its
	// call is made), a long one when A dies during the run; a takeover
	// makes the model call again, and gets the same answer.
	script := paced(5, 20*time.Millisecond)
	if !down {
		script = paced(60, 50*time.Millisecond)
	}
	m := newModel(t, mockllm.WithDefault(script), mockllm.WithMaxRecorded(-1))
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "API_KEYS_FILE="+keys, "API_KEY_SECRET="+keySecret)
	a, b := startServer(t, env...), startServer(t, env...)
	mu.Lock()
	victim = a
	mu.Unlock()

	sid := session.NewID()
	st, resp, _ := keyedRequest(t, http.MethodPost, a.URL()+"/api/chat/"+agentID, "key-alpha",
		`{"sessionId":"`+sid+`","message":"in the background","background":true,"webhook":"`+rcv.URL+`/hook"}`)
	var acc struct{ TurnID string }
	_ = json.Unmarshal([]byte(resp), &acc)
	if st != http.StatusAccepted || acc.TurnID == "" {
		t.Fatalf("the background run on A: %d %s", st, resp)
	}
	if !down {
		// A dies a second into the run's three.
		time.Sleep(time.Second)
		a.Kill()
		mu.Lock()
		killed = time.Now()
		mu.Unlock()
	}
	var made call
	select {
	case made = <-got:
	case <-time.After(90 * time.Second):
		t.Fatalf("the receiver got no call it answered; B's log:\n%s", logTail(b.Log(), 40))
	}
	if a.Alive() {
		t.Fatal("A is alive: the call was not B's")
	}

	// The session, once its turn is over, as B has it.
	var view sessionView
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, raw, _ := keyedRequest(t, http.MethodGet, b.URL()+"/api/sessions/"+sid, "key-alpha", "")
		if st == http.StatusOK {
			view = sessionView{}
			_ = json.Unmarshal([]byte(raw), &view)
			if view.Turn == nil || !view.Turn.Running {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session: %d %s", st, raw)
		}
	}
	saved := ""
	for _, msg := range view.Messages {
		if msg.Role == adchat.RoleAssistant {
			saved += msg.Content
		}
	}
	time.Sleep(2 * time.Second) // a second delivery would come now
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d call(s) to the receiver; the call it answered came %v after A was killed", len(calls), made.at.Sub(killed).Round(10*time.Millisecond))
	if made.turn != acc.TurnID || made.status != "completed" || made.text != saved || saved == "" {
		t.Errorf("the event: turn %s status %q text %q; want turn %s completed with the saved answer %q", made.turn, made.status, made.text, acc.TurnID, saved)
	}
	if !made.valid || made.owner != owner {
		t.Errorf("the event verifies with the key's secret: %v; names owner %q, want the key's %s", made.valid, made.owner, owner)
	}
	answered := 0
	for _, c := range calls {
		if c.id != made.id {
			t.Errorf("calls with two webhook-ids: %s and %s", c.id, made.id)
		}
		if c.at.After(killed) {
			answered++
		}
	}
	want := 1
	if down {
		want = 2 // A's, held unanswered, and B's
	}
	if len(calls) != want || answered != 1 {
		t.Errorf("the receiver got %d calls, %d after the kill; want %d, one after it", len(calls), answered, want)
	}
}
