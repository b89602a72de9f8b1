package orchestration

import (
	"slices"
	"strings"
	"testing"
)

// TestOfferNow: tools that cannot run now (an MCP server restarting) are
// never offered; a sequence position left without a runnable tool falls
// back to the step's runnable tools with a warning, and Apply with the same
// availability accepts exactly what OfferNow offered.
func TestOfferNow(t *testing.T) {
	spec := &Spec{Steps: []Step{
		{Name: "Research", Conditions: []Condition{{Type: CondMessageContains, Value: "research"}},
			Sequence:       []Group{{"gh__search"}, {"think", "gh__read"}},
			AvailableTools: &ToolFilter{Allowed: []string{"gh__*", "think"}}},
		{Name: "Chat", IsDefault: true},
	}}
	e := MustNew(spec, Config{Tools: []string{"think", "gh__search", "gh__read", "reflect"}})
	down := func(t string) bool { return !strings.HasPrefix(t, "gh__") }
	onlyRead := func(t string) bool { return t != "gh__search" }

	var none State
	none, _ = e.Apply(none, UserMessage("hello"))
	research, _ := e.Apply(State{}, UserMessage("research this"))

	tests := []struct {
		name      string
		s         State
		available Available
		want      []string
		warning   string
	}{
		{"all up, no filter", none, nil, []string{"think", "gh__search", "gh__read", "reflect"}, ""},
		{"server down, default step", none, down, []string{"think", "reflect"}, ""},
		{"sequence tool up", research, onlyRead, []string{"think", "gh__read"}, `step "Research": none of the tools at sequence position 1 (gh__search) can run now`},
		{"server down in a sequence", research, down, []string{"think"}, `step "Research": none of the tools at sequence position 1 (gh__search) can run now`},
		{"all up in a sequence", research, func(string) bool { return true }, []string{"gh__search"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := e.OfferNow(tt.s, tt.available)
			if !slices.Equal(o.Tools, tt.want) {
				t.Errorf("offer %v, want %v", o.Tools, tt.want)
			}
			if !strings.HasPrefix(o.Warning, tt.warning) || (tt.warning == "") != (o.Warning == "") {
				t.Errorf("warning %q, want %q", o.Warning, tt.warning)
			}
			for _, tool := range e.Tools() {
				_, d := e.Apply(tt.s, ToolUsedNow(tool, tt.available))
				if d.Refused == slices.Contains(o.Tools, tool) {
					t.Errorf("Apply(%s): refused=%v, but offered=%v", tool, d.Refused, !d.Refused)
				}
			}
		})
	}
	// The fallback tool advances nothing but is recorded; the sequence
	// waits for its tool.
	s, d := e.Apply(research, ToolUsedNow("think", down))
	if d.Refused || s.SequenceIndex != 0 || !s.RecentlyUsedTools.Equal("think") {
		t.Errorf("fallback use: %+v %+v", s, d)
	}
	_, d = e.Apply(research, ToolUsedNow("gh__search", down))
	if !d.Refused || !strings.Contains(d.Reason, "tools you may use now: think") {
		t.Errorf("unavailable use: %+v", d)
	}
}
