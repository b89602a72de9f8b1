package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/spend"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
	"github.com/agentdock-go/agentdock/tools/mcp"
	"github.com/agentdock-go/agentdock/turns"
)

// serveConfig is the configuration of `agentdock serve`. Each value comes
// from, in order of precedence, a flag, the environment, the configuration
// file (--config or AGENTDOCK_CONFIG) and the default; docs/configuration.md
// lists them all.
type serveConfig struct {
	Addr         string
	Store        string
	TemplatesDir string
	LogFormat    string
	LogLevel     slog.Level
	SessionTTL   time.Duration
	LockTTL      time.Duration
	WriteRetry   time.Duration
	// WaitReplicas and WaitTimeout: redisstore.Config's.
	WaitReplicas int
	WaitTimeout  time.Duration
	PprofAddr    string
	ModelIdle    time.Duration
	OfflineDelay time.Duration

	// APIKeys are never printed; APIKeySecret keys their fingerprints.
	// KeyWebhooks are the webhook settings the keys file gives some keys,
	// by key.
	APIKeys      []string
	KeyWebhooks  map[string]server.Key
	APIKeySecret string
	// CompactionSecret signs the Responses API's compaction items.
	CompactionSecret  string
	MetricsRequireKey bool
	RateLimitRPS      float64
	RateLimitBurst    int
	AuthFailures      float64 // a minute per address; 0: no limit
	AuthFailureBurst  int
	CORSOrigins       []string
	// A2APushHosts are the hosts A2A push notifications may be posted to.
	A2APushHosts []string
	// A2ADefaultAgent answers A2A messages to /a2a that name no agent.
	A2ADefaultAgent string
	// AgentCallDepth and AgentCallTimeout bound agent tools
	// (agenttool.Config's MaxDepth and Timeout).
	AgentCallDepth   int
	AgentCallTimeout time.Duration
	// Webhooks of background runs (server.Config's fields of the same
	// names); WebhookHosts is one allow-list with A2APushHosts.
	WebhookHosts    []string
	WebhookSecret   string
	WebhookURL      string
	WebhookAttempts int
	// Busy sessions (server.Config's fields of the same names).
	MaxQueue          int
	QueueWait         time.Duration
	MaxQueuedPerOwner int
	// mcpStdio serves MCP over stdio instead of HTTP (agentdock mcp serve).
	mcpStdio bool
	// The MCP edge's sessions (mcpserver.Config's fields of the same
	// names; -1: no bound).
	MCPMaxSessions      int
	MCPSessionsPerOwner int
	MCPSessionIdle      time.Duration

	MaxBodyBytes    int64
	MaxMessageBytes int
	// MaxAttachmentBytes bounds one image or file of a message as sent.
	MaxAttachmentBytes int
	// MaxAttachmentsInContext and AttachmentURLs: agent.Config's fields
	// of the same names.
	MaxAttachmentsInContext int
	AttachmentURLs          string
	MaxTurnEvents           int
	StreamRetention         time.Duration
	Heartbeat               time.Duration
	// Budget bounds every turn (templates override it field by field).
	Budget llmorch.Budget
	// Context is the context budget (templates override it field by
	// field with options.context).
	Context         agent.ContextConfig
	DisconnectGrace time.Duration
	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	ShutdownTimeout time.Duration

	// Quotas holds SESSIONS_PER_OWNER, BYTES_PER_OWNER and the memory
	// store's caps, as session.Config takes them (a quota of -1 is off).
	Quotas session.Config
	// Spend holds TOKENS_PER_OWNER_PER_DAY, TOKENS_PER_OWNER_PER_MONTH
	// and MODEL_PRICES; KeyLimits are the keys' own budgets from
	// API_KEYS_FILE, by key (serve turns them into Spend.Owners).
	Spend     spend.Policy
	KeyLimits map[string]keyLimits
	// The server's fallback model (LLM_FALLBACK_*), every model's
	// fallback unless its template names its own, and how long a call
	// that has a fallback waits for a rate limit (LLM_FALLBACK_WAIT).
	FallbackProvider, FallbackModel, FallbackBaseURL, FallbackKey string
	FallbackWait                                                  time.Duration

	// ConfigFile is the file read, "" for none.
	ConfigFile string
	// values and sources are the raw value and origin ("flag", "env",
	// "file", "default") of each setting, for the start-up printout.
	values, sources map[string]string
}

// setting is one configuration value: its environment variable, its flag
// ("" for environment and file only: secrets never go on a command line,
// where ps shows them), default and parser.
type setting struct {
	env, flag, def, help string
	parse                func(c *serveConfig, v string) error
}

