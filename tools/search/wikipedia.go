package search

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// --- Wikipedia: GET {base}/w/api.php?action=query&list=search&srsearch=… ----

// WikipediaUserAgent is the User-Agent of the requests to Wikipedia. The
// Wikimedia User-Agent policy asks every client for one that names it and
// says how to reach whoever runs it; requests without one may be blocked.
const WikipediaUserAgent = "agentdock-go-search/1.0 (https://github.com/agentdock-go/agentdock; the search tool of an agent server) Go-http-client"

type wikipedia struct {
	c    client
	base *url.URL
}

func newWikipedia(raw string, hc *http.Client) (*wikipedia, error) {
	base, _, err := parseBase("WIKIPEDIA_URL", raw)
	if err != nil {
		return nil, err
	}
	return &wikipedia{
		c: client{http: hc, display: "Wikipedia", userAgent: WikipediaUserAgent,
			unreachable: "search needs outbound HTTPS to " + base.String() + "; set WIKIPEDIA_URL, another provider, or SEARCH_PROVIDER=none"},
		base: base,
	}, nil
}

func (w *wikipedia) Name() string { return Wikipedia }

// wikipediaResponse is the part of the Action API's answer the search
// reads. Errors come with HTTP 200 and an "error" object; rate limits as
// HTTP 429, or the error codes "ratelimited" and "maxlag".
type wikipediaResponse struct {
	Error *struct {
		Code string `json:"code"`
		Info string `json:"info"`
	} `json:"error"`
	Query *struct {
		Search []struct {
			Title   string `json:"title"`
			Snippet string `json:"snippet"`
		} `json:"search"`
	} `json:"query"`
}

func (w *wikipedia) Search(ctx context.Context, query string, limit int) ([]Result, error) {
	u := *w.base
	u.Path += "/w/api.php"
	u.RawQuery = url.Values{
		"action": {"query"}, "list": {"search"}, "srsearch": {query}, "srlimit": {strconv.Itoa(limit)},
		"srprop": {"snippet"}, "format": {"json"}, "formatversion": {"2"}, "utf8": {"1"},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build Wikipedia request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	var out wikipediaResponse
	if err := w.c.do(req, &out); err != nil {
		return nil, err
	}
	if e := out.Error; e != nil {
		detail := oneLine(e.Info, 200)
		switch e.Code {
		case "ratelimited", "maxlag":
			return nil, fmt.Errorf("Wikipedia is limiting requests (%s: %s); try again later", e.Code, detail)
		}
		return nil, fmt.Errorf("Wikipedia refused the search (%s: %s)", e.Code, detail)
	}
	if out.Query == nil {
		return nil, fmt.Errorf("Wikipedia returned a response without search results (no \"query\" object): is WIKIPEDIA_URL a MediaWiki site?")
	}
	res := make([]Result, 0, len(out.Query.Search))
	for _, r := range out.Query.Search {
		res = append(res, Result{Title: r.Title, URL: w.articleURL(r.Title), Snippet: r.Snippet})
	}
	return clean(res, limit), nil
}

// articleURL is the article's address, {base}/wiki/Title_with_underscores,
// as Wikipedia links its articles.
func (w *wikipedia) articleURL(title string) string {
	u := *w.base
	u.Path += "/wiki/" + strings.ReplaceAll(title, " ", "_")
	return u.String()
}
