package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/web"
)

// serveConfig is the server's configuration: flags override the
// environment, which overrides the defaults.
type serveConfig struct {
	Addr         string
	Store        string
	TemplatesDir string
	LogFormat    string
	LogLevel     slog.Level
	SessionTTL   time.Duration
	OfflineDelay time.Duration
}

func loadServeConfig(args []string, stderr io.Writer) (*serveConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &serveConfig{}
	fs.StringVar(&cfg.Addr, "addr", envOr("ADDR", ":8080"), "listen address (env ADDR)")
	fs.StringVar(&cfg.Store, "store", os.Getenv("SESSION_STORE"), "session store URL: memory://, redis://, rediss://, redis+sentinel://, redis+cluster:// (env SESSION_STORE; default: Redis from REDIS_URL, REDIS_SENTINEL_* or REDIS_CLUSTER_ADDRS when set, else memory)")
	fs.StringVar(&cfg.TemplatesDir, "templates-dir", os.Getenv("TEMPLATES_DIR"), "extra templates: a directory of */template.json (env TEMPLATES_DIR)")
	fs.StringVar(&cfg.LogFormat, "log-format", envOr("LOG_FORMAT", "text"), "log format: text or json (env LOG_FORMAT)")
	level := fs.String("log-level", envOr("LOG_LEVEL", "info"), "log level: debug, info, warn, error (env LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	var probs []string
	if err := cfg.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		probs = append(probs, fmt.Sprintf("log level %q: want debug, info, warn or error", *level))
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		probs = append(probs, fmt.Sprintf("log format %q: want text or json", cfg.LogFormat))
	}
	var err error
	if cfg.SessionTTL, err = session.TTLFromEnv(); err != nil {
		probs = append(probs, err.Error())
	}
	if cfg.OfflineDelay, err = offline.DelayFromEnv(); err != nil {
		probs = append(probs, err.Error())
	}
	if len(probs) > 0 {
		return nil, errors.New("invalid configuration:\n  " + strings.Join(probs, "\n  "))
	}
	return cfg, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := loadServeConfig(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "agentdock serve:", err)
		return 2
	}
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "agentdock"})
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
	if err := serve(ctx, cfg, tel, log); err != nil {
		log.Error("server stopped", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg *serveConfig, tel *telemetry.Telemetry, log *slog.Logger) error {
	store, kind, err := openStore(ctx, cfg)
	if err != nil {
		return fmt.Errorf("opening the session store: %w", err)
	}
	defer store.Close()
	if r, ok := store.(*session.Redis); ok {
		if err := tel.InstrumentRedis(r.Client()); err != nil {
			return fmt.Errorf("tracing redis: %w", err)
		}
	}
	toolCfg, err := tools.BuiltinConfigFromEnv()
	if err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	toolCfg.Logger = log
	registry, err := tools.Builtin(toolCfg)
	if err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	loaded, err := loadAgents(cfg.TemplatesDir, registry.Names(), log)
	if err != nil {
		return err
	}
	agents, err := agent.New(agent.Config{
		Store:     store,
		Tools:     registry,
		Models:    modelFactory(cfg, tel, log),
		Logger:    log,
		Telemetry: tel,
	}, loaded)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Agents: agents, Store: store, Logger: log, WebFS: web.FS(), Telemetry: tel})
	if err != nil {
		return err
	}
	log.Info("serving", "addr", cfg.Addr, "agents", len(agents.List()), "store", kind)
	return srv.ListenAndServe(ctx, cfg.Addr)
}

// loadAgents loads the embedded templates, then TEMPLATES_DIR's. A template
// with errors is reported with every message and skipped; one whose agentId
// is taken replaces the shipped one.
func loadAgents(dir string, provided []string, log *slog.Logger) ([]*template.Agent, error) {
	tcfg := template.Config{Provided: provided}
	results, err := template.LoadFSWith(templates.FS(), ".", tcfg)
	if err != nil {
		return nil, fmt.Errorf("embedded templates: %w", err)
	}
	if dir != "" {
		extra, err := template.LoadPath(dir, tcfg)
		if err != nil {
			return nil, fmt.Errorf("TEMPLATES_DIR: %w", err)
		}
		results = append(results, extra...)
	}
	byID := map[string]int{}
	var out []*template.Agent
	for _, r := range results {
		for _, d := range r.Diagnostics {
			if d.Severity == orchestration.SeverityError {
				log.Error("template error", "problem", d.String())
			} else {
				log.Warn("template warning", "problem", d.String())
			}
		}
		if r.Agent == nil {
			log.Error("template skipped", "file", r.File)
			continue
		}
		if i, dup := byID[r.Agent.ID()]; dup {
			log.Info("template replaces a shipped one", "agent", r.Agent.ID(), "file", r.File)
			out[i] = r.Agent
			continue
		}
		byID[r.Agent.ID()] = len(out)
		out = append(out, r.Agent)
	}
	if len(out) == 0 {
		return nil, errors.New("no template loaded")
	}
	return out, nil
}

// modelFactory picks each template's model: its provider when a key (or a
// local base URL) is configured, otherwise the offline scripted model, which
// is announced once in the log.
func modelFactory(cfg *serveConfig, tel *telemetry.Telemetry, log *slog.Logger) agent.ModelFactory {
	warned := false
	return func(t *template.Template) (llmorch.Model, error) {
		name, node := t.Provider()
		pcfg, ok, err := provider.ConfigFromEnv(name, node.Model, node.Temperature, node.MaxTokens)
		if err != nil {
			return nil, err
		}
		if !ok {
			if !warned {
				warned = true
				log.Warn("no model provider is configured: agents use the OFFLINE SCRIPTED MODEL (set OPENAI_API_KEY, ANTHROPIC_API_KEY or LLM_BASE_URL to use a real model)")
			}
			return offline.New(offline.Config{Delay: cfg.OfflineDelay}), nil
		}
		// Provider calls become child spans of the model call when tracing
		// is on; the transport keeps the provider's header timeout.
		pcfg.HTTPClient = tel.HTTPClient(&http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			ResponseHeaderTimeout: provider.DefaultHeaderTimeout,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   16,
		}})
		m, err := provider.New(pcfg)
		if err != nil {
			return nil, err
		}
		log.Info("model", "agent", t.AgentID, "provider", m.Info().Provider, "model", m.Info().Model)
		return m, nil
	}
}

// openStore opens the store named by --store/SESSION_STORE, else Redis as
// configured by the REDIS_* variables, else the memory store.
func openStore(ctx context.Context, cfg *serveConfig) (session.Store, string, error) {
	if cfg.Store != "" {
		st, err := session.Open(ctx, cfg.Store, session.Config{TTL: cfg.SessionTTL})
		kind, _, _ := strings.Cut(cfg.Store, "://")
		return st, kind, err
	}
	rc, ok, err := session.RedisConfigFromEnv()
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return session.NewMemory(session.Config{TTL: cfg.SessionTTL}), "memory", nil
	}
	st, err := session.NewRedis(rc)
	return st, "redis", err
}

func runMockLLM(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fmt.Fprintf(stdout, "mock model server on http://%s (OpenAI: /v1/chat/completions, Anthropic: /v1/messages)\n", *addr)
	if err := mockllmServe(ctx, *addr); err != nil {
		fmt.Fprintln(stderr, "agentdock mockllm:", err)
		return 1
	}
	return 0
}
