package orchestration_test

import (
	"fmt"

	"github.com/agentdock-go/agentdock/orchestration"
)

// One model answer calling think and debate: think leaves the step that
// requires approval for debate, yet debate, judged against its model
// call's offer, still waits for approval; and the group [think|reflect]
// is passed by one position, not two, though both of its tools are called.
func ExampleEngine_Judge() {
	e := orchestration.MustNew(&orchestration.Spec{Steps: []orchestration.Step{
		{Name: "Reasoning", Conditions: []orchestration.Condition{{Type: orchestration.CondMessageContains, Value: "reason"}},
			Sequence: []orchestration.Group{{"think", "reflect"}, {"reflect"}}},
		{Name: "Thought", Conditions: []orchestration.Condition{{Type: orchestration.CondToolUsed, Value: "think"}}},
		{Name: "Debating", Conditions: []orchestration.Condition{{Type: orchestration.CondMessageContains, Value: "debate"}},
			RequireApproval: []string{"debate"}},
	}}, orchestration.Config{Tools: []string{"think", "reflect", "debate"}})

	s, _ := e.Apply(orchestration.State{}, orchestration.UserMessage("debate it"))
	offer := e.Offer(s)
	s, _ = e.Apply(s, orchestration.ToolUsedIn("think", offer))
	fmt.Println(s.ActiveStep, e.Judge(offer, s, "debate").Approval)

	s, _ = e.Apply(orchestration.State{}, orchestration.UserMessage("reason it out"))
	offer = e.Offer(s)
	for _, tool := range []string{"think", "reflect"} {
		c := e.Judge(offer, s, tool)
		s, _ = e.Apply(s, orchestration.ToolUsedIn(tool, offer))
		fmt.Println(tool, c.Refused, c.Advances)
	}
	fmt.Println(s.ActiveStep, s.SequenceIndex, e.Offer(s).Tools)
	// Output:
	// Thought true
	// think false true
	// reflect false false
	// Reasoning 1 [reflect]
}
