package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// The Cognitive Reasoner's own example prompts, in its default step with all
// seven tools offered: the model picks the mode that fits and runs its
// sequence one tool per call, then answers with every result.
func TestCognitiveReasonerDefaultStep(t *testing.T) {
	tests := []struct {
		message string
		want    []string
		mode    string
	}{
		{"Critique the argument that remote work improves productivity", []string{"critique", "debate", "reflect"}, "EvaluationMode"},
		{"Research the history of electric cars", []string{"search", "think", "reflect"}, "ResearchMode"},
		{"Compare solar and wind energy for residential power generation", []string{"search", "compare", "reflect"}, "ComparisonMode"},
		{"Brainstorm innovative ways to reduce food waste in restaurants", []string{"think", "brainstorm", "critique"}, "IdeationMode"},
		{"Debate whether cryptocurrencies will eventually replace traditional banking", []string{"search", "debate", "reflect"}, "DebateMode"},
		{"How can cities solve traffic congestion problems?", []string{"think", "brainstorm", "compare"}, "ProblemSolvingMode"},
		{"How many electric vehicles will be on the road by 2030?", []string{"search", "think", "reflect"}, "ResearchMode"},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.mode+"/"+tt.message, func(t *testing.T) {
			calls, final := runTurn(t, m, defaultStepRequest(user(tt.message)), nil)
			if got := callNames(calls); !slices.Equal(got, tt.want) {
				t.Fatalf("calls = %v, want %v", got, tt.want)
			}
			for i, c := range calls {
				if want := fmt.Sprintf("call_%d", i+1); c.ID != want {
					t.Errorf("call %d: ID %q, want %q", i, c.ID, want)
				}
				// Each result is quoted under its own numbered sub-heading
				// (the result's title), in order.
				heading := fmt.Sprintf("### %d. Result %d of %s", i+1, i+1, c.Name)
				firstLine := parseResult(fakeResult(i+1, c)).lines()[0]
				at, quoted := strings.Index(final, heading), strings.Index(final, "> "+firstLine+"\n")
				if at < 0 || quoted < at || (i > 0 && at < strings.Index(final, fmt.Sprintf("### %d. ", i))) {
					t.Errorf("final answer lacks %q followed by the quote of %q, in order:\n%s", heading, firstLine, final)
				}
			}
			for _, want := range []string{"offline demo model", "**Mode:** " + tt.mode, "### Conclusion", topicPhrase(tt.message)} {
				if !strings.Contains(final, want) {
					t.Errorf("final answer lacks %q:\n%s", want, final)
				}
			}
			if !strings.HasPrefix(final, "## ") {
				t.Errorf("final answer does not start with a heading: %q", final[:min(len(final), 40)])
			}
		})
	}
}

// The critique call carries real, sectioned text about the topic, with the
// headings the tool's description asks for.
func TestCritiqueArguments(t *testing.T) {
	m := New(Config{})
	o := call(t, m, defaultStepRequest(user("Critique the argument that remote work improves productivity")))
	if len(o.calls) != 1 || o.calls[0].Name != "critique" {
		t.Fatalf("calls = %v, want one critique call", callNames(o.calls))
	}
	var args struct{ Subject, Analysis string }
	if err := json.Unmarshal(o.calls[0].Arguments, &args); err != nil {
		t.Fatal(err)
	}
	if args.Subject != "remote work improves productivity" {
		t.Errorf("subject = %q", args.Subject)
	}
	last := -1
	for _, h := range []string{"### Understanding", "### Strengths", "### Issues", "### Suggestions", "### Overall assessment"} {
		i := strings.Index(args.Analysis, h)
		if i <= last {
			t.Errorf("analysis lacks %q in order:\n%s", h, args.Analysis)
		}
		last = i
	}
	if n := strings.Count(args.Analysis, "remote work improves productivity"); n < 3 {
		t.Errorf("analysis mentions the topic %d times, want at least 3:\n%s", n, args.Analysis)
	}
	if !strings.Contains(args.Analysis, "how one defines and measures productivity") || !strings.Contains(args.Analysis, "involving remote work") {
		t.Errorf("analysis does not discuss the claim's terms (remote work, productivity):\n%s", args.Analysis)
	}
}

