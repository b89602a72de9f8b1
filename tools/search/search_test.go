package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const testKey = "sk-test-0123456789abcdef"

const testQuery = "who maintains the go programming language"

// wantGo is what every recorded response reduces to: three results about Go,
// HTML stripped and entities decoded.
var wantGo = []string{
	"https://go.dev/doc/faq",
	"https://en.wikipedia.org/wiki/Go_(programming_language)",
	"https://github.com/golang/go",
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// server serves body after check has inspected the request; a failed check
// answers 400 so the backend call fails loudly too.
func server(t *testing.T, check func(*http.Request, []byte) error, status int, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, _ := io.ReadAll(r.Body)
		if err := check(r, reqBody); err != nil {
			t.Errorf("request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func expect(cond bool, format string, args ...any) error {
	if cond {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func TestBackendsSpeakTheirAPI(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		check   func(r *http.Request, body []byte) error
		config  func(base string) Config
		limit   int
	}{
		{
			name:    Tavily,
			fixture: "tavily_search.json",
			limit:   3,
			check: func(r *http.Request, body []byte) error {
				var req map[string]any
				if err := json.Unmarshal(body, &req); err != nil {
					return err
				}
				return errors.Join(
					expect(r.Method == http.MethodPost, "method %s", r.Method),
					expect(r.URL.Path == "/search", "path %s", r.URL.Path),
					expect(r.Header.Get("Authorization") == "Bearer "+testKey, "authorization %q", r.Header.Get("Authorization")),
					expect(r.Header.Get("Content-Type") == "application/json", "content type %q", r.Header.Get("Content-Type")),
					expect(req["query"] == testQuery, "query %v", req["query"]),
					expect(req["max_results"] == float64(3), "max_results %v", req["max_results"]),
					expect(req["search_depth"] == "basic", "search_depth %v", req["search_depth"]),
					expect(req["api_key"] == nil, "the key must travel in the header only"),
				)
			},
			config: func(base string) Config { return Config{TavilyAPIKey: testKey, TavilyBaseURL: base} },
		},
		{
			name:    Brave,
			fixture: "brave_web_search.json",
			limit:   3,
			check: func(r *http.Request, body []byte) error {
				q := r.URL.Query()
				return errors.Join(
					expect(r.Method == http.MethodGet, "method %s", r.Method),
					expect(r.URL.Path == "/res/v1/web/search", "path %s", r.URL.Path),
					expect(r.Header.Get("X-Subscription-Token") == testKey, "token %q", r.Header.Get("X-Subscription-Token")),
					expect(r.Header.Get("Accept") == "application/json", "accept %q", r.Header.Get("Accept")),
					expect(q.Get("q") == testQuery, "q %q", q.Get("q")),
					expect(q.Get("count") == "3", "count %q", q.Get("count")),
					expect(len(body) == 0, "GET with a body"),
				)
			},
			config: func(base string) Config { return Config{BraveAPIKey: testKey, BraveBaseURL: base} },
		},
		{
			name:    Serper,
			fixture: "serper_search.json",
			limit:   3,
			check: func(r *http.Request, body []byte) error {
				var req map[string]any
				if err := json.Unmarshal(body, &req); err != nil {
					return err
				}
				return errors.Join(
					expect(r.Method == http.MethodPost, "method %s", r.Method),
					expect(r.URL.Path == "/search", "path %s", r.URL.Path),
					expect(r.Header.Get("X-API-KEY") == testKey, "x-api-key %q", r.Header.Get("X-API-KEY")),
					expect(req["q"] == testQuery, "q %v", req["q"]),
					expect(req["num"] == float64(3), "num %v", req["num"]),
				)
			},
			config: func(base string) Config { return Config{SerperAPIKey: testKey, SerperBaseURL: base} },
		},
		{
			name:    SearXNG,
			fixture: "searxng_search.json",
			limit:   3,
			check: func(r *http.Request, body []byte) error {
				q := r.URL.Query()
				user, pass, ok := r.BasicAuth()
				return errors.Join(
					expect(r.Method == http.MethodGet, "method %s", r.Method),
					expect(r.URL.Path == "/searx/search", "path %s (the base path must be kept)", r.URL.Path),
					expect(q.Get("q") == testQuery, "q %q", q.Get("q")),
					expect(q.Get("format") == "json", "format %q", q.Get("format")),
					expect(ok && user == "agent" && pass == "s3cret", "basic auth from the URL's user info: %v %q", ok, user),
				)
			},
			config: func(base string) Config {
				return Config{SearXNGURL: strings.Replace(base, "http://", "http://agent:s3cret@", 1) + "/searx/"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := server(t, tt.check, http.StatusOK, fixture(t, tt.fixture))
			b, err := New(tt.config(srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			if b.Name() != tt.name {
				t.Fatalf("backend %q, want %q", b.Name(), tt.name)
			}
			got, err := b.Search(context.Background(), testQuery, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var urls []string
			for _, r := range got {
				urls = append(urls, r.URL)
				if r.Title == "" || r.Snippet == "" {
					t.Errorf("result %+v lacks a title or snippet", r)
				}
				if strings.ContainsAny(r.Title+r.Snippet, "<>") || strings.Contains(r.Snippet, "&amp;") {
					t.Errorf("result %+v still holds HTML", r)
				}
			}
			want := []string{wantGo[0], "https://en.wikipedia.org/wiki/Go_%28programming_language%29", wantGo[2]}
			if !reflect.DeepEqual(urls, want) {
				t.Errorf("urls %q, want %q", urls, want)
			}
		})
	}
}

func TestSearchTrimsToLimit(t *testing.T) {
	srv := server(t, func(*http.Request, []byte) error { return nil }, http.StatusOK, fixture(t, "searxng_search.json"))
	b, err := New(Config{SearXNGURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Search(context.Background(), "go", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d results, want 2", len(got))
	}
}

func TestBraveWithoutWebSection(t *testing.T) {
	srv := server(t, func(*http.Request, []byte) error { return nil }, http.StatusOK,
		[]byte(`{"type":"search","query":{"original":"zzqx"},"mixed":{"type":"mixed","main":[],"top":[],"side":[]}}`))
	b, err := New(Config{BraveAPIKey: testKey, BraveBaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Search(context.Background(), "zzqx", 5)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want no results and no error", got, err)
	}
}

func TestBackendErrors(t *testing.T) {
	type backendCase struct {
		name   string
		config func(base string) Config
	}
	backends := []backendCase{
		{Tavily, func(b string) Config { return Config{TavilyAPIKey: testKey, TavilyBaseURL: b} }},
		{Brave, func(b string) Config { return Config{BraveAPIKey: testKey, BraveBaseURL: b} }},
		{Serper, func(b string) Config { return Config{SerperAPIKey: testKey, SerperBaseURL: b} }},
		{SearXNG, func(b string) Config {
			return Config{SearXNGURL: strings.Replace(b, "http://", "http://agent:"+testKey+"@", 1)}
		}},
	}
	echoKey := []byte(`{"message":"invalid key ` + testKey + `"}`)
	cases := []struct {
		name   string
		status int
		body   []byte
		want   []string
	}{
		{"unauthorized echoing the key", http.StatusUnauthorized, echoKey, []string{"HTTP 401", "invalid key [redacted]"}},
		{"server error with HTML page", http.StatusBadGateway, []byte("<html><body>Bad gateway</body></html>"), []string{"HTTP 502"}},
		{"rate limited", http.StatusTooManyRequests, []byte(`{"error":"too many requests"}`), []string{"HTTP 429", "too many requests", "rate limit"}},
		{"not JSON", http.StatusOK, []byte("<!doctype html><p>hello"), []string{"not the expected JSON"}},
		{"wrong JSON shape", http.StatusOK, []byte(`{"results":"nope","organic":7,"web":[]}`), []string{"not the expected JSON"}},
	}
	for _, bc := range backends {
		for _, c := range cases {
			t.Run(bc.name+"/"+c.name, func(t *testing.T) {
				srv := server(t, func(*http.Request, []byte) error { return nil }, c.status, c.body)
				b, err := New(bc.config(srv.URL))
				if err != nil {
					t.Fatal(err)
				}
				_, err = b.Search(context.Background(), "q", 5)
				if err == nil {
					t.Fatal("no error")
				}
				msg := err.Error()
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q lacks %q", msg, w)
					}
				}
				if strings.Contains(msg, testKey) {
					t.Errorf("error %q contains the API key", msg)
				}
			})
		}
	}
}

func TestRecordedErrorBodies(t *testing.T) {
	t.Run("tavily 401", func(t *testing.T) {
		srv := server(t, func(*http.Request, []byte) error { return nil }, http.StatusUnauthorized, fixture(t, "tavily_401.json"))
		b, _ := New(Config{TavilyAPIKey: testKey, TavilyBaseURL: srv.URL})
		_, err := b.Search(context.Background(), "q", 5)
		want := "Tavily answered HTTP 401 Unauthorized: Unauthorized: missing or invalid API key. (check TAVILY_API_KEY)"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
	t.Run("brave 422", func(t *testing.T) {
		srv := server(t, func(*http.Request, []byte) error { return nil }, http.StatusUnprocessableEntity, fixture(t, "brave_422.json"))
		b, _ := New(Config{BraveAPIKey: testKey, BraveBaseURL: srv.URL})
		_, err := b.Search(context.Background(), "q", 5)
		if err == nil || !strings.Contains(err.Error(), "Unable to validate request parameter(s)") {
			t.Fatalf("error %v", err)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != 422 {
			t.Fatalf("error %v is not a 422 StatusError", err)
		}
	})
	t.Run("searxng 403 hints at the json format", func(t *testing.T) {
		srv := server(t, func(*http.Request, []byte) error { return nil }, http.StatusForbidden, []byte("Forbidden"))
		b, _ := New(Config{SearXNGURL: srv.URL})
		_, err := b.Search(context.Background(), "q", 5)
		if err == nil || !strings.Contains(err.Error(), "search.formats") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestTransportErrors(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		b, err := New(Config{TavilyAPIKey: testKey, TavilyBaseURL: srv.URL, Timeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Search(context.Background(), "q", 5)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Tavily did not answer in time") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		base := srv.URL
		srv.Close()
		b, err := New(Config{BraveAPIKey: testKey, BraveBaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Search(context.Background(), "secret query words", 5)
		if err == nil || !strings.Contains(err.Error(), "Brave Search could not be reached") {
			t.Fatalf("error %v", err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q repeats the query", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The server notices a closed connection only once the body is read.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		b, _ := New(Config{SerperAPIKey: testKey, SerperBaseURL: srv.URL})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		_, err := b.Search(ctx, "q", 5)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want cancelled", err)
		}
	})
}

func TestNewSelectsProvider(t *testing.T) {
	all := Config{SearXNGURL: "http://searx.local", TavilyAPIKey: "t", BraveAPIKey: "b", SerperAPIKey: "s"}
	tests := []struct {
		name    string
		cfg     Config
		want    string
		wantErr string
	}{
		{"nothing configured", Config{}, "", "web search is not configured"},
		{"turned off", withProvider(all, None), "", "web search is not configured"},
		{"wikipedia when nothing else", Config{WikipediaURL: DefaultWikipediaURL}, Wikipedia, ""},
		{"any other provider before wikipedia", Config{SerperAPIKey: "s", WikipediaURL: DefaultWikipediaURL}, Serper, ""},
		{"wikipedia chosen", Config{Provider: Wikipedia, BraveAPIKey: "b", WikipediaURL: "https://de.wikipedia.org"}, Wikipedia, ""},
		{"wikipedia chosen without its url", Config{Provider: Wikipedia}, "", `SEARCH_PROVIDER is "wikipedia" but WIKIPEDIA_URL is not set`},
		{"bad wikipedia url", Config{WikipediaURL: "en.wikipedia.org"}, "", "WIKIPEDIA_URL must be an http or https URL"},
		{"preference order", all, SearXNG, ""},
		{"hosted only", Config{BraveAPIKey: "b", SerperAPIKey: "s"}, Brave, ""},
		{"explicit provider", withProvider(all, Serper), Serper, ""},
		{"explicit provider not configured", Config{Provider: Tavily, BraveAPIKey: "b"}, "", `SEARCH_PROVIDER is "tavily" but TAVILY_API_KEY is not set`},
		{"unknown provider", Config{Provider: "bing", BraveAPIKey: "b"}, "", `unknown SEARCH_PROVIDER "bing"`},
		{"bad searxng url", Config{SearXNGURL: "searx.local:8080"}, "", "SEARXNG_URL must be an http or https URL"},
		{"base url with query", Config{TavilyAPIKey: "t", TavilyBaseURL: "https://proxy.local/?x=1"}, "", "TAVILY_BASE_URL must not have a query"},
		{"negative timeout", Config{BraveAPIKey: "b", Timeout: -time.Second}, "", "timeout must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Name() != tt.want {
				t.Fatalf("backend %q, want %q", b.Name(), tt.want)
			}
		})
	}
	for _, c := range []Config{{}, {Provider: None, WikipediaURL: DefaultWikipediaURL}} {
		if _, err := New(c); !errors.Is(err, ErrNotConfigured) {
			t.Fatalf("%+v: %v, want ErrNotConfigured", c, err)
		}
	}
}

func withProvider(c Config, p string) Config { c.Provider = p; return c }

func TestConfigFromLookup(t *testing.T) {
	env := map[string]string{
		"SEARCH_PROVIDER": " Brave ", "BRAVE_API_KEY": "bk", "BRAVE_BASE_URL": "http://127.0.0.1:9",
		"TAVILY_API_KEY": "tk", "SEARXNG_URL": "http://searx",
	}
	got := ConfigFromLookup(func(k string) string { return env[k] })
	want := Config{Provider: "brave", BraveAPIKey: "bk", BraveBaseURL: "http://127.0.0.1:9", TavilyAPIKey: "tk", SearXNGURL: "http://searx",
		WikipediaURL: DefaultWikipediaURL}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if c := got.Configured(); !reflect.DeepEqual(c, []string{SearXNG, Tavily, Brave, Wikipedia}) {
		t.Fatalf("configured %v", c)
	}
	// Nothing set: Wikipedia, at WIKIPEDIA_URL when given.
	if p, err := ConfigFromLookup(func(string) string { return "" }).Selected(); p != Wikipedia || err != nil {
		t.Fatalf("an empty environment selects %q, %v; want wikipedia", p, err)
	}
	de := ConfigFromLookup(func(k string) string { return map[string]string{"WIKIPEDIA_URL": "https://de.wikipedia.org"}[k] })
	if de.WikipediaURL != "https://de.wikipedia.org" {
		t.Fatalf("WIKIPEDIA_URL read as %q", de.WikipediaURL)
	}
}

func TestMarkdown(t *testing.T) {
	results := clean([]Result{
		{Title: "A [bracketed] *title*", URL: "https://example.com/a b(1)", Snippet: "first\n  line &lt;ok&gt;"},
		{Title: "", URL: "https://example.org/path", Snippet: ""},
		{Title: "bad", URL: "data:text/html,hi", Snippet: "dropped"},
	}, 10)
	got := Markdown("Brave Search", "  golang \n news ", results)
	want := "## Search results from Brave Search: golang news\n\n" +
		"1. [A \\[bracketed\\] \\*title\\*](https://example.com/a%20b%281%29)\n" +
		"   first line <ok>\n\n" +
		"2. [example.org](https://example.org/path)\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if empty := Markdown("", "zzqx", nil); !strings.HasPrefix(empty, "## Search results: zzqx") || !strings.Contains(empty, "No results found") {
		t.Fatalf("empty rendering %q", empty)
	}
}
