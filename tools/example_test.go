package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
)

// A typed tool: the schema the model sees is inferred from the input type,
// and the registry validates and decodes the model's arguments before the
// function runs. Inside, CallFrom tells the tool whose call it runs.
func ExampleNew() {
	type Conversion struct {
		Amount float64 `json:"amount" jsonschema:"the amount to convert"`
		From   string  `json:"from" jsonschema:"ISO 4217 code, such as EUR"`
		To     string  `json:"to" jsonschema:"ISO 4217 code, such as USD"`
	}
	convert := tools.MustNew("convert", "Converts an amount between currencies.",
		func(ctx context.Context, in Conversion) (string, error) {
			call, _ := tools.CallFrom(ctx)
			if in.From != "EUR" || in.To != "USD" {
				return "", fmt.Errorf("no rate from %s to %s", in.From, in.To)
			}
			return fmt.Sprintf("%.2f %s = %.2f %s (for session %s)", in.Amount, in.From, in.Amount*1.08, in.To, call.SessionID), nil
		})
	toolbox, err := tools.NewRegistry(convert)
	if err != nil {
		panic(err)
	}
	schema, _ := json.MarshalIndent(toolbox.Specs([]string{"convert"})[0].Parameters, "", "  ")
	fmt.Printf("%s\n", schema)

	ctx := tools.WithCall(context.Background(), tools.Call{SessionID: "session-1"})
	for _, args := range []string{
		`{"amount": 10, "from": "EUR", "to": "USD"}`,
		`{"amount": "ten", "from": "EUR", "to": "USD"}`,
		`{"amount": 10, "from": "EUR", "to": "JPY"}`,
	} {
		res := toolbox.Execute(ctx, chat.ToolCall{ID: "call-1", Name: "convert", Arguments: json.RawMessage(args)})
		fmt.Printf("error=%v: %s\n", res.IsError, res.Content)
	}
	// Output:
	// {
	//   "type": "object",
	//   "properties": {
	//     "amount": {
	//       "type": "number",
	//       "description": "the amount to convert"
	//     },
	//     "from": {
	//       "type": "string",
	//       "description": "ISO 4217 code, such as EUR"
	//     },
	//     "to": {
	//       "type": "string",
	//       "description": "ISO 4217 code, such as USD"
	//     }
	//   },
	//   "required": [
	//     "amount",
	//     "from",
	//     "to"
	//   ],
	//   "additionalProperties": false
	// }
	// error=false: 10.00 EUR = 10.80 USD (for session session-1)
	// error=true: invalid arguments for "convert": field "amount" must be number, got string
	// error=true: tool "convert" failed: no rate from EUR to JPY
}