// An active step whose sequence is not complete gets the offered tool at its
// position, whatever the message says.
func TestActiveSequence(t *testing.T) {
	all := cognitiveReasonerTools()
	only := func(names ...string) []chat.ToolSpec {
		var out []chat.ToolSpec
		for _, s := range all {
			if slices.Contains(names, s.Name) {
				out = append(out, s)
			}
		}
		return out
	}
	tests := []struct {
		name    string
		message string
		snap    chat.Snapshot
		tools   []chat.ToolSpec
		want    string
	}{
		{"research at 0 offers search", "Research the history of electric cars",
			chat.Snapshot{ActiveStep: "ResearchMode", Sequence: []string{"search", "think", "reflect"}}, only("search"), "search"},
		{"research at 1 offers think", "Research the history of electric cars",
			chat.Snapshot{ActiveStep: "ResearchMode", SequenceIndex: 1, Sequence: []string{"search", "think", "reflect"}}, only("think"), "think"},
		{"the sequence wins over the message", "Brainstorm ideas for a party",
			chat.Snapshot{ActiveStep: "EvaluationMode", SequenceIndex: 2, Sequence: []string{"critique", "debate", "reflect"}}, only("reflect"), "reflect"},
		{"a group takes its first offered tool", "Summarise this",
			chat.Snapshot{ActiveStep: "Notes", Sequence: []string{"think", "summarize|save|reflect"}, SequenceIndex: 1}, only("think", "reflect"), "reflect"},
		{"a group tool that is not offered is not called", "Research the history of electric cars",
			chat.Snapshot{ActiveStep: "ResearchMode", Sequence: []string{"search", "think", "reflect"}}, only("think"), ""},
		{"the final step offers nothing", "Research the history of electric cars",
			chat.Snapshot{ActiveStep: "ResearchMode", Sequence: []string{"search", "think", "reflect"}}, nil, ""},
		{"a completed mode answers after this turn's calls", "Critique the argument that remote work improves productivity",
			chat.Snapshot{ActiveStep: "EvaluationMode", SequenceIndex: 3, Sequence: []string{"critique", "debate", "reflect"}},
			only("critique", "debate", "reflect", "search"), ""},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []chat.Message{user(tt.message)}
			if strings.HasPrefix(tt.name, "a completed mode") {
				for i, name := range []string{"critique", "debate", "reflect"} {
					id := fmt.Sprintf("call_%d", i+1)
					msgs = append(msgs,
						chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: name, Arguments: json.RawMessage(`{}`)}}},
						chat.Message{Role: chat.RoleTool, ToolCallID: id, ToolName: name, Content: "## " + name + "\n\nDone."})
				}
			}
			snap := tt.snap
			snap.OfferedTools = toolNames(tt.tools)
			req := llmorch.Request{Messages: msgs, Tools: tt.tools, Orchestration: &snap, Modes: cognitiveReasonerModes()}
			o := call(t, m, req)
			if tt.want == "" {
				if len(o.calls) != 0 {
					t.Fatalf("calls = %v, want none", callNames(o.calls))
				}
				if o.text == "" {
					t.Fatal("no tool call and no answer")
				}
				return
			}
			if len(o.calls) != 1 || o.calls[0].Name != tt.want {
				t.Fatalf("calls = %v, want %s", callNames(o.calls), tt.want)
			}
			validate(t, findTool(tt.tools, tt.want), o.calls[0].Arguments)
			if tt.want == "search" {
				var args struct{ Query string }
				if err := json.Unmarshal(o.calls[0].Arguments, &args); err != nil {
					t.Fatal(err)
				}
				if args.Query != "history of electric cars" {
					t.Errorf("query = %q, want %q", args.Query, "history of electric cars")
				}
			}
		})
	}
}

