package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/offline"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
)

// longTemplate is an orchestrated agent whose conditions read the tool
// history (a sequence, not_recently_used) under a small context budget, so
// that a long conversation is compacted many times. %s is its context.
const longTemplate = `{"agentId": "long", "name": "Long", "nodes": ["llm.openai", "think", "reflect", "critique"],
  "nodeConfigurations": {"llm.openai": {"model": "gpt-4o-mini"}, "llm.summary": {"model": "summary"}},
  "chatSettings": {"historyPolicy": "lastN", "historyLength": 12},
  "options": {"maxSteps": 4, "context": %s},
  "orchestration": {"steps": [
    {"name": "Deep", "conditions": [{"type": "message_contains", "value": "deep"}],
     "sequence": ["think", "reflect"], "availableTools": {"allowed": ["think", "reflect"]}},
    {"name": "Review", "conditions": [{"type": "message_contains", "value": "review"}, {"type": "not_recently_used", "value": "critique", "window": 4}],
     "availableTools": {"allowed": ["critique", "think"]}},
    {"name": "Chat", "isDefault": true, "availableTools": {"allowed": ["think", "reflect", "critique"]}}
  ]}}`

const (
	longBudget = 3000
	longTurns  = 300
)

// facts are planted in the first turn; every summary must carry them.
var facts = []string{"the project code is AX-7", "the budget is 40,000 euros", "the deadline is May 3",
	"the client is Lumen Ltd", "the lead is Ada Byron", "the office is in Lyon", "the server runs Debian",
	"the database is Postgres 16", "the launch city is Oslo", "the mascot is a heron"}

func longMessage(i int) string {
	switch {
	case i == 1:
		return "Remember these ten facts: " + strings.Join(facts, "; ") + "."
	case i%4 == 0:
		return fmt.Sprintf("Let us take a deep look at question %d: how the pieces of part %d fit together with what we said before, step by step.", i, i)
	case i%5 == 0:
		return fmt.Sprintf("Please review item %d and tell me what is weak in it, what is strong, and what you would change first.", i)
	}
	return fmt.Sprintf("Note %d: today the team met about part %d; nothing changes in the plan, but write it down for later.", i, i)
}

// longTools answers every call with a few lines, the first one naming it.
type longTools struct{ countingTools }

func (l *longTools) Execute(_ context.Context, call chat.ToolCall) chat.ToolResult {
	return chat.ToolResult{Content: fmt.Sprintf("%s result for %s\n%s", call.Name, call.ID,
		strings.Repeat("a line of detail that the summary leaves out, ", 6))}
}

// recordingSummarizer is the offline summarizer, recording what it was
// asked to summarize.
type recordingSummarizer struct {
	llmorch.Model
	mu     sync.Mutex
	inputs []llmorch.SummaryInput
}

func (r *recordingSummarizer) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	if req.Summarize != nil {
		r.mu.Lock()
		r.inputs = append(r.inputs, *req.Summarize)
		r.mu.Unlock()
	}
	return r.Model.Stream(ctx, req)
}

// longRun is one 300-turn conversation.
type longRun struct {
	mock       *mockllm.Server
	summarizer *recordingSummarizer
	agents     *agent.Set
	store      session.Store
	id         string
	events     [][]chat.Event // per turn
}

func runLong(t *testing.T, store session.Store, context string) *longRun {
	t.Helper()
	r := &longRun{mock: mockllm.New(), store: store, id: session.NewID(),
		summarizer: &recordingSummarizer{Model: offline.New(offline.Config{})}}
	t.Cleanup(r.mock.Close)
	tools := []string{"think", "reflect", "critique"}
	for i := 1; i <= longTurns; i++ {
		r.mock.Enqueue(
			mockllm.Script{ToolCalls: []mockllm.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: tools[i%3], Arguments: fmt.Sprintf(`{"topic":"part %d"}`, i)}}, EstimateUsage: true},
			mockllm.Script{Text: []string{"Done ", fmt.Sprintf("with turn %d.", i)}, EstimateUsage: true},
		)
	}
	a, ds := template.Load("long.json", []byte(fmt.Sprintf(longTemplate, context)), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	models := func(tm *template.Template) (llmorch.Model, error) {
		if tm.Nodes[0] == "llm.summary" {
			return r.summarizer, nil
		}
		return provider.New(provider.Config{Provider: provider.OpenAI, Model: "gpt-4o-mini", BaseURL: r.mock.URL() + "/v1", APIKey: "test-key"})
	}
	set, err := agent.NewSet(agent.Options{Store: store, ToolsFor: toolbox(&longTools{countingTools{names: tools}}), Models: models, Logger: quietLogger()}, []*template.Loaded{a})
	if err != nil {
		t.Fatal(err)
	}
	r.agents = set
	n, _ := set.Get("long")
	for i := 1; i <= longTurns; i++ {
		evs := turn(t, n, r.id, longMessage(i))
		for _, ev := range evs {
			if ev.Kind == chat.KindError || ev.Kind == chat.KindWarning {
				t.Fatalf("turn %d: %+v %+v %q", i, ev.Kind, ev.Error, ev.Text)
			}
		}
		r.events = append(r.events, evs)
	}
	if p := r.mock.Pending(); p != 0 {
		t.Fatalf("%d model answers left: the turns made fewer model calls than scripted", p)
	}
	return r
}

