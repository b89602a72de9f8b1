package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// DefaultCSP is the Content-Security-Policy sent with every answer: the page
// loads its scripts, styles and images from its own origin only (plus data:
// images), runs no inline script or style, and may not be framed.
const DefaultCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// Errors of KeyAuth.Owner, answered 401.
var (
	ErrNoAPIKey  = errors.New("an API key is required: send it as Authorization: Bearer <key> or x-api-key: <key>")
	ErrBadAPIKey = errors.New("the API key is not valid")
)

// KeyAuth checks API keys and names each key's owner by a fingerprint, an
// HMAC of the key under a secret, so that the key itself is never stored
// with the sessions it owns nor logged.
type KeyAuth struct {
	secret []byte
	// digests are SHA-256 digests of the keys: comparing digests of equal
	// length in constant time reveals neither a key's length nor a prefix.
	digests [][sha256.Size]byte
	// webhooks are the keys' own webhook settings, by fingerprint.
	webhooks map[string]OwnerWebhooks
}

// A Key is an API key, with the settings of its own that a keys file may
// give it: its webhooks' (OwnerWebhooks), in place of the server's.
type Key struct {
	Key string
	// WebhookSecret signs the key's webhook calls ("": the server's
	// WebhookSecret): "whsec_" and base64, or any string. A receiver
	// that knows it tells the key's events from every other key's.
	WebhookSecret string
	// WebhookHosts are the hosts ("host" or "host:port") the key's
	// webhooks may be posted to, in place of the server's WebhookHosts.
	WebhookHosts []string
	// WebhookURL is the webhook of the key's background runs that name
	// none ("": the server's WebhookURL).
	WebhookURL string
}

// OwnerWebhooks are an owner's own webhook settings (Config.Webhooks):
// what is unset is the server's.
type OwnerWebhooks struct {
	Secret []byte
	Hosts  []string
	URL    string
}

// NewKeyAuth accepts the given keys. secret keys the fingerprints: sessions
// in a shared store stay with their key across restarts and replicas only
// when every process uses the same secret; nil picks a random one for this
// process. Empty keys are an error; duplicates are ignored.
func NewKeyAuth(keys []string, secret []byte) (*KeyAuth, error) {
	list := make([]Key, len(keys))
	for i, k := range keys {
		list[i] = Key{Key: k}
	}
	return NewKeys(list, secret)
}

// NewKeys is NewKeyAuth for keys with settings of their own.
func NewKeys(keys []Key, secret []byte) (*KeyAuth, error) {
	if len(keys) == 0 {
		return nil, errors.New("server: NewKeyAuth: no API keys")
	}
	a := &KeyAuth{secret: secret}
	if len(a.secret) == 0 {
		a.secret = make([]byte, 32)
		_, _ = rand.Read(a.secret)
	}
	seen := map[[sha256.Size]byte]bool{}
	for i, k := range keys {
		if strings.TrimSpace(k.Key) == "" {
			return nil, fmt.Errorf("server: NewKeyAuth: key %d is empty", i+1)
		}
		d := sha256.Sum256([]byte(k.Key))
		if !seen[d] {
			seen[d] = true
			a.digests = append(a.digests, d)
		}
		if k.WebhookSecret == "" && len(k.WebhookHosts) == 0 && k.WebhookURL == "" {
			continue
		}
		w := OwnerWebhooks{Hosts: k.WebhookHosts, URL: k.WebhookURL}
		if k.WebhookSecret != "" {
			var err error
			if w.Secret, err = webhookSecret(k.WebhookSecret); err != nil {
				return nil, fmt.Errorf("server: NewKeyAuth: key %d: its webhook secret: %w", i+1, err)
			}
		}
		for _, h := range k.WebhookHosts {
			if err := netguard.CheckHost(h); err != nil {
				return nil, fmt.Errorf("server: NewKeyAuth: key %d: its webhook hosts: %w", i+1, err)
			}
		}
		if a.webhooks == nil {
			a.webhooks = map[string]OwnerWebhooks{}
		}
		a.webhooks[a.Fingerprint(k.Key)] = w
	}
	return a, nil
}

