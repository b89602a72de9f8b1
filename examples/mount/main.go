// Command mount embeds agentdock in a program's own HTTP server: the chat
// page and API under /agents/, behind the program's own authentication
// (HTTP Basic here), next to routes of its own. Each user has sessions of
// their own, and the agent's tool learns who is asking from the request.
//
//	go run ./examples/mount -users ada:lovelace,alan:turing
//
// then open http://localhost:8080/agents/ and sign in as ada.
package main

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/agentdock-go/agentdock/web"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	users := flag.String("users", "", "who may sign in: name:password,...")
	flag.Parse()
	passwords, err := parseUsers(*users)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := newAgentServer()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Addr: *addr, Handler: routes(srv, passwords)}
	hs.RegisterOnShutdown(func() { srv.Shutdown(context.Background()) })
	go func() {
		<-ctx.Done()
		hs.Shutdown(context.Background())
	}()
	log.Printf("serving the agents at http://%s/agents/", *addr)
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

//go:embed concierge.json
var templates embed.FS

// routes is the program's own mux: a public home page and health check,
// and the agents under /agents/ for signed-in users.
func routes(srv *server.Server, passwords map[string]string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Example</title><p>Our agents are at <a href="agents/">agents/</a>.`)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/agents/", signedIn(passwords, http.StripPrefix("/agents", srv.Handler())))
	return mux
}

// newAgentServer builds one agent, the concierge, whose tool greets the
// signed-in user by name.
func newAgentServer() (*server.Server, error) {
	currentUser := tools.MustNew("current_user", "Names the user who is signed in.", func(ctx context.Context, _ struct{}) (string, error) {
		return "You are signed in as " + userFrom(ctx) + ".", nil
	})
	agents, warnings, err := agent.LoadFS(context.Background(), templates, "concierge.json", agent.Options{
		Tools:  []tools.Tool{currentUser},
		Models: agent.Model(offline.New(offline.Config{Delay: offline.DefaultDelay})),
	})
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Print(w)
	}
	rt, err := turns.New(turns.Config{Agents: agents})
	if err != nil {
		return nil, err
	}
	return server.New(server.Config{
		Runtime: rt,
		WebFS:   web.FS(),
		// Each user's sessions are their own: another user's session ID
		// names another session.
		Owner: func(r *http.Request) (string, error) { return userFrom(r.Context()), nil },
	})
}

type userKey struct{}

func userFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// signedIn asks for HTTP Basic credentials and puts the user in the
// request's context, where the server's Owner hook and the tools read it.
func signedIn(passwords map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, password, ok := r.BasicAuth()
		want, known := passwords[name]
		if !ok || !known || subtle.ConstantTimeCompare([]byte(password), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="agents", charset="UTF-8"`)
			http.Error(w, "sign in to talk to the agents", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, name)))
	})
}

func parseUsers(s string) (map[string]string, error) {
	users := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		name, password, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || name == "" || password == "" {
			return nil, fmt.Errorf("-users: want name:password,..., got %q", pair)
		}
		users[name] = password
	}
	return users, nil
}
