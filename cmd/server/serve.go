package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/agui"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/spend"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/agenttool"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/agentdock-go/agentdock/web"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return serveCommand(ctx, "serve", args, stderr)
}

// serveCommand is serve, or `mcp serve` (cmd "mcp serve"): the same
// agents, store and settings, served over stdio as MCP tools instead of
// HTTP.
func serveCommand(ctx context.Context, cmd string, args []string, stderr io.Writer) int {
	cfg, err := loadCommandConfig(cmd, args, osConfigEnv(), stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "agentdock "+cmd+":", err)
		return 2
	}
	cfg.mcpStdio = cmd == "mcp serve"
	tel, err := otelsetup.Setup(ctx, otelsetup.Config{ServiceName: "agentdock"})
	if err != nil {
		fmt.Fprintln(stderr, "agentdock serve:", err)
		return 2
	}
	defer func() {
		// Bounded: an unreachable collector must not hold the exit.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(ctx)
	}()
	log := telemetry.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel, tel.CaptureContent())
	slog.SetDefault(log)
	redisstore.LogTo(log)
	log.LogAttrs(ctx, slog.LevelInfo, "configuration", cfg.attrs(os.LookupEnv, os.Environ())...)
	if err := serve(ctx, cfg, tel, log); err != nil {
		log.Error("server stopped", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg *serveConfig, tel *telemetry.Telemetry, log *slog.Logger) error {
	// The address is taken first: a busy port is the first thing said,
	// before the store, the MCP servers or a "serving" line. MCP over
	// stdio listens on nothing.
	var ln net.Listener
	if !cfg.mcpStdio {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return fmt.Errorf("listening on %s: %w (set ADDR or --addr to another address)", cfg.Addr, err)
		}
		defer ln.Close()
	}
	if cfg.PprofAddr != "" {
		if _, err := servePprof(ctx, cfg.PprofAddr, log); err != nil {
			return err
		}
	}
	back, err := openBackend(ctx, cfg, tel)
	if err != nil {
		return err
	}
	defer back.close()
	store, kind, shared, stored := back.sessions, back.kind, back.turns, back.responses
	builtin, err := tools.BuiltinConfigFromEnv()
	if err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	builtin.Logger = log
	logSearch(log, builtin.Search)
	mcpServers, err := readMCPServers(os.Getenv(mcpServersFileEnv))
	if err != nil {
		return err
	}
	manager, err := newMCPManager(mcpServers, builtin.Timeout, log)
	if err != nil {
		return err
	}
	var streamed agent.StreamReader
	if shared != nil {
		streamed = turns.StreamedSteps(shared)
	}
	auth, err := keyAuth(cfg)
	if err != nil {
		return err
	}
	fallbacks, err := defaultFallbacks(cfg, tel, log)
	if err != nil {
		return err
	}
	// Agent tools run their child turns on the runtime, which is made
	// once the agents are.
	runner := &runtimeRunner{store: store}
	agents, err := loadAgents(ctx, cfg.TemplatesDir, agent.Options{
		Builtin: builtin,
		// A server still starting after agent.DefaultMCPStartWait is
		// offered once ready.
		MCP:        manager,
		AgentTools: agenttool.Config{Runner: runner, MaxDepth: cfg.AgentCallDepth, Timeout: cfg.AgentCallTimeout, Logger: log},

		StreamedSteps: streamed,
		Store:         store,
		Models:        modelFactory(cfg, tel, log),
		Fallbacks:     fallbacks,
		FallbackWait:  cfg.FallbackWait,
		Spend:         spendPolicy(cfg, auth),
		Telemetry:     tel,

		MaxMessageBytes:    cfg.MaxMessageBytes,
		MaxAttachmentBytes: cfg.MaxAttachmentBytes,
		Budget:             cfg.Budget,
		Context:            cfg.Context,

		MaxAttachmentsInContext: cfg.MaxAttachmentsInContext,
		AttachmentURLs:          cfg.AttachmentURLs,
		// Three renewals per lease: a slow round trip or two does not lose
		// it.
		LeaseRenewal: cfg.LockTTL / 3,
	}, log)
	if err != nil {
		return err
	}
	// The MCP servers end, child processes included, after the HTTP
	// server has drained its turns.
	defer closeAgents(agents, cfg.ShutdownTimeout, log)
	rt, err := turns.New(runtimeConfig(cfg, agents, shared, log))
	if err != nil {
		return err
	}
	runner.rt = rt
	if cfg.mcpStdio {
		// agentdock mcp serve: the agents as tools over stdin and stdout.
		log.Info("serving MCP over stdio", "agents", len(agents.List()), "store", kind)
		err := mcpserver.Stdio(ctx, rt, mcpserver.Config{Logger: log})
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		rt.Shutdown(sctx)
		return err
	}
	scfg, err := serverConfig(cfg, kind, auth, log)
	if err != nil {
		return err
	}
	scfg.Runtime, scfg.Logger, scfg.WebFS, scfg.Telemetry = rt, log, web.FS(), tel
	scfg.MCPServers, scfg.Responses, scfg.Outbox = mcpStatus(manager), stored, back.outbox
	if _, ok := agents.Get(cfg.A2ADefaultAgent); cfg.A2ADefaultAgent != "" && !ok {
		return fmt.Errorf("A2A_DEFAULT_AGENT: no agent %q", cfg.A2ADefaultAgent)
	}
	var pushHostsOfKey func(string) []string
	for _, k := range cfg.KeyWebhooks {
		if len(k.WebhookHosts) > 0 {
			pushHostsOfKey = pushHostsOf(scfg.Webhooks)
		}
	}
	a2aEdge, err := a2a.New(a2a.Config{Tasks: stored, Index: back.a2aIndex, PushHosts: webhookHosts(cfg), PushHostsOf: pushHostsOfKey, DefaultAgent: cfg.A2ADefaultAgent, MaxCallDepth: cfg.AgentCallDepth, Logger: log})
	if err != nil {
		return err
	}
	scfg.Doors = []door.Door{a2aEdge, agui.New(), mcpserver.New(mcpserver.Config{Logger: log,
		MaxSessions: cfg.MCPMaxSessions, SessionsPerOwner: cfg.MCPSessionsPerOwner, SessionIdle: cfg.MCPSessionIdle})}
	srv, err := server.New(scfg)
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() {
		if shared != nil {
			log.Info("shutting down: new turns are refused, running turns are handed to the other replicas", "timeout", cfg.ShutdownTimeout)
			return
		}
		log.Info("shutting down: new turns are refused, running turns are waited for, then cancelled with their partial answers saved", "timeout", cfg.ShutdownTimeout)
	})
	log.Info("serving", "addr", cfg.Addr, "agents", len(agents.List()), "store", kind, "api_keys", len(cfg.APIKeys) > 0)
	return srv.Serve(ctx, ln)
}

