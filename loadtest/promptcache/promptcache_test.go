package promptcache

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/template"
)

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestStablePrefix is the acceptance test of the stable request prefix:
// in the ten-turn conversation (a mode change every turn, every sequence
// followed) consecutive requests share at least 90 % of what they could;
// every request sends the same tools and names exactly the tools the
// orchestration offers in tool_choice; and the session's usage holds the
// cached input tokens the model reported.
func TestStablePrefix(t *testing.T) {
	r, err := Run(t.Context(), template.ToolFilteringStable)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Requests); n != 4*len(Conversation) || len(r.Offered) != n {
		t.Fatalf("%d model requests, %d offers; want %d of each", n, len(r.Offered), 4*len(Conversation))
	}
	shared, shareable, input, cached := r.Totals()
	t.Logf("stable: %d of %d shareable bytes shared (%.1f %%); %d input tokens, %d cached", shared, shareable, 100*r.Fraction(), input, cached)
	if f := r.Fraction(); f < 0.90 {
		t.Errorf("consecutive requests share %.1f %% of what they could, want at least 90 %%", 100*f)
	}
	first := r.Requests[0]
	for i, q := range r.Requests {
		if !slices.Equal(q.ToolNames(), first.ToolNames()) || len(q.Tools) != 7 {
			t.Errorf("call %d sends tools %v, want the same seven as the first call", i+1, q.ToolNames())
		}
		if !sameSet(q.Callable(), r.Offered[i]) || len(q.ToolChoice) == 0 {
			t.Errorf("call %d: tool_choice %s names %v, the orchestration offered %v", i+1, q.ToolChoice, q.Callable(), r.Offered[i])
		}
		if q.System != first.System {
			t.Errorf("call %d: the system prompt changed", i+1)
		}
	}
	if r.Refused != 0 {
		t.Errorf("%d calls refused; the script follows every sequence", r.Refused)
	}
	if r.Session.CacheRead != int64(cached) || cached == 0 || r.Session.Prompt != int64(input) {
		t.Errorf("session usage %+v, want the model's %d input tokens of which %d cached", r.Session, input, cached)
	}
}

// TestFilterSendsOnlyOffered: in filter mode each request sends exactly the
// offered tools and no tool_choice, and shares far less than stable mode.
func TestFilterSendsOnlyOffered(t *testing.T) {
	r, err := Run(t.Context(), template.ToolFilteringFilter)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range r.Requests {
		if !sameSet(q.ToolNames(), r.Offered[i]) || q.ToolChoice != nil {
			t.Errorf("call %d sends tools %v (tool_choice %s), the orchestration offered %v", i+1, q.ToolNames(), q.ToolChoice, r.Offered[i])
		}
	}
	t.Logf("filter: %.1f %% of what could be shared", 100*r.Fraction())
	if f := r.Fraction(); f > 0.5 {
		t.Errorf("filter mode shares %.1f %%; its tools change with the step", 100*f)
	}
}

// TestRefusedOnTheWire: a call of a tool the step has but does not offer
// yet (search, before critique in the evaluation sequence) is sent as a
// tool but left out of tool_choice, and the runtime refuses it as the
// orchestration words it; the sequence then goes on.
func TestRefusedOnTheWire(t *testing.T) {
	extra := Turn{Message: "Review the plan to move the office", Mode: "EvaluationMode", Sequence: []string{"search", "critique", "debate", "reflect"}}
	r, err := Run(t.Context(), template.ToolFilteringStable, extra)
	if err != nil {
		t.Fatal(err)
	}
	if r.Refused != 1 {
		t.Fatalf("%d refusals, want the search call's", r.Refused)
	}
	n := 4 * len(Conversation)
	q := r.Requests[n]
	if !slices.Contains(q.ToolNames(), "search") || slices.Contains(q.Callable(), "search") || !slices.Equal(q.Callable(), []string{"critique"}) {
		t.Errorf("the call that searched was sent %v and offered %v", q.ToolNames(), q.Callable())
	}
	next := r.Requests[n+1]
	last := next.Messages[len(next.Messages)-2] // the note follows the result
	if len(last.ToolResults) != 1 || !strings.Contains(last.ToolResults[0].Content, `Refused: tool "search" is not available in step "EvaluationMode"`) {
		t.Errorf("the model read %+v after its call", last)
	}
}

// TestRoutedByModel: with the gathering modes on llm.cheap, their calls go
// to the cheap model and the others to the agent's own, each model's
// prompt cache sees only its own requests, and the figure is reported per
// model: routing by step costs the cache what the other model's turns
// held.
func TestRoutedByModel(t *testing.T) {
	cheap := []string{"ComparisonMode", "ResearchMode"}
	r, err := RunRouted(t.Context(), template.ToolFilteringStable, cheap)
	if err != nil {
		t.Fatal(err)
	}
	byModel := r.ByModel()
	if len(byModel) != 2 {
		t.Fatalf("%d models called, want 2", len(byModel))
	}
	calls := map[string]int{}
	for i, q := range r.Requests {
		calls[q.Model]++
		mode := Conversation[i/4].Mode
		if want := Strong; slices.Contains(cheap, mode) != (q.Model == Cheap) {
			if slices.Contains(cheap, mode) {
				want = Cheap
			}
			t.Errorf("call %d (%s) went to %s, want %s", i+1, mode, q.Model, want)
		}
	}
	if calls[Cheap] != 12 || calls[Strong] != 28 {
		t.Errorf("calls by model %v, want 12 to %s and 28 to %s", calls, Cheap, Strong)
	}
	whole, err := Run(t.Context(), template.ToolFilteringStable)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, cachedWhole := whole.Totals()
	var input, cached int
	for _, m := range byModel {
		_, _, in, c := m.Totals()
		input, cached = input+in, cached+c
		t.Logf("%s: %d calls, %d input tokens, %d cached (%.1f %%)", m.Requests[0].Model, len(m.Requests), in, c, 100*float64(c)/float64(in))
	}
	if r.Session.Prompt != int64(input) || r.Session.CacheRead != int64(cached) {
		t.Errorf("session usage %+v, want the models' %d input tokens of which %d cached", r.Session, input, cached)
	}
	if cached >= cachedWhole {
		t.Errorf("routed: %d tokens cached, one model: %d; each model's cache holds only its own requests", cached, cachedWhole)
	}
}
