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

// TestSteadyStart: a window that still starts at the session's first turn
// is kept whole; one that dropped turns starts at a turn numbered 1 + a
// multiple of half the turns it holds, so consecutive turns see the same
// first turn until it moves by that step.
func TestSteadyStart(t *testing.T) {
	// turns builds the history of turns from..to, two messages each.
	turns := func(from, to int) []chat.Message {
		var h []chat.Message
		for i := from; i <= to; i++ {
			h = append(h, chat.Message{Role: chat.RoleUser, Content: string(rune('0' + i))}, chat.Message{Role: chat.RoleAssistant, Content: "a"})
		}
		return h
	}
	for _, tc := range []struct {
		name      string
		from, to  int // the turns of the window
		turn      int // the current turn
		wantFirst int // the first turn kept
	}{
		{"nothing dropped", 1, 5, 6, 1},
		{"empty", 0, -1, 1, 0},
		{"dropped one", 2, 6, 7, 4},
		{"same start next turn", 3, 7, 8, 4},
		{"and the next", 4, 8, 9, 4},
		{"moves by a step", 5, 9, 10, 7},
		{"one turn in the window", 9, 9, 10, 9},
	} {
		h := steadyStart(turns(tc.from, tc.to), tc.turn)
		first := 0
		if len(h) > 0 {
			first = int(h[0].Content[0] - '0')
		}
		if first != tc.wantFirst || len(h) > 0 && h[len(h)-1].Role != chat.RoleAssistant {
			t.Errorf("%s: window of turns %d..%d at turn %d starts at turn %d (%d messages), want %d", tc.name, tc.from, tc.to, tc.turn, first, len(h), tc.wantFirst)
		}
	}
	// Consecutive turns of a full window: the start moves at most every
	// other turn.
	moves, prev := 0, 0
	for turn := 7; turn <= 30; turn++ {
		h := steadyStart(turns(turn-5, turn-1), turn)
		if first := int(h[0].Content[0] - '0'); first != prev {
			moves++
			prev = first
		}
	}
	if moves > 12 {
		t.Errorf("the start moved %d times in 24 turns", moves)
	}
}