// runtimeConfig is the turn runtime's configuration: the agents, the turn
// log replicas share (nil for one process) and the turn settings.
func runtimeConfig(cfg *serveConfig, agents *agent.Set, shared turnlog.Log, log *slog.Logger) turns.Config {
	return turns.Config{
		Agents:          agents,
		Log:             shared,
		Logger:          log,
		MaxMessageBytes: cfg.MaxMessageBytes,
		MaxEvents:       cfg.MaxTurnEvents,
		Retention:       cfg.StreamRetention,
		Heartbeat:       cfg.Heartbeat,
		// A turn's writer shows a sign of life five times per lease, and
		// a reader elsewhere checks as often: a dead replica is noticed
		// within about 3/5 of the lease, whose expiry then lets another
		// replica take the turn over.
		Liveness:        cfg.LockTTL / 5,
		DisconnectGrace: cfg.DisconnectGrace,
		MaxQueue:        cfg.MaxQueue,
		QueueWait:       cfg.QueueWait,
		// MAX_QUEUED_PER_OWNER's 0 is -1 here: no bound.
		MaxQueuedPerOwner: cfg.MaxQueuedPerOwner,
		// A replica that finds a turn abandoned waits for its lease to
		// expire before saving what it streamed.
		RecoverWait: cfg.LockTTL + 5*time.Second,
	}
}

// keyAuth is the check of the API keys, nil without keys.
func keyAuth(cfg *serveConfig) (*server.KeyAuth, error) {
	if len(cfg.APIKeys) == 0 {
		return nil, nil
	}
	keys := make([]server.Key, len(cfg.APIKeys))
	for i, k := range cfg.APIKeys {
		keys[i] = server.Key{Key: k}
		if own, ok := cfg.KeyWebhooks[k]; ok {
			keys[i] = own
		}
	}
	return server.NewKeys(keys, []byte(cfg.APIKeySecret))
}

// spendPolicy is what each key may spend: the default budgets, and the
// keys' own from API_KEYS_FILE under their owners' names.
func spendPolicy(cfg *serveConfig, auth *server.KeyAuth) *spend.Policy {
	p := cfg.Spend
	if auth != nil && len(cfg.KeyLimits) > 0 {
		p.Owners = map[string]spend.Limits{}
		for key, l := range cfg.KeyLimits {
			p.Owners[auth.Fingerprint(key)] = l.over(p.Default)
		}
	}
	return &p
}