func settings() []setting {
	str := func(p func(*serveConfig) *string) func(*serveConfig, string) error {
		return func(c *serveConfig, v string) error { *p(c) = v; return nil }
	}
	dur := func(p func(*serveConfig) *time.Duration) func(*serveConfig, string) error {
		return func(c *serveConfig, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("want a non-negative Go duration such as 30s or 2m, got %q", v)
			}
			*p(c) = d
			return nil
		}
	}
	num := func(p func(*serveConfig) *int64) func(*serveConfig, string) error {
		return func(c *serveConfig, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("want a non-negative whole number, got %q", v)
			}
			*p(c) = n
			return nil
		}
	}
	intv := func(p func(*serveConfig) *int) func(*serveConfig, string) error {
		return func(c *serveConfig, v string) error {
			var n int64
			if err := num(func(*serveConfig) *int64 { return &n })(c, v); err != nil {
				return err
			}
			*p(c) = int(n)
			return nil
		}
	}
	positive := func(p func(*serveConfig) *int) func(*serveConfig, string) error {
		return func(c *serveConfig, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("want a positive whole number, got %q", v)
			}
			*p(c) = n
			return nil
		}
	}
	return []setting{
		{"ADDR", "addr", ":8080", "listen address", str(func(c *serveConfig) *string { return &c.Addr })},
		{"PPROF_ADDR", "pprof-addr", "", "loopback address for net/http/pprof (/debug/pprof/); empty: off", func(c *serveConfig, v string) error {
			if v == "" {
				c.PprofAddr = ""
				return nil
			}
			if err := checkPprofAddr(v); err != nil {
				return err
			}
			c.PprofAddr = v
			return nil
		}},
		{"SESSION_STORE", "store", "", "session store URL: memory://, redis://, rediss://, redis+sentinel://, redis+cluster:// (default: Redis from REDIS_URL, REDIS_SENTINEL_* or REDIS_CLUSTER_ADDRS when set, else memory)", func(c *serveConfig, v string) error {
			c.Store = v
			if v == "" || strings.HasPrefix(v, "memory://") {
				return nil
			}
			_, err := redisstore.ParseURL(v)
			if err != nil {
				return errors.New(redactErrorURL(err.Error(), v))
			}
			return nil
		}},
		{"TEMPLATES_DIR", "templates-dir", "", "extra templates: a directory of */template.json", func(c *serveConfig, v string) error {
			c.TemplatesDir = v
			if v == "" {
				return nil
			}
			if st, err := os.Stat(v); err != nil || !st.IsDir() {
				return fmt.Errorf("%q is not a readable directory", v)
			}
			return nil
		}},
		{"LOG_FORMAT", "log-format", "text", "log format: text or json", func(c *serveConfig, v string) error {
			if v != "text" && v != "json" {
				return fmt.Errorf("want text or json, got %q", v)
			}
			c.LogFormat = v
			return nil
		}},
		{"LOG_LEVEL", "log-level", "info", "log level: debug, info, warn or error", func(c *serveConfig, v string) error {
			if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
				return fmt.Errorf("want debug, info, warn or error, got %q", v)
			}
			return nil
		}},
		{"API_KEYS", "", "", "comma-separated API keys; when any key is set (here or in API_KEYS_FILE) every /api and /v1 request needs one", func(c *serveConfig, v string) error {
			c.APIKeys = append(c.APIKeys, splitList(v)...)
			return nil
		}},
		{"API_KEYS_FILE", "api-keys-file", "", "a file of API keys, one per line (# comments), each optionally followed by its own budgets (tokens_per_day=N tokens_per_month=N, 0: none) and webhook settings (webhook-secret=..., webhook-hosts=host[:port],... and webhook-url=...)", func(c *serveConfig, v string) error {
			if v == "" {
				return nil
			}
			keys, limits, err := readKeysFile(v)
			c.KeyLimits = limits
			for _, k := range keys {
				c.APIKeys = append(c.APIKeys, k.Key)
				if k.WebhookSecret != "" || len(k.WebhookHosts) > 0 || k.WebhookURL != "" {
					if c.KeyWebhooks == nil {
						c.KeyWebhooks = map[string]server.Key{}
					}
					c.KeyWebhooks[k.Key] = k
				}
			}
			return err
		}},
		{"API_KEY_SECRET", "", "", "secret of the key fingerprints that own sessions; set the same on every replica so that sessions in Redis keep their owner across restarts (default: random per process)", str(func(c *serveConfig) *string { return &c.APIKeySecret })},
		{"COMPACTION_SECRET", "", "", "signs the compaction items of /v1/responses/compact (HMAC-SHA256), so that only the server's own are taken back; set the same on every replica (default: random per process)", str(func(c *serveConfig) *string { return &c.CompactionSecret })},
		{"METRICS_REQUIRE_KEY", "metrics-require-key", "false", "put /metrics behind the API keys", func(c *serveConfig, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false, got %q", v)
			}
			c.MetricsRequireKey = b
			return nil
		}},
		{"RATE_LIMIT_RPS", "rate-limit-rps", "0", "requests per second allowed per API key (per client address without keys); 0 turns the limit off", func(c *serveConfig, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f != f {
				return fmt.Errorf("want a non-negative number, got %q", v)
			}
			c.RateLimitRPS = f
			return nil
		}},
		{"RATE_LIMIT_BURST", "rate-limit-burst", "20", "requests a key may send at once above the rate", func(c *serveConfig, v string) error {
			if err := intv(func(c *serveConfig) *int { return &c.RateLimitBurst })(c, v); err != nil {
				return err
			}
			if c.RateLimitBurst < 1 {
				return fmt.Errorf("want at least 1, got %q", v)
			}
			return nil
		}},
		{"AUTH_FAILURES_PER_MINUTE", "auth-failures-per-minute", "10", "failed authentications allowed a minute per client address, on average; beyond them (and AUTH_FAILURE_BURST) the address gets 429 with Retry-After, even with a right key; 0 turns the limit off", func(c *serveConfig, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f != f {
				return fmt.Errorf("want a non-negative number, got %q", v)
			}
			c.AuthFailures = f
			return nil
		}},
		{"AUTH_FAILURE_BURST", "auth-failure-burst", "20", "failed authentications an address may make at once above the average", func(c *serveConfig, v string) error {
			if err := intv(func(c *serveConfig) *int { return &c.AuthFailureBurst })(c, v); err != nil {
				return err
			}
			if c.AuthFailureBurst < 1 {
				return fmt.Errorf("want at least 1, got %q", v)
			}
			return nil
		}},
		{"CORS_ORIGINS", "cors-origins", "", "comma-separated origins whose pages may call the API (\"*\" for any); none by default", func(c *serveConfig, v string) error {
			c.CORSOrigins = splitList(v)
			var probs []string
			for _, o := range c.CORSOrigins {
				if err := server.ValidOrigin(o); err != nil {
					probs = append(probs, err.Error())
				}
			}
			if len(probs) > 0 {
				return errors.New(strings.Join(probs, "; "))
			}
			return nil
		}},
		{"A2A_PUSH_HOSTS", "a2a-push-hosts", "", "comma-separated hosts (host or host:port) that A2A push notification webhooks may be on; none (no push notifications) by default", func(c *serveConfig, v string) error {
			c.A2APushHosts = splitList(v)
			return nil
		}},
		{"WEBHOOK_HOSTS", "webhook-hosts", "", "comma-separated hosts (host or host:port) that background runs' webhooks may be posted to; the same list as A2A_PUSH_HOSTS (each adds to the other); none (no webhooks) by default", func(c *serveConfig, v string) error {
			c.WebhookHosts = splitList(v)
			return nil
		}},
		{"WEBHOOK_SECRET", "", "", "the key of webhook signatures (webhook-signature, HMAC-SHA256): whsec_ and base64 as Standard Webhooks write it, or any string; required with WEBHOOK_HOSTS", str(func(c *serveConfig) *string { return &c.WebhookSecret })},
		{"WEBHOOK_URL", "webhook-url", "", "the webhook of background runs that name none (chat API and /v1/responses); its host must be in WEBHOOK_HOSTS; none by default", str(func(c *serveConfig) *string { return &c.WebhookURL })},
		{"WEBHOOK_ATTEMPTS", "webhook-attempts", strconv.Itoa(server.DefaultWebhookAttempts), "calls of one webhook at most: the first, and retries after a failure 1 s, 2 s, 4 s ... later", intv(func(c *serveConfig) *int { return &c.WebhookAttempts })},
		{"MAX_QUEUE", "max-queue", strconv.Itoa(turns.DefaultMaxQueue), "messages that may wait for a session's running turn (busy policy enqueue); one more gets 409 session_queue_full", intv(func(c *serveConfig) *int { return &c.MaxQueue })},
		{"MAX_QUEUED_PER_OWNER", "max-queued-per-owner", strconv.Itoa(session.DefaultMaxWaitingPerOwner), "messages of one API key (without keys, of everyone) that may wait for busy sessions at once on this replica; one more gets 429 too_many_queued; 0: no bound", func(c *serveConfig, v string) error {
			return noBound(intv(func(c *serveConfig) *int { return &c.MaxQueuedPerOwner })(c, v), &c.MaxQueuedPerOwner)
		}},
		{"QUEUE_WAIT", "queue-wait", turns.DefaultQueueWait.String(), "longest wait of a message for a busy session (enqueue, interrupt) before 409 session_busy", dur(func(c *serveConfig) *time.Duration { return &c.QueueWait })},
		{"MCP_MAX_SESSIONS", "mcp-max-sessions", strconv.Itoa(mcpserver.DefaultMaxSessions), "MCP sessions /mcp holds at once; an initialize past it gets a JSON-RPC error (HTTP 503); 0: no bound", func(c *serveConfig, v string) error {
			return noBound(intv(func(c *serveConfig) *int { return &c.MCPMaxSessions })(c, v), &c.MCPMaxSessions)
		}},
		{"MCP_SESSIONS_PER_OWNER", "mcp-sessions-per-owner", strconv.Itoa(mcpserver.DefaultSessionsPerOwner), "MCP sessions one API key (without keys, one client address) holds at once; an initialize past it gets a JSON-RPC error (HTTP 429); 0: no bound", func(c *serveConfig, v string) error {
			return noBound(intv(func(c *serveConfig) *int { return &c.MCPSessionsPerOwner })(c, v), &c.MCPSessionsPerOwner)
		}},
		{"MCP_SESSION_IDLE_TIMEOUT", "mcp-session-idle-timeout", mcpserver.DefaultSessionIdle.String(), "how long an MCP session without a request is kept before it is closed (its agent session stays, for a new MCP session to continue by sessionId)", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.MCPSessionIdle })(c, v); err != nil {
				return err
			}
			if c.MCPSessionIdle < time.Second {
				return errors.New("must be at least 1s")
			}
			return nil
		}},
		{"A2A_DEFAULT_AGENT", "a2a-default-agent", "", "the agent that answers A2A messages to /a2a naming none (message.metadata.agent); none by default", func(c *serveConfig, v string) error {
			c.A2ADefaultAgent = v
			return nil
		}},
		{"AGENT_CALL_DEPTH", "agent-call-depth", strconv.Itoa(agenttool.DefaultMaxDepth), "how deep agent tools may nest: a call that would be deeper (counting every agent asked, on this server or another, whose A2A requests carry the depth) is refused, and so is an A2A request that comes deeper (1 to 32)", func(c *serveConfig, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 32 {
				return fmt.Errorf("want a whole number from 1 to 32, got %q", v)
			}
			c.AgentCallDepth = n
			return nil
		}},
		{"AGENT_CALL_TIMEOUT", "agent-call-timeout", agenttool.DefaultTimeout.String(), "longest call of an agent tool (the asked agent's turn, or a remote agent's task); the asked turn is then stopped and the call fails", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.AgentCallTimeout })(c, v); err != nil {
				return err
			}
			if c.AgentCallTimeout < time.Second {
				return errors.New("must be at least 1s")
			}
			return nil
		}},
		{"MAX_BODY_BYTES", "max-body-bytes", strconv.Itoa(server.DefaultMaxBodyBytes), "largest request body; larger ones get 413", func(c *serveConfig, v string) error {
			if err := num(func(c *serveConfig) *int64 { return &c.MaxBodyBytes })(c, v); err != nil {
				return err
			}
			if c.MaxBodyBytes == 0 {
				return errors.New("must be positive")
			}
			return nil
		}},
		{"MAX_MESSAGE_BYTES", "max-message-bytes", "32768", "longest user message; longer ones get 400 invalid_message", intv(func(c *serveConfig) *int { return &c.MaxMessageBytes })},
		{"MAX_ATTACHMENT_BYTES", "max-attachment-bytes", "5242880", "largest image or file of a message, as sent (its data: URL); a stored session keeps each once, with its message; larger ones get 400", intv(func(c *serveConfig) *int { return &c.MaxAttachmentBytes })},
		{"MAX_ATTACHMENTS_IN_CONTEXT", "max-attachments-in-context", strconv.Itoa(llmorch.DefaultMaxAttachments), "images and files a model request carries, the newest of the conversation; an older one is a line in its message saying it is no longer shown (the session keeps it); 0: no bound", func(c *serveConfig, v string) error {
			return noBound(intv(func(c *serveConfig) *int { return &c.MaxAttachmentsInContext })(c, v), &c.MaxAttachmentsInContext)
		}},
		{"ATTACHMENT_URLS", "attachment-urls", agent.AttachmentURLsPublic, "where an image or file may be by URL (the model's provider fetches it): public, https URLs whose host resolves to public addresses only (no loopback, private, link-local or metadata address); none, data: URLs only", func(c *serveConfig, v string) error {
			if v != agent.AttachmentURLsPublic && v != agent.AttachmentURLsNone {
				return fmt.Errorf("want %s or %s, got %q", agent.AttachmentURLsPublic, agent.AttachmentURLsNone, v)
			}
			c.AttachmentURLs = v
			return nil
		}},
		{"MAX_TURN_EVENTS", "max-turn-events", strconv.Itoa(turns.DefaultMaxEvents), "frames kept per turn for resuming", intv(func(c *serveConfig) *int { return &c.MaxTurnEvents })},
		{"STREAM_RETENTION", "stream-retention", turns.DefaultRetention.String(), "how long a finished turn's frames are kept for resuming", dur(func(c *serveConfig) *time.Duration { return &c.StreamRetention })},
		{"SESSION_LOCK_TTL", "session-lock-ttl", session.DefaultLockTTL.String(), "how long a turn's hold on its session outlives a replica that died mid-turn (renewed every third of it)", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.LockTTL })(c, v); err != nil {
				return err
			}
			if c.LockTTL < time.Second {
				return errors.New("must be at least 1s")
			}
			return nil
		}},
		{"STORE_WRITE_RETRY", "store-write-retry", session.DefaultWriteRetry.String(), "how long a Redis write whose outcome is unknown (Redis stopped answering after it was sent) is resent to learn it, before the turn reports the store unavailable", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.WriteRetry })(c, v); err != nil {
				return err
			}
			if c.WriteRetry < 100*time.Millisecond {
				return errors.New("must be at least 100ms")
			}
			return nil
		}},
		{"MAX_TOOL_RESULT_BYTES", "max-tool-result-bytes", strconv.Itoa(llmorch.DefaultMaxToolResultBytes), "bytes of one tool result the model reads; a longer result is cut with a note before it is streamed or stored (a template's options.maxToolResultBytes overrides it)", func(c *serveConfig, v string) error {
			if err := positive(func(c *serveConfig) *int { return &c.Budget.MaxToolResultBytes })(c, v); err != nil {
				return err
			}
			if c.Budget.MaxToolResultBytes < tools.MinMaxResultBytes {
				return fmt.Errorf("must be at least %d, room for the note that says a result was cut", tools.MinMaxResultBytes)
			}
			return nil
		}},
		{"SESSIONS_PER_OWNER", "sessions-per-owner", strconv.Itoa(session.DefaultSessionsPerOwner), "sessions one API key may hold; a new session beyond it gets 429 quota_exceeded (0: no quota)", func(c *serveConfig, v string) error {
			var n int64
			if err := num(func(*serveConfig) *int64 { return &n })(c, v); err != nil {
				return err
			}
			c.Quotas.SessionsPerOwner = int(n)
			if n == 0 {
				c.Quotas.SessionsPerOwner = -1
			}
			return nil
		}},
		{"BYTES_PER_OWNER", "bytes-per-owner", strconv.Itoa(session.DefaultBytesPerOwner), "bytes one API key's sessions may hold; beyond it a new session gets 429 quota_exceeded (0: no quota)", func(c *serveConfig, v string) error {
			if err := num(func(c *serveConfig) *int64 { return &c.Quotas.BytesPerOwner })(c, v); err != nil {
				return err
			}
			if c.Quotas.BytesPerOwner == 0 {
				c.Quotas.BytesPerOwner = -1
			}
			return nil
		}},
		{"TOKENS_PER_OWNER_PER_DAY", "tokens-per-owner-per-day", "0", "tokens one API key's turns may spend on models in a UTC day (cached input at its price's rate when MODEL_PRICES prices the model); a turn that starts past it gets 429 budget_exceeded, a running turn is never cut (0: no budget)", func(c *serveConfig, v string) error {
			return num(func(c *serveConfig) *int64 { return &c.Spend.Default.PerDay })(c, v)
		}},
		{"TOKENS_PER_OWNER_PER_MONTH", "tokens-per-owner-per-month", "0", "tokens one API key's turns may spend on models in a UTC month, as TOKENS_PER_OWNER_PER_DAY (0: no budget)", func(c *serveConfig, v string) error {
			return num(func(c *serveConfig) *int64 { return &c.Spend.Default.PerMonth })(c, v)
		}},
		{"MODEL_PRICES", "model-prices", "", "prices of models per million tokens, input/cached input/output: gpt-4o-mini=0.15/0.075/0.60,gpt-4o=2.50/1.25/10 (a model's name, or provider/name); usage then carries its cost, and budgets count cached input at its rate; none by default", func(c *serveConfig, v string) error {
			p, err := spend.ParsePrices(v)
			c.Spend.Prices = p
			return err
		}},
		{"MEMORY_STORE_MAX_SESSIONS", "memory-store-max-sessions", strconv.Itoa(session.DefaultMaxSessions), "sessions the memory store holds; beyond it sessions are evicted, least recently used first, from the owner holding the largest share", positive(func(c *serveConfig) *int { return &c.Quotas.MaxSessions })},
		{"MEMORY_STORE_MAX_BYTES", "memory-store-max-bytes", strconv.Itoa(session.DefaultMaxBytes), "bytes the memory store's sessions hold; beyond it sessions are evicted as beyond MEMORY_STORE_MAX_SESSIONS", func(c *serveConfig, v string) error {
			if err := num(func(c *serveConfig) *int64 { return &c.Quotas.MaxBytes })(c, v); err != nil {
				return err
			}
			if c.Quotas.MaxBytes == 0 {
				return errors.New("must be positive")
			}
			return nil
		}},
		{"REDIS_WAIT_REPLICAS", "redis-wait-replicas", "auto", "replicas of the Redis primary that must acknowledge a turn's claim and its last write (WAIT) before the turn finishes: auto is every replica the primary has at start-up (in a Cluster, the session's shard's), so that any promotion keeps the write, else none; 0 never waits", func(c *serveConfig, v string) error {
			if v == "auto" {
				c.WaitReplicas = 0
				return nil
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("want auto or a whole number >= 0, got %q", v)
			}
			c.WaitReplicas = n
			if n == 0 {
				c.WaitReplicas = -1 // never
			}
			return nil
		}},
		{"REDIS_WAIT_TIMEOUT", "redis-wait-timeout", "1s", "how long a turn's last write waits for REDIS_WAIT_REPLICAS replicas; past it the turn ends with store_not_replicated, saying what a failover may lose", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.WaitTimeout })(c, v); err != nil {
				return err
			}
			if c.WaitTimeout < 10*time.Millisecond {
				return errors.New("must be at least 10ms")
			}
			return nil
		}},
		{"LLM_IDLE_TIMEOUT", "llm-idle-timeout", provider.DefaultIdleTimeout.String(), "longest silence of a model's streamed answer before it is cut (a timeout error; retried when it had sent nothing yet); 0 never cuts", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.ModelIdle })(c, v); err != nil {
				return err
			}
			if c.ModelIdle == 0 {
				c.ModelIdle = -1 // provider.Config: negative is no bound
			}
			return nil
		}},
		{"LLM_FALLBACK_PROVIDER", "", "", "the server's fallback model, which answers a model call that fails before its first token with an outage, a long rate limit or a timeout, for every model whose template names no fallbacks: openai, anthropic or offline; none by default", func(c *serveConfig, v string) error {
			switch v {
			case "", "offline", provider.OpenAI, provider.Anthropic:
				c.FallbackProvider = v
				return nil
			}
			return fmt.Errorf("want openai, anthropic or offline, got %q", v)
		}},
		{"LLM_FALLBACK_MODEL", "", "", "the fallback's model (required with openai or anthropic)", str(func(c *serveConfig) *string { return &c.FallbackModel })},
		{"LLM_FALLBACK_BASE_URL", "", "", "the fallback's base URL (default: the provider's own)", func(c *serveConfig, v string) error {
			c.FallbackBaseURL = v
			if v == "" {
				return nil
			}
			if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return errors.New("not an http(s) URL")
			}
			return nil
		}},
		{"LLM_FALLBACK_API_KEY", "", "", "the fallback's key (default: OPENAI_API_KEY or ANTHROPIC_API_KEY, as the provider)", str(func(c *serveConfig) *string { return &c.FallbackKey })},
		{"LLM_FALLBACK_WAIT", "llm-fallback-wait", agent.DefaultFallbackWait.String(), "longest wait for a rate limit's Retry-After in a model call that has a fallback; a longer one goes to the fallback at once", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.FallbackWait })(c, v); err != nil {
				return err
			}
			if c.FallbackWait <= 0 {
				return errors.New("must be positive")
			}
			return nil
		}},
		{"HEARTBEAT", "heartbeat", server.DefaultHeartbeat.String(), "interval of heartbeat comments on idle streams", dur(func(c *serveConfig) *time.Duration { return &c.Heartbeat })},
		{"TURN_TIMEOUT", "turn-timeout", llmorch.DefaultTurnTimeout.String(), "longest turn (a template's options.turnTimeout overrides it); the turn then ends with finishReason timeout, its partial answer saved", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.Budget.TurnTimeout })(c, v); err != nil {
				return err
			}
			if c.Budget.TurnTimeout < time.Second {
				return errors.New("must be at least 1s: a turn without a time limit could hold its session forever")
			}
			return nil
		}},
		{"MAX_STEPS", "max-steps", strconv.Itoa(llmorch.DefaultMaxSteps), "model calls per turn before the final answer (a template's options.maxSteps overrides it)", positive(func(c *serveConfig) *int { return &c.Budget.MaxSteps })},
		{"MAX_TOOL_CALLS", "max-tool-calls", strconv.Itoa(llmorch.DefaultMaxToolCalls), "tool calls that run per model answer; the excess are refused (a template's options.maxToolCalls overrides it)", positive(func(c *serveConfig) *int { return &c.Budget.MaxToolCalls })},
		{"MAX_OUTPUT_BYTES", "max-output-bytes", strconv.Itoa(llmorch.DefaultMaxOutputBytes), "bytes of text and tool arguments a model may stream in one turn; the turn then ends with finishReason length (a template's options.maxOutputBytes overrides it)", positive(func(c *serveConfig) *int { return &c.Budget.MaxOutputBytes })},
		{"CONTEXT", "context", "on", "on: past the context budget, the oldest turns are summarized for the model; off: only chatSettings.historyPolicy cuts the history (a template's options.context overrides it)", func(c *serveConfig, v string) error {
			switch v {
			case "on":
				c.Context.Off = false
			case "off":
				c.Context.Off = true
			default:
				return fmt.Errorf("want on or off, got %q", v)
			}
			return nil
		}},
		{"CONTEXT_MAX_INPUT_TOKENS", "context-max-input-tokens", strconv.Itoa(llmorch.DefaultMaxInputTokens), "input tokens a model request may reach (tools, system prompt and messages) before the oldest turns are summarized (options.context.maxInputTokens overrides it)", func(c *serveConfig, v string) error {
			if err := positive(func(c *serveConfig) *int { return &c.Context.MaxInputTokens })(c, v); err != nil {
				return err
			}
			if c.Context.MaxInputTokens < template.MinContextTokens || c.Context.MaxInputTokens > template.MaxContextTokens {
				return fmt.Errorf("want %d to %d tokens, got %q", template.MinContextTokens, template.MaxContextTokens, v)
			}
			return nil
		}},
		{"CONTEXT_KEEP_TURNS", "context-keep-turns", strconv.Itoa(llmorch.DefaultKeepTurns), "newest turns the model reads verbatim after a summary (options.context.keepTurns overrides it)", func(c *serveConfig, v string) error {
			if err := positive(func(c *serveConfig) *int { return &c.Context.KeepTurns })(c, v); err != nil {
				return err
			}
			if c.Context.KeepTurns > template.MaxKeepTurns {
				return fmt.Errorf("want 1 to %d turns, got %q", template.MaxKeepTurns, v)
			}
			return nil
		}},
		{"CONTEXT_SUMMARIZER", "context-summarizer", "model", "who writes the summaries: model (the agent's own model) or offline (the extractive summary of the offline model: the user's words and the first line of each tool result); options.context.summarizer.model overrides it", func(c *serveConfig, v string) error {
			switch v {
			case "model":
				c.Context.Summarizer = ""
			case template.SummarizerOffline:
				c.Context.Summarizer = template.SummarizerOffline
			default:
				return fmt.Errorf("want model or offline, got %q", v)
			}
			return nil
		}},
		{"DISCONNECT_GRACE", "disconnect-grace", "0s", "cancel a turn no client has followed for this long; 0 never cancels", dur(func(c *serveConfig) *time.Duration { return &c.DisconnectGrace })},
		{"READ_TIMEOUT", "read-timeout", server.DefaultReadTimeout.String(), "longest time to receive a request's head and body (a slower body gets 408); streams are not cut by it", func(c *serveConfig, v string) error {
			if err := dur(func(c *serveConfig) *time.Duration { return &c.ReadTimeout })(c, v); err != nil {
				return err
			}
			if c.ReadTimeout < time.Second {
				return errors.New("must be at least 1s")
			}
			return nil
		}},
		{"WRITE_TIMEOUT", "write-timeout", server.DefaultWriteTimeout.String(), "longest ordinary (non-stream) answer", dur(func(c *serveConfig) *time.Duration { return &c.WriteTimeout })},
		{"SHUTDOWN_TIMEOUT", "shutdown-timeout", server.DefaultShutdownTimeout.String(), "longest graceful shutdown after SIGTERM", dur(func(c *serveConfig) *time.Duration { return &c.ShutdownTimeout })},
	}
}