// Without a fitting mode the model calls the single most relevant tool once,
// or nothing, and then answers; without tools it answers plainly.
func TestNoModeFits(t *testing.T) {
	searchOnly := []chat.ToolSpec{cognitiveReasonerTools()[0]}
	tests := []struct {
		name    string
		message string
		tools   []chat.ToolSpec
		modes   []llmorch.Mode
		want    []string
		answer  []string
	}{
		{"relevant single tool", "Search for the latest news on fusion power", searchOnly, nil, []string{"search"},
			[]string{"### 1. Result 1 of search", "> 1. Source one on latest news on fusion power\n> 2. Source two"}},
		{"nothing relevant", "Hello there", cognitiveReasonerTools(), cognitiveReasonerModes(), nil,
			[]string{"no model provider is configured", "None of the tools offered now", "**EvaluationMode**", "critique → debate → reflect"}},
		{"no tools", "What is the capital of France?", nil, nil, nil,
			[]string{"no model provider is configured", "You asked about **capital of France**"}},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := llmorch.Request{Messages: []chat.Message{user(tt.message)}, Tools: tt.tools, Modes: tt.modes}
			calls, final := runTurn(t, m, req, nil)
			if got := callNames(calls); !slices.Equal(got, tt.want) {
				t.Fatalf("calls = %v, want %v", got, tt.want)
			}
			for _, w := range tt.answer {
				if !strings.Contains(final, w) {
					t.Errorf("answer lacks %q:\n%s", w, final)
				}
			}
		})
	}
}

// TestApprovalToolsFirst: with no sequence to follow, a turn's first call
// goes to an offered tool that waits for approval (the best-matching one
// when several do), so that the offline demo shows the approval; once it is
// answered, the model writes its answer. A tool that needs no approval and
// matches the message better waits.
func TestApprovalToolsFirst(t *testing.T) {
	tools := cognitiveReasonerTools()
	m := New(Config{})
	for _, tt := range []struct {
		name, message string
		approval      []string
		want          string
	}{
		{"the only gated tool", "Plan a two-day offsite for twelve people", []string{"search"}, "search"},
		{"the best matching gated tool", "Critique the argument that remote work improves productivity", []string{"search", "critique"}, "critique"},
		{"none gated", "Critique the argument that remote work improves productivity", nil, "critique"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := llmorch.Request{Messages: []chat.Message{user(tt.message)}, Tools: tools, ApprovalTools: tt.approval}
			o := call(t, m, req)
			if len(o.calls) != 1 || o.calls[0].Name != tt.want {
				t.Fatalf("calls %v, want %s", callNames(o.calls), tt.want)
			}
			validate(t, findTool(tools, tt.want), o.calls[0].Arguments)
		})
	}
	// The call was denied: the model answers.
	first := call(t, m, llmorch.Request{Messages: []chat.Message{user("Plan a two-day offsite")}, Tools: tools, ApprovalTools: []string{"search"}})
	req := llmorch.Request{Tools: tools, ApprovalTools: []string{"search"}, Messages: []chat.Message{
		user("Plan a two-day offsite"),
		{Role: chat.RoleAssistant, ToolCalls: first.calls},
		{Role: chat.RoleTool, ToolCallID: first.calls[0].ID, ToolName: "search", Content: "The user declined this call of search; it was not run.", IsError: true},
	}}
	if o := call(t, m, req); len(o.calls) != 0 || o.text == "" {
		t.Fatalf("after the answer: calls %v, text %q", callNames(o.calls), o.text)
	}
}

// TestDeniedCallIsTheUsersChoice: the answer after a person declined a
// call says it did not run as they chose, with their reason, and never
// calls it an error or a failure.
func TestDeniedCallIsTheUsersChoice(t *testing.T) {
	tools := cognitiveReasonerTools()
	m := New(Config{})
	first := call(t, m, llmorch.Request{Messages: []chat.Message{user("Plan a two-day offsite")}, Tools: tools, ApprovalTools: []string{"search"}})
	denied := llmorch.DeniedResult(first.calls[0], "not on this network")
	o := call(t, m, llmorch.Request{Tools: tools, ApprovalTools: []string{"search"}, Messages: []chat.Message{
		user("Plan a two-day offsite"),
		{Role: chat.RoleAssistant, ToolCalls: first.calls},
		{Role: chat.RoleTool, ToolCallID: denied.CallID, ToolName: "search", Content: denied.Content, IsError: true, NotRun: true, Denied: true},
	}})
	if len(o.calls) != 0 {
		t.Fatalf("calls %v after the denial", callNames(o.calls))
	}
	for _, want := range []string{"You chose not to run this search call, so it did not run. Your reason: not on this network",
		"As you chose, the search call did not run"} {
		if !strings.Contains(o.text, want) {
			t.Errorf("the answer lacks %q:\n%s", want, o.text)
		}
	}
	for _, bad := range []string{"error", "failed"} {
		if strings.Contains(strings.ToLower(o.text), bad) {
			t.Errorf("the answer calls the user's choice %q:\n%s", bad, o.text)
		}
	}
}

