package mcpserver_test

import (
	"encoding/json"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGuardrailCard: a card number the model streams in four chunks never
// reaches an MCP client calling the agent as a tool, and the text around
// it does.
func TestGuardrailCard(t *testing.T) {
	s, mock := edgetest.StartGuarded(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	mock.Enqueue(mockllm.Script{Text: edgetest.CardChunks})
	cs := connect(t, s.URL, "", "2025-11-25", nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "guarded", Arguments: map[string]any{"message": "what card do I have?"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if edgetest.HasCardDigits(string(b)) {
		t.Fatalf("the result holds the card's digits: %s", b)
	}
	if res.IsError || text(res) != edgetest.CardAnswer {
		t.Fatalf("result %v %q", res.IsError, text(res))
	}
}
