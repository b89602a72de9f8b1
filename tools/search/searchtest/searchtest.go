// Package searchtest is a local fake of Wikipedia's search, the MediaWiki
// Action API's list=search as the search tool calls it, for tests that
// must not reach the network: point search.Config.WikipediaURL (the
// environment's WIKIPEDIA_URL) at Wikipedia.URL.
//
// It answers GET /w/api.php?action=query&list=search&srsearch=…&format=json
// in the API's own shape (formatversion 2): the pages whose title or text
// holds a word of the query, most matching words first, their snippets
// marked up with <span class="searchmatch"> as Wikipedia marks them. A
// request the API would refuse gets the API's error object, with HTTP 200
// as the API sends it. Fail makes it answer like a failing or rate-limited
// Wikipedia.
package searchtest

import (
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Page is an article of the fake.
type Page struct {
	Title string
	// Text is the article's text, in which the query's words are found
	// and from which the snippet is cut.
	Text string
}

// Pages are the articles of NewWikipedia without arguments: one for each
// suggested prompt of the shipped agents, so that the demo's searches find
// something.
var Pages = []Page{
	{"Transatlantic telegraph cable", "The first transatlantic telegraph cable was laid in 1858 across the floor of the Atlantic Ocean from Valentia Island in western Ireland to Heart's Content in eastern Newfoundland; it worked for three weeks."},
	{"Great Wall of China", "The Great Wall of China is a series of fortifications in northern China. Contrary to a popular claim, it is not visible to the naked eye from the Moon."},
	{"Heat pump", "A heat pump moves heat from a colder place to a warmer one. Cold climate heat pumps keep working well below freezing, at a lower efficiency."},
	{"Corporate retreat", "A corporate retreat, or offsite, takes a team away from its workplace for one or more days of planning, training and team building."},
	{"Remote work", "Remote work is work done away from an employer's premises. Studies of its effect on productivity disagree, depending on the task and how it is measured."},
}

// Request is what the fake was asked.
type Request struct {
	Query     string // srsearch
	Limit     string // srlimit
	UserAgent string
}

// Wikipedia is a running fake.
type Wikipedia struct {
	*httptest.Server

	mu       sync.Mutex
	pages    []Page
	requests []Request
	fail     *failure
}

type failure struct {
	status int
	header http.Header
	body   string
}

// NewWikipedia starts a fake holding pages (Pages when none are given).
// Close it when done.
func NewWikipedia(pages ...Page) *Wikipedia {
	if len(pages) == 0 {
		pages = Pages
	}
	w := &Wikipedia{pages: slices.Clone(pages)}
	w.Server = httptest.NewServer(http.HandlerFunc(w.serve))
	return w
}

// Fail makes every later request answer status with body (a JSON error
// object of the API, an HTML error page) and header; a status of 0 makes
// the fake answer normally again.
func (w *Wikipedia) Fail(status int, header http.Header, body string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if status == 0 {
		w.fail = nil
		return
	}
	w.fail = &failure{status: status, header: header, body: body}
}

// RateLimit makes every later request answer as Wikimedia's rate limiter
// does: HTTP 429 with Retry-After.
func (w *Wikipedia) RateLimit(retryAfterSeconds int) {
	w.Fail(http.StatusTooManyRequests, http.Header{"Retry-After": {strconv.Itoa(retryAfterSeconds)}},
		`{"error":{"code":"too-many-requests","info":"You are making too many requests. Please slow down."}}`)
}

// Requests returns the searches received, oldest first.
func (w *Wikipedia) Requests() []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests)
}

// apiError is the API's error answer, sent with HTTP 200.
func apiError(rw http.ResponseWriter, code, info string) {
	writeJSON(rw, http.StatusOK, map[string]any{"error": map[string]string{"code": code, "info": info, "docref": "See /w/api.php for API usage."}})
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json; charset=utf-8")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v)
}

func (w *Wikipedia) serve(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/w/api.php" {
		http.NotFound(rw, r)
		return
	}
	q := r.URL.Query()
	w.mu.Lock()
	w.requests = append(w.requests, Request{Query: q.Get("srsearch"), Limit: q.Get("srlimit"), UserAgent: r.UserAgent()})
	fail, pages := w.fail, w.pages
	w.mu.Unlock()
	if fail != nil {
		for k, vs := range fail.header {
			rw.Header()[k] = vs
		}
		rw.WriteHeader(fail.status)
		_, _ = rw.Write([]byte(fail.body))
		return
	}
	switch {
	case r.Method != http.MethodGet:
		apiError(rw, "mustbegetrequest", "This module must be called with GET.")
		return
	case q.Get("action") != "query":
		apiError(rw, "badvalue", `Unrecognized value for parameter "action": `+q.Get("action")+".")
		return
	case q.Get("list") != "search":
		apiError(rw, "badvalue", `Unrecognized value for parameter "list": `+q.Get("list")+".")
		return
	case q.Get("format") != "json":
		// The API answers another format (its HTML help page, say).
		rw.Header().Set("Content-Type", "text/html")
		_, _ = rw.Write([]byte("<!DOCTYPE html><title>MediaWiki API help</title>"))
		return
	case strings.TrimSpace(q.Get("srsearch")) == "":
		apiError(rw, "missingparam", `The "srsearch" parameter must be set.`)
		return
	}
	limit := 10
	if s := q.Get("srlimit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			apiError(rw, "badinteger", `Invalid value "`+s+`" for integer parameter "srlimit".`)
			return
		}
		limit = n
	}
	hits := search(pages, q.Get("srsearch"))
	total := len(hits)
	hits = hits[:min(limit, len(hits))]
	results := make([]map[string]any, len(hits))
	for i, h := range hits {
		results[i] = map[string]any{"ns": 0, "title": h.page.Title, "pageid": 1000 + h.index, "snippet": h.snippet}
	}
	writeJSON(rw, http.StatusOK, map[string]any{
		"batchcomplete": true,
		"query":         map[string]any{"searchinfo": map[string]any{"totalhits": total}, "search": results},
	})
}

type hit struct {
	page    Page
	index   int
	score   int
	snippet string
}

var word = regexp.MustCompile(`[\pL\pN]+`)

// search finds the pages holding a word of the query of three or more
// letters, most matching words first, then in the order given.
func search(pages []Page, query string) []hit {
	var words []string
	for _, w := range word.FindAllString(strings.ToLower(query), -1) {
		if len([]rune(w)) >= 3 && !stop[w] && !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	var hits []hit
	for i, p := range pages {
		text := strings.ToLower(p.Title + " " + p.Text)
		score := 0
		for _, w := range words {
			if slices.Contains(word.FindAllString(text, -1), w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{page: p, index: i, score: score, snippet: snippet(p.Text, words)})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	return hits
}

// stop are words too common to search for.
var stop = map[string]bool{"the": true, "and": true, "for": true, "was": true, "when": true, "what": true, "how": true, "who": true, "are": true, "with": true, "from": true, "does": true, "this": true, "that": true}

// snippet is the text, HTML-escaped, with the query's words marked as
// Wikipedia marks them.
func snippet(text string, words []string) string {
	var b strings.Builder
	last := 0
	for _, loc := range word.FindAllStringIndex(text, -1) {
		w := text[loc[0]:loc[1]]
		if !slices.Contains(words, strings.ToLower(w)) {
			continue
		}
		b.WriteString(html.EscapeString(text[last:loc[0]]))
		b.WriteString(`<span class="searchmatch">` + html.EscapeString(w) + `</span>`)
		last = loc[1]
	}
	b.WriteString(html.EscapeString(text[last:]))
	return b.String()
}
