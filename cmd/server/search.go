package main

import (
	"errors"
	"log/slog"

	"github.com/agentdock-go/agentdock/tools/search"
)

// logSearch says at start which service the search tool asks, and why:
// Wikipedia when no web search provider is set, so that a newcomer knows
// where the demo's results come from and how to change it.
func logSearch(log *slog.Logger, cfg search.Config) {
	p, err := cfg.Selected()
	switch {
	case errors.Is(err, search.ErrNotConfigured):
		log.Warn("search is off: every search call fails with a notice", "provider", search.None,
			"why", "SEARCH_PROVIDER=none; unset it to search Wikipedia, or set a web search provider (docs/configuration.md)")
	case err != nil:
		// Not reached: the configuration was checked at start.
	case p == search.Wikipedia && len(cfg.Configured()) == 1:
		log.Info("search uses Wikipedia", "provider", p, "url", cfg.WikipediaURL,
			"why", "no web search provider is configured: the search tool searches Wikipedia's articles (no key needed); set SEARXNG_URL, TAVILY_API_KEY, BRAVE_API_KEY or SERPER_API_KEY to search the web")
	default:
		log.Info("search", "provider", p)
	}
}