// When the engine moves the turn into the chosen mode (turn-scoped templates
// enter it with the sequence done), the model answers instead of starting
// again; under the documented rules it re-enters at position 0 and the model
// runs the sequence the engine asks for.
func TestFollowsEngineTransitions(t *testing.T) {
	tools := cognitiveReasonerTools()
	seq := []string{"critique", "debate", "reflect"}
	tests := []struct {
		name       string
		turnScoped bool
		want       []string
	}{
		{"turn scoped", true, seq},
		{"documented rules", false, append(slices.Clone(seq), seq...)},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snapshot := func(calls []chat.ToolCall) *chat.Snapshot {
				n := len(calls)
				if n < 3 {
					return &chat.Snapshot{ActiveStep: "DefaultMode", OfferedTools: toolNames(tools)}
				}
				idx := 3
				if !tt.turnScoped {
					idx = min(n-3, 3)
				}
				snap := &chat.Snapshot{ActiveStep: "EvaluationMode", SequenceIndex: idx, Sequence: seq,
					OfferedTools: []string{"critique", "debate", "reflect", "search"}}
				if idx < 3 {
					snap.OfferedTools = []string{seq[idx]}
				}
				return snap
			}
			req := defaultStepRequest(user("Critique the argument that remote work improves productivity"))
			calls, final := runTurn(t, m, req, snapshot)
			if got := callNames(calls); !slices.Equal(got, tt.want) {
				t.Fatalf("calls = %v, want %v", got, tt.want)
			}
			if !strings.Contains(final, "**Mode:** EvaluationMode") {
				t.Errorf("final answer does not name the mode:\n%s", final)
			}
		})
	}
}

// Same request, same events: the whole turn, run twice.
func TestDeterministic(t *testing.T) {
	m := New(Config{})
	run := func() []chat.Event {
		req := defaultStepRequest(user("Compare solar and wind energy for residential power generation"))
		var all []chat.Event
		for range 5 {
			events, err := collect(context.Background(), m, req)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, events...)
			var c *chat.ToolCall
			for _, ev := range events {
				if ev.Kind == chat.KindToolCall {
					c = ev.ToolCall
				}
			}
			if c == nil {
				break
			}
			req.Messages = append(req.Messages,
				chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{*c}},
				chat.Message{Role: chat.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: fakeResult(1, *c)})
		}
		return all
	}
	a, b := run(), run()
	if len(a) < 10 {
		t.Fatalf("only %d events in a whole turn", len(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same turn differ")
	}
}

// Cancelling during the word delay ends the stream with ctx.Err(). The delay
// is an hour, so a stream that waited it out would hang the test instead of
// passing.
func TestCancelDuringStreaming(t *testing.T) {
	m := New(Config{Delay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := llmorch.Request{Messages: []chat.Message{user("Tell me about tides")}}
	deltas := 0
	var gotErr error
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			gotErr = err
			break
		}
		if ev.Kind == chat.KindTextDelta {
			deltas++
			cancel()
		}
	}
	if !errors.Is(gotErr, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", gotErr)
	}
	if deltas != 1 {
		t.Fatalf("%d deltas before the error, want 1", deltas)
	}

	// A context cancelled before the call yields only the error.
	events, err := collect(ctx, New(Config{}), req)
	if !errors.Is(err, context.Canceled) || len(events) != 0 {
		t.Fatalf("cancelled before the call: events %v, err %v", events, err)
	}
}

// A consumer that stops early is not called again.
func TestStopEarly(t *testing.T) {
	m := New(Config{})
	n := 0
	for range m.Stream(context.Background(), llmorch.Request{Messages: []chat.Message{user("Tell me about tides")}}) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("n = %d", n)
	}
}