// serverConfig turns the security and limit settings into server.Config
// hooks and values.
func serverConfig(cfg *serveConfig, storeKind string, auth *server.KeyAuth, log *slog.Logger) (server.Config, error) {
	sc := server.Config{
		MaxBodyBytes:        cfg.MaxBodyBytes,
		Heartbeat:           cfg.Heartbeat,
		ReadTimeout:         cfg.ReadTimeout,
		WebhookHosts:        chatWebhookHosts(cfg),
		WebhookSecret:       cfg.WebhookSecret,
		WebhookURL:          cfg.WebhookURL,
		WebhookAttempts:     cfg.WebhookAttempts,
		WriteTimeout:        cfg.WriteTimeout,
		ShutdownTimeout:     cfg.ShutdownTimeout,
		CORSOrigins:         cfg.CORSOrigins,
		MetricsRequireOwner: cfg.MetricsRequireKey,
		CompactionSecret:    cfg.CompactionSecret,
		// A dead replica's webhook calls go on as soon as its turns do.
		WebhookHold: cfg.LockTTL,
	}
	if auth != nil {
		var err error
		sc.Owner, sc.Webhooks = auth.Owner, auth.Webhooks
		if cfg.AuthFailures > 0 {
			if sc.AuthThrottle, err = server.NewAuthThrottle(cfg.AuthFailures, cfg.AuthFailureBurst, 0); err != nil {
				return sc, err
			}
		}
		if cfg.APIKeySecret == "" && storeKind != "memory" {
			log.Warn("API_KEY_SECRET is not set: session owners are fingerprints under a random per-process secret, so sessions in the shared store are lost to their key after a restart and unknown on other replicas")
		}
	} else if cfg.MetricsRequireKey {
		return sc, errors.New("METRICS_REQUIRE_KEY needs API_KEYS or API_KEYS_FILE")
	}
	if cfg.CompactionSecret == "" && storeKind != "memory" {
		log.Warn("COMPACTION_SECRET is not set: the compaction items of /v1/responses/compact are signed with a random per-process secret, so other replicas refuse them, and so does this one after a restart")
	}
	if cfg.RateLimitRPS > 0 {
		lim, err := server.NewRateLimiter(cfg.RateLimitRPS, cfg.RateLimitBurst, 0)
		if err != nil {
			return sc, err
		}
		sc.Limiter = lim
	}
	return sc, nil
}

// loadAgents loads the shipped templates, then TEMPLATES_DIR's (dir),
// through agent.Load, as an embedder loads them: a template with errors
// is logged with every message and skipped (the others are served); one
// whose agentId a shipped one has replaces it.
func loadAgents(ctx context.Context, dir string, opts agent.Options, log *slog.Logger) (*agent.Set, error) {
	opts.Shipped, opts.SkipInvalid, opts.Logger = templates.FS(), true, log
	agents, diags, err := agent.Load(ctx, dir, opts)
	var skipped []string
	for _, d := range diags {
		if d.Severity == orchestration.SeverityError {
			log.Error("template error", "problem", d.String())
			if !slices.Contains(skipped, d.File) {
				skipped = append(skipped, d.File)
			}
		} else {
			log.Warn("template warning", "problem", d.String())
		}
	}
	for _, f := range skipped {
		log.Error("template skipped", "file", f)
	}
	if err != nil {
		return nil, fmt.Errorf("templates: %w", err)
	}
	return agents, nil
}

// closeAgents ends the agents' MCP servers, child processes included,
// within timeout.
func closeAgents(agents *agent.Set, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := agents.Close(ctx); err != nil {
		log.Warn("closing MCP servers", "err", err)
	}
}

