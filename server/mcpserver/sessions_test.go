package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
	"github.com/agentdock-go/agentdock/server/mcpserver"
)

// rpcAnswer is one HTTP answer of /mcp.
type rpcAnswer struct {
	status  int
	header  http.Header
	body    string
	session string
}

// post sends one JSON-RPC body to /mcp.
func post(t testing.TB, url, key, sessionID, version, body string) rpcAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	if version >= "2026-07-28" {
		var m struct{ Method string }
		_ = json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return rpcAnswer{status: res.StatusCode, header: res.Header, body: string(b), session: res.Header.Get("Mcp-Session-Id")}
}

const initialize = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// rpcError decodes a JSON-RPC error answer, failing the test when the
// answer is not one.
func rpcError(t testing.TB, a rpcAnswer) (id any, code int, msg string) {
	t.Helper()
	var v struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(a.body), &v) != nil || v.JSONRPC != "2.0" || v.Error == nil {
		t.Fatalf("%d %s %q: not a JSON-RPC error", a.status, a.header.Get("Content-Type"), a.body)
	}
	return v.ID, v.Error.Code, v.Error.Message
}

// Sessions are capped per key and in total: an initialize past a cap is a
// JSON-RPC error naming the setting, the key's place comes back when it
// ends a session, and another key keeps its own places up to the total.
func TestSessionCaps(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Keys: []string{"key-one", "key-two", "key-three"},
		Doors: []door.Door{mcpserver.New(mcpserver.Config{SessionsPerOwner: 3, MaxSessions: 5})}})
	var ones []string
	for range 3 {
		a := post(t, s.URL, "key-one", "", "", initialize)
		if a.status != http.StatusOK || a.session == "" {
			t.Fatalf("initialize: %d %q", a.status, a.body)
		}
		ones = append(ones, a.session)
	}
	a := post(t, s.URL, "key-one", "", "", initialize)
	id, code, msg := rpcError(t, a)
	if a.status != http.StatusTooManyRequests || id != float64(7) || code != -32002 || !strings.Contains(msg, "MCP_SESSIONS_PER_OWNER") {
		t.Fatalf("the 4th session of a key: %d %v %d %q", a.status, id, code, msg)
	}
	for range 2 {
		if a := post(t, s.URL, "key-two", "", "", initialize); a.status != http.StatusOK {
			t.Fatalf("another key: %d %q", a.status, a.body)
		}
	}
	a = post(t, s.URL, "key-three", "", "", initialize)
	if _, _, msg := rpcError(t, a); a.status != http.StatusServiceUnavailable || !strings.Contains(msg, "MCP_MAX_SESSIONS") {
		t.Fatalf("past the total: %d %q", a.status, msg)
	}

	// Ending a session gives its place back.
	req, _ := http.NewRequest(http.MethodDelete, s.URL+"/mcp", nil)
	req.Header.Set("x-api-key", "key-one")
	req.Header.Set("Mcp-Session-Id", ones[0])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", res.StatusCode)
	}
	if a := post(t, s.URL, "key-three", "", "", initialize); a.status != http.StatusOK {
		t.Fatalf("after a DELETE: %d %q", a.status, a.body)
	}
	// The ended session is gone, as a JSON-RPC error.
	a = post(t, s.URL, "key-one", ones[0], "2025-11-25", `{"jsonrpc":"2.0","id":"x","method":"tools/list"}`)
	if _, code, _ := rpcError(t, a); a.status != http.StatusNotFound || code != -32001 {
		t.Fatalf("an ended session: %d %d", a.status, code)
	}
	// Another key's session is not found either.
	a = post(t, s.URL, "key-two", ones[1], "2025-11-25", `{"jsonrpc":"2.0","id":"x","method":"tools/list"}`)
	if _, code, _ := rpcError(t, a); a.status != http.StatusNotFound || code != -32001 {
		t.Fatalf("another key's session: %d %d", a.status, code)
	}
}

// A session idle past SessionIdle is closed, and its place comes back.
func TestIdleSessionsEnd(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{SessionsPerOwner: 1, SessionIdle: 100 * time.Millisecond})}})
	first := post(t, s.URL, "", "", "", initialize)
	if first.status != http.StatusOK {
		t.Fatalf("initialize: %d %q", first.status, first.body)
	}
	if a := post(t, s.URL, "", "", "", initialize); a.status != http.StatusTooManyRequests {
		t.Fatalf("the address's second session: %d %q", a.status, a.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(150 * time.Millisecond)
		a := post(t, s.URL, "", "", "", initialize)
		if a.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the idle session still holds the place: %d %q", a.status, a.body)
		}
	}
	a := post(t, s.URL, "", first.session, "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if _, code, _ := rpcError(t, a); a.status != http.StatusNotFound || code != -32001 {
		t.Fatalf("the idle session: %d %q", a.status, a.body)
	}
}

