// Package edgetest starts a server.Server with edges on a real loopback
// listener, for the tests of the protocol edges (a2a, agui, mcpserver):
// the test templates of package server (explorer: a step that enforces
// brainstorm then compare; plain) and gatekeeper (every think call waits
// for approval), the cognitive tools, and the offline model or the
// model a test gives.
package edgetest

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/turns"
)

// Options configure Start.
type Options struct {
	// Doors are served (server.Config.Doors).
	Doors []door.Door
	// Runtime adjusts the runtime's configuration.
	Runtime func(*turns.Config)
	// Model answers every agent (default: the offline model, Delay between
	// its words).
	Model llmorch.Model
	Delay time.Duration
	// Keys, when set, are the API keys (server.KeyAuth).
	Keys []string
	// Templates are more template directories to load; Tools are added to
	// the cognitive tools, for their nodes.
	Templates []string
	Tools     []tools.Tool
}

// GuardrailTemplates is the directory of the agent "guarded" of package
// server's tests: the three guardrails (card numbers redacted from
// the answer, a prompt injection blocked, secrets redacted from tools'
// results), for Options.Templates. Its node "vault" needs a tool of that
// name in Options.Tools.
func GuardrailTemplates() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "guardrails")
}

// Server is a started server.
type Server struct {
	*server.Server
	// URL is its base URL, http://127.0.0.1:port.
	URL string
	// Agents counts the agents it serves (every template of both test
	// template directories), which each edge lists.
	Agents int
}

// Start starts a server; it stops with the test.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	store := session.NewMemory(session.Config{})
	reg, err := tools.NewRegistry(append(tools.CognitiveTools(), o.Tools...)...)
	if err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	var loaded []*template.Loaded
	for _, d := range append([]string{filepath.Join(dir, "..", "..", "testdata", "templates"), filepath.Join(dir, "testdata", "templates")}, o.Templates...) {
		results, err := template.LoadPath(d, template.Config{Provided: reg.Names()})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Loaded == nil {
				t.Fatalf("template %s did not load: %v", r.File, r.Diagnostics)
			}
			loaded = append(loaded, r.Loaded)
		}
	}
	model := o.Model
	if model == nil {
		model = offline.New(offline.Config{Delay: o.Delay})
	}
	agents, err := agent.NewSet(agent.Options{
		Store:    store,
		ToolsFor: func(*template.Loaded) tools.Toolbox { return reg },
		Models:   func(*template.Template) (llmorch.Model, error) { return model, nil },
		Logger:   slog.New(slog.DiscardHandler),
	}, loaded)
	if err != nil {
		t.Fatal(err)
	}
	rcfg := turns.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler)}
	if o.Runtime != nil {
		o.Runtime(&rcfg)
	}
	rt, err := turns.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Runtime: rt, Logger: slog.New(slog.DiscardHandler), Doors: o.Doors}
	if len(o.Keys) > 0 {
		auth, err := server.NewKeyAuth(o.Keys, []byte("edgetest"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Owner = auth.Owner
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
		store.Close()
	})
	return &Server{Server: s, URL: hs.URL, Agents: len(loaded)}
}

// CardChunks are a model's answer that streams a card number in four
// chunks, the text around it in the first and the last; CardAnswer is
// what every client must read of it through the agent "guarded".
var CardChunks = []string{"Your card 4111 ", "1111 ", "1111 ", "1111 is on file, thanks."}

const CardAnswer = "Your card [redacted:credit_card] is on file, thanks."

// HasCardDigits reports whether s holds a group of CardChunks' digits
// (with the space after it: a hex ID may hold "1111" by chance).
func HasCardDigits(s string) bool {
	return strings.Contains(s, "4111 ") || strings.Contains(s, "1111 ")
}

// StartGuarded starts a server whose agents run on a scripted
// OpenAI-compatible model over real HTTP (the returned mock, which
// records the requests it gets), the agent "guarded" among them
// (GuardrailTemplates) with its vault tool.
func StartGuarded(t testing.TB, o Options) (*Server, *mockllm.Server) {
	t.Helper()
	mock := mockllm.New()
	t.Cleanup(mock.Close)
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	vault := tools.MustNew("vault", "Reads the deployment's settings.", func(context.Context, struct {
		Name string `json:"name"`
	}) (string, error) {
		return "settings: OPENAI_API_KEY=sk-proj-AbC123dEf456GhI789jKl012 region=eu-west", nil
	})
	o.Model, o.Templates, o.Tools = model, append(o.Templates, GuardrailTemplates()), append(o.Tools, vault)
	return Start(t, o), mock
}