// modelFactory picks each template's model: its provider when a key (or a
// local base URL) is configured, the one configured provider when the
// template's has no key, otherwise the offline scripted model. It logs one
// line per agent: the provider and model, and why when they are not the
// template's own (or the offline model's reason).
func modelFactory(cfg *serveConfig, tel *telemetry.Telemetry, log *slog.Logger) agent.ModelFactory {
	warned := false
	return func(t *template.Template) (llmorch.Model, error) {
		name, node := t.Provider()
		setup, err := provider.ConfigFromEnv(name, node.Model, node.Temperature, node.MaxTokens)
		if err != nil {
			if key := t.ModelNode(); key != "" && node.Provider == "" {
				return nil, fmt.Errorf("agent %s: nodeConfigurations[%q]: %w; a key that names no provider needs its \"provider\"", t.AgentID, key, err)
			}
			return nil, fmt.Errorf("agent %s: %w", t.AgentID, err)
		}
		if !setup.Usable {
			if !warned {
				warned = true
				log.Warn("agents without a model provider use the OFFLINE SCRIPTED MODEL: its answers are scripted, not written by a language model (set OPENAI_API_KEY, ANTHROPIC_API_KEY or LLM_BASE_URL to use a real model)")
			}
			m := offline.New(offline.Config{Delay: cfg.OfflineDelay})
			log.Warn("model", "agent", t.AgentID, "provider", m.Info().Provider, "model", m.Info().Model, "why", setup.Note)
			return m, nil
		}
		pcfg := setup.Config
		pcfg.HTTPClient = providerClient(tel)
		pcfg.IdleTimeout = cfg.ModelIdle
		m, err := provider.New(pcfg)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", t.AgentID, err)
		}
		attrs := []any{"agent", t.AgentID, "provider", setup.Vendor, "model", m.Info().Model}
		if setup.Note != "" {
			attrs = append(attrs, "why", setup.Note)
		}
		if key := t.ModelNode(); key != "" {
			attrs = append(attrs, "config", key)
		}
		log.Info("model", attrs...)
		return m, nil
	}
}

// defaultFallbacks are the models that answer for any model whose
// template names no fallbacks: the server's fallback model, if any.
func defaultFallbacks(cfg *serveConfig, tel *telemetry.Telemetry, log *slog.Logger) ([]llmorch.Candidate, error) {
	fb, err := fallbackModel(cfg, tel)
	if err != nil || fb == nil {
		return nil, err
	}
	log.Info("fallback model", "provider", fb.Info().Provider, "model", fb.Info().Model, "wait", cfg.FallbackWait)
	return []llmorch.Candidate{{Model: fb}}, nil
}

// providerClient is the HTTP client of provider calls: they become child
// spans of the model call when tracing is on, the transport keeps the
// provider's header timeout, and enough idle connections are kept for
// hundreds of concurrent turns not to redial the model for every call.
func providerClient(tel *telemetry.Telemetry) *http.Client {
	return tel.HTTPClient(&http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		ResponseHeaderTimeout: provider.DefaultHeaderTimeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
	}})
}

// fallbackModel is the model used when the template's provider fails before
// its first token (after its own retries): LLM_FALLBACK_PROVIDER names it
// ("openai", "anthropic", or "offline" for the offline model), with
// LLM_FALLBACK_MODEL, LLM_FALLBACK_BASE_URL and LLM_FALLBACK_API_KEY (default:
// the provider's own key variable). Nil when none is configured.
func fallbackModel(cfg *serveConfig, tel *telemetry.Telemetry) (llmorch.Model, error) {
	name := cfg.FallbackProvider
	switch name {
	case "":
		return nil, nil
	case "offline":
		return offline.New(offline.Config{Delay: cfg.OfflineDelay}), nil
	}
	key := cfg.FallbackKey
	if key == "" {
		key = os.Getenv(strings.ToUpper(name) + "_API_KEY")
	}
	m, err := provider.New(provider.Config{
		Provider:    name,
		Model:       cfg.FallbackModel,
		BaseURL:     cfg.FallbackBaseURL,
		APIKey:      key,
		HTTPClient:  providerClient(tel),
		IdleTimeout: cfg.ModelIdle,
	})
	if err != nil {
		return nil, fmt.Errorf("fallback model: %w", err)
	}
	return m, nil
}

// webhookHosts is the one allow-list of the hosts the server posts to:
// A2A_PUSH_HOSTS and WEBHOOK_HOSTS together.
func webhookHosts(cfg *serveConfig) []string {
	return slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(cfg.A2APushHosts), cfg.WebhookHosts...))))
}

// chatWebhookHosts is webhookHosts for background runs, which sign their
// calls: none without WEBHOOK_SECRET (a deployment with A2A push alone
// keeps it).
func chatWebhookHosts(cfg *serveConfig) []string {
	if cfg.WebhookSecret == "" {
		return nil
	}
	return webhookHosts(cfg)
}

// pushHostsOf gives the A2A edge each owner's hosts: its key's own
// webhook-hosts, else webhookHosts.
func pushHostsOf(auth func(string) server.OwnerWebhooks) func(owner string) []string {
	if auth == nil {
		return nil
	}
	return func(owner string) []string { return auth(owner).Hosts }
}
