package transcript

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/internal/testenv"
)

func runFile(t *testing.T, file string) *Report {
	t.Helper()
	tr, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestShippedTemplates(t *testing.T) {
	files, err := Files("../templates")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "../templates/"), func(t *testing.T) {
			rep := runFile(t, f)
			if rep.Failed() {
				var b strings.Builder
				rep.Print(&b)
				t.Errorf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
			}
		})
	}
}

// TestAgentDockTemplates plays transcripts of AgentDock's own templates,
// which stay in ../shared and are referenced, never copied.
func TestAgentDockTemplates(t *testing.T) {
	testenv.SharedDir(t)
	files, err := Files("testdata/agentdock")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("want a transcript per AgentDock template (3), found %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep := runFile(t, f)
			if rep.Failed() {
				var b strings.Builder
				rep.Print(&b)
				t.Errorf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
			}
		})
	}
}

// TestParallelAnswers plays the transcripts of answers that make several
// calls at once (testdata/parallel): a group then the next position, a
// step entered mid-answer, duplicates, and approvals that an earlier call
// of the same answer leaves or enters.
func TestParallelAnswers(t *testing.T) {
	files, err := Files("testdata/parallel")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep := runFile(t, f)
			if rep.Failed() {
				var b strings.Builder
				rep.Print(&b)
				t.Errorf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
			}
		})
	}
}

