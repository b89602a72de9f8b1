package offline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

func summaryTurn(n int, user string, results ...chat.Message) llmorch.SummaryTurn {
	msgs := []chat.Message{{Role: chat.RoleUser, Content: user}}
	for i, r := range results {
		id := fmt.Sprintf("c%d-%d", n, i)
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: r.ToolName, Arguments: []byte(`{}`)}}})
		r.ToolCallID = id
		msgs = append(msgs, r)
	}
	return llmorch.SummaryTurn{Number: n, Messages: append(msgs, chat.Message{Role: chat.RoleAssistant, Content: "an answer the summary leaves out"})}
}

// TestSummary: the offline summary keeps each user statement and each
// tool result's first line, says which calls did not run or failed, folds
// an earlier summary in, and is the same for the same input.
func TestSummary(t *testing.T) {
	prev := chat.Message{Role: chat.RoleSummary, Summary: &chat.Summary{From: 1, Through: 2},
		Content: "Turns 1 to 2, ...\n- Turn 1, the user said: my name is Ada\n  - think: Ada noted"}
	in := &llmorch.SummaryInput{Previous: &prev, MaxTokens: 2000, Turns: []llmorch.SummaryTurn{
		summaryTurn(3, "I live in\nLyon", chat.Message{Role: chat.RoleTool, ToolName: "search", Content: "Lyon: 522,000 people\nmore lines"}),
		summaryTurn(4, "and you?", chat.Message{Role: chat.RoleTool, ToolName: "think", Content: "Refused: not offered", IsError: true, NotRun: true},
			chat.Message{Role: chat.RoleTool, ToolName: "search", Content: "no backend", IsError: true}),
	}}
	got := summarize(in)
	for _, want := range []string{
		"Turns 1 to 4",
		"- Turn 1, the user said: my name is Ada\n  - think: Ada noted\n",
		"- Turn 3, the user said: I live in Lyon\n  - search: Lyon: 522,000 people\n",
		"  - think (did not run): Refused: not offered\n  - search (failed): no backend",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "more lines") || strings.Contains(got, "an answer") {
		t.Errorf("the summary keeps more than first lines and user statements:\n%s", got)
	}
	if again := summarize(in); again != got {
		t.Errorf("two summaries of one input differ:\n%s\n%s", got, again)
	}
}

// TestSummaryFits: over its budget the summary drops tool lines, then user
// lines from the middle, keeping the opening turn and the latest ones and
// counting what it left out, over summaries folded into summaries.
func TestSummaryFits(t *testing.T) {
	var prev *chat.Message
	for round := range 30 {
		in := &llmorch.SummaryInput{Previous: prev, MaxTokens: 400}
		for k := range 10 {
			n := round*10 + k + 1
			user := fmt.Sprintf("statement %d of the conversation", n)
			if n == 1 {
				user = "the facts: code AX-7, budget 40k, due May 3"
			}
			in.Turns = append(in.Turns, summaryTurn(n, user, chat.Message{Role: chat.RoleTool, ToolName: "think", Content: "a thought"}))
		}
		text := summarize(in)
		if n := llmorch.EstimateTokens(text); n > in.MaxTokens {
			t.Fatalf("round %d: the summary is %d tokens, over its budget of %d:\n%s", round, n, in.MaxTokens, text)
		}
		for _, want := range []string{"the facts: code AX-7, budget 40k, due May 3", fmt.Sprintf("statement %d ", round*10+10), "left out: "} {
			if round > 2 && !strings.Contains(text, want) {
				t.Fatalf("round %d: the summary lacks %q:\n%s", round, want, text)
			}
		}
		prev = &chat.Message{Role: chat.RoleSummary, Content: text, Summary: &chat.Summary{From: 1, Through: round*10 + 10}}
	}
	// Every turn is accounted for: kept, or counted among those left out.
	kept, left := 0, 0
	for _, l := range strings.Split(prev.Content, "\n") {
		switch {
		case strings.HasPrefix(l, userMark):
			kept++
		case strings.HasPrefix(l, omittedMark):
			left += turnsIn(l)
		}
	}
	if kept+left != 300 {
		t.Errorf("the summary keeps %d turns and counts %d left out, want 300 in all", kept, left)
	}
}

// TestSummaryStream: a summarizer's request is answered with the summary
// in one delta, then its usage, and no tool call.
func TestSummaryStream(t *testing.T) {
	m := New(Config{Delay: DefaultDelay})
	in := &llmorch.SummaryInput{MaxTokens: 500, Turns: []llmorch.SummaryTurn{summaryTurn(1, "hello")}}
	var kinds []chat.Kind
	for ev, err := range m.Stream(context.Background(), llmorch.Request{Summarize: in, Tools: []chat.ToolSpec{{Name: "think"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind)
	}
	if fmt.Sprint(kinds) != "[text-delta usage]" {
		t.Errorf("events %v, want one text delta and the usage", kinds)
	}
}
