package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
)

func keyEnv(t *testing.T, extra func(*Config)) (*env, *KeyAuth) {
	t.Helper()
	auth, err := NewKeyAuth([]string{"key-alice", "key-bob"}, []byte("test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{cfg: func(c *Config) {
		c.Owner = auth.Owner
		if extra != nil {
			extra(c)
		}
	}})
	return e, auth
}

// TestAPIKeysRequired: with keys, every /api and /v1 route refuses a missing
// or wrong key with 401 and a Bearer challenge, accepts either header, and
// leaves the health checks open.
func TestAPIKeysRequired(t *testing.T) {
	e, _ := keyEnv(t, nil)
	routes := [][2]string{
		{http.MethodGet, "/api/agents"}, {http.MethodGet, "/api/agents/plain"},
		{http.MethodPost, "/api/chat/plain"}, {http.MethodGet, "/api/sessions/some-session"},
		{http.MethodDelete, "/api/sessions/some-session"}, {http.MethodGet, "/api/sessions/some-session/stream"},
		{http.MethodGet, "/v1/models"}, {http.MethodPost, "/v1/chat/completions"},
	}
	for _, rt := range routes {
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer key-mallory"}, {"X-Api-Key", "key-alic"}, {"Authorization", "Basic a2V5LWFsaWNl"}} {
			res := e.do(rt[0], rt[1], `{"message":"hi"}`, hdr...)
			if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s %v: WWW-Authenticate %q", rt[0], rt[1], hdr, res.Header.Get("WWW-Authenticate"))
			}
			var eb errBodyT
			getJSON(t, res, http.StatusUnauthorized, &eb)
			if eb.Error.Code != "unauthorized" || eb.Error.Message == "" {
				t.Errorf("%s %s %v: error %+v", rt[0], rt[1], hdr, eb.Error)
			}
		}
	}
	getJSON(t, e.do(http.MethodGet, "/api/agents", "", "Authorization", "Bearer key-alice"), http.StatusOK, nil)
	getJSON(t, e.do(http.MethodGet, "/api/agents", "", "Authorization", "bearer   key-bob "), http.StatusOK, nil)
	getJSON(t, e.do(http.MethodGet, "/v1/models", "", "X-Api-Key", "key-bob"), http.StatusOK, nil)
	for _, open := range []string{"/healthz", "/readyz", "/openapi.json"} {
		getJSON(t, e.do(http.MethodGet, open, ""), http.StatusOK, nil)
	}
}

