package orchestration

import (
	"testing"
)

// FuzzConditions compiles a one-condition step from fuzzed parts and plays
// fuzzed messages and tools through it. Nothing may panic, and a compiled
// engine's offers must always be a subset of the agent's tools.
func FuzzConditions(f *testing.F) {
	f.Add(uint8(0), "think", 1, "hello", "think")
	f.Add(uint8(4), `(?i)critique|review`, 1, "Critique this", "critique")
	f.Add(uint8(4), `(a+)+$`, 1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", "x")
	f.Add(uint8(5), "search", 0, "", "search")
	f.Add(uint8(2), "ÉTÉ", 3, "l'été", "a")
	f.Add(uint8(1), "", 2, "x", "a")
	f.Fuzz(func(t *testing.T, kind uint8, value string, window int, message, tool string) {
		types := append(ConditionTypes, "bogus")
		c := Condition{Type: types[int(kind)%len(types)], Value: value, Window: &window}
		tools := []string{"a", "think", "search", tool}
		spec := &Spec{Steps: []Step{
			{Name: "S", Conditions: []Condition{c}, Sequence: []Group{{"a"}, {"think", "search"}}},
			{Name: "D", IsDefault: true, AvailableTools: &ToolFilter{Allowed: []string{"*"}, Denied: []string{value}}},
		}}
		e, ds := New(spec, Config{Tools: tools, HistoryLimit: 8})
		if e == nil {
			if !ds.HasErrors() {
				t.Fatal("no engine and no error")
			}
			return
		}
		var s State
		for _, ev := range []Input{ToolUsed(tool), UserMessage(message), ToolUsed("a"), ToolUsed(tool), UserMessage(value), ToolUsed("think")} {
			s, _ = e.Apply(s, ev)
			for _, o := range e.Offer(s).Tools {
				found := false
				for _, t := range tools {
					found = found || t == o
				}
				if !found {
					t.Fatalf("offered %q, which is not an agent tool", o)
				}
			}
			if s.RecentlyUsedTools.Len() > 8 {
				t.Fatalf("history grew to %d past its limit 8", s.RecentlyUsedTools.Len())
			}
		}
	})
}
