package search

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// --- SearXNG: GET {base}/search?q=...&format=json -------------------------

type searxng struct {
	c    client
	base *url.URL
	user *url.Userinfo
}

func newSearXNG(raw string, hc *http.Client) (*searxng, error) {
	base, user, err := parseBase("SEARXNG_URL", raw)
	if err != nil {
		return nil, err
	}
	var secret string
	if user != nil {
		secret, _ = user.Password()
	}
	return &searxng{c: client{http: hc, display: "SearXNG", secret: secret}, base: base, user: user}, nil
}

func (s *searxng) Name() string { return SearXNG }

type searxngResponse struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

func (s *searxng) Search(ctx context.Context, query string, limit int) ([]Result, error) {
	u := *s.base
	u.Path += "/search"
	// SearXNG has no result-count parameter; one page is about twenty hits,
	// trimmed to limit below.
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}, "pageno": {"1"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build SearXNG request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if s.user != nil {
		pass, _ := s.user.Password()
		req.SetBasicAuth(s.user.Username(), pass)
	}
	var out searxngResponse
	if err := s.c.do(req, &out); err != nil {
		if isForbidden(err) {
			return nil, fmt.Errorf("%w (a SearXNG instance answers 403 when the json format is not enabled under search.formats in its settings.yml)", err)
		}
		return nil, err
	}
	res := make([]Result, 0, len(out.Results))
	for _, r := range out.Results {
		res = append(res, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return clean(res, limit), nil
}

// --- Tavily: POST {base}/search, Authorization: Bearer ----------------------

type tavily struct {
	c   client
	url string
}

func newTavily(key, raw string, hc *http.Client) (*tavily, error) {
	base, _, err := parseBase("TAVILY_BASE_URL", raw)
	if err != nil {
		return nil, err
	}
	return &tavily{c: client{http: hc, display: "Tavily", keyVar: "TAVILY_API_KEY", secret: key}, url: base.String() + "/search"}, nil
}

func (t *tavily) Name() string { return Tavily }

type tavilyRequest struct {
	Query       string `json:"query"`
	MaxResults  int    `json:"max_results"`
	SearchDepth string `json:"search_depth"`
	Topic       string `json:"topic"`
}

type tavilyResponse struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

func (t *tavily) Search(ctx context.Context, query string, limit int) ([]Result, error) {
	body, err := json.Marshal(tavilyRequest{Query: query, MaxResults: limit, SearchDepth: "basic", Topic: "general"})
	if err != nil {
		return nil, fmt.Errorf("encode Tavily request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build Tavily request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+t.c.secret)
	var out tavilyResponse
	if err := t.c.do(req, &out); err != nil {
		return nil, err
	}
	res := make([]Result, 0, len(out.Results))
	for _, r := range out.Results {
		res = append(res, Result{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return clean(res, limit), nil
}

// --- Brave: GET {base}/res/v1/web/search?q=&count=, X-Subscription-Token ----

type brave struct {
	c   client
	url string
}

func newBrave(key, raw string, hc *http.Client) (*brave, error) {
	base, _, err := parseBase("BRAVE_BASE_URL", raw)
	if err != nil {
		return nil, err
	}
	return &brave{c: client{http: hc, display: "Brave Search", keyVar: "BRAVE_API_KEY", secret: key}, url: base.String() + "/res/v1/web/search"}, nil
}

func (b *brave) Name() string { return Brave }

type braveResponse struct {
	Web *struct {
		Results []struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
		} `json:"results"`
	} `json:"web"`
}

func (b *brave) Search(ctx context.Context, query string, limit int) ([]Result, error) {
	q := url.Values{"q": {query}, "count": {strconv.Itoa(limit)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("build Brave Search request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", b.c.secret)
	var out braveResponse
	if err := b.c.do(req, &out); err != nil {
		return nil, err
	}
	if out.Web == nil {
		return nil, nil // Brave omits "web" when nothing matched
	}
	res := make([]Result, 0, len(out.Web.Results))
	for _, r := range out.Web.Results {
		res = append(res, Result{Title: r.Title, URL: r.URL, Snippet: r.Description})
	}
	return clean(res, limit), nil
}

// --- Serper: POST {base}/search, X-API-KEY ---------------------------------

type serper struct {
	c   client
	url string
}

func newSerper(key, raw string, hc *http.Client) (*serper, error) {
	base, _, err := parseBase("SERPER_BASE_URL", raw)
	if err != nil {
		return nil, err
	}
	return &serper{c: client{http: hc, display: "Serper", keyVar: "SERPER_API_KEY", secret: key}, url: base.String() + "/search"}, nil
}

func (s *serper) Name() string { return Serper }

type serperRequest struct {
	Q   string `json:"q"`
	Num int    `json:"num"`
}

type serperResponse struct {
	Organic []struct {
		Title   string `json:"title"`
		Link    string `json:"link"`
		Snippet string `json:"snippet"`
	} `json:"organic"`
}

func (s *serper) Search(ctx context.Context, query string, limit int) ([]Result, error) {
	body, err := json.Marshal(serperRequest{Q: query, Num: limit})
	if err != nil {
		return nil, fmt.Errorf("encode Serper request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build Serper request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-KEY", s.c.secret)
	var out serperResponse
	if err := s.c.do(req, &out); err != nil {
		return nil, err
	}
	res := make([]Result, 0, len(out.Organic))
	for _, r := range out.Organic {
		res = append(res, Result{Title: r.Title, URL: r.Link, Snippet: r.Snippet})
	}
	return clean(res, limit), nil
}
