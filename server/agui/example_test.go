package agui_test

import (
	"bufio"
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
	"github.com/agentdock-go/agentdock/server/agui"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/turns"
)

// An agent served over AG-UI beside the API: one run, its events' types.
func ExampleNew() {
	agents, _, err := agent.LoadFS(context.Background(), fstest.MapFS{"echo.json": {Data: []byte(`{"agentId": "echo", "name": "Echo", "description": "Says it back.", "nodes": ["llm.openai"]}`)}}, "echo.json", agent.Options{})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := turns.New(turns.Config{Agents: agents})
	if err != nil {
		panic(err)
	}
	srv, err := server.New(server.Config{Runtime: rt, Logger: slog.New(slog.DiscardHandler), Doors: []door.Door{agui.New()}})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Shutdown(context.Background())

	res, err := http.Post(hs.URL+"/api/agui/echo", "application/json", strings.NewReader(`{"threadId": "thread-0001", "runId": "run-1",
		"messages": [{"id": "u1", "role": "user", "content": "[offline:echo] hello"}], "tools": [], "context": [], "state": {}}`))
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev struct{ Type, Delta string }
			json.Unmarshal([]byte(data), &ev)
			fmt.Println(strings.TrimSpace(ev.Type + " " + ev.Delta))
		}
	}
	// Output:
	// RUN_STARTED
	// STATE_SNAPSHOT
	// STEP_STARTED
	// TEXT_MESSAGE_START
	// TEXT_MESSAGE_CONTENT hello
	// TEXT_MESSAGE_END
	// STEP_FINISHED
	// RUN_FINISHED
}
