package orchestration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

// clientSpec has a step whose sequence is two client tools the template
// declares (client_a, then client_b), a step that allows only the
// agent's "think" and the client's "shell", and a default step with no
// filter.
func clientSpec() *Spec {
	return &Spec{Steps: []Step{
		{Name: "Build", Conditions: []Condition{{Type: CondMessageContains, Value: "build"}},
			Sequence: []Group{{"client_a"}, {"client_b"}}},
		{Name: "Careful", Conditions: []Condition{{Type: CondMessageContains, Value: "careful"}},
			AvailableTools: &ToolFilter{Allowed: []string{"think", "shell"}, Denied: []string{"client_*"}}},
		{Name: "Chat", IsDefault: true},
	}}
}

func clientEngine(t *testing.T) *Engine {
	t.Helper()
	e, ds := New(clientSpec(), Config{Tools: []string{"think", "search"}, ClientTools: []string{"client_*", "shell"}})
	if err := ds.Err(); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOfferWithClientTools: client tools are offered by the step's rules,
// declared or not; a sequence position naming declared client tools
// offers them when the request brings them and waits for them (the
// step's tools, with a warning) when it does not.
func TestOfferWithClientTools(t *testing.T) {
	e := clientEngine(t)
	at := func(msg string, used ...string) State {
		s, _ := e.Apply(State{}, UserMessage(msg))
		for _, u := range used {
			s, _ = e.Apply(s, ToolUsedIn(u, Offer{Tools: []string{u}, Step: s.ActiveStep, SequenceIndex: s.SequenceIndex, StepChanges: s.StepChanges}))
		}
		return s
	}
	all := []string{"client_a", "client_b", "shell", "get_weather"}
	tests := []struct {
		name    string
		s       State
		client  []string
		want    []string
		warning string
	}{
		{"no step: every tool, the agent's first", at("hello"), all, []string{"think", "search", "client_a", "client_b", "shell", "get_weather"}, ""},
		{"no client tools: the agent's", at("hello"), nil, []string{"think", "search"}, ""},
		{"sequence position 1", at("build it"), all, []string{"client_a"}, ""},
		{"sequence position 2", at("build it", "client_a"), all, []string{"client_b"}, ""},
		{"sequence done: the step's tools", at("build it", "client_a", "client_b"), all, []string{"think", "search", "client_a", "client_b", "shell", "get_weather"}, ""},
		{"the client did not bring the position's tool", at("build it"), []string{"client_b", "shell"}, []string{"think", "search", "client_b", "shell"}, `step "Build": none of the tools at sequence position 1 (client_a) can run now (the client tools`},
		{"a request without client tools waits too", at("build it"), nil, []string{"think", "search"}, `step "Build": none of the tools at sequence position 1`},
		{"allowed and denied patterns match client tools", at("be careful"), all, []string{"think", "shell"}, ""},
		{"a client tool named like an agent tool is not offered as one", at("hello"), []string{"search", "shell"}, []string{"think", "search", "shell"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := e.OfferWith(tt.s, nil, tt.client)
			if !slices.Equal(o.Tools, tt.want) {
				t.Errorf("offer %v, want %v", o.Tools, tt.want)
			}
			if !strings.HasPrefix(o.Warning, tt.warning) || (tt.warning == "") != (o.Warning == "") {
				t.Errorf("warning %q, want %q", o.Warning, tt.warning)
			}
		})
	}
}

// TestClientToolInSequence: a call of the sequence's client tool advances
// the sequence like an agent tool's; a call out of order is refused,
// naming the step, its sequence and the position.
func TestClientToolInSequence(t *testing.T) {
	e := clientEngine(t)
	client := []string{"client_a", "client_b"}
	s, _ := e.Apply(State{}, UserMessage("build it"))
	offer := e.OfferWith(s, nil, client)
	if _, d := e.Apply(s, ToolUsedIn("client_b", offer)); !d.Refused ||
		!strings.Contains(d.Reason, `step "Build", which requires the sequence client_a -> client_b and is at position 1`) ||
		!strings.HasSuffix(d.Reason, "tools you may use now: client_a") {
		t.Fatalf("client_b out of order: %+v", d)
	}
	s, d := e.Apply(s, ToolUsedIn("client_a", offer))
	if d.Refused || !d.Advanced || s.SequenceIndex != 1 || !s.RecentlyUsedTools.Equal("client_a") {
		t.Fatalf("client_a in order: %+v, state %+v", d, s)
	}
	if got := e.OfferWith(s, nil, client).Tools; !slices.Equal(got, []string{"client_b"}) {
		t.Fatalf("after client_a: %v", got)
	}
}

// TestClientToolsDiagnostics: a sequence may name a declared client tool
// but not an undeclared one; a declared pattern may not match the agent's
// own tools; an allowed pattern that matches only declared client tools
// is not reported as matching nothing.
func TestClientToolsDiagnostics(t *testing.T) {
	spec := &Spec{Steps: []Step{
		{Name: "S", IsDefault: true, Sequence: []Group{{"shell"}, {"deploy"}},
			AvailableTools: &ToolFilter{Allowed: []string{"client_*", "shell", "deploy", "think"}}},
	}}
	_, ds := New(spec, Config{Tools: []string{"think"}, ClientTools: []string{"shell", "client_*", "thi*", " "}})
	var got []string
	for _, d := range ds {
		got = append(got, d.String())
	}
	text := strings.Join(got, "\n")
	for _, want := range []string{
		`sequence[1]: tool "deploy" is not one of the agent's tools (think), nor a client tool the template declares (options.clientTools)`,
		`options.clientTools[2]: "thi*" matches the agent's own tool "think"`,
		`options.clientTools[3]: an empty tool pattern`,
		`availableTools.allowed[2]: "deploy" matches none of the agent's tools`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	for _, not := range []string{`"shell" is not one`, `allowed[0]`, `allowed[1]`} {
		if strings.Contains(text, not) {
			t.Errorf("unexpected %q in:\n%s", not, text)
		}
	}
}

// TestReplayClientTools: a conversation whose client tool calls have
// their results replays to the state a session holding it has; a result
// of a call the step did not offer records nothing.
func TestReplayClientTools(t *testing.T) {
	e := clientEngine(t)
	client := []string{"client_a", "client_b"}
	call := func(id, name string) chat.ToolCall {
		return chat.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(`{}`)}
	}
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "build it"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call("1", "client_b")}},
		{Role: chat.RoleTool, ToolCallID: "1", ToolName: "client_b", Content: "done b"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call("2", "client_a")}},
		{Role: chat.RoleTool, ToolCallID: "2", ToolName: "client_a", Content: "done a"},
	}
	s := e.Replay(State{}, msgs, client)
	if s.ActiveStep != "Build" || s.SequenceIndex != 1 || !s.RecentlyUsedTools.Equal("client_a") {
		t.Fatalf("replayed %+v: want Build at position 1 with client_a recorded (client_b was not offered first)", s)
	}
	// Without the request's client tools, their calls were never offered.
	if s := e.Replay(State{}, msgs, nil); s.SequenceIndex != 0 || s.RecentlyUsedTools.Len() != 0 {
		t.Fatalf("replayed without client tools: %+v", s)
	}
}

