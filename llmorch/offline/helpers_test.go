package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// cognitiveTool builds a tool shaped like the project's cognitive tools: a
// short title field and a long body field, both required, and a description
// that names the sections it wants.
func cognitiveTool(name, title, body, description string) chat.ToolSpec {
	params := fmt.Sprintf(`{
		"type": "object",
		"properties": {
			%q: {"type": "string", "minLength": 1, "maxLength": 500},
			%q: {"type": "string", "minLength": 1, "maxLength": 100000}
		},
		"required": [%q, %q],
		"additionalProperties": false
	}`, title, body, title, body)
	return chat.ToolSpec{Name: name, Description: description, Parameters: json.RawMessage(params)}
}

// cognitiveReasonerTools are the seven tools of the Cognitive Reasoner.
func cognitiveReasonerTools() []chat.ToolSpec {
	return []chat.ToolSpec{
		{
			Name:        "search",
			Description: "Search the web for current information on a topic.",
			Parameters: json.RawMessage(`{
				"type": "object",
				"properties": {
					"query": {"type": "string", "minLength": 1, "maxLength": 400},
					"limit": {"type": "integer", "minimum": 1, "maximum": 10}
				},
				"required": ["query"],
				"additionalProperties": false
			}`),
		},
		cognitiveTool("think", "topic", "reasoning", "Reason through a problem step by step. Pass it in `reasoning` "+
			"under these headings: **Problem**, **Facts and assumptions**, **Reasoning**, **Uncertainties**, **Conclusion**."),
		cognitiveTool("reflect", "topic", "reflection", "Look back and draw lessons. Pass it in `reflection` under "+
			"these headings: **Context**, **What happened**, **What worked**, **What fell short**, **Lessons**, **Next time**."),
		cognitiveTool("compare", "topic", "comparison", "Compare options. Pass it in `comparison` under these "+
			"headings: **Options**, **Criteria**, **Side by side**, **Trade-offs**, **Recommendation**."),
		cognitiveTool("critique", "subject", "analysis", "Evaluate a piece of work. Pass it in `analysis` under these "+
			"headings: **Understanding**, **Strengths**, **Issues**, **Suggestions**, **Overall assessment**."),
		cognitiveTool("brainstorm", "challenge", "ideas", "Generate ideas. Pass them in `ideas` under these headings: "+
			"**Reframing**, several **idea groups**, **Most promising**, **Next steps**."),
		cognitiveTool("debate", "topic", "perspectives", "Argue each position. Pass it in `perspectives` under these "+
			"headings: **The question**, one **Position** section per viewpoint, **Common ground**, **Judgement**."),
	}
}

// cognitiveReasonerModes are the steps of the Cognitive Reasoner template as
// the service describes them to the model.
func cognitiveReasonerModes() []llmorch.Mode {
	seq := func(tools ...string) [][]string {
		out := make([][]string, len(tools))
		for i, t := range tools {
			out[i] = []string{t}
		}
		return out
	}
	return []llmorch.Mode{
		{Name: "ResearchMode", Description: "Research-based cognitive flow", Sequence: seq("search", "think", "reflect"), Tools: []string{"search", "think", "reflect"}},
		{Name: "ProblemSolvingMode", Description: "Structured problem-solving sequence", Sequence: seq("think", "brainstorm", "compare"), Tools: []string{"think", "brainstorm", "compare", "search"}},
		{Name: "EvaluationMode", Description: "Critical evaluation sequence", Sequence: seq("critique", "debate", "reflect"), Tools: []string{"critique", "debate", "reflect", "search"}},
		{Name: "ComparisonMode", Description: "Comparative analysis sequence", Sequence: seq("search", "compare", "reflect"), Tools: []string{"search", "compare", "reflect"}},
		{Name: "IdeationMode", Description: "Creative ideation sequence", Sequence: seq("think", "brainstorm", "critique"), Tools: []string{"think", "brainstorm", "critique"}},
		{Name: "DebateMode", Description: "Structured debate sequence", Sequence: seq("search", "debate", "reflect"), Tools: []string{"search", "debate", "reflect"}},
		{Name: "DefaultMode", Description: "Default mode with all tools", Default: true, Tools: []string{"search", "think", "reflect", "compare", "critique", "brainstorm", "debate"}},
	}
}