// TestSessionsBelongToTheirKey: a session made with one key is unknown to
// another: 404 for GET and DELETE, the resume endpoint answers exactly as
// for a session that does not exist (204), even when the Last-Event-ID
// names the other key's turn, and a turn with the same ID under the other
// key is a session of its own. The store holds the key's fingerprint,
// never the key.
func TestSessionsBelongToTheirKey(t *testing.T) {
	e, auth := keyEnv(t, nil)
	alice := []string{"X-Api-Key", "key-alice"}
	bob := []string{"Authorization", "Bearer key-bob"}
	res, evs := e.streamChat("plain", `{"message":"hi","sessionId":"alice-session"}`, alice...)
	checkTurnStream(t, res.Header.Get("X-Turn-Id"), evs, 1)
	turnID := res.Header.Get("X-Turn-Id")

	sess, err := e.store.Get(t.Context(), session.Key(auth.Fingerprint("key-alice"), "alice-session"))
	if err != nil {
		t.Fatal(err)
	}
	if sess.Owner != auth.Fingerprint("key-alice") || strings.Contains(sess.Owner, "alice") || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(sess.Owner) {
		t.Fatalf("stored owner %q, want the 32-hex fingerprint %q", sess.Owner, auth.Fingerprint("key-alice"))
	}

	var eb errBodyT
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", bob...), http.StatusNotFound, &eb)
	if eb.Error.Code != "session_not_found" {
		t.Fatalf("GET: %+v", eb.Error)
	}
	getJSON(t, e.do(http.MethodDelete, "/api/sessions/alice-session", "", bob...), http.StatusNotFound, &eb)

	resume := func(who []string, sid string, lei string) (int, string) {
		h := who
		if lei != "" {
			h = append(append([]string{}, who...), "Last-Event-ID", lei)
		}
		res := e.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", h...)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	unknownStatus, unknownBody := resume(bob, "no-such-session", "")
	for _, lei := range []string{"", wire.EventID(turnID, 0), wire.EventID(turnID, 1)} {
		if st, body := resume(bob, "alice-session", lei); st != unknownStatus || body != unknownBody {
			t.Errorf("bob resuming alice's session (Last-Event-ID %q): %d %q; an unknown session gives %d %q", lei, st, body, unknownStatus, unknownBody)
		}
	}
	if st, body := resume(alice, "alice-session", wire.EventID(turnID, 0)); st != http.StatusOK || !strings.Contains(body, "[DONE]") {
		t.Errorf("alice resuming her own turn: %d %q", st, body)
	}
	// Bob's turns with the same ID make a session of his own.
	if res, _ := e.streamChat("plain", `{"message":"bob here","sessionId":"alice-session"}`, bob...); res.StatusCode != http.StatusOK {
		t.Fatalf("bob's turn: %d", res.StatusCode)
	}
	getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", `{"model":"plain","messages":[{"role":"user","content":"bob again"}]}`, append(bob, "X-Session-Id", "alice-session")...), http.StatusOK, nil)
	var bobs, alices struct {
		Messages []struct{ Role, Content string }
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", bob...), http.StatusOK, &bobs)
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", alice...), http.StatusOK, &alices)
	if len(bobs.Messages) != 4 || bobs.Messages[0].Content != "bob here" || len(alices.Messages) != 2 || alices.Messages[0].Content != "hi" {
		t.Fatalf("bob's history %+v, alice's %+v", bobs.Messages, alices.Messages)
	}
	// Alice's session survived bob's attempts and is still hers.
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", alice...), http.StatusOK, nil)
	res = e.do(http.MethodDelete, "/api/sessions/alice-session", "", alice...)
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("alice's DELETE: %d", res.StatusCode)
	}
}

func TestKeyAuthUnit(t *testing.T) {
	if _, err := NewKeyAuth(nil, nil); err == nil {
		t.Error("no keys accepted")
	}
	if _, err := NewKeyAuth([]string{"a", " "}, nil); err == nil || !strings.Contains(err.Error(), "key 2 is empty") {
		t.Errorf("empty key: %v", err)
	}
	a, _ := NewKeyAuth([]string{"k1", "k2", "k1"}, []byte("s"))
	b, _ := NewKeyAuth([]string{"k1"}, []byte("s"))
	c, _ := NewKeyAuth([]string{"k1"}, []byte("other"))
	if a.Fingerprint("k1") != b.Fingerprint("k1") || a.Fingerprint("k1") == c.Fingerprint("k1") || a.Fingerprint("k1") == a.Fingerprint("k2") {
		t.Error("fingerprints must depend on the key and the secret only")
	}
	r1, _ := NewKeyAuth([]string{"k1"}, nil)
	r2, _ := NewKeyAuth([]string{"k1"}, nil)
	if r1.Fingerprint("k1") == r2.Fingerprint("k1") {
		t.Error("without a secret, each process must pick its own")
	}
	for _, tc := range []struct {
		name    string
		headers []string
		want    error
	}{
		{"bearer", []string{"Authorization", "Bearer k2"}, nil},
		{"bearer any case", []string{"Authorization", "BEARER k1"}, nil},
		{"x-api-key", []string{"X-Api-Key", "k1"}, nil},
		{"none", nil, ErrNoAPIKey},
		{"basic is not a key", []string{"Authorization", "Basic azE="}, ErrNoAPIKey},
		{"wrong", []string{"X-Api-Key", "k3"}, ErrBadAPIKey},
		{"prefix", []string{"X-Api-Key", "k"}, ErrBadAPIKey},
		{"longer", []string{"Authorization", "Bearer k1k1"}, ErrBadAPIKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/agents", nil)
			for i := 0; i+1 < len(tc.headers); i += 2 {
				r.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			owner, err := a.Owner(r)
			if err != tc.want {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err == nil && (owner == "" || owner != a.Fingerprint(strings.Fields(tc.headers[1])[len(strings.Fields(tc.headers[1]))-1])) {
				t.Fatalf("owner %q", owner)
			}
		})
	}
}

// TestRateLimitPerKey: a key over its burst gets 429 with a whole-second
// Retry-After of at least 1; another key is not affected.
func TestRateLimitPerKey(t *testing.T) {
	lim, err := NewRateLimiter(0.5, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := keyEnv(t, func(c *Config) { c.Limiter = lim })
	alice := []string{"X-Api-Key", "key-alice"}
	for i := 0; i < 2; i++ {
		getJSON(t, e.do(http.MethodGet, "/api/agents", "", alice...), http.StatusOK, nil)
	}
	res := e.do(http.MethodGet, "/v1/models", "", alice...)
	ra, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Errorf("Retry-After %q, want whole seconds in [1, 2]", res.Header.Get("Retry-After"))
	}
	var eb errBodyT
	getJSON(t, res, http.StatusTooManyRequests, &eb)
	if eb.Error.Code != "rate_limited" {
		t.Fatalf("error %+v", eb.Error)
	}
	getJSON(t, e.do(http.MethodGet, "/api/agents", "", "X-Api-Key", "key-bob"), http.StatusOK, nil)
	// Health checks are never limited.
	for i := 0; i < 5; i++ {
		getJSON(t, e.do(http.MethodGet, "/healthz", ""), http.StatusOK, nil)
	}
}

func TestRateLimiterUnit(t *testing.T) {
	for _, bad := range []struct {
		rps   float64
		burst int
		max   int
	}{{0, 1, 0}, {-1, 1, 0}, {1, 0, 0}, {1, 1, -1}} {
		if _, err := NewRateLimiter(bad.rps, bad.burst, bad.max); err == nil {
			t.Errorf("NewRateLimiter(%v, %d, %d) accepted", bad.rps, bad.burst, bad.max)
		}
	}
	l, _ := NewRateLimiter(1, 1, 3)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	req := func(ip string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api/agents", nil)
		r.RemoteAddr = ip + ":1234"
		return r
	}
	if ok, _ := l.Allow(req("10.0.0.1"), ""); !ok {
		t.Fatal("first request refused")
	}
	ok, retry := l.Allow(req("10.0.0.1"), "")
	if ok || retry <= 0 || retry > time.Second {
		t.Fatalf("second request: ok %v retry %v, want refused with a retry in (0, 1s]", ok, retry)
	}
	// Anonymous callers are told apart by address; owners by name.
	if ok, _ := l.Allow(req("10.0.0.2"), ""); !ok {
		t.Fatal("another address shares the bucket")
	}
	if ok, _ := l.Allow(req("10.0.0.1"), "owner-a"); !ok {
		t.Fatal("an owner shares the address's bucket")
	}
	// The map is bounded: a fourth key evicts the least recently used.
	l.Allow(req("10.0.0.9"), "owner-b")
	if l.Len() != 3 {
		t.Fatalf("%d buckets, want at most 3", l.Len())
	}
	// Buckets idle for a full refill are dropped when a new one is made.
	now = now.Add(2 * time.Second)
	if ok, _ := l.Allow(req("10.0.0.5"), ""); !ok {
		t.Fatal("a new caller refused")
	}
	if l.Len() != 1 {
		t.Fatalf("%d buckets after the idle ones expired, want 1", l.Len())
	}
	// A refused request is not charged: the caller may retry after the
	// delay it was told, not later.
	if ok, _ := l.Allow(req("10.0.0.5"), ""); ok {
		t.Fatal("burst of 1 allowed twice")
	}
	_, retry = l.Allow(req("10.0.0.5"), "")
	now = now.Add(retry)
	if ok, _ := l.Allow(req("10.0.0.5"), ""); !ok {
		t.Fatal("refused after the Retry-After delay")
	}
}

// TestCORS: no CORS headers at all by default; with an allowlist, allowed
// origins get the allow and expose headers and a preflight answer, others
// get nothing (and 403 for a preflight).
func TestCORS(t *testing.T) {
	off := newEnv(t, envOptions{})
	res := off.do(http.MethodOptions, "/api/chat/plain", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
	res.Body.Close()
	for k := range res.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("CORS header %s sent without CORS_ORIGINS", k)
		}
	}
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("preflight without CORS: %d", res.StatusCode)
	}

	e, _ := keyEnv(t, func(c *Config) { c.CORSOrigins = []string{"https://app.example", "http://localhost:3000/"} })
	pre := e.do(http.MethodOptions, "/api/chat/plain", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type,x-api-key")
	pre.Body.Close()
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(pre.Header.Get("Access-Control-Allow-Headers")), "x-api-key") {
		t.Errorf("allowed preflight: %d %v", pre.StatusCode, pre.Header)
	}
	res, _ = e.streamChat("plain", `{"message":"hi"}`, "Origin", "http://localhost:3000", "X-Api-Key", "key-alice")
	if res.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "X-Session-Id") ||
		!strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "X-Turn-Id") {
		t.Errorf("allowed origin's chat: %v", res.Header)
	}
	// A 401 still carries the CORS headers, so that the page can read it.
	res = e.do(http.MethodGet, "/api/agents", "", "Origin", "https://app.example")
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("401 to an allowed origin: %d %v", res.StatusCode, res.Header)
	}

	pre = e.do(http.MethodOptions, "/api/chat/plain", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	var eb errBodyT
	getJSON(t, pre, http.StatusForbidden, &eb)
	if pre.Header.Get("Access-Control-Allow-Origin") != "" || eb.Error.Code != "cors_origin_denied" {
		t.Errorf("denied preflight: %v %+v", pre.Header, eb.Error)
	}
	res = e.do(http.MethodGet, "/api/agents", "", "Origin", "https://evil.example", "X-Api-Key", "key-alice")
	res.Body.Close()
	if res.Header.Get("Access-Control-Allow-Origin") != "" || res.Header.Get("Access-Control-Expose-Headers") != "" {
		t.Errorf("denied origin got CORS headers: %v", res.Header)
	}

	if _, err := New(Config{Runtime: e.srv.rt, CORSOrigins: []string{"app.example", "https://a.example/path"}}); err == nil ||
		!strings.Contains(err.Error(), `"app.example"`) || !strings.Contains(err.Error(), `"https://a.example/path"`) {
		t.Errorf("bad origins: %v", err)
	}
}

