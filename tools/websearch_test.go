package tools

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/tools/search"
	"github.com/agentdock-go/agentdock/tools/search/searchtest"
)

const braveKey = "BSA-test-key-0123456789"

// braveServer speaks Brave's web search API, answering with the recorded
// response and remembering the count it was asked for.
func braveServer(t *testing.T, status int, body []byte) (*httptest.Server, *string) {
	t.Helper()
	var count string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/res/v1/web/search" || r.Header.Get("X-Subscription-Token") != braveKey {
			http.Error(w, `{"error":{"detail":"wrong request"}}`, http.StatusBadRequest)
			return
		}
		count = r.URL.Query().Get("count")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &count
}

func TestSearchToolThroughRegistry(t *testing.T) {
	body, err := os.ReadFile("search/testdata/brave_web_search.json")
	if err != nil {
		t.Fatal(err)
	}
	srv, count := braveServer(t, http.StatusOK, body)
	r, err := Builtin(BuiltinConfig{Search: search.Config{BraveAPIKey: braveKey, BraveBaseURL: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	res := r.Execute(ctx, call("search", `{"query":"who maintains the go programming language"}`))
	if res.IsError || res.Type != "search_result" {
		t.Fatalf("%+v", res)
	}
	if *count != "5" {
		t.Errorf("default limit sent as count=%q, want 5", *count)
	}
	want := "## Search results from Brave Search: who maintains the go programming language\n\n" +
		"1. [Frequently Asked Questions (FAQ) - The Go Programming Language](https://go.dev/doc/faq)\n" +
		"   Go was designed at Google in 2007 & is developed as an open source project by the Go team and contributors.\n\n" +
		"2. [Go (programming language) - Wikipedia](https://en.wikipedia.org/wiki/Go_%28programming_language%29)\n" +
		"   Go is a high-level general purpose programming language that is statically typed and compiled.\n\n" +
		"3. [GitHub - golang/go: The Go programming language](https://github.com/golang/go)\n" +
		"   The Go programming language. Contribute to golang/go development by creating an account on GitHub.\n"
	if res.Content != want {
		t.Fatalf("content\n%s\nwant\n%s", res.Content, want)
	}

	res = r.Execute(ctx, call("search", `{"query":"go","limit":2}`))
	if res.IsError || *count != "2" || strings.Count(res.Content, "](https://") != 2 {
		t.Fatalf("limit 2: count=%q %+v", *count, res)
	}

	for args, wantMsg := range map[string]string{
		`{"query":"go","limit":11}`:  `field "limit" must be at most 10`,
		`{"query":"go","limit":0}`:   `field "limit" must be at least 1`,
		`{"query":"go","limit":"3"}`: `field "limit" must be integer, got string`,
		`{"limit":3}`:                `missing required field "query"`,
		`{"query":"   "}`:            `field "query" must not be blank`,
	} {
		res := r.Execute(ctx, call("search", args))
		if !res.IsError || !strings.Contains(res.Content, wantMsg) {
			t.Errorf("%s: %+v, want %q", args, res, wantMsg)
		}
	}
}

func TestSearchToolBackendFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("unauthorized", func(t *testing.T) {
		srv, _ := braveServer(t, http.StatusUnauthorized, []byte(`{"type":"ErrorResponse","error":{"status":401,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token `+braveKey+` is invalid."}}`))
		r, _ := Builtin(BuiltinConfig{Search: search.Config{BraveAPIKey: braveKey, BraveBaseURL: srv.URL}})
		res := r.Execute(ctx, call("search", `{"query":"go"}`))
		if !res.IsError || res.Type != ErrorType ||
			!strings.Contains(res.Content, `tool "search" failed: web search: Brave Search answered HTTP 401`) ||
			!strings.Contains(res.Content, "check BRAVE_API_KEY") {
			t.Fatalf("%+v", res)
		}
		if strings.Contains(res.Content, braveKey) {
			t.Fatalf("API key in result: %s", res.Content)
		}
	})
	t.Run("bad JSON", func(t *testing.T) {
		srv, _ := braveServer(t, http.StatusOK, []byte(`{"web":{"results":[{"title":`))
		r, _ := Builtin(BuiltinConfig{Search: search.Config{BraveAPIKey: braveKey, BraveBaseURL: srv.URL}})
		res := r.Execute(ctx, call("search", `{"query":"go"}`))
		if !res.IsError || !strings.Contains(res.Content, "Brave Search returned a response that is not the expected JSON") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("slower than the tool timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		r, _ := Builtin(BuiltinConfig{Timeout: 30 * time.Millisecond, Search: search.Config{SearXNGURL: srv.URL}})
		res := r.Execute(ctx, call("search", `{"query":"go"}`))
		if !res.IsError || res.Content != `tool "search" timed out after 30ms` {
			t.Fatalf("%+v", res)
		}
	})
}

func TestSearchNotConfigured(t *testing.T) {
	r, err := Builtin(BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Execute(context.Background(), call("search", `{"query":"latest go release"}`))
	if !res.IsError || res.Type != ErrorType {
		t.Fatalf("%+v", res)
	}
	for _, want := range []string{"web search is not configured", "SEARXNG_URL", "TAVILY_API_KEY", "BRAVE_API_KEY", "SERPER_API_KEY", "SEARCH_PROVIDER"} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("content %q lacks %q", res.Content, want)
		}
	}
	if strings.Contains(res.Content, "](http") {
		t.Errorf("not-configured result holds links: %q", res.Content)
	}
}

func TestBuiltinConfigFromEnv(t *testing.T) {
	t.Setenv("SEARCH_PROVIDER", "serper")
	t.Setenv("SERPER_API_KEY", "sk")
	t.Setenv("BRAVE_API_KEY", "bk")
	t.Setenv("TOOL_TIMEOUT", "45s")
	cfg, err := BuiltinConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != 45*time.Second || cfg.Search.Provider != "serper" || cfg.Search.SerperAPIKey != "sk" || cfg.Search.BraveAPIKey != "bk" {
		t.Fatalf("%+v", cfg)
	}
	if _, err := Builtin(cfg); err != nil {
		t.Fatal(err)
	}

	t.Setenv("TOOL_TIMEOUT", "soon")
	if _, err := BuiltinConfigFromEnv(); err == nil || !strings.Contains(err.Error(), `TOOL_TIMEOUT must be a positive duration such as 30s, got "soon"`) {
		t.Fatalf("error %v", err)
	}
	t.Setenv("TOOL_TIMEOUT", "")
	t.Setenv("SEARCH_PROVIDER", "tavily")
	if _, err := BuiltinConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "TAVILY_API_KEY is not set") {
		t.Fatalf("misconfigured provider accepted: %v", err)
	}
	if _, err := Builtin(BuiltinConfig{Search: search.Config{Provider: "tavily"}}); err == nil || !strings.Contains(err.Error(), "TAVILY_API_KEY is not set") {
		t.Fatalf("misconfigured provider accepted: %v", err)
	}
	for _, k := range []string{"SEARCH_PROVIDER", "SERPER_API_KEY", "BRAVE_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("WIKIPEDIA_URL", "en.wikipedia.org")
	if _, err := BuiltinConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "WIKIPEDIA_URL must be an http or https URL") {
		t.Fatalf("a malformed WIKIPEDIA_URL accepted: %v", err)
	}
}

// TestSearchToolOnWikipedia: with nothing else set, the environment's
// search is Wikipedia's: the model is told that it searches an
// encyclopedia, and the result says where it comes from.
func TestSearchToolOnWikipedia(t *testing.T) {
	fake := searchtest.NewWikipedia()
	t.Cleanup(fake.Close)
	for _, k := range []string{"SEARCH_PROVIDER", "SEARXNG_URL", "TAVILY_API_KEY", "BRAVE_API_KEY", "SERPER_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("WIKIPEDIA_URL", fake.URL)
	cfg, err := BuiltinConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Builtin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := r.Lookup(SearchName)
	if d := tool.Spec().Description; !strings.Contains(d, "Wikipedia") {
		t.Errorf("the model is not told that it searches Wikipedia: %q", d)
	}
	res := r.Execute(context.Background(), call("search", `{"query":"heat pumps in cold climates","limit":2}`))
	want := "## Search results from Wikipedia: heat pumps in cold climates\n\n1. [Heat pump](" + fake.URL + "/wiki/Heat_pump)\n   A heat pump moves heat"
	if res.IsError || res.Type != "search_result" || !strings.HasPrefix(res.Content, want) {
		t.Fatalf("%+v\nwant it to start %q", res, want)
	}
}
