package session_test

import (
	"fmt"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

// A store that keeps its history in Go trims it with TrimTurns after each
// append: over the cap, the oldest turn goes whole, tool call and result
// with it; the newest is kept whole even when it alone is over the cap.
func ExampleTrimTurns() {
	history := []chat.Message{
		{Role: chat.RoleUser, Content: "first question"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "search", Arguments: []byte(`{}`)}}},
		{Role: chat.RoleTool, ToolCallID: "c1", ToolName: "search", Content: "result"},
		{Role: chat.RoleAssistant, Content: "first answer"},
		{Role: chat.RoleUser, Content: "second question"},
		{Role: chat.RoleAssistant, Content: "second answer"},
	}
	for _, max := range []int{6, 3, 1} {
		fmt.Printf("max %d:", max)
		for _, m := range session.TrimTurns(history, max) {
			fmt.Printf(" %s", m.Role)
		}
		fmt.Println()
	}
	// Output:
	// max 6: user assistant tool assistant user assistant
	// max 3: user assistant
	// max 1: user assistant
}
