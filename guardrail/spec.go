package guardrail

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
)

// Stage is where a guardrail looks.
type Stage string

// The stages of a turn a guardrail can watch.
const (
	// Input is the user's message (and the text of its text attachments),
	// before the model or the session sees it.
	Input Stage = "input"
	// Output is the model's answer text, checked as it streams.
	Output Stage = "output"
	// ToolArguments are a tool call's arguments, before the tool runs (or
	// a client is asked to run it): every string and number in them, and,
	// for max_length and model checks, the arguments' JSON as a whole.
	ToolArguments Stage = "tool_arguments"
	// ToolResult is a tool's result, before the model (or the client)
	// sees it: built-in, MCP, client and agent tools alike.
	ToolResult Stage = "tool_result"
)

// Stages lists the stages a guardrail watches. In JSON it is one stage or
// a list of them.
type Stages []Stage

// UnmarshalJSON accepts "output" or ["input", "output"].
func (s *Stages) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var one Stage
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Stages{one}
		return nil
	}
	var list []Stage
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New(`"on" must be a stage or a list of stages, such as ["input", "output"]`)
	}
	*s = list
	return nil
}

// The checks a guardrail can make (Spec.Check).
const (
	// CheckRegex matches Spec.Pattern, an RE2 regular expression.
	CheckRegex = "regex"
	// CheckPII finds personal data of Spec.Kinds (all of PIIKinds when
	// empty).
	CheckPII = "pii"
	// CheckSecrets finds credentials of Spec.Kinds (all of SecretKinds
	// when empty).
	CheckSecrets = "secrets"
	// CheckDeny finds the words and phrases of Spec.Words, as whole words,
	// ignoring case under Unicode simple folding (as the orchestration's
	// message conditions do).
	CheckDeny = "deny"
	// CheckMaxLength matches text longer than Spec.MaxLength characters.
	CheckMaxLength = "max_length"
	// CheckModel asks a model Spec.Prompt, a yes/no question about the
	// text; "yes" is a match.
	CheckModel = "model"
)

// Action is what a guardrail does with a match.
type Action string

// The actions.
const (
	// Block: an input is not sent to the model and the turn ends with a
	// message naming the guardrail; an output stops at the match and the
	// turn ends the same way; a tool call is refused (not run); a tool's
	// result is withheld from the model.
	Block Action = "block"
	// Redact replaces the match with a marker naming its kind, such as
	// "[redacted:credit_card]" (max_length cuts the text instead).
	Redact Action = "redact"
	// Approve holds a tool call for a person's approval, through the
	// approvals of the session (tool_arguments only).
	Approve Action = "approve"
	// Log only reports the match: a guardrail event, a span event and a
	// metric.
	Log Action = "log"
)

// Spec is one guardrail as a template declares it, in options.guardrails
// or in a step's guardrails. Compile checks it.
type Spec struct {
	// Name names the guardrail in events, messages and metrics.
	Name string `json:"name"`
	// On lists the stages it watches.
	On Stages `json:"on"`
	// Check is one of the Check* constants.
	Check string `json:"check"`
	// Pattern is the regular expression of a regex check (RE2 syntax).
	Pattern string `json:"pattern,omitempty"`
	// Kinds narrows a pii or secrets check to these kinds.
	Kinds []string `json:"kinds,omitempty"`
	// Words are a deny check's words and phrases.
	Words []string `json:"words,omitempty"`
	// MaxLength is a max_length check's limit, in characters.
	MaxLength int `json:"maxLength,omitempty"`
	// Model names the model of a model check: "offline", or an llm.* key
	// of the template's nodeConfigurations.
	Model string `json:"model,omitempty"`
	// Prompt is a model check's yes/no question about the text.
	Prompt string `json:"prompt,omitempty"`
	// Tools narrows a tool_arguments or tool_result guardrail to the
	// calls of these tools (names or patterns with *, as a step's
	// availableTools); empty: every tool.
	Tools []string `json:"tools,omitempty"`
	// Action is what a match does.
	Action Action `json:"action"`
	// Message replaces the default text a block shows (which names the
	// guardrail).
	Message string `json:"message,omitempty"`

	// Extra keeps the keys this runtime does not know; Compile reports
	// them.
	Extra map[string]json.RawMessage `json:"-"`
}

// spec is Spec without its methods, so that decoding it does not recurse.
type spec Spec

// UnmarshalJSON decodes a guardrail, keeping unknown keys in Extra.
func (s *Spec) UnmarshalJSON(b []byte) error {
	var v spec
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	known := Keys()
	for k, raw := range all {
		if !containsString(known, k) {
			if v.Extra == nil {
				v.Extra = map[string]json.RawMessage{}
			}
			v.Extra[k] = raw
		}
	}
	*s = Spec(v)
	return nil
}

// MarshalJSON encodes a guardrail with its unknown keys.
func (s Spec) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(spec(s))
	if err != nil || len(s.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, raw := range s.Extra {
		if _, ok := m[k]; !ok {
			m[k] = raw
		}
	}
	return json.Marshal(m)
}

// Keys returns the JSON keys of a guardrail, in declaration order.
func Keys() []string {
	t := reflect.TypeOf(spec{})
	out := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