// TestSecureHeaders: the page and the API carry the CSP and the other
// protective headers.
func TestSecureHeaders(t *testing.T) {
	page := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>t</title>")}}
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.WebFS = page }})
	for _, path := range []string{"/", "/index.html", "/api/agents", "/healthz", "/no/such/file"} {
		res := e.do(http.MethodGet, path, "")
		res.Body.Close()
		for k, want := range map[string]string{
			"Content-Security-Policy": DefaultCSP,
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"X-Frame-Options":         "DENY",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", path, k, got, want)
			}
		}
	}
	for _, d := range []string{"script-src 'self'", "object-src 'none'", "frame-ancestors 'none'", "img-src 'self' data:"} {
		if !strings.Contains(DefaultCSP, d) {
			t.Errorf("CSP lacks %s", d)
		}
	}
}

// TestMetricsKey: /metrics is open by default and behind the key when
// MetricsRequireOwner is set.
func TestMetricsKey(t *testing.T) {
	tel, err := otelsetup.Setup(t.Context(), otelsetup.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(t.Context()) })
	open, _ := keyEnv(t, func(c *Config) { c.Telemetry = tel })
	getJSON(t, open.do(http.MethodGet, "/metrics", ""), http.StatusOK, nil)
	closed, _ := keyEnv(t, func(c *Config) { c.Telemetry = tel; c.MetricsRequireOwner = true })
	res := closed.do(http.MethodGet, "/metrics", "")
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without a key: %d", res.StatusCode)
	}
	res = closed.do(http.MethodGet, "/metrics", "", "X-Api-Key", "key-bob")
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics with a key: %d", res.StatusCode)
	}
}

