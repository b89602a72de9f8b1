package mcpserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/agentdock-go/agentdock/session"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headers adds headers to every request.
type headers map[string]string

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A call sent again with the same idempotency key, as the Idempotency-Key
// header over HTTP or in _meta, gets the first call's answer and turn;
// the model answers once per key. A bad key is an argument error.
func TestCallSentAgain(t *testing.T) {
	mock, model := scriptedModel(t)
	mock.Enqueue(mockllm.TextScript("once."), mockllm.TextScript("twice."))
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}, Model: model})
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headers{"Idempotency-Key": "call-1"}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sid := session.NewID()
	call := func(cs *mcp.ClientSession, meta mcp.Meta) (string, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plain", Meta: meta, Arguments: map[string]any{"message": "hello", "sessionId": sid}})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := res.StructuredContent.(map[string]any)
		return text(res), out
	}
	first, out1 := call(cs, nil)
	again, out2 := call(cs, nil)
	if first != "once." || again != first || out1["turnId"] == "" || out2["turnId"] != out1["turnId"] {
		t.Fatalf("the header's retry: %q %v, then %q %v", first, out1, again, out2)
	}
	// _meta's key wins over the header's.
	if third, out3 := call(cs, mcp.Meta{mcpserver.MetaIdempotencyKey: "call-2"}); third != "twice." || out3["turnId"] == out1["turnId"] {
		t.Fatalf("a new key in _meta: %q %v", third, out3)
	}
	if n := len(mock.Requests()); n != 2 {
		t.Fatalf("%d model calls, want 2", n)
	}
	if got, _ := call(cs, mcp.Meta{mcpserver.MetaIdempotencyKey: strings.Repeat("k", 300)}); !strings.Contains(got, "idempotency key") {
		t.Fatalf("a key of 300 bytes: %q", got)
	}
}
