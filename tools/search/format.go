package search

import (
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// maxSnippet bounds one snippet in runes; search snippets are a few
// sentences, and the model does not need more to pick a source.
const maxSnippet = 500

var tags = regexp.MustCompile(`<[^>]*>`)

// clean makes results safe to render: HTML (Brave marks matches with
// <strong>, SearXNG passes entities through) becomes plain text, results
// without an http(s) URL are dropped (a javascript: or data: link must never
// reach a rendered page), and at most limit results are kept.
func clean(in []Result, limit int) []Result {
	out := make([]Result, 0, min(len(in), max(limit, 0)))
	for _, r := range in {
		if len(out) >= limit {
			break
		}
		u, ok := safeURL(r.URL)
		if !ok {
			continue
		}
		r.URL = u
		r.Title = plain(r.Title, 200)
		r.Snippet = plain(r.Snippet, maxSnippet)
		out = append(out, r)
	}
	return out
}

func plain(s string, n int) string {
	return oneLine(html.UnescapeString(tags.ReplaceAllString(s, "")), n)
}

// safeURL accepts absolute http(s) URLs and returns them in a form that
// cannot end a markdown link early.
func safeURL(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	s := u.String()
	s = strings.NewReplacer("(", "%28", ")", "%29", " ", "%20", "<", "%3C", ">", "%3E").Replace(s)
	return s, true
}

var linkText = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "*", `\*`, "_", `\_`, "`", "\\`")

// Markdown renders results as a numbered list under a heading naming where
// they come from (a provider's DisplayName, "" for none) and the query:
// each entry a linked title and, when there is one, its snippet.
func Markdown(source, query string, results []Result) string {
	var b strings.Builder
	b.WriteString("## Search results")
	if source != "" {
		b.WriteString(" from ")
		b.WriteString(source)
	}
	b.WriteString(": ")
	b.WriteString(oneLine(query, 200))
	b.WriteString("\n\n")
	if len(results) == 0 {
		b.WriteString("No results found. Try a broader or differently worded query.\n")
		return b.String()
	}
	for i, r := range results {
		title := r.Title
		if title == "" {
			if u, err := url.Parse(r.URL); err == nil {
				title = u.Host
			}
		}
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString(". [")
		b.WriteString(linkText.Replace(title))
		b.WriteString("](")
		b.WriteString(r.URL)
		b.WriteString(")\n")
		if r.Snippet != "" {
			b.WriteString("   ")
			b.WriteString(r.Snippet)
			b.WriteString("\n")
		}
		if i < len(results)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}