// noBound turns a setting's 0 ("no bound") into -1, as the packages take
// it, once it parsed (err nil).
func noBound(err error, n *int) error {
	if err == nil && *n == 0 {
		*n = -1
	}
	return err
}

// configFileEnv names the configuration file when --config is not given.
const configFileEnv = "AGENTDOCK_CONFIG"

// configEnv is what loadServeConfig reads and changes of the process: the
// environment and the file system, injected so that tests can run in
// parallel without touching the real environment.
type configEnv struct {
	lookup func(string) (string, bool)
	// setenv exports a file's variable that the environment lacks, so that
	// the packages that read their own variables (providers, Redis,
	// telemetry, search) see it too.
	setenv   func(k, v string) error
	readFile func(string) ([]byte, error)
}

func osConfigEnv() configEnv {
	return configEnv{lookup: os.LookupEnv, setenv: os.Setenv, readFile: os.ReadFile}
}

// loadServeConfig reads the flags, the environment and the configuration
// file, validates every value and reports every problem at once.
func loadServeConfig(args []string, env configEnv, stderr io.Writer) (*serveConfig, error) {
	return loadCommandConfig("serve", args, env, stderr)
}

// loadCommandConfig is loadServeConfig for a command that takes serve's
// flags ("mcp serve"), which its usage names.
func loadCommandConfig(cmd string, args []string, env configEnv, stderr io.Writer) (*serveConfig, error) {
	all := settings()
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	flagVals := map[string]*string{}
	for _, s := range all {
		if s.flag == "" {
			continue
		}
		def := s.def
		if def == "" {
			def = "none"
		}
		flagVals[s.env] = fs.String(s.flag, "", fmt.Sprintf("%s (env %s; default %s)", s.help, s.env, def))
	}
	configFile := fs.String("config", "", "configuration file of KEY=VALUE lines, the environment's names (env "+configFileEnv+")")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s takes no arguments, got %q", cmd, fs.Args())
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })

	cfg := &serveConfig{values: map[string]string{}, sources: map[string]string{}}
	var probs []string
	file := map[string]string{}
	exported := map[string]bool{} // the file's variables copied to the environment
	cfg.ConfigFile = *configFile
	if cfg.ConfigFile == "" {
		cfg.ConfigFile, _ = env.lookup(configFileEnv)
	}
	if cfg.ConfigFile != "" {
		data, err := env.readFile(cfg.ConfigFile)
		if err != nil {
			probs = append(probs, fmt.Sprintf("configuration file: %v", err))
		} else if file, err = parseConfigFile(data, cfg.ConfigFile); err != nil {
			probs = append(probs, err.Error())
		}
		for _, k := range sortedKeys(file) {
			if _, ok := env.lookup(k); !ok {
				exported[k] = true
				if err := env.setenv(k, file[k]); err != nil {
					probs = append(probs, fmt.Sprintf("%s: setting %s from the file: %v", cfg.ConfigFile, k, err))
				}
			}
		}
	}
	for _, s := range all {
		v, src := s.def, "default"
		if fv, ok := file[s.env]; ok {
			v, src = fv, "file"
		}
		if ev, ok := env.lookup(s.env); ok && !exported[s.env] && (ev != "" || src == "default") {
			v, src = ev, "env"
		}
		if s.flag != "" && setFlags[s.flag] {
			v, src = *flagVals[s.env], "flag"
		}
		v = strings.TrimSpace(v)
		if v == "" && s.def != "" {
			v = s.def
		}
		cfg.values[s.env], cfg.sources[s.env] = v, src
		if err := s.parse(cfg, v); err != nil {
			name := s.env
			if s.flag != "" {
				name = "--" + s.flag + " / " + s.env
			}
			probs = append(probs, fmt.Sprintf("%s (from %s): %v", name, src, err))
		}
	}
	for i, k := range cfg.APIKeys {
		if strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			probs = append(probs, fmt.Sprintf("API key %d contains a space or a control character", i+1))
		}
	}
	cfg.APIKeys = slices.Compact(slices.Sorted(slices.Values(cfg.APIKeys)))
	probs = append(probs, checkKeyWebhooks(cfg)...)
	for _, h := range webhookHosts(cfg) {
		if err := netguard.CheckHost(h); err != nil {
			probs = append(probs, "WEBHOOK_HOSTS / A2A_PUSH_HOSTS: "+err.Error())
		}
	}
	if cfg.MetricsRequireKey && len(cfg.APIKeys) == 0 {
		probs = append(probs, "METRICS_REQUIRE_KEY: needs API_KEYS or API_KEYS_FILE")
	}
	if cfg.FallbackProvider != "" && cfg.FallbackProvider != "offline" && cfg.FallbackModel == "" {
		probs = append(probs, fmt.Sprintf("LLM_FALLBACK_MODEL: required with LLM_FALLBACK_PROVIDER=%s (the fallback's model)", cfg.FallbackProvider))
	}
	if len(cfg.KeyLimits) > 0 && len(cfg.APIKeys) == 0 {
		probs = append(probs, "API_KEYS_FILE: its budgets need keys")
	}
	if cfg.MaxTurnEvents > 0 && cfg.MaxTurnEvents < 16 {
		probs = append(probs, fmt.Sprintf("MAX_TURN_EVENTS: must be at least 16, got %d", cfg.MaxTurnEvents))
	}
	// The variables the packages read themselves, checked now so that a
	// mistake is reported with the others rather than at first use. They
	// read the process environment, which the file was merged into above.
	var err error
	if cfg.SessionTTL, err = session.TTLFromEnv(); err != nil {
		probs = append(probs, err.Error())
	}
	if cfg.OfflineDelay, err = offline.DelayFromEnv(); err != nil {
		probs = append(probs, err.Error())
	}
	if _, err := tools.BuiltinConfigFromEnv(); err != nil {
		probs = append(probs, err.Error())
	}
	if _, err := mcp.LimitsFromEnv(mcp.Config{}); err != nil {
		probs = append(probs, strings.ReplaceAll(err.Error(), "\n", "\n  "))
	}
	if cfg.Store == "" {
		if _, _, err := redisstore.ConfigFromEnv(); err != nil {
			probs = append(probs, redactErrorURL(err.Error(), os.Getenv("REDIS_URL")))
		}
	}
	if len(probs) > 0 {
		return nil, errors.New("invalid configuration:\n  " + strings.Join(probs, "\n  "))
	}
	return cfg, nil
}