// webhookSecret is WEBHOOK_SECRET's key: the base64 after "whsec_", as
// Standard Webhooks write their secrets, or the bytes of any other value.
func webhookSecret(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("a secret that starts with whsec_ is base64 after it: %w", err)
		}
		return k, nil
	}
	return []byte(secret), nil
}

// Webhooks is a Config.Webhooks hook: the webhook settings of the key
// whose fingerprint is owner.
func (a *KeyAuth) Webhooks(owner string) OwnerWebhooks { return a.webhooks[owner] }

// Fingerprint is the owner name of key: 32 hex digits of HMAC-SHA256(secret,
// key).
func (a *KeyAuth) Fingerprint(key string) string {
	m := hmac.New(sha256.New, a.secret)
	m.Write([]byte(key))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Owner is a Config.Owner hook: the fingerprint of the request's key, from
// "Authorization: Bearer <key>" or "x-api-key: <key>".
func (a *KeyAuth) Owner(r *http.Request) (string, error) {
	key := requestKey(r)
	if key == "" {
		return "", ErrNoAPIKey
	}
	d := sha256.Sum256([]byte(key))
	match := 0
	// Every key is compared, so that the time taken does not say which
	// one matched.
	for i := range a.digests {
		match |= subtle.ConstantTimeCompare(d[:], a.digests[i][:])
	}
	if match != 1 {
		return "", ErrBadAPIKey
	}
	return a.Fingerprint(key), nil
}

// requestKey reads the key of a request; "" when it carries none.
func requestKey(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

// Defaults of RateLimiter.
const (
	DefaultMaxBuckets = 100000
)

// RateLimiter is a Limiter with a token bucket per owner (per client IP
// for the anonymous owner, as without API keys every caller is ""). Buckets
// idle long enough to be full again are dropped, since a new bucket is the
// same; the map never holds more than MaxBuckets.
type RateLimiter struct {
	limit      rate.Limit
	burst      int
	refill     time.Duration // time for an empty bucket to fill again
	maxBuckets int
	now        func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// NewRateLimiter allows rps requests per second per owner on average, with
// bursts of up to burst requests. maxBuckets bounds the owners tracked at
// once (0: DefaultMaxBuckets); beyond it the least recently used bucket is
// dropped.
func NewRateLimiter(rps float64, burst, maxBuckets int) (*RateLimiter, error) {
	if rps <= 0 {
		return nil, fmt.Errorf("server: NewRateLimiter: rps must be positive, got %g", rps)
	}
	if burst < 1 {
		return nil, fmt.Errorf("server: NewRateLimiter: burst must be at least 1, got %d", burst)
	}
	if maxBuckets < 0 {
		return nil, fmt.Errorf("server: NewRateLimiter: maxBuckets must not be negative, got %d", maxBuckets)
	}
	if maxBuckets == 0 {
		maxBuckets = DefaultMaxBuckets
	}
	refill := time.Duration(float64(burst) / rps * float64(time.Second))
	return &RateLimiter{limit: rate.Limit(rps), burst: burst, refill: max(refill, time.Second), maxBuckets: maxBuckets,
		now: time.Now, buckets: make(map[string]*bucket)}, nil
}

// Allow takes a token from the owner's bucket. When there is none it
// reports how long until there is one.
func (l *RateLimiter) Allow(r *http.Request, owner string) (bool, time.Duration) {
	key := "k:" + owner
	if owner == "" {
		key = "ip:" + clientIP(r)
	}
	now := l.now()
	res := l.bucket(key, now).lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// bucket returns key's bucket, made full when there is none.
func (l *RateLimiter) bucket(key string, now time.Time) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		l.evict(now)
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.used = now
	return b
}

// evict drops the buckets idle for longer than a full refill and, when the
// map is still full, the least recently used one. Called with l.mu held.
func (l *RateLimiter) evict(now time.Time) {
	if now.Sub(l.lastSweep) >= l.refill || len(l.buckets) >= l.maxBuckets {
		l.lastSweep = now
		for k, b := range l.buckets {
			if now.Sub(b.used) >= l.refill {
				delete(l.buckets, k)
			}
		}
	}
	if len(l.buckets) < l.maxBuckets {
		return
	}
	var oldest string
	var at time.Time
	for k, b := range l.buckets {
		if oldest == "" || b.used.Before(at) {
			oldest, at = k, b.used
		}
	}
	delete(l.buckets, oldest)
}

// Len is the number of buckets held.
func (l *RateLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// AuthThrottle limits the failed authentications of each client address
// (a token bucket of failures, as RateLimiter's of requests): once an
// address used them up, its requests get 429 with Retry-After before
// their key is even checked, a right key included, so that guessing keys
// from one address goes no faster than the bucket refills. Successes take
// nothing. Behind a proxy every client shares the proxy's address.
type AuthThrottle struct{ l *RateLimiter }

// NewAuthThrottle allows perMinute failed authentications a minute per
// address on average, burst at once; maxAddrs bounds the addresses
// tracked (0: DefaultMaxBuckets).
func NewAuthThrottle(perMinute float64, burst, maxAddrs int) (*AuthThrottle, error) {
	l, err := NewRateLimiter(perMinute/60, burst, maxAddrs)
	if err != nil {
		return nil, fmt.Errorf("server: NewAuthThrottle: %w", err)
	}
	return &AuthThrottle{l: l}, nil
}

// Blocked reports whether r's address has used up its failures, and how
// long until it has one again.
func (a *AuthThrottle) Blocked(r *http.Request) (bool, time.Duration) {
	now := a.l.now()
	a.l.mu.Lock()
	b := a.l.buckets["ip:"+clientIP(r)]
	a.l.mu.Unlock()
	if b == nil {
		return false, 0 // no failure yet: a full bucket
	}
	if left := b.lim.TokensAt(now); left < 1 {
		return true, time.Duration((1 - left) / float64(a.l.limit) * float64(time.Second))
	}
	return false, 0
}

// Failed takes one failure from r's address.
func (a *AuthThrottle) Failed(r *http.Request) {
	now := a.l.now()
	a.l.bucket("ip:"+clientIP(r), now).lim.ReserveN(now, 1)
}

// clientIP is the peer's address. Forwarding headers are not trusted: behind
// a proxy every anonymous caller shares the proxy's bucket.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ValidOrigin checks a CORS_ORIGINS entry: "*" or scheme://host[:port]
// with nothing after it.
func ValidOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("CORS origin %q: want \"*\" or scheme://host[:port], as a browser sends it in Origin", o)
	}
	return nil
}

// corsExposed are the answer headers an allowed page may read.
const corsExposed = "X-Session-Id, X-Turn-Id, X-Request-Id, Retry-After, Idempotent-Replayed"

// corsAllowedHeaders are the request headers an allowed page may send.
const corsAllowedHeaders = "Authorization, Content-Type, X-Api-Key, X-Session-Id, Last-Event-Id, X-Request-Id, Idempotency-Key, X-Busy"

// cors answers CORS for the allowed origins: the allow and expose headers on
// every answer to an allowed Origin, and the preflight itself. Without
// CORSOrigins it does nothing, so browsers keep the same-origin rule.
func (s *Server) cors(c *gin.Context) bool {
	if len(s.origins) == 0 && !s.anyOrigin {
		return true
	}
	h := c.Writer.Header()
	h.Add("Vary", "Origin")
	origin := c.GetHeader("Origin")
	allowed := origin != "" && (s.anyOrigin || s.origins[strings.TrimSuffix(origin, "/")])
	preflight := c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != ""
	if !allowed {
		if preflight {
			abortWith(c, newError(http.StatusForbidden, "cors_origin_denied", "the origin %q is not allowed (CORS_ORIGINS)", origin))
			return false
		}
		return true
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", corsExposed)
	if preflight {
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE, OPTIONS")
		h.Set("Access-Control-Allow-Headers", corsAllowedHeaders)
		h.Set("Access-Control-Max-Age", "600")
		c.AbortWithStatus(http.StatusNoContent)
		return false
	}
	return true
}

// secureHeaders sets the headers that keep the page and the API out of
// frames, sniffing and referrers, on every answer.
func (s *Server) secureHeaders(c *gin.Context) bool {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", s.cfg.ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	return true
}
