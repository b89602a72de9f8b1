package llmorch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

// TestTurnSpans: turns start at user messages and are numbered back from
// the last; a call and its result are never split.
func TestTurnSpans(t *testing.T) {
	u := chat.Message{Role: chat.RoleUser}
	a := chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "1"}}}
	r := chat.Message{Role: chat.RoleTool, ToolCallID: "1"}
	for _, tc := range []struct {
		msgs          []chat.Message
		last          int
		starts, turns string
	}{
		{[]chat.Message{u, a, r, a, u, a}, 7, "[0 4]", "[6 7]"},
		{[]chat.Message{a, r, u}, 3, "[0 2]", "[2 3]"},
		{[]chat.Message{u}, 1, "[0]", "[1]"},
		{nil, 0, "[]", "[]"},
	} {
		starts, numbers := turnSpans(tc.msgs, tc.last)
		if fmt.Sprint(starts) != tc.starts || fmt.Sprint(numbers) != tc.turns {
			t.Errorf("turnSpans of %d messages: starts %v numbers %v, want %s %s", len(tc.msgs), starts, numbers, tc.starts, tc.turns)
		}
	}
}

// answer is a Model that streams its events (a summarizer under test).
type answer struct {
	events []chat.Event
	err    error
}

func (m answer) Info() Info { return Info{Provider: "test"} }
func (m answer) Stream(ctx context.Context, req Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		for _, ev := range m.events {
			if !yield(ev, nil) {
				return
			}
		}
		if m.err != nil {
			yield(chat.Event{}, m.err)
		}
	}
}

func text(s string) chat.Event { return chat.Event{Kind: chat.KindTextDelta, Text: s} }

// TestSummarizeRefuses: a summary is made of a whole answer that is a
// summary, never of an error, an error text, a partial or a too long
// answer; the usage of a failed call is still reported.
func TestSummarizeRefuses(t *testing.T) {
	in := SummaryInput{MaxTokens: 50, Turns: []SummaryTurn{{Number: 1, Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}}}}}
	usage := chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 7}}
	for _, tc := range []struct {
		name  string
		model answer
		want  error // nil: the summary is taken
	}{
		{"a summary", answer{events: []chat.Event{text("The user said hi."), usage}}, nil},
		{"a stream error after text", answer{events: []chat.Event{text("The user said"), usage}, err: errors.New("connection reset")}, errSummary},
		{"an error event", answer{events: []chat.Event{{Kind: chat.KindError, Error: &chat.Error{Code: "x", Message: "upstream 500"}}}}, errSummary},
		{"an error text", answer{events: []chat.Event{text("Error: rate limit exceeded, try again"), usage}}, errSummaryError},
		{"a JSON error body", answer{events: []chat.Event{text(`{"error": {"message": "overloaded"}}`)}}, errSummaryError},
		{"nothing", answer{events: []chat.Event{text("  \n"), usage}}, errSummaryEmpty},
		{"too long", answer{events: []chat.Event{text(strings.Repeat("word ", 400)), usage}}, errSummaryTooBig},
		{"over the output budget", answer{events: []chat.Event{text("The user")}, err: ErrOutputLimit}, errSummaryTooBig},
		{"a tool call", answer{events: []chat.Event{{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "1", Name: "think"}}}}, errSummary},
	} {
		s, u, err := summarize(context.Background(), tc.model, "", in, EstimateTokens)
		switch {
		case tc.want == nil && (err != nil || s != "The user said hi."):
			t.Errorf("%s: %q, %v", tc.name, s, err)
		case tc.want != nil && (!errors.Is(err, tc.want) || s != ""):
			t.Errorf("%s: %q, %v; want no summary (%v)", tc.name, s, err, tc.want)
		}
		if tc.name == "a stream error after text" && u.Prompt != 7 {
			t.Errorf("%s: usage %+v, want the call's", tc.name, u)
		}
	}
}

// TestReconcile: a count is scaled by the largest of the latest ratios of
// the provider's reports to the counts; a report far off (a provider that
// does not count, a mock) is ignored, and old reports age out.
func TestReconcile(t *testing.T) {
	c := newTokenCount(answer{})
	if got := c.provider(1000); got != 1000 {
		t.Fatalf("before any report: %d", got)
	}
	c.reconcile(1000, 1100)
	c.reconcile(1000, 1300)
	c.reconcile(1000, 1200)
	if got := c.provider(1000); got != 1300 {
		t.Fatalf("after reports of 1.1, 1.3 and 1.2: %d, want the largest", got)
	}
	c.reconcile(1000, 12) // not a count of this request
	c.reconcile(1000, 0)
	if got := c.provider(1000); got != 1300 {
		t.Fatalf("an absurd report moved the ratio: %d", got)
	}
	for range reconciled {
		c.reconcile(1000, 1050)
	}
	if got := c.provider(1000); got != 1050 {
		t.Fatalf("after %d reports of 1.05: %d", reconciled, got)
	}
}

type countingCounter struct{ calls int }

func (c *countingCounter) CountTokens(s string) int { c.calls++; return len(s) }
func (c *countingCounter) Info() Info               { return Info{} }
func (c *countingCounter) Stream(context.Context, Request) iter.Seq2[chat.Event, error] {
	return nil
}

// TestTokenCache: a text is counted by the tokenizer once while in use;
// short texts are counted directly.
func TestTokenCache(t *testing.T) {
	m := &countingCounter{}
	c := newTokenCount(m)
	long := strings.Repeat("x", 100)
	for range 5 {
		if c.text(long) != 100 || c.text("short") != 5 {
			t.Fatal("wrong counts")
		}
	}
	if m.calls != 6 {
		t.Errorf("the tokenizer ran %d times, want once for the long text and five for the short one", m.calls)
	}
	// Past a generation's size the oldest counts go, the cache stays bounded.
	for i := range 3 * tokenCacheSize {
		c.text(fmt.Sprintf("%0100d", i))
	}
	if n := len(c.cache.cur) + len(c.cache.old); n > 2*tokenCacheSize {
		t.Errorf("the cache holds %d counts", n)
	}
}

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{{"", 0}, {"abcd", 1}, {"abcde", 2}, {"héllo", 2}, {"日本語", 3}} {
		if got := EstimateTokens(tc.s); got != tc.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}