// parseConfigFile reads KEY=VALUE lines: blank lines and lines starting
// with # are skipped, "export " before a key is allowed (so that a shell
// can source the same file), and a value may be wrapped in single or double
// quotes, which are removed (no escapes, no expansion). Errors name the file
// and the line.
func parseConfigFile(data []byte, name string) (map[string]string, error) {
	out := map[string]string{}
	var probs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok:
			probs = append(probs, fmt.Sprintf("%s:%d: want KEY=VALUE", name, n))
			continue
		case !validEnvName(k):
			probs = append(probs, fmt.Sprintf("%s:%d: %q is not a variable name (letters, digits and _, not starting with a digit)", name, n, k))
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
			if v[len(v)-1] != v[0] {
				probs = append(probs, fmt.Sprintf("%s:%d: %s: the value's quote is not closed", name, n, k))
				continue
			}
			v = v[1 : len(v)-1]
		}
		if _, dup := out[k]; dup {
			probs = append(probs, fmt.Sprintf("%s:%d: %s is set twice", name, n, k))
			continue
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		probs = append(probs, fmt.Sprintf("%s: %v", name, err))
	}
	if len(probs) > 0 {
		return out, errors.New(strings.Join(probs, "\n  "))
	}
	return out, nil
}

func validEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// keyLimits are an API key's own budgets (API_KEYS_FILE); nil keeps
// TOKENS_PER_OWNER_PER_DAY or _MONTH.
type keyLimits struct{ day, month *int64 }

