package orchestration

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUnknownOrchestrationKeys: a key of the orchestration that the
// runtime does not know is an error at every level, naming its path and
// the nearest known key, since reading it as nothing changes what the
// model may do (a step whose availableTools is misspelt offers every tool).
func TestUnknownOrchestrationKeys(t *testing.T) {
	tests := []struct {
		name, spec, path, want string
	}{
		{"orchestration", `{"stepz": [], "steps": []}`, "orchestration.stepz", `unknown key; did you mean "steps"?`},
		{"step", `{"steps": [{"name": "A", "isDefault": true}, {"name": "B", "availableTool": {"allowed": ["a"]}, "conditions": [{"type": "tool_used", "value": "a"}]}]}`,
			"orchestration.steps[1].availableTool", `unknown key; did you mean "availableTools"? (step "B")`},
		{"step, case", `{"steps": [{"name": "A", "IsDefault": true}]}`, "orchestration.steps[0].IsDefault", `did you mean "isDefault"?`},
		{"conditions", `{"steps": [{"name": "B", "conditons": [{"type": "tool_used", "value": "a"}]}]}`,
			"orchestration.steps[0].conditons", `did you mean "conditions"?`},
		{"availableTools", `{"steps": [{"name": "B", "isDefault": true, "availableTools": {"alowed": ["a"]}}]}`,
			"orchestration.steps[0].availableTools.alowed", `did you mean "allowed"?`},
		{"condition", `{"steps": [{"name": "B", "conditions": [{"type": "tool_used", "value": "a", "windw": 2}]}]}`,
			"orchestration.steps[0].conditions[0].windw", `did you mean "window"?`},
		{"no near key", `{"steps": [{"name": "B", "isDefault": true, "zzzzzzzz": 1}]}`,
			"orchestration.steps[0].zzzzzzzz", "unknown key (known: name, description, conditions, availableTools, sequence, isDefault, requireApproval, guardrails, model)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec Spec
			if err := json.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			e, ds := New(&spec, Config{Tools: []string{"a"}})
			if e != nil {
				t.Fatalf("compiled despite the unknown key; diagnostics %v", ds)
			}
			for _, d := range ds.Errors() {
				if d.Path == tt.path && strings.Contains(d.Message, tt.want) {
					return
				}
			}
			t.Fatalf("no error at %s saying %q in %v", tt.path, tt.want, ds)
		})
	}
}

func TestNearest(t *testing.T) {
	known := []string{"personality", "nodes", "options", "orchestration", "availableTools", "allowed"}
	tests := []struct{ key, want string }{
		{"personalty", "personality"},
		{"Personality", "personality"},
		{"availableTool", "availableTools"},
		{"avialableTools", "availableTools"}, // a swap
		{"node", "nodes"},
		{"x", ""},
		{"tools", ""},
		{"orchestratoin", "orchestration"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Nearest(tt.key, known); got != tt.want {
			t.Errorf("Nearest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestSlip: a tool name one edit away (two from ten runes) is a slip;
// a name two edits from a short one is another thing.
func TestSlip(t *testing.T) {
	known := []string{"think", "search", "github", "weather", "create_issue"}
	for _, tt := range []struct{ name, want string }{
		{"thnik", "think"}, // a swap
		{"serch", "search"},
		{"Search", "search"},
		{"wether", "weather"},
		{"gitlab", ""}, // two edits from github: another server
		{"fetch", ""},
		{"create_isue", "create_issue"},
		{"creat_isue", "create_issue"}, // two edits, ten runes
		{"pubmed_search", ""},
		{"", ""},
	} {
		if got := Slip(tt.name, known); got != tt.want {
			t.Errorf("Slip(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// FuzzNearest: the edit distance behind Nearest is a distance on any
// input: zero exactly between equal strings (of UTF-8: other bytes count as
// one rune, U+FFFD), symmetric, and at most the longer length.
func FuzzNearest(f *testing.F) {
	f.Add("availableTool", "availableTools")
	f.Add("ab", "ba")
	f.Add("é", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := editDistance(a, b)
		if (d == 0) != (a == b) && utf8.ValidString(a) && utf8.ValidString(b) {
			t.Fatalf("distance(%q, %q) = %d", a, b, d)
		}
		if d != editDistance(b, a) {
			t.Fatalf("distance(%q, %q) = %d, reversed %d", a, b, d, editDistance(b, a))
		}
		if d > max(len([]rune(a)), len([]rune(b))) {
			t.Fatalf("distance(%q, %q) = %d exceeds the lengths", a, b, d)
		}
		_ = Nearest(a, []string{b})
	})
}
