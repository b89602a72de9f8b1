package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// The tenant tests (issue 41): one API key cannot take what belongs to the
// others, and wrong keys are throttled. Each runs the real binary.

// keyed starts agentdock serve with API keys alice and bob and env.
func keyed(t *testing.T, env ...string) *serverProc {
	t.Helper()
	m := newModel(t, mockllm.WithMaxRecorded(-1))
	return startServer(t, append(append(modelEnv(m), "API_KEYS=key-alice,key-bob", "API_KEY_SECRET=quota-test"), env...)...)
}

// keyedRequest sends a request with key and returns the status and body.
func keyedRequest(t *testing.T, method, url, key, body string) (int, string, http.Header) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Api-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// completion runs one turn through /v1/chat/completions on session sid.
func completion(t *testing.T, base, key, sid string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"`+agentID+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("X-Session-Id", sid)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// flood has bob create n sessions, workers at a time; it returns how many
// were created and how many refused with 429 quota_exceeded.
func flood(t *testing.T, base string, n, workers int) (created, refused int64) {
	var wg sync.WaitGroup
	var next atomic.Int64
	var c, r atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				status, body := completion(t, base, "key-bob", fmt.Sprintf("bob-%06d", i))
				switch {
				case status == http.StatusOK:
					c.Add(1)
				case status == http.StatusTooManyRequests && strings.Contains(body, `"quota_exceeded"`) && strings.Contains(body, "SESSIONS_PER_OWNER"):
					r.Add(1)
				default:
					t.Errorf("session %d: %d %s", i, status, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	return c.Load(), r.Load()
}

// TestOwnerFlood: bob creating sessions past SESSIONS_PER_OWNER gets
// 429 quota_exceeded naming the quota for every one past it, while alice's
// session stays readable and she can start more.
func TestOwnerFlood(t *testing.T) {
	srv := keyed(t, "SESSIONS_PER_OWNER=40")
	if status, body := completion(t, srv.URL(), "key-alice", "alice-session"); status != http.StatusOK {
		t.Fatalf("alice's turn: %d %s", status, body)
	}
	created, refused := flood(t, srv.URL(), 400, 4)
	if created != 40 || refused != 360 {
		t.Fatalf("bob created %d sessions and was refused %d; want 40 and 360", created, refused)
	}
	if status, body, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/sessions/alice-session", "key-alice", ""); status != http.StatusOK || !strings.Contains(body, `"hi"`) {
		t.Fatalf("alice's session after bob's flood: %d %s", status, body)
	}
	if status, body := completion(t, srv.URL(), "key-alice", "alice-session-2"); status != http.StatusOK {
		t.Fatalf("alice's new session: %d %s", status, body)
	}
}

// TestOwnerFloodHundredThousand: with the defaults, bob creating 100,000
// sessions gets the first 10,000 and 429 for the rest; alice's session
// stays readable (slow: AGENTDOCK_SLOW_FAULTS=1).
func TestOwnerFloodHundredThousand(t *testing.T) {
	slow(t)
	srv := keyed(t)
	if status, body := completion(t, srv.URL(), "key-alice", "alice-session"); status != http.StatusOK {
		t.Fatalf("alice's turn: %d %s", status, body)
	}
	start := time.Now()
	created, refused := flood(t, srv.URL(), 100_000, 16)
	t.Logf("bob: %d created, %d refused in %s", created, refused, time.Since(start).Round(time.Second))
	if created != 10_000 || refused != 90_000 {
		t.Fatalf("bob created %d sessions and was refused %d; want 10000 and 90000", created, refused)
	}
	if status, body, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/sessions/alice-session", "key-alice", ""); status != http.StatusOK {
		t.Fatalf("alice's session after bob's flood: %d %s", status, body)
	}
}

// TestWrongKeyFlood: 200 wrong keys from one address get 401 for the
// first AUTH_FAILURE_BURST and then 429 auth_rate_limited with
// Retry-After, and so does a right key from that address, which gets in
// again once a failure came back.
func TestWrongKeyFlood(t *testing.T) {
	srv := keyed(t, "AUTH_FAILURES_PER_MINUTE=30", "AUTH_FAILURE_BURST=20")
	var codes []int
	for i := range 200 {
		status, body, h := keyedRequest(t, http.MethodGet, srv.URL()+"/api/agents", "wrong-"+strconv.Itoa(i), "")
		codes = append(codes, status)
		if status == http.StatusTooManyRequests {
			ra, err := strconv.Atoi(h.Get("Retry-After"))
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &e)
			if err != nil || ra < 1 || ra > 2 || e.Error.Code != "auth_rate_limited" {
				t.Fatalf("attempt %d: Retry-After %q, %s", i, h.Get("Retry-After"), body)
			}
		}
	}
	for i, c := range codes {
		want := http.StatusTooManyRequests
		if i < 20 {
			want = http.StatusUnauthorized
		}
		if c != want {
			t.Fatalf("attempt %d: %d, want %d", i, c, want)
		}
	}
	if status, _, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/agents", "key-alice", ""); status != http.StatusTooManyRequests {
		t.Fatalf("a right key from the throttled address: %d, want 429", status)
	}
	time.Sleep(2100 * time.Millisecond) // a failure comes back every 2 s
	if status, body, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/agents", "key-alice", ""); status != http.StatusOK {
		t.Fatalf("the right key once a failure came back: %d %s", status, body)
	}
}
