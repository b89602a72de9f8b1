package offline

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// argumentSchemas are parameter schemas of many shapes; every generated
// argument object must validate against its schema.
var argumentSchemas = []struct {
	name   string
	schema string
	// check inspects the decoded arguments; nil checks validity only.
	check func(t *testing.T, args map[string]any)
}{
	{"search with limit", `{"type":"object","properties":{"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":10}},"required":["query"]}`,
		func(t *testing.T, a map[string]any) {
			if a["query"] != "solar and wind energy for homes" || a["limit"] != 5.0 {
				t.Errorf("query/limit = %v/%v", a["query"], a["limit"])
			}
		}},
	{"a place is a name, not prose", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
		func(t *testing.T, a map[string]any) {
			if a["city"] != "homes" {
				t.Errorf("city = %q, want the message's last term", a["city"])
			}
		}},
	{"limit below the default count", `{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":3}},"required":["limit"]}`,
		func(t *testing.T, a map[string]any) {
			if a["limit"] != 3.0 {
				t.Errorf("limit = %v, want the maximum 3", a["limit"])
			}
		}},
	{"exclusive bounds and multipleOf", `{"type":"object","properties":{
		"n":{"type":"integer","exclusiveMinimum":10,"exclusiveMaximum":12},
		"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},
		"m":{"type":"integer","minimum":7,"multipleOf":5},
		"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["n","x","m","confidence"]}`,
		func(t *testing.T, a map[string]any) {
			if a["n"] != 11.0 || a["m"] != 10.0 || a["confidence"] != 0.7 {
				t.Errorf("n/m/confidence = %v/%v/%v", a["n"], a["m"], a["confidence"])
			}
		}},
	{"draft-04 boolean exclusive minimum", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":2}},"required":["n"]}`, nil},
	{"enum by message words", `{"type":"object","properties":{"kind":{"type":"string","enum":["summary","comparison","critique"]}},"required":["kind"]}`,
		func(t *testing.T, a map[string]any) {
			if a["kind"] != "comparison" {
				t.Errorf("kind = %v, want comparison for a compare request", a["kind"])
			}
		}},
	{"const and boolean", `{"type":"object","properties":{"v":{"const":2},"deep":{"type":"boolean"},"safe":{"type":"boolean","default":true}},"required":["v","deep","safe"]}`,
		func(t *testing.T, a map[string]any) {
			if a["v"] != 2.0 || a["deep"] != false || a["safe"] != true {
				t.Errorf("v/deep/safe = %v/%v/%v", a["v"], a["deep"], a["safe"])
			}
		}},
	{"compare items and criteria", `{"type":"object","properties":{
		"items":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":4,"uniqueItems":true},
		"criteria":{"type":"array","items":{"type":"string"},"minItems":5},
		"analysis":{"type":"string"}},"required":["items","criteria","analysis"]}`,
		func(t *testing.T, a map[string]any) {
			items, _ := a["items"].([]any)
			if len(items) < 2 || items[0] != "solar energy" || items[1] != "wind energy" {
				t.Errorf("items = %v, want solar energy and wind energy first", items)
			}
			if c, _ := a["criteria"].([]any); len(c) != 5 {
				t.Errorf("criteria = %v, want 5", c)
			}
		}},
	{"unique enum items", `{"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","b","c"]},"minItems":3,"uniqueItems":true}},"required":["tags"]}`, nil},
	{"empty array allowed only", `{"type":"object","properties":{"none":{"type":"array","maxItems":0}},"required":["none"]}`, nil},
	{"nested object", `{"type":"object","properties":{"options":{"type":"object","properties":{"depth":{"type":"integer","minimum":1,"maximum":3},"region":{"type":"string","maxLength":10}},"required":["depth","region"],"additionalProperties":false}},"required":["options"]}`, nil},
	{"array of objects", `{"type":"object","properties":{"perspectives":{"type":"array","minItems":2,"items":{"type":"object","properties":{"position":{"type":"string"},"argument":{"type":"string"}},"required":["position","argument"]}}},"required":["perspectives"]}`, nil},
	{"AgentDock alias", `{"type":"object","properties":{"topic":{"type":"string"},"adTopic":{"type":"string"},"reasoning":{"type":"string"}},"required":["reasoning"],"not":{"required":["topic","adTopic"]}}`,
		func(t *testing.T, a map[string]any) {
			if _, ok := a["adTopic"]; ok {
				t.Errorf("the optional alias adTopic was generated next to topic: %v", a)
			}
		}},
	{"required alias only", `{"type":"object","properties":{"adTopic":{"type":"string"}},"required":["adTopic"]}`,
		func(t *testing.T, a map[string]any) {
			if a["adTopic"] != "solar and wind energy for homes" {
				t.Errorf("adTopic = %v, want the topic phrase", a["adTopic"])
			}
		}},
	{"nullable type list", `{"type":"object","properties":{"note":{"type":["null","string"],"maxLength":30}},"required":["note"]}`, nil},
	{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":3}},"required":["b"]}]}`, nil},
	{"anyOf", `{"type":"object","properties":{"v":{"anyOf":[{"type":"integer","minimum":4},{"type":"string"}]}},"required":["v"]}`, nil},
	{"long minLength", `{"type":"object","properties":{"essay":{"type":"string","minLength":5000}},"required":["essay"]}`, nil},
	{"tight maxLength", `{"type":"object","properties":{"summary":{"type":"string","minLength":12,"maxLength":12}},"required":["summary"]}`, nil},
	{"pattern", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[a-z-]+$"},"opt":{"type":"string","pattern":"^[0-9]{6}$"}},"required":["code"]}`,
		func(t *testing.T, a map[string]any) {
			if _, ok := a["opt"]; ok {
				t.Errorf("an optional field whose pattern cannot be met was generated: %v", a)
			}
		}},
	{"formats", `{"type":"object","properties":{"when":{"type":"string","format":"date"},"at":{"type":"string","format":"date-time"},"url":{"type":"string","format":"uri"},"mail":{"type":"string","format":"email"},"id":{"type":"string","format":"uuid"}},"required":["when","at","url","mail","id"]}`, nil},
	{"untyped properties", `{"properties":{"subject":{},"count":{"minimum":2}},"required":["subject","count","extra"]}`, nil},
	{"boolean schemas", `{"type":"object","properties":{"any":true,"never":false},"required":["any"]}`, nil},
	{"empty", `{}`, nil},
	{"file system paths are paths, not prose", `{"type":"object","properties":{"path":{"type":"string"},"paths":{"type":"array","items":{"type":"string"}},"sourceDir":{"type":"string"}},"required":["path","paths","sourceDir"]}`,
		func(t *testing.T, a map[string]any) {
			if a["path"] != "." || a["sourceDir"] != "." || !slices.Equal(a["paths"].([]any), []any{".", ".", "."}) {
				t.Errorf("paths = %v, want . for a message that names none", a)
			}
		}},
}

// TestValidArguments: the arguments a call gets satisfy the tool's schema
// as a validator reads it: a path the message names goes to a path field
// (an MCP file system tool's schema, as the server lists it), and when the
// full arguments fail a keyword the generator does not read, the required
// ones alone are sent.
func TestValidArguments(t *testing.T) {
	readFile := `{"type":"object","properties":{"path":{"type":"string"},"tail":{"type":"number","description":"If provided, returns only the last N lines of the file"},"head":{"type":"number"}},"required":["path"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`
	tests := []struct {
		name, schema, message, want string
	}{
		{"MCP read_text_file, a path named", readFile, "Summarise notes/todo.md for me", `"path":"notes/todo.md"`},
		{"MCP read_text_file, a file name", readFile, "What is in README.md?", `"path":"README.md"`},
		{"MCP read_text_file, no path", readFile, "What is in my files?", `"path":"."`},
		// head and tail are settings without a default: left out, as the
		// server refuses both at once.
		{"MCP read_text_file, only the path", readFile, "Read the file todo.txt", `{"path":"todo.txt"}`},
		{"an optional field no value satisfies", `{"type":"object","properties":{"topic":{"type":"string"},"extra":{"type":"string","not":{"type":"string"}}},"required":["topic"]}`,
			"remote work", `{"topic":"remote work"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := chat.ToolSpec{Name: "tool", Parameters: json.RawMessage(tt.schema)}
			args, err := validArguments(spec, newTopic(tt.message))
			if err != nil {
				t.Fatal(err)
			}
			validate(t, spec, args)
			if !strings.Contains(string(args), tt.want) {
				t.Errorf("arguments %s lack %s", args, tt.want)
			}
		})
	}
	_, err := validArguments(chat.ToolSpec{Name: "tool", Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string","not":{"type":"string"}}},"required":["x"]}`)}, newTopic("x"))
	if err == nil || !strings.Contains(err.Error(), "no generated arguments satisfy") {
		t.Errorf("a schema no generated value satisfies: %v", err)
	}
}

func TestArgumentsValidate(t *testing.T) {
	tp := newTopic("Compare solar and wind energy for homes")
	for _, tt := range argumentSchemas {
		t.Run(tt.name, func(t *testing.T) {
			spec := chat.ToolSpec{Name: "tool", Parameters: json.RawMessage(tt.schema)}
			args, err := arguments(spec, tp, false)
			if err != nil {
				t.Fatalf("arguments: %v", err)
			}
			validate(t, spec, args)
			var decoded map[string]any
			if err := json.Unmarshal(args, &decoded); err != nil {
				t.Fatalf("arguments %s are not a JSON object: %v", args, err)
			}
			if tt.check != nil {
				tt.check(t, decoded)
			}
		})
	}
}

// Every tool of the Cognitive Reasoner gets valid arguments for each of its
// example prompts, with the sections its description names.
func TestCognitiveToolArguments(t *testing.T) {
	prompts := []string{
		"Critique the argument that remote work improves productivity",
		"Compare solar and wind energy for residential power generation",
		"Brainstorm innovative ways to reduce food waste in restaurants",
		"Debate whether cryptocurrencies will eventually replace traditional banking",
		"x",
	}
	wantHeadings := map[string][]string{
		"think":      {"Problem", "Facts and assumptions", "Reasoning", "Uncertainties", "Conclusion"},
		"reflect":    {"Context", "What happened", "What worked", "What fell short", "Lessons", "Next time"},
		"compare":    {"Options", "Criteria", "Side by side", "Trade-offs", "Recommendation"},
		"critique":   {"Understanding", "Strengths", "Issues", "Suggestions", "Overall assessment"},
		"brainstorm": {"Reframing", "Quick wins", "Process changes", "Bolder bets", "Most promising", "Next steps"},
		"debate":     {"The question", "Position: in favour", "Position: against", "Common ground", "Judgement"},
	}
	for _, prompt := range prompts {
		tp := newTopic(prompt)
		for _, spec := range cognitiveReasonerTools() {
			args, err := arguments(spec, tp, false)
			if err != nil {
				t.Fatalf("%s / %q: %v", spec.Name, prompt, err)
			}
			validate(t, spec, args)
			var fields map[string]string
			if err := json.Unmarshal(args, &fields); err != nil && spec.Name != "search" {
				t.Fatalf("%s: %v", spec.Name, err)
			}
			for _, body := range fields {
				if !strings.Contains(body, "###") {
					continue
				}
				var got []string
				for line := range strings.Lines(body) {
					if h, ok := strings.CutPrefix(line, "### "); ok {
						got = append(got, strings.TrimSpace(h))
					}
				}
				if !slices.Equal(got, wantHeadings[spec.Name]) {
					t.Errorf("%s / %q: headings %q, want %q", spec.Name, prompt, got, wantHeadings[spec.Name])
				}
			}
		}
	}
}

// Without headings in the description, the field and tool names choose the
// sections.
func TestSectionsByKind(t *testing.T) {
	tests := []struct {
		tool, field, first string
	}{
		{"critique", "analysis", "Understanding"},
		{"compare_options", "analysis", "Options"},
		{"anything", "reasoning", "Problem"},
		{"anything", "perspectives", "The question"},
		{"anything", "ideas", "Reframing"},
		{"anything", "reflection", "Context"},
		{"anything", "notes", "Context"},
	}
	tp := newTopic("Assess the plan")
	for _, tt := range tests {
		got := sections(chat.ToolSpec{Name: tt.tool, Description: "No headings here."}, tt.field, tp)
		if !strings.HasPrefix(got, "### "+tt.first+"\n") {
			t.Errorf("%s.%s: sections start %q, want heading %q", tt.tool, tt.field, got[:min(len(got), 40)], tt.first)
		}
	}
}

// FuzzArguments feeds arbitrary schemas and messages to the generator: it
// must not panic, and what it returns must be a JSON object.
func FuzzArguments(f *testing.F) {
	for _, s := range argumentSchemas {
		f.Add(s.schema, "Compare solar and wind energy for homes")
	}
	for _, s := range cognitiveReasonerTools() {
		f.Add(string(s.Parameters), "Critique the argument that remote work improves productivity")
	}
	f.Add(`{"type":"object","properties":{"a":{"type":"integer","minimum":5,"maximum":1}}}`, "How many?")
	f.Add(`{"type":["object"],"required":["K"]}`, "\u212a x")
	f.Fuzz(func(t *testing.T, schema, message string) {
		spec := chat.ToolSpec{Name: "t", Parameters: json.RawMessage(schema)}
		args, err := arguments(spec, newTopic(message), false)
		if err != nil {
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil {
			t.Fatalf("arguments %s for schema %s are not a JSON object: %v", args, schema, err)
		}
	})
}

// BenchmarkFinalAnswer measures one final-answer call after a three-tool
// evaluation turn, without word delay: the cost of planning, writing and
// streaming the synthesis.
func BenchmarkFinalAnswer(b *testing.B) {
	m := New(Config{Delay: 0})
	req := defaultStepRequest(user("Critique the argument that remote work improves productivity"))
	for i, name := range []string{"critique", "debate", "reflect"} {
		spec := findTool(req.Tools, name)
		args, err := arguments(spec, newTopic(req.Messages[0].Content), false)
		if err != nil {
			b.Fatal(err)
		}
		c := chat.ToolCall{ID: nextCallID(req.Messages), Name: name, Arguments: args}
		req.Messages = append(req.Messages,
			chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{c}},
			chat.Message{Role: chat.RoleTool, ToolCallID: c.ID, ToolName: name, Content: fakeResult(i+1, c)})
	}
	req.Orchestration = &chat.Snapshot{ActiveStep: "EvaluationMode", SequenceIndex: 3,
		Sequence: []string{"critique", "debate", "reflect"}, OfferedTools: []string{"critique", "debate", "reflect", "search"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		words := 0
		for ev, err := range m.Stream(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			if ev.Kind == chat.KindToolCall {
				b.Fatal("tool call in a final-answer call")
			}
			if ev.Kind == chat.KindTextDelta {
				words++
			}
		}
		if words < 100 {
			b.Fatalf("only %d words", words)
		}
	}
}

var _ llmorch.Model = New(Config{})

// Padding to minLength reaches the minimum exactly or just past it, from an
// empty start too (a field whose format gives no text).
func TestMinLengthPadding(t *testing.T) {
	for _, tt := range []struct {
		phrase string
		min    int
	}{{"abc", 4}, {"abc", 3}, {"abc", 7}, {"", 2}, {"ü", 5}} {
		tp := &topic{phrase: tt.phrase}
		min := tt.min
		v, err := fitString("", &schema{MinLength: &min}, "f", tp)
		if err != nil {
			t.Fatal(err)
		}
		if n := len([]rune(v.(string))); n < tt.min || n > tt.min+len([]rune(tt.phrase))+1 {
			t.Errorf("phrase %q, minLength %d: got %q (%d runes)", tt.phrase, tt.min, v, n)
		}
	}
	huge := maxGenerated + 1
	if _, err := fitString("", &schema{MinLength: &huge}, "f", &topic{phrase: "x"}); err == nil || !strings.Contains(err.Error(), `field "f": minLength`) {
		t.Errorf("huge minLength: err = %v, want a minLength error naming the field", err)
	}
}
