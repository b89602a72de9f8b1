package guardrail_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentdock-go/agentdock/guardrail"
)

// A card number streamed in four chunks: the stream lets the text around
// it through at once and never the digits.
func ExampleSet_Stream() {
	gs, problems := guardrail.Compile("options.guardrails", []guardrail.Spec{
		{Name: "cards", On: guardrail.Stages{guardrail.Output}, Check: guardrail.CheckPII, Kinds: []string{guardrail.PIICreditCard}, Action: guardrail.Redact},
	})
	if problems != nil {
		panic(problems)
	}
	st := guardrail.NewSet(gs).Stream(context.Background(), nil)
	for _, chunk := range []string{"Your card 4111 ", "1111 ", "1111 ", "1111 is on file."} {
		r := st.Write(chunk)
		for _, h := range r.Hits {
			fmt.Println(h.Describe())
		}
		fmt.Printf("%q\n", r.Text)
	}
	fmt.Printf("%q\n", st.Flush().Text)
	// Output:
	// "Your card"
	// ""
	// ""
	// The guardrail "cards" redacted a credit_card in the answer.
	// " [redacted:credit_card] is on file."
	// ""
}

// A tool call's arguments: a key in a search query blocks the call, and
// the arguments come back without it.
func ExampleSet_CheckArguments() {
	gs, _ := guardrail.Compile("options.guardrails", []guardrail.Spec{
		{Name: "no-keys-in-searches", On: guardrail.Stages{guardrail.ToolArguments}, Tools: []string{"search"}, Check: guardrail.CheckSecrets, Action: guardrail.Block},
	})
	args, r := guardrail.NewSet(gs).CheckArguments(context.Background(), "search", json.RawMessage(`{"query":"sk-proj-AbC123dEf456GhI789jKl012 docs"}`), nil)
	fmt.Println(string(args))
	fmt.Println(r.Blocked.Notice())
	// Output:
	// {"query":"[redacted:openai_key] docs"}
	// the guardrail "no-keys-in-searches" blocked this call's arguments
}

// Every problem of a declaration is reported at its field.
func ExampleCompile() {
	_, problems := guardrail.Compile("options.guardrails", []guardrail.Spec{
		{Name: "digits", On: guardrail.Stages{guardrail.Output}, Check: guardrail.CheckRegex, Pattern: "[0-9]+", Action: guardrail.Redact},
		{Name: "ask", On: guardrail.Stages{guardrail.Input}, Check: guardrail.CheckPII, Action: guardrail.Approve},
	})
	for _, p := range problems {
		fmt.Println(p.Path)
	}
	// Output:
	// options.guardrails[0].pattern
	// options.guardrails[1].action
}
