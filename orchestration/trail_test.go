package orchestration

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
)

// editEngine has a step whose sequence mixes the agent's tools and a
// client tool the template declares: think, client_edit, reflect.
func editEngine(t *testing.T) *Engine {
	t.Helper()
	e, ds := New(&Spec{Steps: []Step{
		{Name: "Edit", Conditions: []Condition{{Type: CondMessageContains, Value: "edit"}},
			Sequence: []Group{{"think"}, {"client_edit"}, {"reflect"}}},
		{Name: "Moved", Conditions: []Condition{{Type: CondToolUsed, Value: "search"}}},
		{Name: "Chat", IsDefault: true},
	}}, Config{Tools: []string{"think", "reflect", "search"}, ClientTools: []string{"client_*"}})
	if e == nil {
		t.Fatal(ds.Err())
	}
	return e
}

// TestTrailID: a trail survives the ID it is carried in, as letters,
// digits and '_' only; an ID without one, or with a mark whose rest does
// not decode to a trail, carries none.
func TestTrailID(t *testing.T) {
	id := TrailID("call_1", [][]string{{"search", "think"}, nil}, []string{"reflect"})
	if !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(id) || !strings.HasPrefix(id, "call_1_ad1") {
		t.Fatalf("ID %q", id)
	}
	before, own, ok := trailOf(id)
	if !ok || len(before) != 2 || !slices.Equal(before[0], []string{"search", "think"}) || len(before[1]) != 0 || !slices.Equal(own, []string{"reflect"}) {
		t.Fatalf("trail of %q: %v %v %v", id, before, own, ok)
	}
	if got := TrailID("call_1", [][]string{nil, {}}, nil); got != "call_1" {
		t.Fatalf("an empty trail changed the ID: %q", got)
	}
	for _, plain := range []string{"call_1", "call_ad1", "toolu_ad1xyz", "x_ad1mfrgg", "x_ad1" + strings.Repeat("a", 40000), "call_ad1_ad1"} {
		if _, _, ok := trailOf(plain); ok {
			t.Errorf("%q read as a trail", plain[:min(len(plain), 40)])
		}
	}
	// An ID that carries a trail and gets another keeps the newest.
	again := TrailID(id, [][]string{{"think"}}, nil)
	if before, _, _ := trailOf(again); len(before) != 1 || !slices.Equal(before[0], []string{"think"}) {
		t.Fatalf("trail of %q: %v", again, before)
	}
}

// TestReplayTrail: a conversation that holds only the client's calls
// replays the agent's calls their IDs carry, model call by model call,
// and reaches the position a session holding the whole turn reaches.
func TestReplayTrail(t *testing.T) {
	e := editEngine(t)
	client := []string{"client_edit"}
	call := func(id string) chat.Message {
		return chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: id, Name: "client_edit"}}}
	}
	res := func(id string) chat.Message {
		return chat.Message{Role: chat.RoleTool, ToolCallID: id, ToolName: "client_edit", Content: "edited"}
	}
	// What a session holds: think's model call, then client_edit's.
	whole := []chat.Message{user("edit it"), calls("think"), result("think", "ran"), call("c1"), res("c1")}
	want := e.Replay(State{}, whole, client)
	if want.ActiveStep != "Edit" || want.SequenceIndex != 2 {
		t.Fatalf("the whole turn replays to %s at %d, want Edit at 2", want.ActiveStep, want.SequenceIndex)
	}
	id := TrailID("c1", [][]string{{"think"}}, nil)
	tests := []struct {
		name string
		msgs []chat.Message
		seq  int
		used []string
	}{
		{"the client's messages alone lose the agent's call", []chat.Message{user("edit it"), call("c1"), res("c1")}, 0, nil},
		{"the trail gives it back", []chat.Message{user("edit it"), call(id), res(id)}, 2, []string{"think", "client_edit"}},
		{"a trail of calls out of order is refused again", []chat.Message{user("edit it"), call(TrailID("c1", [][]string{{"reflect", "think"}}, nil)), res(TrailID("c1", [][]string{{"reflect", "think"}}, nil))}, 2, []string{"think", "client_edit"}},
		{"a trail that passes the sequence side by side does not", []chat.Message{user("edit it"), call(TrailID("c1", nil, []string{"think"})), res(TrailID("c1", nil, []string{"think"}))}, 1, []string{"think"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e.Replay(State{}, tt.msgs, client)
			if s.ActiveStep != "Edit" || s.SequenceIndex != tt.seq || !s.RecentlyUsedTools.Equal(tt.used...) {
				t.Fatalf("replayed %s at %d used %v, want Edit at %d used %v", s.ActiveStep, s.SequenceIndex, s.RecentlyUsedTools, tt.seq, tt.used)
			}
		})
	}
	if s := e.Replay(State{}, []chat.Message{user("edit it"), call(id), res(id)}, client); sameJSON(s) != sameJSON(want) {
		t.Fatalf("trail replay %+v, session replay %+v", s, want)
	}
}

// TestReplayUnknownTools: calls of tools that neither the agent nor the
// request has (an earlier agent's, a name the model made up) count as not
// run, wherever they are, and leave the rest of the replay as it was.
func TestReplayUnknownTools(t *testing.T) {
	e := editEngine(t)
	unknown := chat.Message{Role: chat.RoleTool, ToolCallID: "id-pubmed_search", ToolName: "pubmed_search", Content: "3 papers"}
	with := []chat.Message{user("edit it"), calls("pubmed_search", "think"), unknown, result("think", "ran"), user("go on editing"), calls("lookup"), result("lookup", "ran")}
	without := []chat.Message{user("edit it"), calls("think"), result("think", "ran"), user("go on editing")}
	if a, b := sameJSON(e.Replay(State{}, with, nil)), sameJSON(e.Replay(State{}, without, nil)); a != b {
		t.Fatalf("with unknown calls %s\nwithout          %s", a, b)
	}
}

func sameJSON(s State) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzTrail: any ID reads as a trail or as none without failing, and a
// trail TrailID wrote reads back as it was written.
func FuzzTrail(f *testing.F) {
	f.Add("call_1", "think", "reflect")
	f.Add("toolu_01_ad1", "", "a,b")
	f.Add("x_ad1mfrgg", "search,think", "")
	f.Fuzz(func(t *testing.T, id, before, own string) {
		trailOf(id)
		if !utf8.ValidString(before) || !utf8.ValidString(own) {
			return // tool names are text; JSON would replace the bytes
		}
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		b, o := [][]string{split(before)}, split(own)
		got := TrailID(id, b, o)
		if len(split(before)) == 0 && len(o) == 0 {
			if got != id {
				t.Fatalf("an empty trail changed %q to %q", id, got)
			}
			return
		}
		gb, gown, ok := trailOf(got)
		if !ok || len(gb) != 1 || !slices.Equal(gb[0], split(before)) && len(gb[0])+len(split(before)) > 0 || !slices.Equal(gown, o) && len(gown)+len(o) > 0 {
			if len(got) <= maxTrail { // a trail too long to read is read as none
				t.Fatalf("TrailID(%q, %q, %q) = %q reads as %q %q %v", id, b, o, got, gb, gown, ok)
			}
		}
	})
}
