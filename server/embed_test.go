package server

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
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
	agents, err := agent.NewSet(agent.Config{
		Store: store, Tools: reg, Logger: slog.New(slog.DiscardHandler),
		Models: func(*template.Template) (llmorch.Model, error) { return callsOnce{tool: "whoami"}, nil },
	}, []*template.Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Agents: agents, Logger: slog.New(slog.DiscardHandler),
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