// The SDK's protocol errors come back as JSON-RPC errors, with the
// request's ID when it could be read, not as plain text.
func TestProtocolErrorsAreJSONRPC(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	sess := post(t, s.URL, "", "", "", initialize).session
	for _, tc := range []struct {
		name, session, version, body string
		status, code                 int
	}{
		{"malformed JSON in a session", sess, "2025-11-25", `{"jsonrpc":`, http.StatusBadRequest, -32700},
		{"an unknown protocol version", "", "1999-01-01", initialize, http.StatusBadRequest, -32600},
		{"an unknown session", "no-such-session", "2025-11-25", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, http.StatusNotFound, -32001},
	} {
		a := post(t, s.URL, "", tc.session, tc.version, tc.body)
		_, code, msg := rpcError(t, a)
		if a.status != tc.status || code != tc.code || msg == "" {
			t.Errorf("%s: %d %d %q; want %d %d", tc.name, a.status, code, msg, tc.status, tc.code)
		}
	}
	// A GET without the SSE Accept is refused as JSON too.
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sess)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	rpcError(t, rpcAnswer{status: res.StatusCode, header: res.Header, body: string(b)})
}

// Without a session (2026-07-28), tools/list is answered from the one
// server every request shares.
func TestSessionlessToolsList(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	for range 3 {
		a := post(t, s.URL, "", "", "2026-07-28", toolsList)
		if a.status != http.StatusOK || !strings.Contains(a.body, `"name":"explorer"`) || a.session != "" {
			t.Fatalf("tools/list: %d %q %q", a.status, a.session, a.body)
		}
	}
}

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`

// BenchmarkToolsList compares a sessionless tools/list with GET
// /api/agents, over loopback HTTP, side by side: b.ReportMetric gives
// each one's time per request.
func BenchmarkToolsList(b *testing.B) {
	s := edgetest.Start(b, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	b.Run("mcp-tools-list", func(b *testing.B) {
		for b.Loop() {
			if a := post(b, s.URL, "", "", "2026-07-28", toolsList); a.status != http.StatusOK {
				b.Fatal(a.status, a.body)
			}
		}
	})
	b.Run("api-agents", func(b *testing.B) {
		for b.Loop() {
			res, err := http.Get(s.URL + "/api/agents")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
}

// A plain sessionless tools/list is answered from the list rendered once;
// its answer is the SDK's own, which a request the edge leaves to the SDK
// (here, one whose client declares a capability) gets.
func TestRenderedToolsListIsTheSDKs(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	sdk := post(t, s.URL, "", "", "2026-07-28", strings.Replace(toolsList, `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":{"roots":{}}`, 1))
	for _, id := range []string{`1`, `"call-é"`, `-42`} {
		rendered := post(t, s.URL, "", "", "2026-07-28", strings.Replace(toolsList, `"id":1`, `"id":`+id, 1))
		want := strings.Replace(sdk.body, `"id":1`, `"id":`+id, 1)
		if rendered.status != http.StatusOK || rendered.body != want || rendered.header.Get("Content-Type") != sdk.header.Get("Content-Type") {
			t.Errorf("id %s: %d %s %q\nwant the SDK's %s %q", id, rendered.status, rendered.header.Get("Content-Type"), rendered.body, sdk.header.Get("Content-Type"), want)
		}
	}
	// Requests the SDK must judge still get its answers.
	for _, tc := range []struct{ name, body, want string }{
		{"no client capabilities", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}}}`, `"code":-32602`},
		{"a cursor", strings.Replace(toolsList, `"params":{`, `"params":{"cursor":"bogus",`, 1), `"error"`},
		{"a notification", strings.Replace(toolsList, `"id":1,`, ``, 1), ``},
	} {
		a := post(t, s.URL, "", "", "2026-07-28", tc.body)
		if !strings.Contains(a.body, tc.want) || strings.Contains(a.body, `"tools":[`) {
			t.Errorf("%s: %d %q; want the SDK's answer with %s", tc.name, a.status, a.body, tc.want)
		}
	}
}
