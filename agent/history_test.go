package agent

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func TestWellFormed(t *testing.T) {
	call := func(id string) chat.ToolCall {
		return chat.ToolCall{ID: id, Name: "think", Arguments: json.RawMessage(`{}`)}
	}
	user := chat.Message{Role: chat.RoleUser, Content: "q"}
	answer := chat.Message{Role: chat.RoleAssistant, Content: "a"}
	result := func(id string) chat.Message {
		return chat.Message{Role: chat.RoleTool, ToolCallID: id, ToolName: "think", Content: "r" + id}
	}
	calls := func(text string, ids ...string) chat.Message {
		m := chat.Message{Role: chat.RoleAssistant, Content: text}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, call(id))
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		in, want []chat.Message
	}{
		{"plain", []chat.Message{user, answer}, []chat.Message{user, answer}},
		{"answered calls", []chat.Message{user, calls("", "1", "2"), result("1"), result("2"), answer},
			[]chat.Message{user, calls("", "1", "2"), result("1"), result("2"), answer}},
		{"orphan result", []chat.Message{user, result("9"), answer}, []chat.Message{user, answer}},
		{"call without result keeps the text", []chat.Message{user, calls("so far", "1"), user},
			[]chat.Message{user, calls("so far"), user}},
		{"call without result and text goes", []chat.Message{user, calls("", "1"), user}, []chat.Message{user, user}},
		{"one of two answered", []chat.Message{user, calls("", "1", "2"), result("2")},
			[]chat.Message{user, calls("", "2"), result("2")}},
		{"results out of order", []chat.Message{user, calls("", "1", "2"), result("2"), result("1")},
			[]chat.Message{user, calls("", "1", "2"), result("1"), result("2")}},
		{"result of an earlier call", []chat.Message{user, calls("", "1"), result("1"), answer, result("1")},
			[]chat.Message{user, calls("", "1"), result("1"), answer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wellFormed(tc.in, nil)
			eq := func(a, b chat.Message) bool {
				return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID &&
					slices.EqualFunc(a.ToolCalls, b.ToolCalls, func(x, y chat.ToolCall) bool { return x.ID == y.ID })
			}
			if !slices.EqualFunc(got, tc.want, eq) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
