package faults

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// The provider's documented behaviour (llmorch/provider's package doc and
// Config): rate limits (429), 5xx and connection failures are retried, at
// most DefaultMaxRetries (2) times, with backoff from 500 ms honouring
// Retry-After / retry-after-ms, but only while nothing has been streamed;
// a Retry-After over MaxRetryDelay (20 s) fails the call at once; a failure
// after output started is not retried. The binary sets no whole-call
// timeout: TURN_TIMEOUT bounds a turn whose model hangs. Whatever happens,
// the client's stream ends with finish and [DONE].

// turnResult is one finished turn as the client saw it.
type turnResult struct {
	frames []frame
	reason string
	errs   []string
	took   time.Duration
}

// runTurn runs one turn to its end and checks that it ended properly.
func runTurn(t *testing.T, base, sid, msg string) turnResult {
	t.Helper()
	start := time.Now()
	frames := chat(t, base, agentID, sid, msg).All(15 * time.Second)
	r := turnResult{frames: frames, took: time.Since(start)}
	r.reason = requireEnd(t, frames)
	r.errs = errorTexts(frames)
	return r
}

// requireConsistent checks the session's history after a failure: it
// parses, every tool call has its result, and it starts with the user's
// message.
func requireConsistent(t *testing.T, base, sid string) sessionView {
	t.Helper()
	view, status, raw := getSession(t, base, sid)
	if status != http.StatusOK {
		t.Fatalf("GET /api/sessions/%s: %d %s", sid, status, raw)
	}
	if probs := checkHistory(view.Messages); len(probs) > 0 {
		t.Fatalf("inconsistent history: %s\n%s", strings.Join(probs, "; "), raw)
	}
	if len(view.Messages) == 0 || view.Messages[0].Role != "user" {
		t.Fatalf("the history does not start with the user's message: %s", raw)
	}
	return view
}

// TestModelRetryableFailures: a 429 (with retry-after-ms), a 500, a 503 or
// a connection dropped before the first token is retried, and the turn
// succeeds with the second answer, without an error frame, and the retry
// honours the server's Retry-After (the turn takes at least that long).
func TestModelRetryableFailures(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	for _, tc := range []struct {
		name     string
		first    mockllm.Script
		minDelay time.Duration
	}{
		{"429 with Retry-After", mockllm.ErrorScript(http.StatusTooManyRequests, 700*time.Millisecond), 700 * time.Millisecond},
		{"500", mockllm.ErrorScript(http.StatusInternalServerError, 0), 0},
		{"503 with Retry-After", mockllm.ErrorScript(http.StatusServiceUnavailable, 300*time.Millisecond), 300 * time.Millisecond},
		{"dropped before the first token", mockllm.Script{Text: []string{"lost"}, Fail: mockllm.FailAbort, FailAfter: 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(m.Requests())
			m.Enqueue(tc.first, mockllm.TextScript("Second", " try."))
			sid := "retry-" + strings.NewReplacer(" ", "-", "-", "").Replace(tc.name)
			r := runTurn(t, srv.URL(), sid, "hello")
			if r.reason != "stop" || len(r.errs) > 0 || textOf(r.frames) != "Second try." {
				t.Fatalf("finish %q, errors %q, text %q; want stop, none, %q", r.reason, r.errs, textOf(r.frames), "Second try.")
			}
			if n := len(m.Requests()) - before; n != 2 {
				t.Errorf("the model got %d requests, want 2 (one retry)", n)
			}
			if r.took < tc.minDelay {
				t.Errorf("the turn took %v, under the Retry-After of %v: the wait was not honoured", r.took, tc.minDelay)
			}
			requireConsistent(t, srv.URL(), sid)
		})
	}
}

// TestModelFailuresEndTheStream: failures that are not retried, or that
// outlast the retries, end the turn with an error frame naming the
// failure (never the provider's raw body), finish with reason "error" and
// [DONE]; the session stays consistent and its next turn works.
func TestModelFailuresEndTheStream(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	const secret = "raw-provider-body-7f3a"
	for _, tc := range []struct {
		name    string
		scripts []mockllm.Script
		// requests is how many calls the model must get (1 + retries).
		requests int
		// code is the error frame's code; text the streamed text before it.
		code, text string
	}{
		{
			name:     "500 outlasts the retries",
			scripts:  repeat(mockllm.Script{Status: http.StatusInternalServerError, ErrorMessage: secret}, 3),
			requests: 3, code: "provider_unavailable",
		},
		{
			name:     "Retry-After over the limit",
			scripts:  []mockllm.Script{mockllm.ErrorScript(http.StatusTooManyRequests, time.Minute)},
			requests: 1, code: "rate_limited",
		},
		{
			name:     "401 is not retried",
			scripts:  []mockllm.Script{{Status: http.StatusUnauthorized, ErrorMessage: secret}},
			requests: 1, code: "provider_auth",
		},
		{
			name:     "dropped mid-stream",
			scripts:  []mockllm.Script{{Text: []string{"one ", "two ", "three ", "four"}, InterTokenDelay: 5 * time.Millisecond, Fail: mockllm.FailAbort, FailAfter: 2}},
			requests: 1, code: "provider_unavailable", text: "one two ",
		},
		{
			name:     "error event mid-stream",
			scripts:  []mockllm.Script{{Text: []string{"one ", "two ", "three ", "four"}, InterTokenDelay: 5 * time.Millisecond, Fail: mockllm.FailErrorEvent, FailAfter: 2}},
			requests: 1, code: "provider_", text: "one two ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(m.Requests())
			m.Enqueue(tc.scripts...)
			sid := "fail-" + strings.NewReplacer(" ", "-", "-", "").Replace(tc.name)
			r := runTurn(t, srv.URL(), sid, "hello")
			if r.reason != "error" {
				t.Errorf("finish reason %q, want error", r.reason)
			}
			if len(r.errs) != 1 || !strings.HasPrefix(r.errs[0], tc.code) {
				t.Errorf("error frames %q, want one starting with %q", r.errs, tc.code)
			}
			for _, f := range r.frames {
				if strings.Contains(f.Data, secret) {
					t.Errorf("the provider's raw body reached the client: %s", f.Data)
				}
			}
			if got := textOf(r.frames); got != tc.text {
				t.Errorf("streamed text %q, want %q", got, tc.text)
			}
			if n := len(m.Requests()) - before; n != tc.requests {
				t.Errorf("the model got %d requests, want %d", n, tc.requests)
			}
			if m.Pending() != 0 {
				t.Errorf("%d scripts left unused", m.Pending())
			}
			requireConsistent(t, srv.URL(), sid)
			// The session is not left locked or broken: the next turn
			// (the mock's default answer) works.
			next := runTurn(t, srv.URL(), sid, "again")
			if next.reason != "stop" || len(next.errs) > 0 {
				t.Errorf("the next turn: finish %q, errors %q", next.reason, next.errs)
			}
			requireConsistent(t, srv.URL(), sid)
		})
	}
}

