package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// Example runs the program's handler on a loopback port: the agents answer
// under /agents/ for a signed-in user only, the tool knows who asked, and
// one user's session is not another's.
func Example() {
	srv, err := newAgentServer()
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(context.Background())
	hs := httptest.NewServer(routes(srv, map[string]string{"ada": "lovelace", "alan": "turing"}))
	defer hs.Close()

	ask := func(user, password, method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		return res
	}

	res := ask("", "", "GET", "/agents/api/agents", "")
	fmt.Println("without signing in:", res.Status)
	res.Body.Close()

	res = ask("ada", "lovelace", "POST", "/agents/api/chat/concierge", `{"message": "Which user is signed in?", "sessionId": "ada-session"}`)
	for sc := bufio.NewScanner(res.Body); sc.Scan(); {
		var chunk struct {
			Type   string
			Output struct{ Content string }
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &chunk) == nil && chunk.Type == "tool-output-available" {
			fmt.Println("ada's turn, the tool said:", chunk.Output.Content)
		}
	}
	res.Body.Close()

	res = ask("alan", "turing", "GET", "/agents/api/sessions/ada-session", "")
	fmt.Println("alan reads ada's session:", res.Status)
	res.Body.Close()
	// Output:
	// without signing in: 401 Unauthorized
	// ada's turn, the tool said: You are signed in as ada.
	// alan reads ada's session: 404 Not Found
}