// TestOwnerQuota: a key at its quota of sessions gets 429 quota_exceeded,
// naming the quota, for a new session on every endpoint that starts one,
// while its sessions keep working; another key's session stays readable
// and another key can still start sessions.
func TestOwnerQuota(t *testing.T) {
	store := session.NewMemory(session.Config{SessionsPerOwner: 3})
	auth, err := NewKeyAuth([]string{"key-alice", "key-bob"}, []byte("test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{store: store, cfg: func(c *Config) { c.Owner = auth.Owner }})
	alice := []string{"X-Api-Key", "key-alice"}
	bob := []string{"X-Api-Key", "key-bob"}
	if res, _ := e.streamChat("plain", `{"message":"hi","sessionId":"alice-session"}`, alice...); res.StatusCode != http.StatusOK {
		t.Fatalf("alice's turn: %d", res.StatusCode)
	}
	for i := range 3 {
		if res, _ := e.streamChat("plain", `{"message":"flood","sessionId":"bob-session-`+strconv.Itoa(i)+`"}`, bob...); res.StatusCode != http.StatusOK {
			t.Fatalf("bob's session %d: %d", i, res.StatusCode)
		}
	}
	for _, req := range []struct {
		path, body string
		headers    []string
	}{
		{"/api/chat/plain", `{"message":"one more","sessionId":"bob-session-4"}`, bob},
		{"/v1/chat/completions", `{"model":"plain","messages":[{"role":"user","content":"one more"}]}`, append([]string{"X-Session-Id", "bob-session-5"}, bob...)},
		{"/v1/responses", `{"model":"plain","input":"one more"}`, bob},
	} {
		res := e.do(http.MethodPost, req.path, req.body, req.headers...)
		var eb errBodyT
		getJSON(t, res, http.StatusTooManyRequests, &eb)
		if eb.Error.Code != "quota_exceeded" || !strings.Contains(eb.Error.Message, "3 sessions, its quota (SESSIONS_PER_OWNER)") {
			t.Errorf("%s: %+v", req.path, eb.Error)
		}
	}
	// Bob's own sessions keep working; alice's session is untouched and
	// she can start more.
	if res, _ := e.streamChat("plain", `{"message":"again","sessionId":"bob-session-0"}`, bob...); res.StatusCode != http.StatusOK {
		t.Fatalf("bob's existing session: %d", res.StatusCode)
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions/alice-session", "", alice...), http.StatusOK, nil)
	if res, _ := e.streamChat("plain", `{"message":"more","sessionId":"alice-session-2"}`, alice...); res.StatusCode != http.StatusOK {
		t.Fatalf("alice's new session: %d", res.StatusCode)
	}
}

// TestAuthThrottle: wrong keys from one address get 401 until its
// failures are used up, then 429 with Retry-After, a right key included;
// successes use nothing, and another address is not affected.
func TestAuthThrottle(t *testing.T) {
	throttle, err := NewAuthThrottle(10, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := keyEnv(t, func(c *Config) { c.AuthThrottle = throttle })
	for range 20 {
		getJSON(t, e.do(http.MethodGet, "/api/agents", "", "X-Api-Key", "key-alice"), http.StatusOK, nil)
	}
	var codes []int
	for i := range 200 {
		res := e.do(http.MethodGet, "/api/agents", "", "X-Api-Key", "wrong-key-"+strconv.Itoa(i))
		res.Body.Close()
		codes = append(codes, res.StatusCode)
		if res.StatusCode == http.StatusTooManyRequests {
			if ra, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 6 {
				t.Fatalf("attempt %d: Retry-After %q, want the 6 s a failure takes to come back", i, res.Header.Get("Retry-After"))
			}
		}
	}
	for i, c := range codes {
		if want := map[bool]int{true: http.StatusUnauthorized, false: http.StatusTooManyRequests}[i < 5]; c != want {
			t.Fatalf("attempt %d: %d, want %d (codes %v)", i, c, want, codes[:10])
		}
	}
	var eb errBodyT
	getJSON(t, e.do(http.MethodGet, "/api/agents", "", "X-Api-Key", "key-alice"), http.StatusTooManyRequests, &eb)
	if eb.Error.Code != "auth_rate_limited" {
		t.Errorf("a right key from the blocked address: %+v", eb.Error)
	}
	// Another address still has its failures.
	req := httptest.NewRequest(http.MethodGet, "/api/agents", nil)
	req.RemoteAddr = "192.0.2.7:4000"
	if blocked, _ := throttle.Blocked(req); blocked {
		t.Error("another address is blocked")
	}
}

// TestAuthThrottleRefills: a blocked address gets a failure back as the
// bucket refills (the limiter's clock is moved, not waited for).
func TestAuthThrottleRefills(t *testing.T) {
	throttle, err := NewAuthThrottle(60, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	throttle.l.now = func() time.Time { return now }
	req := httptest.NewRequest(http.MethodGet, "/api/agents", nil)
	req.RemoteAddr = "198.51.100.1:1234"
	throttle.Failed(req)
	throttle.Failed(req)
	blocked, retry := throttle.Blocked(req)
	if !blocked || retry <= 0 || retry > time.Second {
		t.Fatalf("after its burst: blocked %v, retry %s", blocked, retry)
	}
	now = now.Add(retry)
	if blocked, _ := throttle.Blocked(req); blocked {
		t.Fatal("still blocked once a failure came back")
	}
}
