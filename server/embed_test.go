package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/turns"
)

// callsOnce is a model that calls one tool, then answers with its result.
type callsOnce struct{ tool string }

func (m callsOnce) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "calls-once"} }

func (m callsOnce) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == chat.RoleTool {
			yield(chat.Event{Kind: chat.KindTextDelta, Text: "The tool said: " + last.Content}, nil)
			return
		}
		yield(chat.Event{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "call-1", Name: m.tool, Arguments: json.RawMessage(`{}`)}}, nil)
	}
}

type userKey struct{}

// TestToolSeesSessionAndMiddlewareValues: through the real handlers, a
// typed tool reads the session, agent, owner and call from tools.CallFrom,
// and a value the embedder's HTTP middleware put in the request's context:
// the turn's context keeps the request's values (not its cancellation).
func TestToolSeesSessionAndMiddlewareValues(t *testing.T) {
	whoami := tools.MustNew("whoami", "Says who is asking.", func(ctx context.Context, _ struct{}) (string, error) {
		c, _ := tools.CallFrom(ctx)
		user, _ := ctx.Value(userKey{}).(string)
		return fmt.Sprintf("session=%s agent=%s owner=%s call=%s user=%s", c.SessionID, c.AgentID, c.Owner, c.ToolCallID, user), nil
	})
	reg, err := tools.NewRegistry(whoami)
	if err != nil {
		t.Fatal(err)
	}
	a, ds := template.Load("who.json", []byte(`{"agentId": "who", "name": "Who", "nodes": ["llm.openai", "whoami"]}`), template.Config{Provided: reg.Names()})
	if a == nil {
		t.Fatal(ds.Err())
	}
	store := session.NewMemory(session.Config{})
	agents, err := agent.NewSet(agent.Options{
		Store: store, ToolsFor: func(*template.Loaded) tools.Toolbox { return reg }, Logger: slog.New(slog.DiscardHandler),
		Models: func(*template.Template) (llmorch.Model, error) { return callsOnce{tool: "whoami"}, nil },
	}, []*template.Loaded{a})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := turns.New(turns.Config{Agents: agents, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Runtime: rt, Logger: slog.New(slog.DiscardHandler),
		Owner: func(r *http.Request) (string, error) { return "team-" + r.Header.Get("X-Team"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	// The embedder's own authentication, as middleware around the handler.
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, r.Header.Get("X-User"))))
		})
	}
	hs := httptest.NewServer(auth(srv.Handler()))
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/api/chat/who", strings.NewReader(`{"message":"who am I?","sessionId":"embed-session-1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "ada")
	req.Header.Set("X-Team", "blue")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out string
	for _, ev := range newSSEReader(res.Body).all() {
		if strings.Contains(ev.Data, `"tool-output-available"`) {
			out = ev.Data
		}
	}
	for _, want := range []string{"session=embed-session-1", "agent=who", "owner=team-blue", "call=call-1", "user=ada"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the tool's output %s lacks %q", out, want)
		}
	}
}

// TestMountedUnderPrefix: in an embedder's own mux, Handler serves the page
// and the API under a prefix, and APIHandler serves the API alone.
func TestMountedUnderPrefix(t *testing.T) {
	page := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>agentdock</title>")}}
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.WebFS = page }})
	mux := http.NewServeMux()
	mux.Handle("/agents/", http.StripPrefix("/agents", e.srv.Handler()))
	mux.Handle("/chat-api/", http.StripPrefix("/chat-api", e.srv.APIHandler()))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	e.base = hs.URL

	for _, tt := range []struct {
		path   string
		status int
		has    string
	}{
		{"/agents/", http.StatusOK, "<title>agentdock</title>"},
		{"/agents/healthz", http.StatusOK, `"ok"`},
		{"/agents/api/agents", http.StatusOK, `"explorer"`},
		{"/agents/api/nothing", http.StatusNotFound, `"not_found"`},
		{"/chat-api/api/agents", http.StatusOK, `"explorer"`},
		{"/chat-api/v1/models", http.StatusOK, `"plain"`},
		{"/chat-api/", http.StatusNotFound, `"not_found"`},
		{"/chat-api/healthz", http.StatusNotFound, `"not_found"`},
		{"/chat-api/openapi.json", http.StatusNotFound, `"not_found"`},
	} {
		res := e.do(http.MethodGet, tt.path, "")
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tt.status || !strings.Contains(string(body), tt.has) {
			t.Errorf("GET %s: %d %s, want %d with %s", tt.path, res.StatusCode, body, tt.status, tt.has)
		}
	}
	// A whole turn under each prefix, then its replay from the session's
	// stream.
	for _, prefix := range []string{"/agents", "/chat-api"} {
		e.base = hs.URL + prefix
		sid := "mounted" + strings.ReplaceAll(prefix, "/", "-")
		res, events := e.streamChat("plain", `{"message":"hi","sessionId":"`+sid+`"}`)
		turnID := res.Header.Get("X-Turn-Id")
		_, _, text := checkTurnStream(t, turnID, events, 1)
		if text == "" {
			t.Fatalf("%s: the turn streamed no text", prefix)
		}
		replay := e.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", wire.EventID(turnID, 1))
		again := newSSEReader(replay.Body).all()
		replay.Body.Close()
		if len(again) != len(events)-1 {
			t.Fatalf("%s: the replay after frame 1 has %d frames, want %d", prefix, len(again), len(events)-1)
		}
	}
}