func repeat(s mockllm.Script, n int) []mockllm.Script {
	out := make([]mockllm.Script, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestModelHangs: a model that hangs, either after sending its headers
// (the mock's first token never comes) or before answering at all (a
// listener that accepts and never writes), is cut by TURN_TIMEOUT: the
// client gets the turnTimeout limit frame, finish "other" and [DONE] soon
// after the limit, no error, and the session's next turn works.
func TestModelHangs(t *testing.T) {
	m := newModel(t)
	// A peer that accepts connections and never answers: the provider's
	// header timeout (90 s) is far beyond the turn's limit.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	const limit = 1500 * time.Millisecond
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"after the headers", modelEnv(m)},
		{"before the headers", []string{"LLM_PROVIDER=openai", "LLM_BASE_URL=http://" + silent.Addr().String() + "/v1", "OPENAI_API_KEY=faults-test-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, append(tc.env, "TURN_TIMEOUT="+limit.String())...)
			m.Enqueue(mockllm.Script{Text: []string{"never"}, TimeToFirstToken: time.Minute})
			const sid = "hang-session-1"
			r := runTurn(t, srv.URL(), sid, "hello")
			if l := limitsOf(r.frames); len(r.errs) != 0 || len(l) != 1 || l[0] != "turnTimeout" || r.reason != "other" {
				t.Errorf("error frames %q, limits %q, finish %q; want the turnTimeout limit and finish other", r.errs, l, r.reason)
			}
			if r.took < limit || r.took > limit+5*time.Second {
				t.Errorf("the turn ended after %v, want soon after TURN_TIMEOUT %v", r.took, limit)
			}
			requireConsistent(t, srv.URL(), sid)
			if tc.name == "after the headers" {
				next := runTurn(t, srv.URL(), sid, "again")
				if next.reason != "stop" || len(next.errs) > 0 {
					t.Errorf("the next turn: finish %q, errors %q", next.reason, next.errs)
				}
			}
		})
	}
}

// TestModelGoesSilent: with no TURN_TIMEOUT, a model that sends its headers
// and then nothing is cut by LLM_IDLE_TIMEOUT: the silent attempts are
// retried (three in all), the client gets one timeout error frame, finish
// and [DONE], and the session's next turn works. A model that falls silent
// after its first words is cut too, without a retry, and the words stay.
func TestModelGoesSilent(t *testing.T) {
	m := newModel(t)
	const idle = 400 * time.Millisecond
	srv := startServer(t, append(modelEnv(m), "LLM_IDLE_TIMEOUT="+idle.String())...)
	const sid = "silent-session-1"
	hang := mockllm.Script{Text: []string{"never"}, TimeToFirstToken: time.Minute}
	before := len(m.Requests())
	m.Enqueue(hang, hang, hang)
	r := runTurn(t, srv.URL(), sid, "hello")
	if len(r.errs) != 1 || !strings.HasPrefix(r.errs[0], "timeout:") || r.reason != "error" {
		t.Fatalf("a silent model: finish %q, error frames %q; want one timeout error", r.reason, r.errs)
	}
	if n := len(m.Requests()) - before; n != 3 {
		t.Errorf("the model got %d requests, want 3 (two retries of a silent stream)", n)
	}
	requireConsistent(t, srv.URL(), sid)

	before = len(m.Requests())
	m.Enqueue(mockllm.Script{Text: []string{"first ", "words ", "never"}, InterTokenDelay: time.Minute})
	r = runTurn(t, srv.URL(), sid, "again")
	if len(r.errs) != 1 || !strings.HasPrefix(r.errs[0], "timeout:") || textOf(r.frames) != "first " {
		t.Fatalf("silent after its first words: text %q, error frames %q", textOf(r.frames), r.errs)
	}
	if n := len(m.Requests()) - before; n != 1 {
		t.Errorf("the model got %d requests, want 1 (no retry once output started)", n)
	}
	requireConsistent(t, srv.URL(), sid)

	m.Enqueue(mockllm.TextScript("Back", " again."))
	if next := runTurn(t, srv.URL(), sid, "and now"); next.reason != "stop" || len(next.errs) > 0 {
		t.Errorf("the next turn: finish %q, errors %q", next.reason, next.errs)
	}
}