var summaryHead = regexp.MustCompile(`^## Summary of the conversation so far \(turns (\d+) to (\d+);`)

// TestLongConversation plays a scripted 300-turn conversation (a tool call
// every turn, ten facts planted in the first) with a context budget, on
// memory and on Redis, and checks every model request the provider
// received: each stays under the budget (as the provider counts it), none
// has a tool result without its call or a call without its result, and a
// summary is followed by exactly the turns after those it covers. Every
// summarizer input covers exactly the turns it replaces, from where the
// last summary stopped, and carries the planted facts. The orchestration
// state after turn 300 equals that of the same conversation without a
// budget.
func TestLongConversation(t *testing.T) {
	for _, st := range memoryAndRedis() {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			defer store.Close()
			on := runLong(t, store, fmt.Sprintf(`{"maxInputTokens": %d, "keepTurns": 3, "summarizer": {"model": "llm.summary"}}`, longBudget))

			// Every request the provider got, as it counts its input.
			largest, orphans, summarized := 0, 0, 0
			for i, req := range on.mock.Requests() {
				largest = max(largest, len(req.Body)/4+1)
				calls := map[string]bool{}
				for _, m := range req.Messages {
					for _, c := range m.ToolCalls {
						calls[c.ID] = true
					}
					for _, res := range m.ToolResults {
						if !calls[res.CallID] {
							orphans++ // a result without its call
						}
						delete(calls, res.CallID)
					}
				}
				orphans += len(calls) // calls without their result
				if m := summaryHead.FindStringSubmatch(req.Messages[0].Text); m != nil {
					summarized++
					through, _ := strconv.Atoi(m[2])
					if m[1] != "1" || len(req.Messages) < 2 || req.Messages[1].Text != longMessage(through+1) {
						t.Errorf("request %d: a summary of turns %s to %s is followed by %q, want turn %d's message", i, m[1], m[2], req.Messages[1].Text, through+1)
					}
				}
			}
			t.Logf("%d model requests: the largest is %d input tokens, the budget %d; %d orphaned tool calls or results; %d read a summary",
				len(on.mock.Requests()), largest, longBudget, orphans, summarized)
			if largest >= longBudget || orphans != 0 || summarized == 0 {
				t.Fatalf("largest request %d tokens (budget %d), %d orphans, %d requests with a summary", largest, longBudget, orphans, summarized)
			}

			// Every summarizer input: exactly the turns after the previous
			// summary, whole, with the facts.
			inputs := on.summarizer.inputs
			next := 1
			for k, in := range inputs {
				if k > 0 && (in.Previous == nil || in.Previous.Summary.Through != next-1) {
					t.Fatalf("summary %d folds in %+v, want the summary through turn %d", k, in.Previous, next-1)
				}
				for _, tr := range in.Turns {
					if tr.Number != next || tr.Messages[0].Role != chat.RoleUser || tr.Messages[0].Content != longMessage(tr.Number) {
						t.Fatalf("summary %d: turn %d (%q), want turn %d", k, tr.Number, tr.Messages[0].Content, next)
					}
					calls := map[string]bool{}
					for _, m := range tr.Messages[1:] {
						if m.Role == chat.RoleUser {
							t.Fatalf("summary %d: turn %d holds another user message", k, tr.Number)
						}
						for _, c := range m.ToolCalls {
							calls[c.ID] = true
						}
						if m.Role == chat.RoleTool && !calls[m.ToolCallID] {
							t.Fatalf("summary %d: turn %d has a result without its call", k, tr.Number)
						}
						delete(calls, m.ToolCallID)
					}
					if len(calls) != 0 {
						t.Fatalf("summary %d: turn %d has calls without results: %v", k, tr.Number, calls)
					}
					next++
				}
				text := llmorch.RenderSummaryInput(in)
				for _, f := range facts {
					if !strings.Contains(text, f) {
						t.Fatalf("summary %d (turns %d to %d) is made without the fact %q", k, in.Turns[0].Number, next-1, f)
					}
				}
			}
			compactions := 0
			for _, evs := range on.events {
				for _, ev := range evs {
					if ev.Kind == chat.KindCompaction {
						compactions++
					}
				}
			}
			if len(inputs) < 10 || compactions != len(inputs) {
				t.Fatalf("%d summaries made, %d compaction events", len(inputs), compactions)
			}
			t.Logf("%d compactions; the last summary covers turns 1 to %d", compactions, next-1)

			// The same conversation without a budget ends in the same
			// orchestration state; the summaries' cost is the session's, apart.
			offStore := st.open(t)
			defer offStore.Close()
			off := runLong(t, offStore, `"off"`)
			got := must(on.store.Get(t.Context(), on.id))
			want := must(off.store.Get(t.Context(), off.id))
			if a, b := orchestrationOf(got.State), orchestrationOf(want.State); a != b {
				t.Fatalf("the state after %d turns differs with a context budget:\n%s\nwithout:\n%s", longTurns, a, b)
			}
			if got.State.TokenUsage.Completion != want.State.TokenUsage.Completion {
				t.Fatalf("the model's completion tokens differ: %d with a budget, %d without (a summary's tokens in the state?)", got.State.TokenUsage.Completion, want.State.TokenUsage.Completion)
			}
			if got.SummarizerUsage.IsZero() || !want.SummarizerUsage.IsZero() {
				t.Fatalf("summarizer usage %+v with a budget, %+v without", got.SummarizerUsage, want.SummarizerUsage)
			}
			t.Logf("state after %d turns equal with and without compaction; prompt tokens %d with, %d without; summarizer %+v",
				longTurns, got.State.TokenUsage.Prompt, want.State.TokenUsage.Prompt, got.SummarizerUsage)
		})
	}
}