// TestToolChoice: a choice narrows the offer; one that requires a call of
// tools the step does not offer is refused, naming the step.
func TestToolChoice(t *testing.T) {
	e := clientEngine(t)
	s, _ := e.Apply(State{}, UserMessage("build it"))
	offer := e.OfferWith(s, nil, []string{"client_a", "client_b"})
	tests := []struct {
		name   string
		choice ToolChoice
		tools  []string
		err    string
	}{
		{"auto", ToolChoice{}, []string{"client_a"}, ""},
		{"none", ToolChoice{None: true}, []string{}, ""},
		{"required", ToolChoice{Required: true}, []string{"client_a"}, ""},
		{"named and offered", ToolChoice{Only: []string{"client_a"}, Required: true}, []string{"client_a"}, ""},
		{"allowed, auto, none offered", ToolChoice{Only: []string{"client_b"}}, []string{}, ""},
		{"named, not offered", ToolChoice{Only: []string{"client_b"}, Required: true}, []string{},
			`tool_choice requires a call of client_b, and step "Build", at position 1 of its sequence client_a -> client_b, offers none of them now (tools it offers now: client_a)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.choice.Narrow(offer).Tools; !slices.Equal(got, tt.tools) {
				t.Errorf("narrowed to %v, want %v", got, tt.tools)
			}
			err := e.CheckChoice(offer, tt.choice)
			if (err == nil) != (tt.err == "") || err != nil && err.Error() != tt.err {
				t.Errorf("CheckChoice = %v, want %q", err, tt.err)
			}
		})
	}
	if !(ToolChoice{}).IsZero() || (ToolChoice{None: true}).IsZero() {
		t.Error("IsZero")
	}
}

// TestOfferWithProperties: over random conversations and random sets of
// client tools, an offer holds only the agent's tools and the request's;
// a client tool in it is admitted by the step's patterns; without client
// tools it is OfferNow's; and Apply refuses exactly the tools it leaves
// out.
func TestOfferWithProperties(t *testing.T) {
	e := clientEngine(t)
	names := []string{"client_a", "client_b", "shell", "get_weather", "think", "search"}
	messages := []string{"build it", "be careful", "hello"}
	rng := uint64(1)
	next := func(n int) int {
		rng = rng*6364136223846793005 + 1442695040888963407
		return int(rng>>33) % n
	}
	for i := range 2000 {
		s, _ := e.Apply(State{}, UserMessage(messages[next(len(messages))]))
		var client []string
		for _, n := range names[:4] {
			if next(2) == 0 {
				client = append(client, n)
			}
		}
		for range next(4) {
			o := e.OfferWith(s, nil, client)
			if len(o.Tools) == 0 {
				break
			}
			s, _ = e.Apply(s, ToolUsedIn(o.Tools[next(len(o.Tools))], o))
		}
		o := e.OfferWith(s, nil, client)
		st := e.step(s.ActiveStep)
		for _, tool := range o.Tools {
			agentTool := slices.Contains(e.Tools(), tool)
			if !agentTool && !slices.Contains(client, tool) {
				t.Fatalf("case %d: %q offered, neither the agent's nor the request's (%v)", i, tool, client)
			}
			if !agentTool && st != nil && !st.admits(tool) {
				t.Fatalf("case %d: client tool %q offered in step %q, whose patterns exclude it", i, tool, st.name)
			}
		}
		if len(client) == 0 {
			if now := e.OfferNow(s, nil); !slices.Equal(now.Tools, o.Tools) {
				t.Fatalf("case %d: OfferWith without client tools %v, OfferNow %v", i, o.Tools, now.Tools)
			}
		}
		for _, tool := range names {
			if _, d := e.Apply(s, ToolUsedIn(tool, o)); d.Refused == slices.Contains(o.Tools, tool) {
				t.Fatalf("case %d: %q refused=%v, offered %v", i, tool, d.Refused, o.Tools)
			}
		}
	}
}
