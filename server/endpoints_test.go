package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/turns"
)

func TestInfoEndpoints(t *testing.T) {
	page := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>agentdock</title>")}}
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.WebFS = page }})

	getJSON(t, e.do(http.MethodGet, "/healthz", ""), http.StatusOK, nil)
	getJSON(t, e.do(http.MethodGet, "/readyz", ""), http.StatusOK, nil)

	var list struct{ Agents []agentSummary }
	getJSON(t, e.do(http.MethodGet, "/api/agents", ""), http.StatusOK, &list)
	if len(list.Agents) != 3 || list.Agents[0].ID != "explorer" || list.Agents[1].ID != "plain" || list.Agents[2].ID != "approver" {
		t.Fatalf("agents %+v", list.Agents)
	}
	ex := list.Agents[0]
	if !ex.Offline || ex.Model.Provider != "offline" || !ex.HasOrchestration || ex.ChatPrompts[0] != "Explore options for a team offsite" ||
		ex.InitialMessages[0] != "What shall we explore?" || !slices.Equal(ex.Tags, []string{"test", "planning"}) {
		t.Fatalf("explorer %+v", ex)
	}

	var d agentDetail
	getJSON(t, e.do(http.MethodGet, "/api/agents/explorer", ""), http.StatusOK, &d)
	o := d.Orchestration
	if o == nil || len(o.Steps) != 2 || o.StepScope != "session" {
		t.Fatalf("orchestration %+v", o)
	}
	explore := o.Steps[0]
	if explore.Name != "Explore" || len(explore.Sequence) != 2 || explore.Sequence[0][0] != "brainstorm" ||
		explore.Conditions[0].Type != "message_regex" || !o.Steps[1].IsDefault || !slices.Equal(explore.Tools, []string{"brainstorm", "compare"}) {
		t.Fatalf("steps %+v", o.Steps)
	}
	var plain agentDetail
	getJSON(t, e.do(http.MethodGet, "/api/agents/plain", ""), http.StatusOK, &plain)
	if plain.Orchestration != nil {
		t.Fatalf("plain has orchestration %+v", plain.Orchestration)
	}
	var eb errBodyT
	getJSON(t, e.do(http.MethodGet, "/api/agents/nobody", ""), http.StatusNotFound, &eb)
	if eb.Error.Code != "agent_not_found" {
		t.Fatalf("%+v", eb.Error)
	}

	// Sessions: 400 for a bad ID, 404 unknown, then a real one deleted.
	getJSON(t, e.do(http.MethodGet, "/api/sessions/bad!", ""), http.StatusBadRequest, &eb)
	getJSON(t, e.do(http.MethodGet, "/api/sessions/unknown-session", ""), http.StatusNotFound, &eb)
	if eb.Error.Code != "session_not_found" {
		t.Fatalf("%+v", eb.Error)
	}
	e.streamChat("plain", `{"message":"hi","sessionId":"to-be-deleted"}`)
	var sv sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/to-be-deleted?limit=1", ""), http.StatusOK, &sv)
	if len(sv.Messages) != 1 || sv.Messages[0].Role != "assistant" {
		t.Fatalf("limit=1 gave %+v", sv.Messages)
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions/to-be-deleted?limit=x", ""), http.StatusBadRequest, &eb)
	res := e.do(http.MethodDelete, "/api/sessions/to-be-deleted", "")
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", res.StatusCode)
	}
	getJSON(t, e.do(http.MethodGet, "/api/sessions/to-be-deleted", ""), http.StatusNotFound, &eb)
	getJSON(t, e.do(http.MethodDelete, "/api/sessions/to-be-deleted", ""), http.StatusNotFound, &eb)

	// Routing: unknown API paths and methods are JSON errors; the page is at /.
	getJSON(t, e.do(http.MethodGet, "/api/nothing", ""), http.StatusNotFound, &eb)
	getJSON(t, e.do(http.MethodPut, "/api/agents", ""), http.StatusMethodNotAllowed, &eb)
	res = e.do(http.MethodGet, "/", "")
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("<title>agentdock</title>")) {
		t.Fatalf("page: %d %s", res.StatusCode, body)
	}
}

