package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/tools/search"
	"github.com/agentdock-go/agentdock/tools/search/searchtest"
)

// wikipedia is the fake Wikipedia that every test of the package searches
// (WIKIPEDIA_URL, kept by clearConfigEnv too), so that no test reaches the
// network whatever the machine's environment says.
var wikipedia *searchtest.Wikipedia

func TestMain(m *testing.M) {
	wikipedia = searchtest.NewWikipedia()
	os.Setenv("WIKIPEDIA_URL", wikipedia.URL)
	code := m.Run()
	wikipedia.Close()
	os.Exit(code)
}

// serveForTest runs serve with the environment as the test set it, until
// the test ends; it returns the base URL and the log.
func serveForTest(t *testing.T) (string, *syncBuffer) {
	t.Helper()
	addr := freeAddr(t)
	t.Setenv("ADDR", addr)
	cfg, err := loadServeConfig(nil, testConfigEnv(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, cfg, nil, slog.New(slog.NewTextHandler(logs, nil))) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + addr
	waitHealthy(t, base, func() error {
		select {
		case err := <-served:
			served <- err
			return fmt.Errorf("serve returned %v", err)
		default:
			return nil
		}
	})
	return base, logs
}

// chatTurn sends message to agent and returns the session's messages
// once the turn ended.
func chatTurn(t *testing.T, base, agent, message string) []struct {
	Role, Content string
	IsError       bool
} {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"message": message})
	res, err := http.Post(base+"/api/chat/"+agent, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(stream), "[DONE]") {
		t.Fatalf("chat answered %d:\n%s", res.StatusCode, stream)
	}
	g, err := http.Get(base + "/api/sessions/" + res.Header.Get("X-Session-Id"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Body.Close()
	var view struct {
		Messages []struct {
			Role, Content string
			IsError       bool
		}
	}
	if err := json.NewDecoder(g.Body).Decode(&view); err != nil {
		t.Fatal(err)
	}
	return view.Messages
}

// TestSearchDefaultsToWikipedia: with no search provider configured, the
// start-up log says that search uses Wikipedia, and the offline Research
// Assistant's quick answer holds what Wikipedia (a fake of its Action API)
// found; without Wikipedia, the search's error says it could not be
// reached, and the answer goes on.
func TestSearchDefaultsToWikipedia(t *testing.T) {
	clearConfigEnv(t)
	base, logs := serveForTest(t)
	if !strings.Contains(logs.String(), `msg="search uses Wikipedia" provider=wikipedia url=`+wikipedia.URL) {
		t.Errorf("the start-up log does not say that search uses Wikipedia:\n%s", logs)
	}
	before := len(wikipedia.Requests())
	msgs := chatTurn(t, base, "research-assistant", "quick: when was the first transatlantic telegraph cable laid?")
	reqs := wikipedia.Requests()
	if len(reqs) != before+1 || reqs[len(reqs)-1].UserAgent != search.WikipediaUserAgent {
		t.Fatalf("Wikipedia got %v", reqs[before:])
	}
	var result, answer string
	for _, m := range msgs {
		switch m.Role {
		case "tool":
			result = m.Content
		case "assistant":
			answer = m.Content
		}
	}
	if !strings.HasPrefix(result, "## Search results from Wikipedia: ") || !strings.Contains(result, "[Transatlantic telegraph cable]("+wikipedia.URL+"/wiki/Transatlantic_telegraph_cable)") {
		t.Fatalf("the search's result:\n%s", result)
	}
	for _, want := range []string{"Transatlantic telegraph cable", "The first transatlantic telegraph cable was laid in 1858"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer lacks %q:\n%s", want, answer)
		}
	}

	t.Run("unreachable", func(t *testing.T) {
		clearConfigEnv(t)
		t.Setenv("WIKIPEDIA_URL", "http://"+freeAddr(t))
		base, _ := serveForTest(t)
		msgs := chatTurn(t, base, "research-assistant", "quick: when was the first transatlantic telegraph cable laid?")
		var failed bool
		for _, m := range msgs {
			if m.Role == "tool" {
				failed = m.IsError && strings.Contains(m.Content, "Wikipedia could not be reached")
			}
		}
		if !failed || msgs[len(msgs)-1].Role != "assistant" {
			t.Fatalf("the session: %+v", msgs)
		}
	})
}
