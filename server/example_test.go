package server_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/turns"
)

// The API alone, under /chat/ in a mux of one's own, with one's own
// authentication as the Owner hook: each team's sessions are its own.
// Handler mounts the same way and adds the page, health checks and metrics.
func ExampleServer_APIHandler() {
	helper := fstest.MapFS{"helper.json": {Data: []byte(`{"agentId": "helper", "name": "Helper", "nodes": ["llm.openai"]}`)}}
	agents, _, err := agent.LoadFS(context.Background(), helper, "helper.json", agent.Options{})
	if err != nil {
		panic(err)
	}
	rt, err := turns.New(turns.Config{Agents: agents})
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Runtime: rt, Owner: func(r *http.Request) (string, error) {
		if team := r.Header.Get("X-Team"); team != "" {
			return team, nil
		}
		return "", errors.New("send X-Team")
	}})
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())

	mux := http.NewServeMux()
	mux.Handle("/chat/", http.StripPrefix("/chat", srv.APIHandler()))
	hs := httptest.NewServer(mux)
	defer hs.Close()

	for _, path := range []string{"/chat/api/agents", "/chat/healthz"} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		req.Header.Set("X-Team", "blue")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Println(path, res.Status, strings.TrimSpace(string(body)))
	}
	// Output:
	// /chat/api/agents 200 OK {"agents":[{"id":"helper","name":"Helper","description":"","tags":[],"chatPrompts":[],"initialMessages":[],"model":{"provider":"offline","model":"offline-scripted"},"offline":true,"hasOrchestration":false}]}
	// /chat/healthz 404 Not Found {"error":{"code":"not_found","message":"no endpoint GET /chat/healthz"}}
}

// The API's OpenAPI document, the one the server serves at /openapi.json,
// for a gateway or a client generator of one's own.
func ExampleOpenAPI() {
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Title string `json:"title"`
		} `json:"info"`
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(server.OpenAPI(), &doc); err != nil {
		panic(err)
	}
	_, chat := doc.Paths["/api/chat/{agentId}"]
	fmt.Println(doc.OpenAPI, doc.Info.Title, chat)
	// Output:
	// 3.1.0 agentdock HTTP API true
}

// A webhook receiver checks a background run's call: it signs the call's
// webhook-id, webhook-timestamp and body with WEBHOOK_SECRET as the server
// did, and compares the result with the webhook-signature header in
// constant time (hmac.Equal).
func ExampleSignWebhook() {
	key := []byte("the deployment's WEBHOOK_SECRET")
	id, ts := "msg_2f6c0e1a", int64(1767225600)
	body := []byte(`{"type":"turn.completed","data":{"status":"completed"}}`)
	received := "v1,6kP83VdpHdrZEgsblrMS7RHnfkRugMUAsI6xtWJ7/zA=" // the webhook-signature header
	fmt.Println(server.SignWebhook(key, id, ts, body))
	fmt.Println(hmac.Equal([]byte(received), []byte(server.SignWebhook(key, id, ts, body))))
	// Output:
	// v1,6kP83VdpHdrZEgsblrMS7RHnfkRugMUAsI6xtWJ7/zA=
	// true
}
