package tools

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/tools/search"
)

// BuiltinConfig configures the tools this package provides.
type BuiltinConfig struct {
	// Search selects the web search backend; with no provider configured the
	// search tool is still registered and answers every call with an error
	// result saying how to configure it.
	Search search.Config
	// Timeout bounds each tool call; zero means DefaultTimeout.
	Timeout time.Duration
	// Logger is the registry's logger; nil means slog.Default().
	Logger *slog.Logger
}

// BuiltinConfigFromEnv reads the search variables (see search.ConfigFromEnv:
// Wikipedia when no other provider is set) and TOOL_TIMEOUT, a Go duration
// such as "45s", and checks them: an unknown SEARCH_PROVIDER, one without
// its key or a malformed URL is an error.
func BuiltinConfigFromEnv() (BuiltinConfig, error) {
	cfg := BuiltinConfig{Search: search.ConfigFromEnv()}
	if _, err := search.New(cfg.Search); err != nil && !errors.Is(err, search.ErrNotConfigured) {
		return BuiltinConfig{}, fmt.Errorf("tools: %w", err)
	}
	if v := strings.TrimSpace(os.Getenv("TOOL_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return BuiltinConfig{}, fmt.Errorf("tools: TOOL_TIMEOUT must be a positive duration such as 30s, got %q", v)
		}
		cfg.Timeout = d
	}
	return cfg, nil
}

// BuiltinTools returns the tools this package provides, for callers that
// register them together with tools of their own.
func BuiltinTools(cfg BuiltinConfig) ([]Tool, error) {
	backend, err := search.New(cfg.Search)
	if err != nil && !errors.Is(err, search.ErrNotConfigured) {
		return nil, fmt.Errorf("tools: %w", err)
	}
	return append(CognitiveTools(), NewSearch(backend)), nil
}

// Builtin returns a registry holding the cognitive tools and search.
func Builtin(cfg BuiltinConfig) (*Registry, error) {
	ts, err := BuiltinTools(cfg)
	if err != nil {
		return nil, err
	}
	return NewRegistryWithConfig(Config{Timeout: cfg.Timeout, Logger: cfg.Logger}, ts...)
}

var builtinNames = func() []string {
	n := []string{ThinkName, ReflectName, CritiqueName, DebateName, BrainstormName, CompareName, SearchName}
	slices.Sort(n)
	return n
}()

// BuiltinNames returns the names of the tools Builtin registers, sorted, for
// checking the tool names a template uses.
func BuiltinNames() []string { return slices.Clone(builtinNames) }