// The echo marker streams the rest of the message verbatim, HTML included,
// and calls no tool even when tools and a mode would fit.
func TestEcho(t *testing.T) {
	tests := []struct{ message, want string }{
		{"[offline:echo] <img src=x onerror=alert(1)>", "<img src=x onerror=alert(1)>"},
		{"Critique this [offline:echo]<script>alert('x')</script> and **bold**\n\n| a | b |",
			"<script>alert('x')</script> and **bold**\n\n| a | b |"},
		{"[offline:echo]", ""},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			o := call(t, m, defaultStepRequest(user(tt.message)))
			if len(o.calls) != 0 {
				t.Fatalf("calls = %v, want none", callNames(o.calls))
			}
			if o.text != tt.want {
				t.Fatalf("text = %q, want %q", o.text, tt.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	m := New(Config{})
	short := call(t, m, llmorch.Request{Messages: []chat.Message{user("Hi")}})
	long := call(t, m, defaultStepRequest(user("Hi")))
	for _, o := range []outcome{short, long} {
		u := *o.usage
		if u.Prompt <= 0 || u.Completion <= 0 || u.Total != u.Prompt+u.Completion {
			t.Errorf("usage %+v: want positive counts and Total = Prompt + Completion", u)
		}
		if want := int64((len([]rune(o.text)) + 3) / 4); u.Completion != want {
			t.Errorf("completion = %d, want %d for %d characters", u.Completion, want, len(o.text))
		}
	}
	if long.usage.Prompt <= short.usage.Prompt+100 {
		t.Errorf("prompt with seven tool specs (%d) is not well above the bare prompt (%d)", long.usage.Prompt, short.usage.Prompt)
	}
}

func TestCallIDs(t *testing.T) {
	tests := []struct {
		name string
		msgs []chat.Message
		want string
	}{
		{"first", []chat.Message{user("x")}, "call_1"},
		{"after earlier turns", []chat.Message{
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1"}, {ID: "call_2"}}},
			user("x"),
		}, "call_3"},
		{"skips IDs in use", []chat.Message{
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_2"}}},
			{Role: chat.RoleTool, ToolCallID: "call_3"},
			user("x"),
		}, "call_4"},
		{"provider IDs", []chat.Message{
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "toolu_01"}}},
		}, "call_2"},
	}
	for _, tt := range tests {
		if got := nextCallID(tt.msgs); got != tt.want {
			t.Errorf("%s: nextCallID = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDelayFromEnv(t *testing.T) {
	tests := []struct {
		value   string
		unset   bool
		want    time.Duration
		wantErr string
	}{
		{unset: true, want: DefaultDelay},
		{value: "", want: DefaultDelay},
		{value: "0", want: 0},
		{value: " 40 ", want: 40 * time.Millisecond},
		{value: "10000", want: 10 * time.Second},
		{value: "10001", wantErr: "want 0 to 10000 milliseconds"},
		{value: "-1", wantErr: "want 0 to 10000 milliseconds"},
		{value: "15ms", wantErr: `OFFLINE_MODEL_DELAY_MS="15ms": want a whole number of milliseconds`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Setenv(DelayEnv, tt.value)
			if tt.unset {
				// t.Setenv restores the variable afterwards.
				if err := os.Unsetenv(DelayEnv); err != nil {
					t.Fatal(err)
				}
			}
			got, err := DelayFromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DelayFromEnv() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestNewAndInfo(t *testing.T) {
	tests := []struct {
		cfg       Config
		wantName  string
		wantDelay time.Duration
	}{
		{Config{}, DefaultName, 0},
		{Config{Name: " demo ", Delay: 5 * time.Millisecond}, "demo", 5 * time.Millisecond},
		{Config{Delay: -time.Second}, DefaultName, 0},
	}
	for _, tt := range tests {
		m := New(tt.cfg)
		if info := m.Info(); info.Provider != "offline" || info.Model != tt.wantName || m.delay != tt.wantDelay {
			t.Errorf("New(%+v): info %+v, delay %v; want offline/%s, %v", tt.cfg, info, m.delay, tt.wantName, tt.wantDelay)
		}
	}
}

// A tool whose parameters are not JSON fails the call with an error that
// names the tool, instead of a call with made-up arguments.
func TestBadSchema(t *testing.T) {
	req := llmorch.Request{
		Messages: []chat.Message{user("Search for the latest news on fusion")},
		Tools:    []chat.ToolSpec{{Name: "search", Description: "Search the web", Parameters: json.RawMessage(`{"type": "object", "properties": [}`)}},
	}
	_, err := collect(context.Background(), New(Config{}), req)
	if err == nil || !strings.Contains(err.Error(), `tool "search": parameters schema`) {
		t.Fatalf("err = %v, want a parameters schema error naming the tool", err)
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"## Title\n\nBody text.", []string{"## ", "Title\n\n", "Body ", "text."}},
		{"  lead and trail  ", []string{"  lead ", "and ", "trail  "}},
	}
	for _, tt := range tests {
		if got := splitWords(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTopicPhrase(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Critique the argument that remote work improves productivity", "remote work improves productivity"},
		{"Research the history of electric cars", "history of electric cars"},
		{"Please compare solar and wind energy for residential power generation.", "solar and wind energy for residential power generation"},
		{"Debate whether cryptocurrencies will eventually replace traditional banking", "cryptocurrencies will eventually replace traditional banking"},
		{"How can cities solve traffic congestion problems?", "how can cities solve traffic congestion problems"},
		{"NASA budget cuts", "NASA budget cuts"},
		{"Critique", "Critique"},
		{"   ", "your question"},
	}
	for _, tt := range tests {
		if got := topicPhrase(tt.in); got != tt.want {
			t.Errorf("topicPhrase(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTerms(t *testing.T) {
	tests := []struct {
		message string
		want    []string
	}{
		{"Critique the argument that remote work improves productivity", []string{"remote work", "productivity"}},
		{"Research the history of electric cars", []string{"history", "electric cars"}},
		{"Debate whether cryptocurrencies will eventually replace traditional banking", []string{"cryptocurrencies", "traditional banking"}},
		{"How can cities solve traffic congestion problems?", []string{"cities", "traffic congestion problems"}},
		{"What is the capital of France?", []string{"capital", "France"}},
		{"a b c", nil},
	}
	for _, tt := range tests {
		if got := newTopic(tt.message).terms; !slices.Equal(got, tt.want) {
			t.Errorf("terms of %q = %q, want %q", tt.message, got, tt.want)
		}
	}
}

// An agent shaped like AgentDock's "orchestrated agent": one short sequence
// (search -> think) and single-tool modes. Requests that name one tool get
// that tool alone; a research request follows the sequence, also after the
// engine moved the turn into a follow-up step without a sequence.
func TestOrchestratedAgentShape(t *testing.T) {
	tools := cognitiveReasonerTools()
	modes := []llmorch.Mode{
		{Name: "Initial Greeting", Description: "Start with a friendly greeting and ask how you can help.", Default: true},
		{Name: "Research Sequence", Description: "First search for relevant information, then use structured thinking to analyze the findings.",
			Sequence: [][]string{{"search"}, {"think"}}, Tools: []string{"search", "think"}},
		{Name: "Web Research Mode", Description: "Use web search tools to find information requested by the user.", Tools: []string{"search"}},
		{Name: "Tool Follow-up Mode", Description: "After using a tool, follow up on results."},
	}
	tests := []struct {
		message string
		want    []string
	}{
		{"Research the future of renewable energy", []string{"search", "think"}},
		{"Think through how to solve the traveling salesman problem", []string{"think"}},
		{"Help me reflect on my recent project experience", []string{"reflect"}},
		{"Compare electric vehicles and hybrid cars", []string{"compare"}},
		{"Brainstorm ideas for a new mobile app.", []string{"brainstorm"}},
	}
	m := New(Config{})
	for _, tt := range tests {
		t.Run(tt.message, func(t *testing.T) {
			snapshot := func(calls []chat.ToolCall) *chat.Snapshot {
				step := "Initial Greeting"
				if len(calls) > 0 {
					step = "Tool Follow-up Mode" // its tool_used conditions pass
				}
				return &chat.Snapshot{ActiveStep: step, OfferedTools: toolNames(tools)}
			}
			req := llmorch.Request{Messages: []chat.Message{user(tt.message)}, Tools: tools, Modes: modes}
			calls, final := runTurn(t, m, req, snapshot)
			if got := callNames(calls); !slices.Equal(got, tt.want) {
				t.Fatalf("calls = %v, want %v", got, tt.want)
			}
			if !strings.Contains(final, "### Conclusion") {
				t.Errorf("no synthesis in the final answer:\n%s", final)
			}
		})
	}
}

// TestKeepsToOffered: with stable tool filtering the request lists every
// tool but offers some; the offline model calls only an offered one, and
// with none offered it answers. Its Info says it restricts itself, which
// gives its agents stable tool filtering by default.
func TestKeepsToOffered(t *testing.T) {
	m := New(Config{})
	if !m.Info().RestrictsTools {
		t.Fatal("Info().RestrictsTools is false")
	}
	tools := cognitiveReasonerTools()
	for _, tt := range []struct {
		offered []string
		want    []string
	}{
		{[]string{"think"}, []string{"think"}},
		{[]string{"reflect", "think"}, []string{"think"}},
		{[]string{}, nil},
	} {
		// "Search for ..." would make the model search, were search offered.
		req := llmorch.Request{Messages: []chat.Message{user("Search for the latest news on fusion power, and think about it")},
			Tools: tools, Offered: tt.offered, Modes: cognitiveReasonerModes()}
		o := call(t, m, req)
		if got := callNames(o.calls); !slices.Equal(got, tt.want) {
			t.Errorf("offered %v: calls %v, want %v", tt.offered, got, tt.want)
		}
	}
}

// TestOnlyTool: a step the message led to that offers one tool gets it
// called once; the default step, or a step offering more, does not.
func TestOnlyTool(t *testing.T) {
	all := cognitiveReasonerTools()
	var search chat.ToolSpec
	for _, s := range all {
		if s.Name == "search" {
			search = s
		}
	}
	modes := []llmorch.Mode{
		{Name: "QuickAnswer", Description: "One search, then a short answer with its source."},
		{Name: "Conversation", Default: true},
	}
	const msg = "quick: when was the first transatlantic telegraph cable laid?"
	m := New(Config{})
	for _, tt := range []struct {
		name  string
		step  string
		tools []chat.ToolSpec
		want  string
	}{
		{"a step of one tool", "QuickAnswer", []chat.ToolSpec{search}, "search"},
		{"the default step", "Conversation", []chat.ToolSpec{search}, ""},
		{"a step of several tools", "QuickAnswer", all, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			snap := chat.Snapshot{ActiveStep: tt.step, OfferedTools: toolNames(tt.tools)}
			o := call(t, m, llmorch.Request{Messages: []chat.Message{user(msg)}, Tools: tt.tools, Orchestration: &snap, Modes: modes})
			if tt.want == "" {
				if len(o.calls) != 0 {
					t.Fatalf("calls %v, want none", callNames(o.calls))
				}
				return
			}
			if len(o.calls) != 1 || o.calls[0].Name != tt.want {
				t.Fatalf("calls %v, want %s", callNames(o.calls), tt.want)
			}
			// Once it ran, the model answers.
			msgs := []chat.Message{user(msg), {Role: chat.RoleAssistant, ToolCalls: o.calls},
				{Role: chat.RoleTool, ToolCallID: o.calls[0].ID, ToolName: "search", Content: "## Search results from Wikipedia: cable\n\n1. [Transatlantic telegraph cable](https://en.wikipedia.org/wiki/Transatlantic_telegraph_cable)"}}
			if o := call(t, m, llmorch.Request{Messages: msgs, Tools: tt.tools, Orchestration: &snap, Modes: modes}); len(o.calls) != 0 || !strings.Contains(o.text, "Transatlantic telegraph cable") {
				t.Fatalf("after the call: calls %v, text %q", callNames(o.calls), o.text)
			}
		})
	}
}