func TestDeleteRunningSessionConflicts(t *testing.T) {
	e := newEnv(t, envOptions{delay: slowWord})
	res := e.do(http.MethodPost, "/api/chat/plain", `{"message":"tell me a story","sessionId":"busy-delete"}`)
	defer res.Body.Close()
	newSSEReader(res.Body).next()
	var eb errBodyT
	getJSON(t, e.do(http.MethodDelete, "/api/sessions/busy-delete", ""), http.StatusConflict, &eb)
	if eb.Error.Code != "session_busy" {
		t.Fatalf("%+v", eb.Error)
	}
	// A second turn on the running session is refused as well, when it
	// asks for busy reject.
	getJSON(t, e.do(http.MethodPost, "/api/chat/plain", `{"message":"again","sessionId":"busy-delete"}`, "X-Busy", "reject"), http.StatusConflict, &eb)
	if eb.Error.Code != "session_busy" {
		t.Fatalf("%+v", eb.Error)
	}
}

// TestTurnStopsAtTheEventBudget: a turn whose stream reaches
// MaxTurnEvents frames is stopped there (a maxTurnEvents limit, finish
// "length"), its stream and its turn end together, every frame stays
// readable from the start, and the session takes the next turn at once.
func TestTurnStopsAtTheEventBudget(t *testing.T) {
	e := newEnv(t, envOptions{rt: func(c *turns.Config) { c.MaxEvents = 16 }})
	res, evs := e.streamChat("explorer", exploreFor("gap-session-1"))
	turnID := res.Header.Get("X-Turn-Id")
	n := len(evs)
	if n < 17 || evs[n-1].Data != "[DONE]" || !strings.Contains(evs[n-2].Data, `"finishReason":"length"`) || !strings.Contains(evs[n-3].Data, `"maxTurnEvents"`) {
		t.Fatalf("the live stream ends %v", evs[max(n-3, 0):])
	}
	// The session is free as soon as the client saw the finish.
	res2, _ := e.streamChat("explorer", exploreFor("gap-session-1"))
	if res2.StatusCode != http.StatusOK {
		t.Fatalf("next turn: %d", res2.StatusCode)
	}
	// The whole first turn can still be read from its first frame.
	res3 := e.do(http.MethodGet, "/api/sessions/gap-session-1/stream", "", "Last-Event-ID", wire.EventID(turnID, 0))
	all := newSSEReader(res3.Body).all()
	res3.Body.Close()
	if len(all) != n || all[0].ID != wire.EventID(turnID, 1) {
		t.Fatalf("resumed %d frames from %q, want all %d", len(all), all[0].ID, n)
	}
}

// TestOpenAPIDocument: the served document is docs/openapi.json, and it
// describes exactly the routes the server has.
func TestOpenAPIDocument(t *testing.T) {
	e := newEnv(t, envOptions{})
	res := e.do(http.MethodGet, "/openapi.json", "")
	served, _ := io.ReadAll(res.Body)
	res.Body.Close()
	onDisk, err := os.ReadFile("../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served, onDisk) {
		t.Fatal("docs/openapi.json differs from server/openapi.json: copy server/openapi.json to docs/")
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(served, &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{(\w+)\}`)
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" {
				continue
			}
			documented[strings.ToUpper(m)+" "+param.ReplaceAllString(p, ":$1")] = true
		}
	}
	for _, r := range e.srv.engine.Routes() {
		key := r.Method + " " + r.Path
		if !documented[key] {
			t.Errorf("route %s is not in the OpenAPI document", key)
		}
		delete(documented, key)
	}
	for k := range documented {
		t.Errorf("the OpenAPI document has %s, which the server does not serve", k)
	}
}