// parseRun parses a transcript written as if it were in testdata/ (so that
// relative template paths resolve) and runs it.
func parseRun(t *testing.T, data string) *Report {
	t.Helper()
	tr, err := Parse("testdata/inline.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestWrongExpectationsFail: every kind of expectation that does not hold
// fails the transcript, and each failure names the turn, the model call,
// what was expected and what the runtime did.
func TestWrongExpectationsFail(t *testing.T) {
	rep := parseRun(t, `{
	  "name": "wrong on purpose",
	  "template": "../../templates/cognitive-reasoner/template.json",
	  "turns": [
	    {"user": "Critique the argument that remote work improves productivity",
	     "model": [
	       {"toolCalls": [{"name": "critique", "arguments": {"subject": "s", "analysis": "a"}}]},
	       {"toolCalls": [{"name": "reflect", "arguments": {"topic": "t", "reflection": "r"}}]},
	       {"toolCalls": [{"name": "debate", "arguments": {"topic": "t", "perspectives": "p"}}]},
	       {"text": "done"}
	     ],
	     "expect": {"offered": [["critique"], ["critique"], ["debate"]], "refused": [], "activeStep": "ResearchMode",
	                "sequenceIndex": 3, "recentlyUsedTools": ["critique"], "finishReason": "max-steps"}},
	    {"user": "Research the history of electric cars",
	     "model": [{"toolCalls": [{"name": "search", "arguments": {"query": "ev history"}}]}],
	     "toolResults": {"search": "1. a result"},
	     "expect": {"activeStep": null}},
	    {"user": "Hello",
	     "model": [{"text": "hi"}, {"text": "never asked for"}, {"text": "nor this"}]}
	  ]}`)
	if !rep.Failed() {
		t.Fatal("the transcript passed")
	}
	got := strings.Join(rep.Mismatches(), "\n")
	for _, want := range []string{
		`turn 1 ("Critique the argument that remote work …"), model call 2 of 4: offered: expected [critique], got [debate]`,
		`turn 1 ("Critique the argument that remote work …"), model call 3 of 4: offered: expected [debate], got [debate]` + "\x00", // not a mismatch: see below
		`turn 1 ("Critique the argument that remote work …"), model call 4 of 4: offered: expected no model call 4, got [reflect]`,
		`turn 1 ("Critique the argument that remote work …"), model calls 1-4: refused: expected [], got [reflect (model call 2)]`,
		`turn 1 ("Critique the argument that remote work …"), after model call 4 of 4: activeStep: expected ResearchMode, got EvaluationMode`,
		`turn 1 ("Critique the argument that remote work …"), after model call 4 of 4: sequenceIndex: expected 3, got 2`,
		`turn 1 ("Critique the argument that remote work …"), after model call 4 of 4: recentlyUsedTools: expected [critique], got [critique, debate]`,
		`turn 1 ("Critique the argument that remote work …"), after model call 4 of 4: finishReason: expected max-steps, got stop`,
		`turn 2 ("Research the history of electric cars"), model call 2 of 2: model: expected no model call 2 (the transcript scripts 1 answer), got model call 2, offered [think]`,
		`turn 2 ("Research the history of electric cars"), after model call 2 of 2: activeStep: expected (none), got ResearchMode`,
		`turn 3 ("Hello"), after model call 1 of 1: model: expected 3 model calls (the transcript scripts 3 answers), got 1: the turn ended (stop) and the last 2 answers were not used`,
	} {
		if strings.HasSuffix(want, "\x00") {
			if strings.Contains(got, strings.TrimSuffix(want, "\x00")) {
				t.Errorf("a holding expectation is reported: %s", want)
			}
			continue
		}
		if !strings.Contains(got, want) {
			t.Errorf("mismatches lack\n  %s\ngot:\n%s", want, got)
		}
	}
	if n := len(rep.Mismatches()); n != 10 {
		t.Errorf("%d mismatches, want 10:\n%s", n, got)
	}
	// The printed report shows the same under each turn, with the calls.
	var b strings.Builder
	rep.Print(&b)
	for _, want := range []string{
		"FAIL wrong on purpose (testdata/inline.json)",
		"call 2: step=EvaluationMode seq=1 offered=[debate] -> calls reflect",
		`REFUSED reflect: Refused: tool "reflect" is not available in step "EvaluationMode"`,
		"MISMATCH model call 2 of 4: offered: expected [critique], got [debate]",
		"call 2: step=ResearchMode seq=1 offered=[think] -> (no answer in the transcript)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestToolsRunForReal: without a stand-in a tool runs (web search has no
// backend here, so it fails, and a tool that ran and failed is recorded);
// a stand-in replaces the result, or the failure, but arguments are still
// validated, and a call with invalid arguments is not recorded.
func TestToolsRunForReal(t *testing.T) {
	rep := parseRun(t, `{
	  "template": "../../templates/research-assistant/template.json",
	  "turns": [
	    {"user": "hello",
	     "model": [
	       {"toolCalls": [{"name": "search", "arguments": {"query": "real"}}]},
	       {"toolCalls": [{"name": "think", "arguments": {"topic": "t", "reasoning": "r"}}, {"name": "think", "arguments": {"topic": 3}}]},
	       {"text": "done"}
	     ],
	     "expect": {"recentlyUsedTools": ["search", "think"]}},
	    {"user": "tell me more",
	     "model": [
	       {"toolCalls": [{"name": "search", "arguments": {"query": "stand-in"}}, {"name": "search", "arguments": {"limit": 2}}]},
	       {"text": "done"}
	     ],
	     "toolResults": {"search": {"error": "the backend is down"}},
	     "expect": {"recentlyUsedTools": ["search", "think", "search"]}},
	    {"user": "once more",
	     "model": [{"toolCalls": [{"name": "search", "arguments": {"query": "stand-in"}}]}, {"text": "done"}],
	     "toolResults": {"search": "1. the stand-in result"},
	     "expect": {"recentlyUsedTools": ["search", "think", "search", "search"]}}
	  ]}`)
	if rep.Failed() {
		t.Fatal(strings.Join(rep.Mismatches(), "\n"))
	}
	contents := func(turn int) []string {
		var out []string
		for _, r := range rep.Turns[turn].Results {
			out = append(out, r.Result.Content)
		}
		return out
	}
	for turn, want := range [][]string{
		{"web search is not configured", "", `invalid arguments for "think"`},
		{"the backend is down", `invalid arguments for "search"`},
		{"1. the stand-in result"},
	} {
		got := contents(turn)
		if len(got) != len(want) {
			t.Fatalf("turn %d results %q, want %d", turn+1, got, len(want))
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Errorf("turn %d result %d = %q, want it to contain %q", turn+1, i, got[i], want[i])
			}
		}
	}
}

func TestRunErrors(t *testing.T) {
	for _, tt := range []struct{ name, json, want string }{
		{"stand-in for a tool the runtime lacks", `{"template": "../../../shared/fixtures/agentdock-templates/dr-house/template.json",
			"turns": [{"user": "x", "model": [{"text": "y"}], "toolResults": {"pubmed_search": "z"}}]}`,
			`turns[0].toolResults: "pubmed_search" is not a tool of this runtime`},
		{"unknown shipped agent", `{"agent": "nobody", "turns": [{"user": "x", "model": [{"text": "y"}]}]}`,
			`agent nobody: no shipped agent "nobody" (shipped: cognitive-reasoner, planner, research-assistant, research-lead)`},
		{"missing template", `{"template": "nope.json", "turns": [{"user": "x", "model": [{"text": "y"}]}]}`,
			`testdata/inline.json: template nope.json: stat testdata/nope.json: no such file or directory`},
		{"invalid template", `{"template": "bad-template.json", "turns": [{"user": "x", "model": [{"text": "y"}]}]}`,
			`template bad-template.json: invalid template: testdata/bad-template.json: orchestration.steps[0] "S": conditions[0].value: tool_used needs a value`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.json, "shared") {
				testenv.SharedDir(t)
			}
			tr, err := Parse("testdata/inline.json", []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Run(context.Background(), tr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestShippedAgentByID: "agent" names an embedded template.
func TestShippedAgentByID(t *testing.T) {
	rep := parseRun(t, `{"agent": "planner", "turns": [{"user": "Explore options", "model": [{"text": "ok"}],
		"expect": {"activeStep": "Explore", "offered": [["brainstorm"]]}}]}`)
	if rep.Failed() {
		t.Fatal(strings.Join(rep.Mismatches(), "\n"))
	}
}

func TestParseErrors(t *testing.T) {
	const ok = `"template": "t.json", `
	tests := []struct{ name, json, want string }{
		{"syntax", "{\n  \"name\": ,\n}", `line 2, column 11: malformed JSON`},
		{"unknown expectation", `{` + ok + `"turns": [{"user": "a", "model": [{"text": "b"}], "expect": {"activStep": "A"}}]}`, `unknown field "activStep"`},
		{"wrong type", "{" + ok + "\"turns\": [{\"user\": \"a\", \"model\": [{\"text\": \"b\"}],\n \"expect\": {\"sequenceIndex\": \"1\"}}]}",
			`line 2, column 30: turns[0].expect.sequenceIndex: expected int, found a JSON string`},
		{"no agent", `{"turns": [{"user": "a", "model": [{"text": "b"}]}]}`, `line 1, column 1: a transcript needs "template"`},
		{"both", `{"template": "t.json", "agent": "a", "turns": [{"user": "a", "model": [{"text": "b"}]}]}`, `line 1, column 33: agent: give "template" or "agent", not both`},
		{"no turns", `{` + ok + `"turns": []}`, `turns: a transcript needs at least one turn`},
		{"empty user", `{` + ok + `"turns": [{"user": " ", "model": [{"text": "b"}]}]}`, `turns[0].user: a turn needs the user's message`},
		{"message and approvals", `{` + ok + `"turns": [{"user": "a", "approvals": [{"tool": "x", "approved": true}], "model": [{"text": "b"}]}]}`, `turns[0].approvals: a turn sends "user" (a message) or "approvals"`},
		{"no approvals", `{` + ok + `"turns": [{"approvals": [], "model": [{"text": "b"}]}]}`, `turns[0].approvals: answer the calls that wait`},
		{"nameless approval", `{` + ok + `"turns": [{"approvals": [{"approved": true}], "model": [{"text": "b"}]}]}`, `turns[0].approvals[0].tool: an answer names the tool`},
		{"no answers", "{" + ok + "\"turns\": [\n{\"user\": \"a\", \"model\": []}]}", `line 2, column 24: turns[0].model: a turn needs the model's answer`},
		{"empty answer", `{` + ok + `"turns": [{"user": "a", "model": [{"text": "b"}, {}]}]}`, `turns[0].model[1]: an answer needs "text", "toolCalls" or both`},
		{"nameless call", `{` + ok + `"turns": [{"user": "a", "model": [{"toolCalls": [{"arguments": {}}]}]}]}`, `turns[0].model[0].toolCalls[0]: a tool call needs the tool's name`},
		{"arguments not an object", `{` + ok + `"turns": [{"user": "a", "model": [{"toolCalls": [{"name": "x", "arguments": "{}"}]}]}]}`, `turns[0].model[0].toolCalls[0].arguments: arguments must be a JSON object`},
		{"duplicate call ID", `{` + ok + `"turns": [{"user": "a", "model": [{"toolCalls": [{"id": "c", "name": "x"}, {"id": "c", "name": "y"}]}]}]}`, `turns[0].model[0].toolCalls[1].id: call ID "c" is used twice`},
		{"bad stand-in", `{` + ok + `"turns": [{"user": "a", "model": [{"text": "b"}], "toolResults": {"search": 3}}]}`, `a tool result is a string, {"content": "..."} or {"error": "..."}`},
		{"negative usage", `{` + ok + `"turns": [{"user": "a", "model": [{"text": "b", "usage": {"prompt": -1, "completion": 1}}]}]}`, `turns[0].model[0].usage: token counts must not be negative`},
		{"trailing text", `{` + ok + `"turns": [{"user": "a", "model": [{"text": "b"}]}]} x`, `text after the transcript's object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.json", []byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "bad.json: ") {
				t.Fatalf("error %v\nwant it to name bad.json and contain %q", err, tt.want)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	files, err := Files("../templates", "testdata/inline-example.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"../templates/cognitive-reasoner/tests/modes.json",
		"../templates/cognitive-reasoner/tests/parallel.json",
		"../templates/planner/tests/approvals.json",
		"../templates/planner/tests/explore-challenge-decide.json",
		"../templates/research-assistant/tests/parallel.json",
		"../templates/research-assistant/tests/workflow.json",
		"../templates/research-lead/tests/delegation.json",
		"testdata/inline-example.json",
	}
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Files =\n%s\nwant\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	if _, err := Files("testdata/no-such"); err == nil {
		t.Error("a missing path is not an error")
	}
	if _, err := Files(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no transcripts") {
		t.Errorf("a directory without transcripts: %v", err)
	}
}

func TestParseAnswers(t *testing.T) {
	for _, tt := range []struct {
		name, json string
		want       int
	}{
		{"a list", `[{"text": "a"}, {"toolCalls": [{"name": "think"}]}]`, 2},
		{"an object", `{"model": [{"text": "a"}]}`, 1},
		{"a transcript", `{"agent": "planner", "turns": [{"user": "u", "model": [{"text": "a"}, {"text": "b"}]}, {"user": "v", "model": [{"text": "c"}]}]}`, 3},
	} {
		answers, err := ParseAnswers("a.json", []byte(tt.json))
		if err != nil || len(answers) != tt.want {
			t.Errorf("%s: %d answers, %v; want %d", tt.name, len(answers), err, tt.want)
		}
	}
	for _, tt := range []struct{ name, json, want string }{
		{"empty list", `[]`, `line 1, column 1: no answers`},
		{"empty answer", "[\n  {}\n]", `line 2, column 3: [0]: an answer needs "text", "toolCalls" or both`},
		{"unknown field", `{"model": [{"txt": "a"}]}`, `unknown field "txt"`},
		{"neither", `{"events": []}`, `no model answers here`},
		{"bad transcript", `{"turns": []}`, `a transcript needs "template"`},
		{"syntax", `[{"text": }]`, `line 1, column 11: malformed JSON`},
	} {
		_, err := ParseAnswers("a.json", []byte(tt.json))
		if err == nil || !strings.HasPrefix(err.Error(), "a.json: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

// TestDocsExample plays the Cognitive Reasoner transcript of
// docs/testing.md, as if it were in the template's tests folder, so that
// the documentation cannot drift from what the runtime does.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```json\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatal("docs/testing.md has no json block")
	}
	tr, err := Parse("../templates/cognitive-reasoner/tests/docs-example.json", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		var b strings.Builder
		rep.Print(&b)
		t.Fatalf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
	}
	turn := rep.Turns[0]
	if n := len(turn.Refused); n != 1 {
		t.Fatalf("the example's refusal did not happen: %d refusals", n)
	}
	// The model read the orchestration's refusal in its next request.
	msgs := turn.Calls[2].Request.Messages
	last := msgs[len(msgs)-1]
	want := `Refused: tool "reflect" is not available in step "EvaluationMode", which requires the sequence critique -> debate -> reflect and is at position 2; tools you may use now: debate.`
	if last.Role != "tool" || last.Content != want {
		t.Fatalf("the third model call's last message: %+v\nwant the refusal %q", last, want)
	}
}

// TestPerStepModels: a step that names a model ("model": "llm.cheap") has
// its calls go to that configuration's model, the other steps' to the
// agent's own, and an expectation of the models that does not hold fails
// naming the call.
func TestPerStepModels(t *testing.T) {
	rep := runFile(t, "../examples/routing/tests/routing.json")
	if rep.Failed() {
		var b strings.Builder
		rep.Print(&b)
		t.Fatalf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
	}
	if got := []string{rep.Turns[0].Calls[0].Model, rep.Turns[0].Calls[1].Model}; got[0] != "llm.cheap" || got[1] != "llm.openai" {
		t.Errorf("models %v", got)
	}
	tr, err := Load("../examples/routing/tests/routing.json")
	if err != nil {
		t.Fatal(err)
	}
	tr.Turns[0].Expect.Models = &[]string{"llm.openai", "llm.openai"}
	rep, err = Run(t.Context(), tr)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Mismatches(), "\n")
	for _, want := range []string{
		"model call 1 of 3: models: expected llm.openai, got llm.cheap",
		"model call 3 of 3: models: expected no model call 3, got llm.openai",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("mismatches lack %q:\n%s", want, got)
		}
	}
}
