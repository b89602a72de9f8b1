package search

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/tools/search/searchtest"
)

// TestWikipediaRecordedResponse: a response of the real Action API (its
// continue, searchinfo and per-page fields included) becomes linked
// articles in plain text, asked for as the API and Wikimedia's policy want.
func TestWikipediaRecordedResponse(t *testing.T) {
	srv := server(t, func(r *http.Request, body []byte) error {
		q := r.URL.Query()
		return errors.Join(
			expect(r.Method == http.MethodGet, "method %s", r.Method),
			expect(r.URL.Path == "/wiki-mirror/w/api.php", "path %s (the base path must be kept)", r.URL.Path),
			expect(q.Get("action") == "query" && q.Get("list") == "search" && q.Get("format") == "json", "query %s", r.URL.RawQuery),
			expect(q.Get("srsearch") == testQuery, "srsearch %q", q.Get("srsearch")),
			expect(q.Get("srlimit") == "3", "srlimit %q", q.Get("srlimit")),
			expect(r.UserAgent() == WikipediaUserAgent, "user agent %q", r.UserAgent()),
			expect(strings.Contains(r.UserAgent(), "https://github.com/agentdock-go/agentdock"), "the user agent names no contact"),
		)
	}, http.StatusOK, fixture(t, "wikipedia_search.json"))
	b, err := New(Config{WikipediaURL: srv.URL + "/wiki-mirror/"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != Wikipedia {
		t.Fatalf("backend %q", b.Name())
	}
	got, err := b.Search(context.Background(), testQuery, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Title: "Go (programming language)", URL: srv.URL + "/wiki-mirror/wiki/Go_%28programming_language%29",
			Snippet: "Go is a high-level general purpose programming language that is statically typed and compiled. It is known for the simplicity of its syntax & the efficiency"},
		{Title: "Robert Griesemer", URL: srv.URL + "/wiki-mirror/wiki/Robert_Griesemer",
			Snippet: "Robert Griesemer (born 1964) is a Swiss computer scientist. He is best known for his work on the Go programming language"},
		{Title: "Ken Thompson", URL: srv.URL + "/wiki-mirror/wiki/Ken_Thompson",
			Snippet: "co-created the Go programming language. Other notable contributions included his work on regular expressions"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// TestWikipediaAgainstFake: the search, no results, the API's errors,
// a rate limit and an unreachable Wikipedia, against the fake of the API.
func TestWikipediaAgainstFake(t *testing.T) {
	fake := searchtest.NewWikipedia()
	t.Cleanup(fake.Close)
	b, err := New(Config{WikipediaURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("search", func(t *testing.T) {
		got, err := b.Search(ctx, "when was the first transatlantic telegraph cable laid?", 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || got[0].Title != "Transatlantic telegraph cable" || got[0].URL != fake.URL+"/wiki/Transatlantic_telegraph_cable" {
			t.Fatalf("results %+v", got)
		}
		if !strings.Contains(got[0].Snippet, "The first transatlantic telegraph cable was laid in 1858") || strings.Contains(got[0].Snippet, "<") {
			t.Fatalf("snippet %q: want the text without its markup", got[0].Snippet)
		}
		reqs := fake.Requests()
		if last := reqs[len(reqs)-1]; last.Limit != "5" || last.UserAgent != WikipediaUserAgent {
			t.Fatalf("request %+v", last)
		}
		md := Markdown(DisplayName(b.Name()), "first transatlantic telegraph cable", got)
		if !strings.HasPrefix(md, "## Search results from Wikipedia: first transatlantic telegraph cable\n\n1. [Transatlantic telegraph cable]("+fake.URL+"/wiki/Transatlantic_telegraph_cable)") {
			t.Fatalf("markdown:\n%s", md)
		}
	})
	t.Run("no results", func(t *testing.T) {
		got, err := b.Search(ctx, "zzqx qqzx", 5)
		if err != nil || len(got) != 0 {
			t.Fatalf("got %v, %v; want no results and no error", got, err)
		}
	})

	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		body   string
		want   []string
	}{
		{"an error object of the API", http.StatusOK, nil, `{"error":{"code":"internal_api_error_DBQueryError","info":"A database query error has occurred."},"servedby":"mw-api-ext.eqiad.main-7d9f"}`,
			[]string{"Wikipedia refused the search (internal_api_error_DBQueryError: A database query error has occurred.)"}},
		{"rate limited by the API", http.StatusOK, nil, `{"error":{"code":"ratelimited","info":"You've exceeded your rate limit. Please wait some time and try again."}}`,
			[]string{"Wikipedia is limiting requests (ratelimited:", "try again later"}},
		{"a server error page", http.StatusServiceUnavailable, http.Header{"Content-Type": {"text/html"}}, "<!DOCTYPE html><title>Wikimedia Error</title>",
			[]string{"Wikipedia answered HTTP 503 Service Unavailable"}},
		{"not the API", http.StatusOK, nil, `{"hello":"world"}`, []string{"without search results", "WIKIPEDIA_URL"}},
		{"not JSON", http.StatusOK, nil, "<!doctype html><p>hello", []string{"Wikipedia returned a response that is not the expected JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.Fail(tc.status, tc.header, tc.body)
			t.Cleanup(func() { fake.Fail(0, nil, "") })
			_, err := b.Search(ctx, "heat pump", 5)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	t.Run("rate limit", func(t *testing.T) {
		fake.RateLimit(30)
		t.Cleanup(func() { fake.Fail(0, nil, "") })
		_, err := b.Search(ctx, "heat pump", 5)
		var se *StatusError
		if err == nil || !strings.Contains(err.Error(), "Wikipedia answered HTTP 429") || !strings.Contains(err.Error(), "rate limit or quota reached; try again in 30 s") {
			t.Fatalf("error %v", err)
		}
		if !errors.As(err, &se) || se.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("error %v is not a 429 StatusError", err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		base := closed.URL
		closed.Close()
		b, err := New(Config{WikipediaURL: base})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Search(ctx, "secret words", 5)
		if err == nil || !strings.HasPrefix(err.Error(), "Wikipedia could not be reached: ") || !strings.Contains(err.Error(), "search needs outbound HTTPS to "+base) {
			t.Fatalf("error %v", err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q repeats the query", err)
		}
	})
}
