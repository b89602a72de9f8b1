package llmorch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/tools"
)

// The types of Format.
const (
	// FormatJSONObject: the answer is a JSON object.
	FormatJSONObject = "json_object"
	// FormatJSONSchema: the answer is JSON valid for Format.Schema.
	FormatJSONSchema = "json_schema"
)

// Format is the format a client asks a turn's answer in (OpenAI's
// response_format, the Responses API's text.format). It goes to the
// model with every call of the turn, with the tools: a provider that takes
// it natively (Info.Formats) gets it in its own field, any other reads it
// in the call's note. Whatever the model, the final answer is checked
// (Check); one that does not pass gets one repair call, and a second
// failure ends the turn with CodeInvalidOutput.
type Format struct {
	// Type is FormatJSONObject or FormatJSONSchema.
	Type string
	// Name, Description, Schema and Strict are a JSON schema format's, as
	// the client sent them.
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      bool

	schema *tools.Schema
}

// CodeInvalidOutput is the error code of a turn whose answer did not match
// its Format after the repair call.
const CodeInvalidOutput = "invalid_output"

// NewFormat checks and compiles a format. A JSON schema format needs a
// name and a schema that compiles, self-contained.
func NewFormat(typ, name, description string, schema json.RawMessage, strict bool) (*Format, error) {
	f := &Format{Type: typ, Name: name, Description: description, Strict: strict}
	switch typ {
	case FormatJSONObject:
		return f, nil
	case FormatJSONSchema:
	default:
		return nil, fmt.Errorf("unknown format %q (known: text, %s, %s)", typ, FormatJSONObject, FormatJSONSchema)
	}
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("a json_schema format needs a name")
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, errors.New("a json_schema format needs its schema")
	}
	s, err := tools.CompileSchema(schema)
	if err != nil {
		return nil, err
	}
	f.Schema, f.schema = schema, s
	return f, nil
}

// Check reports why text, an answer, is not in the format, or nil.
func (f *Format) Check(text string) error {
	data := []byte(strings.TrimSpace(text))
	if f.schema != nil {
		if err := f.schema.CheckJSON(data); err != nil {
			return fmt.Errorf("the answer is not valid for the schema %q: %w", f.Name, err)
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return errors.New("the answer is not a JSON object")
	}
	return nil
}

// instruction is what a model that does not take the format natively
// reads in each call's note.
func (f *Format) instruction() string {
	if f.Type == FormatJSONObject {
		return "When you answer without calling a tool, answer with one JSON object and nothing else.\n"
	}
	return fmt.Sprintf("When you answer without calling a tool, answer with JSON and nothing else, valid for this JSON schema (%q): %s\n", f.Name, compactJSON(f.Schema))
}

// repair is the request of the repair call, after an answer that failed
// Check with err.
func (f *Format) repair(err error) string {
	return "## Now (a note from the runtime, not from the user)\nYour answer is not in the format asked for: " + err.Error() +
		". Answer again, with the same content, as " + f.want() + " and nothing else: no prose, no code fence.\n"
}

func (f *Format) want() string {
	if f.Type == FormatJSONObject {
		return "one JSON object"
	}
	return fmt.Sprintf("JSON valid for the schema %q: %s", f.Name, compactJSON(f.Schema))
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