// orchestrationOf is the state as the orchestration reads it: everything
// but the token counts, which depend on how big the requests were.
func orchestrationOf(s orchestration.State) string {
	s.TokenUsage, s.RegeneratedUsage = chat.Usage{}, chat.Usage{}
	if s.TurnStart != nil {
		ts := *s.TurnStart
		ts.TokenUsage = chat.Usage{}
		s.TurnStart = &ts
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestSummarizerFailure: a summarizer that fails, answers with an error
// text or with a summary over its budget leaves the turn working on the
// history's message cap, with a warning, and no summary stored; the next
// turn tries again, and a good summary then replaces the turns. A summary
// is never made of the error text.
func TestSummarizerFailure(t *testing.T) {
	main := mockllm.New(mockllm.WithDefault(mockllm.Script{Text: []string{"An answer that takes some room in the history, ", strings.Repeat("word ", 40)}, EstimateUsage: true}))
	sum := mockllm.New()
	defer main.Close()
	defer sum.Close()
	sum.Enqueue(
		mockllm.Script{Status: 500, ErrorMessage: "upstream exploded"},
		mockllm.Script{Text: []string{"Error: the upstream model is overloaded, try again later."}},
		mockllm.Script{Text: []string{strings.Repeat("far too long ", 2000)}},
		mockllm.Script{Text: []string{"The user asked about ships, one question per turn."}},
	)
	src := `{"agentId": "s", "name": "S", "nodes": ["llm.openai"],
	  "nodeConfigurations": {"llm.openai": {"model": "gpt-4o-mini"}, "llm.summary": {"model": "gpt-4o-mini"}},
	  "chatSettings": {"historyPolicy": "lastN", "historyLength": 4},
	  "options": {"context": {"maxInputTokens": 1000, "keepTurns": 1, "summarizer": {"model": "llm.summary"}}}}`
	a, ds := template.Load("s.json", []byte(src), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	models := func(tm *template.Template) (llmorch.Model, error) {
		url := main.URL()
		if tm.Nodes[0] == "llm.summary" {
			url = sum.URL()
		}
		return provider.New(provider.Config{Provider: provider.OpenAI, Model: "gpt-4o-mini", BaseURL: url + "/v1", APIKey: "k", MaxRetries: -1})
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, models, []*template.Loaded{a})
	n, _ := agents.Get("s")
	id := session.NewID()
	var warnings, compactions []string
	for i := 1; i <= 12 && len(compactions) == 0; i++ {
		before := len(main.Requests())
		evs := turn(t, n, id, fmt.Sprintf("Question %d about ships: %s", i, strings.Repeat("how do hulls float, ", 20)))
		if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStop {
			t.Fatalf("turn %d finished with %q", i, done.FinishReason)
		}
		for _, ev := range evs {
			switch ev.Kind {
			case chat.KindWarning:
				warnings = append(warnings, ev.Text)
				// The turn went on with the last 4 messages, whole turns.
				if req := main.Requests()[before]; len(req.Messages) > 4 || req.Messages[0].Role != "user" {
					t.Fatalf("turn %d after a failed summary sent %d messages", i, len(req.Messages))
				}
			case chat.KindCompaction:
				compactions = append(compactions, ev.Compaction.Summary.Content)
			}
		}
	}
	if len(warnings) != 3 || len(compactions) != 1 {
		t.Fatalf("%d warnings %q and %d compactions, want three failures then a summary", len(warnings), warnings, len(compactions))
	}
	for i, want := range []string{"HTTP 500", "error text", "longer than its budget"} {
		if !strings.Contains(warnings[i], want) || !strings.Contains(warnings[i], "newest messages only") {
			t.Errorf("warning %d: %q, want it to say %q and what the model sees", i, warnings[i], want)
		}
	}
	hist := must(store.Messages(t.Context(), id, 0))
	var stored []string
	for _, m := range hist {
		if m.Role == chat.RoleSummary {
			stored = append(stored, m.Content)
		}
	}
	if len(stored) != 1 || stored[0] != "The user asked about ships, one question per turn." {
		t.Fatalf("stored summaries %q, want only the good one", stored)
	}
	// The next request reads the summary, then the turn kept.
	n2 := len(main.Requests())
	turn(t, n, id, "And the last question?")
	req := main.Requests()[n2]
	if !strings.Contains(req.Messages[0].Text, "The user asked about ships") || !strings.HasPrefix(req.Messages[len(req.Messages)-1].Text, "And the last question?") {
		t.Fatalf("the turn after the summary sent %q ... %q", req.Messages[0].Text, req.Messages[len(req.Messages)-1].Text)
	}
}

// TestCompactConversation: Agent.Compact fits a conversation a client
// holds to the budget, as a turn would, and leaves one that fits as it is;
// the summary it returns starts the next Compact.
func TestCompactConversation(t *testing.T) {
	a, ds := template.Load("c.json", []byte(`{"agentId": "c", "name": "C", "nodes": ["llm.openai", "think"],
	  "options": {"context": {"maxInputTokens": 1000, "keepTurns": 2, "summarizer": {"model": "offline"}}}}`), template.Config{})
	if a == nil {
		t.Fatal(ds.Err())
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n, _ := newAgents(t, store, offlineModels, []*template.Loaded{a}).Get("c")
	var msgs []chat.Message
	for i := 1; i <= 12; i++ {
		msgs = append(msgs, chat.Message{Role: chat.RoleUser, Content: fmt.Sprintf("Point %d: %s", i, strings.Repeat("the tide turns at dusk, ", 8))},
			chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "think", Arguments: json.RawMessage(`{}`)}}},
			chat.Message{Role: chat.RoleTool, ToolCallID: fmt.Sprintf("c%d", i), ToolName: "think", Content: "noted"},
			chat.Message{Role: chat.RoleAssistant, Content: "Noted."})
	}
	short, err := n.Compact(t.Context(), nil, msgs[:4])
	if err != nil || short.Summary != nil || len(short.Messages) != 4 {
		t.Fatalf("a conversation that fits: %+v, %v", short, err)
	}
	c, err := n.Compact(t.Context(), nil, msgs)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Summary
	if s == nil || s.Summary.From != 1 || s.Summary.Through != 10 || s.Summary.Kept != 2 || len(c.Messages) != 8 || c.Tokens > 1000 ||
		!strings.Contains(s.Content, "Point 1: the tide") || c.Messages[0].Content != msgs[40].Content {
		t.Fatalf("compacted: summary %+v, %d messages kept from %q, %d tokens", s, len(c.Messages), c.Messages[0].Content, c.Tokens)
	}
	if _, err := n.Compact(t.Context(), &msgs[0], msgs); err == nil {
		t.Fatal("a summary to start from that is no summary entry was taken")
	}
	// The next compaction folds the summary in.
	more := append(slices.Clone(c.Messages), msgs[:40]...)
	for i := range more[8:] {
		more[8+i].ToolCallID = strings.Replace(more[8+i].ToolCallID, "c", "d", 1)
		for j := range more[8+i].ToolCalls {
			more[8+i].ToolCalls = []chat.ToolCall{{ID: strings.Replace(more[8+i].ToolCalls[j].ID, "c", "d", 1), Name: "think", Arguments: json.RawMessage(`{}`)}}
		}
	}
	c2, err := n.Compact(t.Context(), c.Summary, more)
	if err != nil || c2.Summary == nil || c2.Summary.Summary.From != 1 || c2.Summary.Summary.Through != 20 || !strings.Contains(c2.Summary.Content, "Point 1: the tide") {
		t.Fatalf("the second compaction: %+v, %v", c2.Summary, err)
	}
}
