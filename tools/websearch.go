package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools/search"
)

// SearchName is the name of the web search tool.
const SearchName = "search"

// Search limits: the default matches AgentDock's; ten keeps the result
// readable and within every provider's per-request maximum.
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 10
	maxQueryLen        = 400 // Brave's limit, the strictest of the providers
)

var searchParams = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": %d,
      "description": "What to search for, written as you would type it into a search engine."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "default": %d,
      "description": "How many results to return (1 to %d, default %d)."}
  },
  "required": ["query"],
  "additionalProperties": false
}`, maxQueryLen, maxSearchLimit, defaultSearchLimit, maxSearchLimit, defaultSearchLimit))

// webSearch is the search tool. With no backend configured (the zero
// search.Config, or SEARCH_PROVIDER=none) it fails every call with
// search.ErrNotConfigured, which tells the model (and through it the
// operator) which variables to set; it never makes results up.
type webSearch struct {
	backend search.Backend
}

// NewSearch returns the search tool over backend; a nil backend gives the
// not-configured tool.
func NewSearch(backend search.Backend) Tool { return &webSearch{backend: backend} }

// Idempotent implements Idempotent: a search reads.
func (s *webSearch) Idempotent() bool { return true }

func (s *webSearch) Spec() chat.ToolSpec {
	desc := "Search the web for current or specific information you do not know reliably. " +
		"Returns a numbered list of results with titles, links and short snippets; cite the links you use. " +
		"Prefer one precise query over several vague ones."
	if s.backend != nil && s.backend.Name() == search.Wikipedia {
		// The model should know that it searches one encyclopedia, whose
		// search matches article text, not the web.
		desc = "Search Wikipedia's articles for facts you do not know reliably (this search covers Wikipedia only, not the whole web or recent news). " +
			"Returns a numbered list of articles with titles, links and short snippets; cite the links you use. " +
			"Search for the topic's name or a few key words rather than a whole question."
	}
	return chat.ToolSpec{Name: SearchName, Description: desc, Parameters: searchParams}
}

func (s *webSearch) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var in struct {
		Query string `json:"query"`
		Limit *int   `json:"limit"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return Result{}, fmt.Errorf("decode arguments: %w", err)
	}
	query := strings.Join(strings.Fields(in.Query), " ")
	if query == "" {
		return Result{}, fmt.Errorf("field %q must not be blank", "query")
	}
	limit := defaultSearchLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > maxSearchLimit {
		return Result{}, fmt.Errorf("field %q must be between 1 and %d", "limit", maxSearchLimit)
	}
	if s.backend == nil {
		return Result{}, search.ErrNotConfigured
	}
	results, err := s.backend.Search(ctx, query, limit)
	if err != nil {
		return Result{}, fmt.Errorf("web search: %w", err)
	}
	return Result{Content: search.Markdown(search.DisplayName(s.backend.Name()), query, results), Type: "search_result"}, nil
}
