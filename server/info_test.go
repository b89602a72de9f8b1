package server

import (
	"net/http"
	"slices"
	"testing"
)

// TestNotProvidedToolsListedApart: /api/agents/:id lists the tools the
// agent can use apart from the nodes naming a tool nobody provides.
func TestNotProvidedToolsListedApart(t *testing.T) {
	e := newEnv(t, envOptions{templates: "testdata/unprovided"})
	var d agentDetail
	getJSON(t, e.do(http.MethodGet, "/api/agents/lookup", ""), http.StatusOK, &d)
	if !slices.Equal(d.Tools, []string{"think", "compare"}) || !slices.Equal(d.NotProvided, []string{"pubmed_search"}) {
		t.Fatalf("tools %q, notProvided %q; want think and compare, and pubmed_search apart", d.Tools, d.NotProvided)
	}
	var raw map[string]any
	getJSON(t, e.do(http.MethodGet, "/api/agents/lookup", ""), http.StatusOK, &raw)
	if _, ok := raw["notProvided"].([]any); !ok {
		t.Fatalf("notProvided is not a list: %v", raw["notProvided"])
	}
}
