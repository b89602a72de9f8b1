// Package search is the web search behind the "search" tool: one Backend
// interface with SearXNG, Tavily, Brave, Serper and Wikipedia
// implementations speaking each service's own HTTP API, chosen from
// configuration (usually the environment), and the markdown rendering of
// results for the model.
//
// Wikipedia's public search (the MediaWiki Action API) needs no key: the
// environment (ConfigFromEnv) selects it when no other provider is set, so
// that the search tool works out of the box. The zero Config has no backend
// at all, so that a program or a test that does not ask for search never
// reaches the network.
//
// Errors from a backend are written for the model and the operator to read:
// they name the service and what went wrong, and never contain the API key.
package search

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Result is one web search hit.
type Result struct {
	Title   string
	URL     string
	Snippet string
}

// Backend runs a web search on one service.
type Backend interface {
	// Name is the provider name ("searxng", "tavily", "brave", "serper",
	// "wikipedia").
	Name() string
	// Search returns at most limit results for query.
	Search(ctx context.Context, query string, limit int) ([]Result, error)
}

// Provider names, in the order of preference used when several providers are
// configured and Config.Provider is empty: a self-hosted SearXNG first (no
// per-query cost, no third party), then the hosted web search APIs, then
// Wikipedia, which searches one encyclopedia rather than the web but needs
// no key.
const (
	SearXNG   = "searxng"
	Tavily    = "tavily"
	Brave     = "brave"
	Serper    = "serper"
	Wikipedia = "wikipedia"
)

// None as Config.Provider (SEARCH_PROVIDER=none) turns search off: New
// returns ErrNotConfigured whatever else is set.
const None = "none"

var providers = []string{SearXNG, Tavily, Brave, Serper, Wikipedia}

// DisplayName is how results and errors name a provider: "Wikipedia",
// "Brave Search"; an unknown name is returned as it is.
func DisplayName(provider string) string {
	switch provider {
	case SearXNG:
		return "SearXNG"
	case Tavily:
		return "Tavily"
	case Brave:
		return "Brave Search"
	case Serper:
		return "Serper"
	case Wikipedia:
		return "Wikipedia"
	}
	return provider
}

// Default endpoints of the hosted services.
const (
	DefaultTavilyBaseURL = "https://api.tavily.com"
	DefaultBraveBaseURL  = "https://api.search.brave.com"
	DefaultSerperBaseURL = "https://google.serper.dev"
	// DefaultWikipediaURL is the English Wikipedia; another language's
	// (https://de.wikipedia.org) or any MediaWiki site with the Action API
	// at /w/api.php works the same.
	DefaultWikipediaURL = "https://en.wikipedia.org"
)

// DefaultTimeout bounds one request to a search service when Config.Timeout
// is zero.
const DefaultTimeout = 15 * time.Second

// ErrNotConfigured is returned by New when no provider is configured (the
// zero Config) or search is turned off (Provider None).
var ErrNotConfigured = errors.New("web search is not configured: unset SEARCH_PROVIDER=none to search Wikipedia (WIKIPEDIA_URL), or set SEARXNG_URL " +
	"(the address of a SearXNG instance with the JSON format enabled), TAVILY_API_KEY, BRAVE_API_KEY or SERPER_API_KEY in the server's environment, " +
	"and SEARCH_PROVIDER to choose one when several are set")

// Config selects and configures the search backend.
type Config struct {
	// Provider picks one of the configured providers; empty picks the first
	// configured in the order searxng, tavily, brave, serper, wikipedia;
	// None turns search off.
	Provider string
	// SearXNGURL is the base URL of a SearXNG instance. User info in the URL
	// (https://user:pass@host) is sent as HTTP basic auth.
	SearXNGURL string

	TavilyAPIKey  string
	TavilyBaseURL string
	BraveAPIKey   string
	BraveBaseURL  string
	SerperAPIKey  string
	SerperBaseURL string
	// WikipediaURL is the base URL of a MediaWiki site whose Action API is
	// at /w/api.php. Empty leaves Wikipedia out; ConfigFromEnv sets
	// DefaultWikipediaURL when WIKIPEDIA_URL is not set.
	WikipediaURL string

	// Timeout bounds one request; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means a client with Timeout. Its own
	// Timeout, if set, is kept.
	HTTPClient *http.Client
}

