package orchestration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/agentdock-go/agentdock/guardrail"
)

// Spec is the "orchestration" node of a template, as written. It is plain
// data: New checks it and compiles it into an Engine.
type Spec struct {
	// Description is shown to the model as the orchestration guide. AgentDock
	// accepts a string or a list of strings.
	Description Lines  `json:"description,omitempty"`
	Steps       []Step `json:"steps"`
	// StepScope is "session" (the default: the documented rules, where steps
	// and tool history persist across turns) or "turn" (the lock-in opt-in:
	// every user message starts the orchestration afresh). See
	// docs/orchestration.md.
	StepScope string `json:"stepScope,omitempty"`

	// Extra keeps fields this runtime does not know, so that a template
	// survives a round trip unchanged.
	Extra map[string]json.RawMessage `json:"-"`
}

// Step scopes; see Spec.StepScope.
const (
	ScopeSession = "session"
	ScopeTurn    = "turn"
)

// Step is one mode of an agent: the conditions that select it, the tools it
// offers and the order in which it enforces them.
type Step struct {
	Name           string      `json:"name"`
	Description    string      `json:"description,omitempty"`
	Conditions     []Condition `json:"conditions,omitempty"`
	AvailableTools *ToolFilter `json:"availableTools,omitempty"`
	Sequence       []Group     `json:"sequence,omitempty"`
	IsDefault      bool        `json:"isDefault,omitempty"`
	// RequireApproval lists tool patterns (the syntax of availableTools)
	// whose calls wait for a person's approval while this step is active:
	// the runtime does not run such a call until someone approves it.
	RequireApproval []string `json:"requireApproval,omitempty"`
	// Guardrails are added to the template's (options.guardrails) while
	// this step is active. The template package checks them (see package
	// guardrail); the engine does not read them.
	Guardrails []guardrail.Spec `json:"guardrails,omitempty"`
	// Model names the model of this step's model calls: an llm.* key of
	// the template's nodeConfigurations ("llm.cheap"), which the template
	// package checks; empty, the agent's own model. The orchestration
	// reads nothing from it.
	Model string `json:"model,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// ToolFilter narrows the agent's tools for a step. Patterns may use * for any
// run of characters; without *, a pattern is an exact, case-sensitive name.
type ToolFilter struct {
	Allowed []string `json:"allowed,omitempty"`
	Denied  []string `json:"denied,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Condition is one test of a step; a step is chosen when all its conditions
// pass.
type Condition struct {
	Type        string `json:"type"`
	Value       string `json:"value,omitempty"`
	Window      *int   `json:"window,omitempty"`
	Description string `json:"description,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Group is one position of a sequence: the tools any of which satisfies it.
// In JSON it is a tool name or a list of alternative names.
type Group []string

// UnmarshalJSON accepts "name" or ["a", "b"].
func (g *Group) UnmarshalJSON(b []byte) error {
	list, err := oneOrMany(b, "a sequence entry must be a tool name or a list of tool names")
	*g = list
	return err
}

// oneOrMany decodes a string, as a list of one, or a list of strings; a
// list that does not decode is the error notList.
func oneOrMany(b []byte, notList string) ([]string, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, errors.New(notList)
	}
	return list, nil
}

// MarshalJSON writes a one-tool group as a plain name, as templates do.
func (g Group) MarshalJSON() ([]byte, error) {
	if len(g) == 1 {
		return json.Marshal(g[0])
	}
	return json.Marshal([]string(g))
}

// String renders a group for people: "think" or "summarize|save".
func (g Group) String() string { return strings.Join(g, "|") }

// Lines is text that templates write either as one string or as a list of
// strings (AgentDock's personality and orchestration description).
type Lines []string

// UnmarshalJSON accepts "text" or ["line", "line"].
func (l *Lines) UnmarshalJSON(b []byte) error {
	list, err := oneOrMany(b, "expected a string or a list of strings")
	*l = list
	return err
}

// String joins the lines with newlines.
func (l Lines) String() string { return strings.Join(l, "\n") }

func (s *Spec) UnmarshalJSON(b []byte) error       { return unmarshalKeep(b, s, &s.Extra) }
func (s Spec) MarshalJSON() ([]byte, error)        { return marshalKeep(s, s.Extra) }
func (s *Step) UnmarshalJSON(b []byte) error       { return unmarshalKeep(b, s, &s.Extra) }
func (s Step) MarshalJSON() ([]byte, error)        { return marshalKeep(s, s.Extra) }
func (f *ToolFilter) UnmarshalJSON(b []byte) error { return unmarshalKeep(b, f, &f.Extra) }
func (f ToolFilter) MarshalJSON() ([]byte, error)  { return marshalKeep(f, f.Extra) }
func (c *Condition) UnmarshalJSON(b []byte) error  { return unmarshalKeep(b, c, &c.Extra) }
func (c Condition) MarshalJSON() ([]byte, error)   { return marshalKeep(c, c.Extra) }

// UnmarshalKeep decodes b into v, a pointer to a struct, and stores the
// object's fields that v does not declare in *extra. Types that keep unknown
// fields use it from their UnmarshalJSON; it is exported for the template
// package.
func UnmarshalKeep(b []byte, v any, extra *map[string]json.RawMessage) error {
	return unmarshalKeep(b, v, extra)
}

// MarshalKeep encodes v, a struct value, and merges extra into the object.
func MarshalKeep(v any, extra map[string]json.RawMessage) ([]byte, error) {
	return marshalKeep(v, extra)
}

func unmarshalKeep(b []byte, v any, extra *map[string]json.RawMessage) error {
	rv := reflect.ValueOf(v).Elem()
	// A struct type with the same fields but no methods, so that decoding it
	// does not recurse into this UnmarshalJSON.
	plain := reflect.New(plainType(rv.Type()))
	if err := json.Unmarshal(b, plain.Interface()); err != nil {
		return err
	}
	rv.Set(plain.Elem().Convert(rv.Type()))
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	known := knownFields(rv.Type())
	*extra = nil
	for k, raw := range all {
		if !known[k] {
			if *extra == nil {
				*extra = make(map[string]json.RawMessage)
			}
			(*extra)[k] = raw
		}
	}
	return nil
}

func marshalKeep(v any, extra map[string]json.RawMessage) ([]byte, error) {
	rv := reflect.ValueOf(v)
	plain := rv.Convert(plainType(rv.Type())).Interface()
	b, err := json.Marshal(plain)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, raw := range extra {
		if _, ok := m[k]; !ok {
			m[k] = raw
		}
	}
	return json.Marshal(m)
}

var (
	plainTypes sync.Map // reflect.Type -> reflect.Type
	knownSets  sync.Map // reflect.Type -> map[string]bool
)

// plainType returns a struct type with t's fields and tags but none of its
// methods.
func plainType(t reflect.Type) reflect.Type {
	if p, ok := plainTypes.Load(t); ok {
		return p.(reflect.Type)
	}
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		fields[i] = t.Field(i)
	}
	p := reflect.StructOf(fields)
	plainTypes.Store(t, p)
	return p
}

func knownFields(t reflect.Type) map[string]bool {
	if k, ok := knownSets.Load(t); ok {
		return k.(map[string]bool)
	}
	known := make(map[string]bool)
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = t.Field(i).Name
		}
		known[name] = true
	}
	knownSets.Store(t, known)
	return known
}

// Keys returns the JSON keys of v's type (a struct or a pointer to one), in
// declaration order: what UnmarshalKeep reads into fields.
func Keys(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" || !t.Field(i).IsExported() {
			continue
		}
		if name == "" {
			name = t.Field(i).Name
		}
		out = append(out, name)
	}
	return out
}

// UnknownKey is the message for key, a key of a JSON object that names
// none of known: the nearest known key when one is close enough to be a
// slip (an edit distance of at most a third of the key, case ignored),
// else the list of known keys.
func UnknownKey(key string, known []string) string {
	if near := Nearest(key, known); near != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", near)
	}
	return fmt.Sprintf("unknown key (known: %s)", strings.Join(known, ", "))
}

// Nearest returns the entry of known nearest to key by edit distance
// (insertions, deletions, substitutions and swaps of neighbours, case
// ignored), or "" when even the nearest is more than a third of key's
// length (at least 1) away. Ties go to the earlier entry.
func Nearest(key string, known []string) string {
	best, bestD := "", max(1, len([]rune(key))/3)+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Slip returns the entry of known that name is a slip of the keyboard
// for: one edit away (two for a name of ten runes or more), case ignored;
// "" when none is. It is stricter than Nearest because it judges names,
// where a near miss is often another thing (gitlab is not github), and
// its verdict stops a template from loading. Ties go to the earlier entry.
func Slip(name string, known []string) string {
	limit := 1
	if len([]rune(name)) >= 10 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// counted in runes.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// rows i-2, i-1 and i of the table.
	prev2, prev, cur := make([]int, len(y)+1), make([]int, len(y)+1), make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
