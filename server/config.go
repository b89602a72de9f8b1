package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/turns"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes    = 1 << 20
	DefaultHeartbeat       = 15 * time.Second
	DefaultShutdownTimeout = 25 * time.Second
	DefaultWriteTimeout    = 60 * time.Second
	DefaultReadTimeout     = 30 * time.Second
	DefaultWebhookAttempts = 6
	DefaultWebhookBackoff  = time.Second
)

// Limiter decides whether a request may proceed; it is the hook for rate
// limits. Allow is called once per /api and /v1 request, after the caller's
// owner is known.
type Limiter interface {
	// Allow reports whether the request may proceed. When it may not,
	// retryAfter says when to try again (0 when unknown); the client gets 429.
	Allow(r *http.Request, owner string) (ok bool, retryAfter time.Duration)
}

// Config configures a Server. New validates it once and fills the defaults.
type Config struct {
	// Runtime runs the turns of the agents served (turns.New: the agents,
	// the session store, the turn log replicas share). Required. The
	// server's Shutdown shuts it down.
	Runtime *turns.Runtime
	// Responses keeps the objects of POST /v1/responses for GET
	// /v1/responses/{id} and previous_response_id; replicas share one
	// (responses/redisstore on the session store's Redis). Nil: an in-memory
	// store of this server (responses.DefaultTTL, bounded).
	Responses responses.Store
	// CompactionSecret signs the compaction items of POST
	// /v1/responses/compact (HMAC-SHA256), so that only the items this
	// server (or a replica with the same secret) made are taken back: a
	// forged one could carry a summary of any size to the model. Empty: a
	// random secret of this process, whose items no other process takes.
	CompactionSecret string
	// Compactor makes the compactions of POST /v1/responses/compact (nil:
	// agent.Summarizing, the agent's own context machinery, which
	// summarizes the turns beyond the kept ones; for an agent whose
	// context budget is off, agent.KeepTurns(agent.DefaultKeepTurns), which
	// keeps the newest whole turns and summarizes nothing).
	Compactor agent.Compactor
	// Logger gets one record per request (method, route, status, duration;
	// never bodies or chat content). Nil means slog.Default().
	Logger *slog.Logger
	// Doors are the other protocols served beside the API over the same
	// turns (server/a2a, server/agui, server/mcpserver).
	Doors []door.Door
	// MCPServers, when set, describes the MCP servers an agent's tools come
	// from, for /api/agents (see MCPServer).
	MCPServers func(agentID string) []MCPServer

	// MaxBodyBytes bounds a request body (default 1 MiB); larger bodies get
	// 413.
	MaxBodyBytes int64
	// Heartbeat is the interval of SSE comment lines on idle streams
	// (default 15 s).
	Heartbeat time.Duration
	// ReadTimeout is the http.Server's ReadTimeout in Serve (default 30 s):
	// it bounds the reading of each request's head and body, and a body
	// that does not arrive in time is answered 408. Each request clears it
	// once its body is read, so it never cuts a stream.
	ReadTimeout time.Duration
	// WriteTimeout is the http.Server's WriteTimeout in Serve (default 60 s);
	// it bounds ordinary answers, while every stream clears its own deadline.
	WriteTimeout time.Duration
	// ShutdownTimeout bounds Serve's graceful shutdown (default 25 s, under
	// the 30 s a container orchestrator usually waits before SIGKILL).
	ShutdownTimeout time.Duration

	// WebhookHosts are the hosts ("host" or "host:port") that background
	// runs' webhooks may be posted to; a bare host allows its scheme's
	// default port only. None (the default) calls no webhook. WebhookSecret keys their signatures (required with
	// WebhookHosts; "whsec_" and base64, or any string). WebhookURL is the
	// webhook of background runs that name none (default none).
	WebhookHosts  []string
	WebhookSecret string
	WebhookURL    string
	// Webhooks, when set, gives an owner webhook settings of its own
	// (KeyAuth.Webhooks: the keys file's per-key secret, hosts and URL),
	// which replace the server's above for that owner's runs.
	Webhooks func(owner string) OwnerWebhooks
	// WebhookAttempts bounds the calls of one webhook (default 6: the
	// first and 5 retries); WebhookBackoff is the wait before the first
	// retry, doubled before each next (default 1 s).
	WebhookAttempts int
	WebhookBackoff  time.Duration
	// WebhookHold is how soon another replica takes up a webhook call
	// whose replica died while working on it (default 30 s; the replica
	// renews its hold every third of it): cmd/server uses the session
	// lease's TTL, so that a dead replica's calls go on as soon as its
	// turns do.
	WebhookHold time.Duration
	// Outbox keeps the webhook calls owed until they are made, so that
	// another replica makes those of a replica that died or shut down
	// (redisoutbox on the session store's Redis); nil: in this process.
	Outbox outbox.Store

	// WebFS is the chat page, served at /; nil serves no page.
	WebFS fs.FS
	// Limiter limits requests; nil means no limit.
	Limiter Limiter
	// Telemetry traces the API routes (streaming routes excepted: their
	// duration is the chat's, not the request's), counts open streams and
	// serves /metrics. Nil records nothing and serves no /metrics.
	Telemetry *telemetry.Telemetry

	// CORSOrigins are the origins whose pages may call the API from a
	// browser ("*" for any; KeyAuth keys travel in headers, never cookies,
	// so "*" exposes nothing a key does not already grant). Empty (the
	// default) sends no CORS headers at all.
	CORSOrigins []string
	// ContentSecurityPolicy is sent with every answer (default DefaultCSP,
	// what the shipped page needs).
	ContentSecurityPolicy string
	// MetricsRequireOwner puts /metrics behind the Owner hook (API keys).
	// Off by default: scrapers usually reach /metrics on a private network
	// and it carries no chat content.
	MetricsRequireOwner bool

	// Owner identifies the caller of a request (for example the fingerprint
	// of its API key); sessions are owned by it, and another owner's session
	// is reported as not found. An error answers 401. Nil means every caller
	// is the same anonymous owner "".
	Owner func(r *http.Request) (string, error)
	// AuthThrottle, when set, limits the Owner hook's failures per client
	// address: beyond them a request gets 429 with Retry-After. Nil: no
	// limit.
	AuthThrottle *AuthThrottle
}

