package format

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the transcript parser and to the
// answers parser of mockllm --script: they must never panic, and what it accepts must hold what Run relies on (an agent, turns
// with a message and answers, calls with names and object arguments).
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"../../../templates/*/tests/*.json", "../../testdata/*.json", "../../testdata/agentdock/tests/*.json"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"agent":"a","turns":[{"user":"u","model":[{"toolCalls":[{"name":"x","arguments":{}}]}],"toolResults":{"x":{"error":"e"}},"expect":{"activeStep":null,"offered":[[]]}}]}`))
	f.Add([]byte(`{"template":"t","turns":[{"user":"u","model":[{"text":"t","usage":{"prompt":1,"completion":2}}]}]}`))
	f.Add([]byte(`[{"text":"a"},{"toolCalls":[{"id":"c","name":"x"}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if answers, err := ParseAnswers("fuzz.json", data); err == nil && len(answers) == 0 {
			t.Fatal("accepted a script without answers")
		}
		tr, err := Parse("fuzz.json", data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if (tr.Template == "") == (tr.Agent == "") || len(tr.Turns) == 0 {
			t.Fatalf("accepted a transcript without exactly one agent or without turns: %+v", tr)
		}
		for _, turn := range tr.Turns {
			if (turn.User == "") == (len(turn.Approvals) == 0) || len(turn.Model) == 0 {
				t.Fatalf("accepted a turn without exactly one of a message and approvals, or without answers: %+v", turn)
			}
			for _, a := range turn.Approvals {
				if a.Tool == "" {
					t.Fatalf("accepted an approval without its tool: %+v", a)
				}
			}
			for _, a := range turn.Model {
				for _, c := range a.ToolCalls {
					if c.Name == "" || (len(c.Arguments) > 0 && c.Arguments[0] != '{') {
						t.Fatalf("accepted a bad call: %+v", c)
					}
				}
			}
			for _, s := range turn.ToolResults {
				_ = s.Content + s.Error
			}
		}
	})
}
