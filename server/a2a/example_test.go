package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing/fstest"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/turns"
)

// An agent served over A2A beside the API, sent a message over JSON-RPC.
func ExampleNew() {
	agents, _, err := agent.LoadFS(context.Background(), fstest.MapFS{"echo.json": {Data: []byte(`{"agentId": "echo", "name": "Echo", "description": "Says it back.", "nodes": ["llm.openai"]}`)}}, "echo.json", agent.Options{})
	if err != nil {
		log.Fatal(err)
	}
	edge, err := a2a.New(a2a.Config{})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := turns.New(turns.Config{Agents: agents})
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Runtime: rt, Logger: slog.New(slog.DiscardHandler), Doors: []door.Door{edge}})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	res, err := http.Post(hs.URL+"/a2a/echo", "application/json", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
		"params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "[offline:echo] hello over A2A"}]}}}`))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Result struct{ Task a2a.Task } `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Result.Task.Status.State)
	fmt.Println(*out.Result.Task.Artifacts[0].Parts[0].Text)
	// Output:
	// TASK_STATE_COMPLETED
	// hello over A2A
}