// validate fills the defaults and reports every problem in one error.
func (c *Config) validate() error {
	var probs []string
	if c.Runtime == nil {
		probs = append(probs, "Runtime is required (turns.New)")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Compactor == nil {
		c.Compactor = agent.Summarizing{Fallback: agent.KeepTurns(agent.DefaultKeepTurns)}
	}
	if c.Responses == nil {
		m, err := responses.NewMemory(responses.Config{})
		if err != nil {
			probs = append(probs, err.Error())
		}
		c.Responses = m
	}
	neg := func(name string, v int64) {
		if v < 0 {
			probs = append(probs, fmt.Sprintf("%s must not be negative (got %d)", name, v))
		}
	}
	neg("MaxBodyBytes", c.MaxBodyBytes)
	neg("Heartbeat", int64(c.Heartbeat))
	neg("ShutdownTimeout", int64(c.ShutdownTimeout))
	neg("WriteTimeout", int64(c.WriteTimeout))
	neg("ReadTimeout", int64(c.ReadTimeout))
	neg("WebhookAttempts", int64(c.WebhookAttempts))
	neg("WebhookBackoff", int64(c.WebhookBackoff))
	neg("WebhookHold", int64(c.WebhookHold))
	if c.WebhookAttempts == 0 {
		c.WebhookAttempts = DefaultWebhookAttempts
	}
	if c.WebhookBackoff == 0 {
		c.WebhookBackoff = DefaultWebhookBackoff
	}
	for _, h := range c.WebhookHosts {
		if err := netguard.CheckHost(h); err != nil {
			probs = append(probs, "WebhookHosts: "+err.Error())
		}
	}
	if len(c.WebhookHosts) > 0 && c.WebhookSecret == "" {
		probs = append(probs, "WebhookHosts needs WebhookSecret, which signs the calls (WEBHOOK_SECRET)")
	}
	if c.WebhookURL != "" && len(c.WebhookHosts) == 0 {
		probs = append(probs, "WebhookURL needs WebhookHosts, the hosts webhooks may be posted to (WEBHOOK_HOSTS)")
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	for _, o := range c.CORSOrigins {
		if err := ValidOrigin(o); err != nil {
			probs = append(probs, err.Error())
		}
	}
	if c.ContentSecurityPolicy == "" {
		c.ContentSecurityPolicy = DefaultCSP
	}
	if len(probs) > 0 {
		return errors.New("server: invalid Config: " + strings.Join(probs, "; "))
	}
	return nil
}

// MCPServer describes one MCP server of an agent, as /api/agents reports it.
type MCPServer struct {
	Name string `json:"name"`
	// Scope is "server" (MCP_SERVERS_FILE) or the agent ID of the template
	// that declares it.
	Scope     string `json:"scope"`
	Transport string `json:"transport"`
	// State is starting, ready, restarting, failed or stopped.
	State string `json:"state"`
	// Error says why it is not ready.
	Error           string    `json:"error,omitempty"`
	Since           time.Time `json:"since"`
	Restarts        int       `json:"restarts"`
	ProtocolVersion string    `json:"protocolVersion,omitempty"`
	// Tools are its tools that can be offered now, under their final names.
	Tools []string `json:"tools"`
	// Skipped are its tools never offered (a name breaking the providers'
	// rule, an unusable schema), each as "name: reason".
	Skipped []string `json:"skipped,omitempty"`
	// MissingTools are the agent's nodes naming a tool it does not list.
	MissingTools []string `json:"missingTools,omitempty"`
	// Limits are the limits its tool list is over (more tools or pages
	// than MCP_MAX_TOOLS or MCP_MAX_TOOL_PAGES allow), each saying what was
	// skipped.
	Limits []string `json:"limits,omitempty"`
}