// limits are l over def.
func (l keyLimits) over(def spend.Limits) spend.Limits {
	if l.day != nil {
		def.PerDay = *l.day
	}
	if l.month != nil {
		def.PerMonth = *l.month
	}
	return def
}

// readKeysFile reads API keys, one per line; blank lines and # comments
// are skipped. A key may be followed, after spaces, by its own budgets
// (tokens_per_day=N tokens_per_month=N, 0 for none) and its own webhook
// settings: webhook-secret=SECRET, webhook-hosts=HOST[:PORT],... and
// webhook-url=URL (server.Key). Errors name the line, never a key.
func readKeysFile(path string) ([]server.Key, map[string]keyLimits, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the keys: %w", err)
	}
	var (
		keys   []server.Key
		limits map[string]keyLimits
		probs  []string
		n      int
	)
	for line := range strings.Lines(string(data)) {
		n++
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		k := server.Key{Key: fields[0]}
		var l keyLimits
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "#") {
				break
			}
			name, v, ok := strings.Cut(f, "=")
			switch {
			case ok && (name == "tokens_per_day" || name == "tokens_per_month"):
				num, err := strconv.ParseInt(v, 10, 64)
				if err != nil || num < 0 {
					probs = append(probs, fmt.Sprintf("%s:%d: %s: want a non-negative whole number of tokens, got %q", path, n, name, v))
					continue
				}
				if name == "tokens_per_day" {
					l.day = &num
				} else {
					l.month = &num
				}
			case ok && name == "webhook-secret" && v != "":
				k.WebhookSecret = v
			case ok && name == "webhook-hosts" && v != "":
				k.WebhookHosts = splitList(v)
				for _, h := range k.WebhookHosts {
					if err := netguard.CheckHost(h); err != nil {
						probs = append(probs, fmt.Sprintf("%s:%d: webhook-hosts: %v", path, n, err))
					}
				}
			case ok && name == "webhook-url" && v != "":
				k.WebhookURL = v
			default:
				probs = append(probs, fmt.Sprintf("%s:%d: unknown setting %q after the key (known: tokens_per_day=, tokens_per_month=, webhook-secret=, webhook-hosts=, webhook-url=)", path, n, strings.SplitN(f, "=", 2)[0]))
			}
		}
		keys = append(keys, k)
		if l.day != nil || l.month != nil {
			if limits == nil {
				limits = map[string]keyLimits{}
			}
			limits[k.Key] = l
		}
	}
	if len(probs) > 0 {
		return nil, nil, errors.New(strings.Join(probs, "; "))
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("%s holds no key", path)
	}
	return keys, limits, nil
}