func toolNames(specs []chat.ToolSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// defaultStepRequest is a Cognitive Reasoner request in its default step,
// offering all seven tools.
func defaultStepRequest(msgs ...chat.Message) llmorch.Request {
	tools := cognitiveReasonerTools()
	return llmorch.Request{
		System:        "You are the Cognitive Reasoner.",
		Messages:      msgs,
		Tools:         tools,
		Orchestration: &chat.Snapshot{ActiveStep: "DefaultMode", OfferedTools: toolNames(tools)},
		Modes:         cognitiveReasonerModes(),
	}
}

func user(text string) chat.Message { return chat.Message{Role: chat.RoleUser, Content: text} }

// collect runs one model call and returns its events and its error.
func collect(ctx context.Context, m *Model, req llmorch.Request) ([]chat.Event, error) {
	var events []chat.Event
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// outcome is one model call, digested.
type outcome struct {
	text  string
	calls []chat.ToolCall
	usage *chat.Usage
}

// call runs one model call and checks the event contract: deltas, then at
// most one tool call, then exactly one usage event, last.
func call(t *testing.T, m *Model, req llmorch.Request) outcome {
	t.Helper()
	events, err := collect(context.Background(), m, req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var o outcome
	var b strings.Builder
	for i, ev := range events {
		switch ev.Kind {
		case chat.KindTextDelta:
			if len(o.calls) > 0 || o.usage != nil {
				t.Fatalf("event %d: text delta after a tool call or usage", i)
			}
			if n := len(strings.Fields(ev.Text)); n != 1 {
				t.Fatalf("event %d: delta %q holds %d words, want 1", i, ev.Text, n)
			}
			b.WriteString(ev.Text)
		case chat.KindToolCall:
			if o.usage != nil {
				t.Fatalf("event %d: tool call after usage", i)
			}
			o.calls = append(o.calls, *ev.ToolCall)
		case chat.KindUsage:
			if o.usage != nil {
				t.Fatalf("event %d: second usage event", i)
			}
			o.usage = ev.Usage
		default:
			t.Fatalf("event %d: unexpected kind %q", i, ev.Kind)
		}
	}
	if o.usage == nil || events[len(events)-1].Kind != chat.KindUsage {
		t.Fatalf("the last event is not the usage event: %+v", events)
	}
	if len(o.calls) > 1 {
		t.Fatalf("%d tool calls in one model call, want at most 1", len(o.calls))
	}
	o.text = b.String()
	return o
}

// validate checks args against the tool's JSON Schema with a real validator.
func validate(t *testing.T, spec chat.ToolSpec, args json.RawMessage) {
	t.Helper()
	if err := validateErr(spec.Parameters, args); err != nil {
		t.Errorf("tool %q: arguments %s do not validate: %v", spec.Name, args, err)
	}
}

func validateErr(params, args json.RawMessage) error {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if err := c.AddResource("mem://tool.json", doc); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	sch, err := c.Compile("mem://tool.json")
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return sch.Validate(inst)
}

// fakeResult frames a call the way the cognitive tools do: a heading with the
// tool and its title argument, then the body argument. A numbered marker makes
// each result recognisable in the final answer.
func fakeResult(n int, c chat.ToolCall) string {
	var args map[string]any
	_ = json.Unmarshal(c.Arguments, &args)
	var title, body string
	for _, k := range []string{"topic", "subject", "challenge", "query"} {
		if s, ok := args[k].(string); ok {
			title = s
		}
	}
	for _, k := range []string{"reasoning", "reflection", "comparison", "analysis", "ideas", "perspectives"} {
		if s, ok := args[k].(string); ok {
			body = s
		}
	}
	if c.Name == "search" {
		body = "1. Source one on " + title + "\n2. Source two on " + title
	}
	return fmt.Sprintf("## Result %d of %s: %s\n\n%s", n, c.Name, title, body)
}

// runTurn plays one turn the way the service does, without orchestration
// changes: it calls the model, executes every tool call with fakeResult and
// feeds it back, until the model answers. snapshot, when not nil, gives the
// snapshot before each call from the calls made so far.
func runTurn(t *testing.T, m *Model, req llmorch.Request, snapshot func(calls []chat.ToolCall) *chat.Snapshot) ([]chat.ToolCall, string) {
	t.Helper()
	var calls []chat.ToolCall
	for step := 0; step < 20; step++ {
		if snapshot != nil {
			req.Orchestration = snapshot(calls)
		}
		o := call(t, m, req)
		if len(o.calls) == 0 {
			return calls, o.text
		}
		c := o.calls[0]
		spec := findTool(req.Tools, c.Name)
		if spec.Parameters == nil {
			t.Fatalf("the model called %q, which was not offered", c.Name)
		}
		validate(t, spec, c.Arguments)
		calls = append(calls, c)
		req.Messages = append(req.Messages,
			chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{c}},
			chat.Message{Role: chat.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: fakeResult(len(calls), c)})
	}
	t.Fatalf("no final answer after 20 model calls; calls: %v", calls)
	return nil, ""
}

func callNames(calls []chat.ToolCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Name
	}
	return out
}
