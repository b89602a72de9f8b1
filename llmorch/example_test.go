package llmorch_test

import (
	"fmt"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// With stable tool filtering a request sends every tool of the agent and
// names the offered ones apart; a model keeps to Callable.
func ExampleRequest_Callable() {
	req := llmorch.Request{
		Tools:   []chat.ToolSpec{{Name: "search"}, {Name: "think"}, {Name: "reflect"}},
		Offered: []string{"think"},
		Note:    llmorch.Note(llmorch.PromptInput{Snapshot: chat.Snapshot{ActiveStep: "ResearchMode", SequenceIndex: 1, Sequence: []string{"search", "think", "reflect"}, OfferedTools: []string{"think"}}}),
	}
	for _, t := range req.Callable() {
		fmt.Println("callable:", t.Name)
	}
	fmt.Print(req.Note)
	// Output:
	// callable: think
	// ## Now (a note from the runtime, not from the user)
	// Active step: ResearchMode (sequence position 2 of 3: next think)
	// Tools you may use now: think
}