// ConfigFromEnv reads SEARCH_PROVIDER, SEARXNG_URL, TAVILY_API_KEY,
// TAVILY_BASE_URL, BRAVE_API_KEY, BRAVE_BASE_URL, SERPER_API_KEY,
// SERPER_BASE_URL and WIKIPEDIA_URL (DefaultWikipediaURL when unset, so
// that Wikipedia answers when no other provider is set).
func ConfigFromEnv() Config { return ConfigFromLookup(os.Getenv) }

// ConfigFromLookup is ConfigFromEnv with another source of variables.
func ConfigFromLookup(getenv func(string) string) Config {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	return Config{
		Provider:      strings.ToLower(get("SEARCH_PROVIDER")),
		SearXNGURL:    get("SEARXNG_URL"),
		TavilyAPIKey:  get("TAVILY_API_KEY"),
		TavilyBaseURL: get("TAVILY_BASE_URL"),
		BraveAPIKey:   get("BRAVE_API_KEY"),
		BraveBaseURL:  get("BRAVE_BASE_URL"),
		SerperAPIKey:  get("SERPER_API_KEY"),
		SerperBaseURL: get("SERPER_BASE_URL"),
		WikipediaURL:  orDefault(get("WIKIPEDIA_URL"), DefaultWikipediaURL),
	}
}

// Configured returns the providers that have what they need (a URL or an API
// key), in order of preference.
func (c Config) Configured() []string {
	var out []string
	for _, p := range providers {
		if c.has(p) {
			out = append(out, p)
		}
	}
	return out
}

func (c Config) has(p string) bool {
	switch p {
	case SearXNG:
		return c.SearXNGURL != ""
	case Tavily:
		return c.TavilyAPIKey != ""
	case Brave:
		return c.BraveAPIKey != ""
	case Serper:
		return c.SerperAPIKey != ""
	case Wikipedia:
		return c.WikipediaURL != ""
	}
	return false
}

// Selected returns the provider New would use: Config.Provider, or the
// first configured one. The errors are New's, without checking URLs.
func (c Config) Selected() (string, error) {
	p := c.Provider
	if p == None {
		return "", ErrNotConfigured
	}
	if p != "" && !slices.Contains(providers, p) {
		return "", fmt.Errorf("search: unknown SEARCH_PROVIDER %q: want one of %s, or %s", p, strings.Join(providers, ", "), None)
	}
	configured := c.Configured()
	switch {
	case p == "" && len(configured) == 0:
		return "", ErrNotConfigured
	case p == "":
		return configured[0], nil
	case !c.has(p):
		return "", fmt.Errorf("search: SEARCH_PROVIDER is %q but %s is not set", p, requiredVar(p))
	}
	return p, nil
}

// New validates cfg and returns the selected backend. It returns an error
// wrapping ErrNotConfigured when no provider is configured or Provider is
// None, and a plain error for a Provider that is unknown or not
// configured, a negative timeout, or a malformed URL.
func New(cfg Config) (Backend, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("search: timeout must not be negative, got %s", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	p, err := cfg.Selected()
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	switch p {
	case SearXNG:
		return newSearXNG(cfg.SearXNGURL, hc)
	case Tavily:
		return newTavily(cfg.TavilyAPIKey, orDefault(cfg.TavilyBaseURL, DefaultTavilyBaseURL), hc)
	case Brave:
		return newBrave(cfg.BraveAPIKey, orDefault(cfg.BraveBaseURL, DefaultBraveBaseURL), hc)
	case Wikipedia:
		return newWikipedia(cfg.WikipediaURL, hc)
	default:
		return newSerper(cfg.SerperAPIKey, orDefault(cfg.SerperBaseURL, DefaultSerperBaseURL), hc)
	}
}

func requiredVar(p string) string {
	switch p {
	case SearXNG:
		return "SEARXNG_URL"
	case Tavily:
		return "TAVILY_API_KEY"
	case Brave:
		return "BRAVE_API_KEY"
	case Wikipedia:
		return "WIKIPEDIA_URL"
	}
	return "SERPER_API_KEY"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseBase checks a base URL and returns it without a trailing slash and
// without user info (returned separately, for basic auth).
func parseBase(envName, raw string) (*url.URL, *url.Userinfo, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("search: %s is not a valid URL", envName)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, nil, fmt.Errorf("search: %s must be an http or https URL, got scheme %q", envName, u.Scheme)
	}
	if u.Host == "" {
		return nil, nil, fmt.Errorf("search: %s has no host", envName)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, nil, fmt.Errorf("search: %s must not have a query or fragment", envName)
	}
	user := u.User
	u.User = nil
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, user, nil
}
