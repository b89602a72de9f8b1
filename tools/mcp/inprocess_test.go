package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/chat"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// TestInProcess: a server of the official SDK in this process is listed,
// offered and called like a child's, its arguments checked against the
// schema the SDK inferred, and it is closed with the manager.
func TestInProcess(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "greeter", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "greet", Description: "Greets someone."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in greetIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello, " + in.Name}}}, nil, nil
		})
	m := NewManager(Config{})
	if err := m.AddInProcess("", "greeter", srv); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "two__parts"} {
		if err := m.AddInProcess("", bad, srv); err == nil {
			t.Errorf("AddInProcess(%q): no error", bad)
		}
	}
	if err := m.AddInProcess("", "greeter", srv); err == nil || !strings.Contains(err.Error(), "added twice") {
		t.Errorf("a second greeter: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.Start(ctx)
	defer m.Close(context.Background())
	if err := m.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	tb := m.Toolbox(builtin(t), "a", []string{"greeter__greet"})
	if st := tb.Status(); len(st) != 1 || st[0].State != StateReady || st[0].Transport != TransportInProcess {
		t.Fatalf("status: %+v", st)
	}
	res := tb.Execute(ctx, chat.ToolCall{ID: "1", Name: "greeter__greet", Arguments: json.RawMessage(`{"name": "Ada"}`)})
	if res.IsError || res.Content != "hello, Ada" {
		t.Errorf("call: %+v", res)
	}
	res = tb.Execute(ctx, chat.ToolCall{ID: "2", Name: "greeter__greet", Arguments: json.RawMessage(`{"name": 7}`)})
	if !res.IsError {
		t.Errorf("a call with a number for the name ran: %+v", res)
	}
}
