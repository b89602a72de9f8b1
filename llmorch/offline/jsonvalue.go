package offline

import (
	"encoding/json"
	"fmt"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// answerIn is the offline model's answer in a format: for a JSON object,
// {"answer": text}; for a JSON schema, a value the schema accepts, made by
// the generator of tool arguments from the topic.
func answerIn(f *llmorch.Format, text string, tp *topic) (string, error) {
	var v any = map[string]string{"answer": text}
	if f.Type == llmorch.FormatJSONSchema {
		var s schema
		if err := json.Unmarshal(f.Schema, &s); err != nil {
			return "", fmt.Errorf("format %q: %w", f.Name, err)
		}
		g := &generator{tool: chat.ToolSpec{Name: f.Name, Description: f.Description, Parameters: f.Schema}, topic: tp}
		var err error
		if v, err = g.value(&s, "", -1); err != nil {
			return "", fmt.Errorf("format %q: %w", f.Name, err)
		}
	}
	b, err := json.Marshal(v)
	return string(b), err
}