// checkKeyWebhooks reports the keys' webhook settings that cannot work:
// hosts with no secret to sign with, a URL on no allowed host.
func checkKeyWebhooks(c *serveConfig) []string {
	var probs []string
	for _, k := range c.KeyWebhooks {
		// A key is never named: the line of the keys file is.
		if len(k.WebhookHosts) > 0 && k.WebhookSecret == "" && c.WebhookSecret == "" {
			probs = append(probs, "API_KEYS_FILE: a key with webhook-hosts needs webhook-secret (or WEBHOOK_SECRET), which signs its webhooks")
		}
		if k.WebhookURL == "" {
			continue
		}
		hosts := k.WebhookHosts
		if len(hosts) == 0 {
			hosts = webhookHosts(c)
		}
		if u, err := url.Parse(k.WebhookURL); err != nil || u.Host == "" || !netguard.HostAllowed(u, hosts) {
			probs = append(probs, fmt.Sprintf("API_KEYS_FILE: a key's webhook-url %q is not on its webhook-hosts (or WEBHOOK_HOSTS)", redactURL(k.WebhookURL)))
		}
	}
	return probs
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

// printedEnv are the variables read by the packages themselves that the
// start-up record shows when they are set (redacted), beside the settings
// above and every OTEL_* variable.
var printedEnv = []string{
	"SESSION_TTL_SECONDS", "OFFLINE_MODEL_DELAY_MS", "TOOL_TIMEOUT", "LOG_CONTENT", "GODEBUG",
	"REDIS_URL", "REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_ADDRS", "REDIS_CLUSTER_ADDRS", "REDIS_USERNAME", "REDIS_PASSWORD",
	"REDIS_PREFIX", "REDIS_DIAL_TIMEOUT", "REDIS_READ_TIMEOUT", "REDIS_WRITE_TIMEOUT",
	"LLM_PROVIDER", "LLM_MODEL", "LLM_BASE_URL", "LLM_ALLOWED_TOOLS",
	"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
	"GEMINI_API_KEY", "GOOGLE_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "CEREBRAS_API_KEY", "OPENROUTER_API_KEY",
	"SEARCH_PROVIDER", "SEARXNG_URL", "TAVILY_API_KEY", "TAVILY_BASE_URL", "BRAVE_API_KEY", "BRAVE_BASE_URL",
	"SERPER_API_KEY", "SERPER_BASE_URL", "WIKIPEDIA_URL", mcpServersFileEnv,
	"LLM_FALLBACK_PROVIDER", "LLM_FALLBACK_MODEL", "LLM_FALLBACK_BASE_URL", "LLM_FALLBACK_API_KEY",
	"MCP_MAX_TOOLS", "MCP_MAX_TOOL_PAGES", "MCP_MAX_SCHEMA_BYTES", "MCP_MAX_AGENT_SCHEMA_BYTES",
}

// redacted replaces a secret value.
const redacted = "[redacted]"

// secretSettings are the settings and variables whose values are secrets,
// printed as [redacted] whole. The list, not a pattern of their names,
// decides: CONTEXT_MAX_INPUT_TOKENS holds no token, and a secret setting
// added later must be added here (TestSecretsListed makes sure every
// name that looks like one was decided).
var secretSettings = map[string]bool{
	"API_KEYS": true, "API_KEY_SECRET": true, "WEBHOOK_SECRET": true, "COMPACTION_SECRET": true, "REDIS_PASSWORD": true,
	"OPENAI_API_KEY": true, "ANTHROPIC_API_KEY": true, "GEMINI_API_KEY": true, "GOOGLE_API_KEY": true,
	"GROQ_API_KEY": true, "DEEPSEEK_API_KEY": true, "CEREBRAS_API_KEY": true, "OPENROUTER_API_KEY": true,
	"LLM_FALLBACK_API_KEY": true, "TAVILY_API_KEY": true, "BRAVE_API_KEY": true, "SERPER_API_KEY": true,
}

// headerSettings are the OTLP variables of name=value header lists, whose
// values are credentials: printed with their names only.
var headerSettings = map[string]bool{
	"OTEL_EXPORTER_OTLP_HEADERS": true, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": true,
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS": true, "OTEL_EXPORTER_OTLP_LOGS_HEADERS": true,
}

// redact returns value as it may be printed: the values of
// secretSettings are replaced whole, those of headerSettings keep only
// their names, and a URL loses its password and any query parameter that
// looks like a credential.
func redact(name, value string) string {
	if value == "" {
		return ""
	}
	if secretSettings[name] {
		return redacted
	}
	if headerSettings[name] {
		var out []string
		for _, kv := range strings.Split(value, ",") {
			k, _, _ := strings.Cut(kv, "=")
			out = append(out, strings.TrimSpace(k)+"="+redacted)
		}
		return strings.Join(out, ",")
	}
	if strings.Contains(value, "://") || strings.Contains(value, "@") {
		return redactURL(value)
	}
	return value
}

// redactURL removes a URL's password and credential-like query values;
// a value that does not parse is withheld whole, since it may hold one.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL withheld]"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	q := u.Query()
	changed := false
	for k := range q {
		lk := strings.ToLower(k)
		for _, s := range []string{"pass", "secret", "token", "key", "auth", "sig"} {
			if strings.Contains(lk, s) {
				q.Set(k, "xxxxx")
				changed = true
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// redactErrorURL removes raw's password from an error message that may
// quote it.
func redactErrorURL(msg, raw string) string {
	if raw == "" {
		return msg
	}
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		if p, has := u.User.Password(); has && p != "" {
			msg = strings.ReplaceAll(msg, raw, redactURL(raw))
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// attrs is the start-up record of the configuration: every setting with
// its source, then the packages' variables that are set, all redacted.
func (c *serveConfig) attrs(lookup func(string) (string, bool), environ []string) []slog.Attr {
	var out []slog.Attr
	if c.ConfigFile != "" {
		out = append(out, slog.String("config_file", c.ConfigFile))
	}
	for _, s := range settings() {
		v := redact(s.env, c.values[s.env])
		if s.env == "API_KEYS" && len(c.APIKeys) > 0 {
			v = fmt.Sprintf("%d keys %s", len(c.APIKeys), redacted)
		}
		out = append(out, slog.String(s.env, v+" ("+c.sources[s.env]+")"))
	}
	names := slices.Clone(printedEnv)
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			names = append(names, k)
		}
	}
	for _, k := range names {
		if v, ok := lookup(k); ok && v != "" {
			out = append(out, slog.String(k, redact(k, v)))
		}
	}
	return out
}
