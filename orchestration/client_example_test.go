package orchestration_test

import (
	"fmt"

	"github.com/agentdock-go/agentdock/orchestration"
)

// A step whose sequence is two client tools: a request that brings them
// is offered the first, then, once the client's result recorded it, the
// second; a tool_choice naming the second is refused until then.
func ExampleEngine_OfferWith() {
	e := orchestration.MustNew(&orchestration.Spec{Steps: []orchestration.Step{
		{Name: "Build", Conditions: []orchestration.Condition{{Type: orchestration.CondMessageContains, Value: "build"}},
			Sequence: []orchestration.Group{{"client_a"}, {"client_b"}}},
	}}, orchestration.Config{Tools: []string{"think"}, ClientTools: []string{"client_*"}})
	client := []string{"client_a", "client_b", "shell"}

	s, _ := e.Apply(orchestration.State{}, orchestration.UserMessage("build a shed"))
	offer := e.OfferWith(s, nil, client)
	fmt.Println(offer.Tools)
	fmt.Println(e.CheckChoice(offer, orchestration.ToolChoice{Only: []string{"client_b"}, Required: true}))

	s, _ = e.Apply(s, orchestration.ToolUsedIn("client_a", offer))
	fmt.Println(e.OfferWith(s, nil, client).Tools)
	// Output:
	// [client_a]
	// tool_choice requires a call of client_b, and step "Build", at position 1 of its sequence client_a -> client_b, offers none of them now (tools it offers now: client_a)
	// [client_b]
}
