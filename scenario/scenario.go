// Package scenario reads and runs orchestration scenarios: a fresh session,
// a list of events (user messages, tool calls, token usage) and what must
// hold after each one. The format is the one of the contract's worked
// examples (spec/scenarios/README.md in the shared specification).
//
// Scenarios run through a session.Store, one atomic update per event, so the
// same file checks the engine alone (memory store) and a real store.
package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/jsonopt"
	"github.com/agentdock-go/agentdock/internal/jsonpos"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/template"
)

// Scenario is one scenario file.
type Scenario struct {
	Name string `json:"name"`
	// Tools are the agent's tools when no template is given.
	Tools []string `json:"tools,omitempty"`
	// Template is a template file, relative to the scenario file; the
	// agent's tools are its nodes without llm.* entries.
	Template      string              `json:"template,omitempty"`
	Orchestration *orchestration.Spec `json:"orchestration,omitempty"`
	Events        []Event             `json:"events"`

	// File is where the scenario was read from.
	File string `json:"-"`
}

// Event is one step of a scenario: exactly one of User, Tool, Answer and
// Usage.
type Event struct {
	User *string `json:"user,omitempty"`
	Tool *string `json:"tool,omitempty"`
	// Answer is one model answer's calls, in order: each is judged
	// against what that model call was offered (the offer of the state
	// the event starts from), as a turn judges parallel calls.
	Answer []string    `json:"answer,omitempty"`
	Usage  *chat.Usage `json:"usage,omitempty"`
	Expect Expect      `json:"expect"`
}

// Expect lists what must hold after an event; absent keys are not checked.
type Expect struct {
	// ActiveStep is a step name, or null for no active step.
	ActiveStep        OptionalString `json:"activeStep"`
	SequenceIndex     *int           `json:"sequenceIndex,omitempty"`
	AllowedTools      *[]string      `json:"allowedTools,omitempty"`
	RecentlyUsedTools *[]string      `json:"recentlyUsedTools,omitempty"`
	// Rejected must be true for a tool event that is refused; a refusal
	// that the scenario does not expect is a mismatch.
	Rejected *bool `json:"rejected,omitempty"`
	// Refused lists the tools of an answer event's calls that are
	// refused, in order (absent: none may be).
	Refused    *[]string   `json:"refused,omitempty"`
	TokenUsage *chat.Usage `json:"tokenUsage,omitempty"`
}

// OptionalString is a JSON value that may be absent, null or a string.
type OptionalString = jsonopt.String

// ReadError is returned when a scenario, or the template it names, cannot
// be read or is invalid.
type ReadError struct {
	File string
	Err  error
}

func (e *ReadError) Error() string { return e.File + ": " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Load reads a scenario file. Unknown keys are errors: a misspelt
// expectation would otherwise check nothing.
func Load(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &ReadError{File: file, Err: err}
	}
	sc, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// Parse decodes a scenario; file names it in errors and anchors a relative
// template path.
func Parse(file string, data []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, &ReadError{File: file, Err: errors.New(jsonpos.Describe(data, err, dec.InputOffset()))}
	}
	sc.File = file
	for i, ev := range sc.Events {
		n := 0
		for _, set := range []bool{ev.User != nil, ev.Tool != nil, ev.Answer != nil, ev.Usage != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, &ReadError{File: file, Err: fmt.Errorf("events[%d]: an event needs exactly one of user, tool, answer and usage", i)}
		}
		if ev.Answer != nil && len(ev.Answer) == 0 {
			return nil, &ReadError{File: file, Err: fmt.Errorf("events[%d]: an answer needs at least one call", i)}
		}
		if ev.Expect.Refused != nil && ev.Answer == nil {
			return nil, &ReadError{File: file, Err: fmt.Errorf("events[%d]: expect.refused is for answer events (a tool event expects rejected)", i)}
		}
	}
	if sc.Template == "" && sc.Orchestration == nil && sc.Tools == nil {
		return nil, &ReadError{File: file, Err: errors.New("a scenario needs a template, or tools and an orchestration")}
	}
	return &sc, nil
}

// Engine compiles the scenario's orchestration: from its template, loaded
// with cfg as serve loads it (cfg.Provided names the tools the runtime
// provides: a node naming another is not offered, and a sequence position
// only such tools fill is blocked, as it is when serving), or from its
// tools, which are the agent's tools, and inline orchestration.
func (sc *Scenario) Engine(cfg template.Config) (*orchestration.Engine, error) {
	if sc.Template != "" {
		path := sc.Template
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(sc.File), path)
		}
		results, err := template.LoadPath(path, cfg)
		if err != nil {
			return nil, &ReadError{File: sc.File, Err: fmt.Errorf("template: %w", err)}
		}
		r := results[0]
		if r.Loaded == nil {
			return nil, &ReadError{File: sc.File, Err: fmt.Errorf("template: %w", r.Diagnostics.Err())}
		}
		return r.Loaded.Engine, nil
	}
	engine, ds := orchestration.New(sc.Orchestration, orchestration.Config{Tools: sc.Tools})
	if engine == nil {
		lines := make([]string, 0, len(ds))
		for _, d := range ds.Errors() {
			lines = append(lines, d.String())
		}
		return nil, &ReadError{File: sc.File, Err: errors.New(strings.Join(lines, "; "))}
	}
	return engine, nil
}
