package orchestration

import (
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func user(text string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: text} }

func calls(names ...string) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant}
	for _, n := range names {
		m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: "id-" + n, Name: n})
	}
	return m
}

// result is the tool message of the call calls made for tool; kind is
// "ran", "failed" or "not-run".
func result(tool, kind string) chat.Message {
	return chat.Message{Role: chat.RoleTool, ToolCallID: "id-" + tool, ToolName: tool, IsError: kind != "ran", NotRun: kind == "not-run"}
}

// TestReplay: a conversation gives the state a session that had it holds.
func TestReplay(t *testing.T) {
	e := evalEngine(t)
	tests := []struct {
		name string
		msgs []chat.Message
		step string
		seq  int
		used []string
	}{
		{"an answer is checked against its model call's offer",
			[]chat.Message{user("critique it"), calls("critique", "debate", "reflect"), result("critique", "ran"), result("debate", "not-run"), result("reflect", "not-run")},
			"EvaluationMode", 1, []string{"critique"}},
		{"a call that never ran records nothing, one that failed does",
			[]chat.Message{user("critique it"), calls("critique"), result("critique", "not-run"), calls("critique"), result("critique", "failed")},
			"EvaluationMode", 1, []string{"critique"}},
		{"a call the conversation claims ran but was not offered is refused",
			[]chat.Message{user("critique it"), calls("critique", "debate"), result("critique", "ran"), result("debate", "ran")},
			"EvaluationMode", 1, []string{"critique"}},
		{"a call held for approval counts where its result is",
			[]chat.Message{user("hello"), calls("search", "critique"), result("critique", "ran"), result("search", "ran")},
			"Chat", 0, []string{"critique", "search"}},
		{"a result without its call in the conversation uses its tool name",
			[]chat.Message{user("hello"), result("think", "ran")},
			"ThinkMode", 0, []string{"think"}},
		{"a step change between calls of one answer",
			[]chat.Message{user("critique it"), calls("critique"), result("critique", "ran"), calls("debate"), result("debate", "ran"), calls("reflect"), result("reflect", "ran"),
				calls("think", "critique", "search"), result("think", "ran"), result("critique", "ran"), result("search", "not-run")},
			"ThinkMode", 0, []string{"critique", "debate", "reflect", "think", "critique"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e.Replay(State{}, tt.msgs, nil)
			if s.ActiveStep != tt.step || s.SequenceIndex != tt.seq || !s.RecentlyUsedTools.Equal(tt.used...) {
				t.Fatalf("replayed %s seq=%d used=%v, want %s seq=%d used=%v", s.ActiveStep, s.SequenceIndex, s.RecentlyUsedTools, tt.step, tt.seq, tt.used)
			}
		})
	}
}

// TestReplayIsApplyByAnswer: replaying a conversation gives the state that
// applying its inputs live gives, answer by answer.
func TestReplayIsApplyByAnswer(t *testing.T) {
	e := evalEngine(t)
	live, _ := e.Apply(State{}, UserMessage("critique it"))
	live, _ = answer(e, live, "critique", "debate")
	live, _ = answer(e, live, "debate")
	live, _ = e.Apply(live, UserMessage("now think"))
	live, _ = answer(e, live, "think", "search")
	msgs := []chat.Message{
		user("critique it"), calls("critique", "debate"), result("critique", "ran"), result("debate", "not-run"),
		calls("debate"), result("debate", "ran"),
		user("now think"), calls("think", "search"), result("think", "ran"), result("search", "ran"),
	}
	if diff := sameTurnState(e.Replay(State{}, msgs, nil), live); diff != "" {
		t.Fatal(diff)
	}
}

// TestCurrent: a state whose active step the template no longer has shows
// the step the rules choose now; any other state is left as it is.
func TestCurrent(t *testing.T) {
	e := evalEngine(t)
	s, _ := e.Apply(State{}, UserMessage("critique it"))
	if got := e.Current(s); got.ActiveStep != "EvaluationMode" {
		t.Fatalf("Current moved a state whose step exists: %+v", got)
	}
	gone := s
	gone.ActiveStep, gone.SequenceIndex = "Removed", 2
	got := e.Current(gone)
	if got.ActiveStep != "EvaluationMode" || got.SequenceIndex != 0 {
		t.Fatalf("Current(%q) = %q seq %d, want the step chosen now (EvaluationMode, 0)", gone.ActiveStep, got.ActiveStep, got.SequenceIndex)
	}
	gone.LastUserMessage = "hello"
	gone.memo = nil
	if got := e.Current(gone); got.ActiveStep != "Chat" {
		t.Fatalf("Current = %q, want the default step", got.ActiveStep)
	}
}
