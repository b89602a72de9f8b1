// Package format reads transcripts: the file format of package transcript,
// its parser and its checks. It is apart from the runner so that its fuzz
// target does not instrument the runtime the runner links (the agent,
// OpenTelemetry, langchaingo), which makes fuzzing it several times faster.
// Package transcript re-exports everything here; see its documentation for
// the format.
package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentdock-go/agentdock/internal/jsonopt"
	"github.com/agentdock-go/agentdock/internal/jsonpos"
)

// Transcript is one transcript file.
type Transcript struct {
	Name string `json:"name"`
	// Template is a template file, relative to the transcript's file.
	Template string `json:"template,omitempty"`
	// Agent is the ID of an agent shipped with the runtime (templates/).
	Agent string `json:"agent,omitempty"`
	// Agents are the other agents the transcript's agent asks (the
	// agents of its agent tools, and theirs): template files, relative
	// to the transcript's file, or shipped agents' IDs. An asked agent
	// that is not listed is looked up among the shipped agents.
	Agents []string `json:"agents,omitempty"`
	Turns  []Turn   `json:"turns"`

	// File is where the transcript was read from.
	File string `json:"-"`
}

// Turn is one user message (or the user's answers to the calls that wait
// for approval), the model's answers during the turn it starts, and what
// must hold.
type Turn struct {
	User string `json:"user,omitempty"`
	// Approvals, instead of User, answers the calls of the previous turn
	// that wait for approval (requireApproval), in the order the model made
	// them: every one, each named by its tool (for a call of an asked
	// agent, its own tool's name).
	Approvals []Approval `json:"approvals,omitempty"`
	// Model answers the turn's model calls, in order; the turn must make
	// exactly this many.
	Model []Answer `json:"model"`
	// ToolResults stand in for the named tools during this turn: their
	// arguments are still validated, but the result is this one.
	ToolResults map[string]StandIn `json:"toolResults,omitempty"`
	Expect      Expect             `json:"expect"`
	// Agents script the agents that the turn's agent asks through its
	// agent tools, by agent ID: the answers of each one's model calls
	// during this turn (across all the calls that ask it), stand-ins for
	// its tools, and what must hold of its turns.
	Agents map[string]AgentTurn `json:"agents,omitempty"`
}

// AgentTurn is the part of a turn played by an agent that the turn's
// agent asks: its model's answers, stand-ins for its tools, and what must
// hold after its turns (its own session's state; finishReason is its last
// turn's).
type AgentTurn struct {
	Model       []Answer           `json:"model"`
	ToolResults map[string]StandIn `json:"toolResults,omitempty"`
	Expect      Expect             `json:"expect"`
}

// Approval is the user's answer to one call that waits for approval.
type Approval struct {
	// Tool names the call: the next waiting call of this tool.
	Tool     string `json:"tool"`
	Approved bool   `json:"approved"`
	// Reason is told to the model with a denial.
	Reason string `json:"reason,omitempty"`
}

// Answer is the model's answer to one call: text, tool calls or both.
type Answer struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// Usage is the call's token usage; estimated from the request's and the
	// answer's length when absent.
	Usage *Usage `json:"usage,omitempty"`
}

// ToolCall is one call the model makes.
type ToolCall struct {
	// ID is the call's ID; one is made up when empty.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is a JSON object ({} when absent).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Usage is a model call's token count.
type Usage struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
}

// StandIn replaces a tool's result: a string is the content, {"error":
// "..."} makes the tool fail with that message (it ran, so it is recorded).
type StandIn struct {
	Content string
	Error   string
}

// UnmarshalJSON accepts "content", {"content": "..."} or {"error": "..."}.
func (s *StandIn) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &s.Content)
	}
	var obj struct {
		Content *string `json:"content"`
		Error   *string `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil || (obj.Content == nil) == (obj.Error == nil) {
		return errors.New(`a tool result is a string, {"content": "..."} or {"error": "..."}`)
	}
	if obj.Content != nil {
		s.Content = *obj.Content
	} else {
		s.Error = *obj.Error
		if s.Error == "" {
			return errors.New(`{"error": "..."} needs the error's message`)
		}
	}
	return nil
}

// Expect lists what must hold after a turn; absent keys are not checked.
type Expect struct {
	// Offered is, per model call, the set of tools offered to the model.
	Offered *[][]string `json:"offered,omitempty"`
	// Models is, per model call, the llm.* key of nodeConfigurations
	// whose model it went to: the agent's own, or its step's ("model").
	Models *[]string `json:"models,omitempty"`
	// Refused lists, in order, the tools of the calls the orchestration
	// refused during the turn.
	Refused *[]string `json:"refused,omitempty"`
	// ActiveStep is a step name, or null for no active step.
	ActiveStep        OptionalString `json:"activeStep"`
	SequenceIndex     *int           `json:"sequenceIndex,omitempty"`
	RecentlyUsedTools *[]string      `json:"recentlyUsedTools,omitempty"`
	// AwaitingApproval lists, in order, the tools of the calls the turn
	// held for the user's approval (it then ends with finishReason
	// "approval").
	AwaitingApproval *[]string `json:"awaitingApproval,omitempty"`
	// FinishReason is the turn's: stop, max-steps, error...
	FinishReason *string `json:"finishReason,omitempty"`
}

// OptionalString is a JSON value that may be absent, null or a string.
type OptionalString = jsonopt.String

// MaxFileSize bounds a transcript file.
const MaxFileSize = 4 << 20

// Error is a transcript, or the template it names, that cannot be read or
// is invalid. Its message starts with the file and, where it can, the line
// and column.
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Load reads and parses a transcript file.
func Load(file string) (*Transcript, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// readFile reads a file of at most MaxFileSize bytes.
func readFile(file string) ([]byte, error) {
	info, err := os.Stat(file)
	if err != nil {
		return nil, &Error{File: file, Err: err}
	}
	if info.Size() > MaxFileSize {
		return nil, &Error{File: file, Err: fmt.Errorf("file is larger than %d bytes", MaxFileSize)}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{File: file, Err: err}
	}
	return data, nil
}

// Parse decodes and checks a transcript; file names it in errors and
// anchors a relative template path. Every error says where: line, column
// and the path of the value.
func Parse(file string, data []byte) (*Transcript, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tr Transcript
	if err := dec.Decode(&tr); err != nil {
		return nil, &Error{File: file, Err: errors.New(jsonpos.Describe(data, err, dec.InputOffset()))}
	}
	if dec.More() {
		return nil, &Error{File: file, Err: fmt.Errorf("near %s: text after the transcript's object", jsonpos.At(data, nil))}
	}
	tr.File = file
	var problems []string
	bad := func(p jsonpos.Path, format string, args ...any) {
		problems = append(problems, jsonpos.At(data, p)+": "+fmt.Sprintf(format, args...))
	}
	key, idx := jsonpos.Key, jsonpos.Index
	switch {
	case tr.Template == "" && tr.Agent == "":
		bad(nil, `a transcript needs "template" (a template file, relative to this one) or "agent" (a shipped agent's ID)`)
	case tr.Template != "" && tr.Agent != "":
		bad(jsonpos.Path{key("agent")}, `give "template" or "agent", not both`)
	}
	if len(tr.Turns) == 0 {
		bad(jsonpos.Path{key("turns")}, "a transcript needs at least one turn")
	}
	for i, t := range tr.Turns {
		turn := jsonpos.Path{key("turns"), idx(i)}
		at := func(more ...jsonpos.Elem) jsonpos.Path { return append(turn[:len(turn):len(turn)], more...) }
		switch {
		case t.Approvals != nil && t.User != "":
			bad(at(key("approvals")), `a turn sends "user" (a message) or "approvals" (answers to the calls that wait), not both`)
		case t.Approvals != nil && len(t.Approvals) == 0:
			bad(at(key("approvals")), "answer the calls that wait: at least one {\"tool\", \"approved\"}")
		case t.Approvals == nil && strings.TrimSpace(t.User) == "":
			bad(at(key("user")), `a turn needs the user's message (or "approvals": answers to the calls that wait)`)
		}
		for k, a := range t.Approvals {
			if a.Tool == "" {
				bad(at(key("approvals"), idx(k), key("tool")), "an answer names the tool of the call it answers")
			}
		}
		if len(t.Model) == 0 {
			bad(at(key("model")), "a turn needs the model's answer to every model call it makes, at least one")
		}
		checkAnswers(t.Model, at(key("model")), bad)
		for id, a := range t.Agents {
			ap := at(key("agents"), key(id))
			if len(a.Model) == 0 {
				bad(append(ap, key("model")), "an asked agent needs the answer to every model call it makes, at least one")
			}
			checkAnswers(a.Model, append(ap, key("model")), bad)
			if x := a.Expect; x.SequenceIndex != nil && *x.SequenceIndex < 0 {
				bad(append(ap, key("expect"), key("sequenceIndex")), "must not be negative")
			}
		}
		for name := range t.ToolResults {
			if name == "" {
				bad(at(key("toolResults")), "a stand-in needs the tool's name")
			}
		}
		if x := t.Expect; x.SequenceIndex != nil && *x.SequenceIndex < 0 {
			bad(at(key("expect"), key("sequenceIndex")), "must not be negative")
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, &Error{File: file, Err: errors.New(strings.Join(problems, "; "))}
	}
	return &tr, nil
}

// checkAnswers reports the problems of answers, the value at path p.
func checkAnswers(answers []Answer, p jsonpos.Path, bad func(jsonpos.Path, string, ...any)) {
	key, idx := jsonpos.Key, jsonpos.Index
	at := func(more ...jsonpos.Elem) jsonpos.Path { return append(p[:len(p):len(p)], more...) }
	for k, a := range answers {
		if a.Text == "" && len(a.ToolCalls) == 0 {
			bad(at(idx(k)), `an answer needs "text", "toolCalls" or both`)
		}
		if a.Usage != nil && (a.Usage.Prompt < 0 || a.Usage.Completion < 0) {
			bad(at(idx(k), key("usage")), "token counts must not be negative")
		}
		ids := map[string]bool{}
		for c, call := range a.ToolCalls {
			cp := at(idx(k), key("toolCalls"), idx(c))
			if call.Name == "" {
				bad(cp, "a tool call needs the tool's name")
			}
			if call.ID != "" {
				if ids[call.ID] {
					bad(append(cp, key("id")), "call ID %q is used twice in this answer", call.ID)
				}
				ids[call.ID] = true
			}
			if args := bytes.TrimSpace(call.Arguments); len(args) > 0 && args[0] != '{' {
				bad(append(cp, key("arguments")), "arguments must be a JSON object")
			}
		}
	}
}

// LoadAnswers reads the model answers of a file for `agentdock mockllm
// --script`; see ParseAnswers.
func LoadAnswers(file string) ([]Answer, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	return ParseAnswers(file, data)
}

// ParseAnswers reads model answers, in the order a model would give them:
// from a transcript (every turn's "model" answers, turn after turn), from
// {"model": [answers]}, or from a bare list of answers. Errors are located
// as Parse's are.
func ParseAnswers(file string, data []byte) ([]Answer, error) {
	trimmed := bytes.TrimSpace(data)
	var answers []Answer
	var root jsonpos.Path
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&answers); err != nil {
			return nil, &Error{File: file, Err: errors.New(jsonpos.Describe(data, err, dec.InputOffset()))}
		}
	default:
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(data, &probe); err != nil {
			return nil, &Error{File: file, Err: errors.New(jsonpos.Describe(data, err, -1))}
		}
		_, hasModel := probe["model"]
		if _, ok := probe["turns"]; !ok && !hasModel {
			return nil, &Error{File: file, Err: fmt.Errorf(`%s: no model answers here: want a transcript (with "turns"), {"model": [answers]} or a list of answers`, jsonpos.At(data, nil))}
		}
		if _, ok := probe["turns"]; ok {
			tr, err := Parse(file, data)
			if err != nil {
				return nil, err
			}
			for _, t := range tr.Turns {
				answers = append(answers, t.Model...)
			}
			return answers, nil
		}
		var doc struct {
			Model []Answer `json:"model"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			return nil, &Error{File: file, Err: errors.New(jsonpos.Describe(data, err, dec.InputOffset()))}
		}
		answers, root = doc.Model, jsonpos.Path{jsonpos.Key("model")}
	}
	var problems []string
	if len(answers) == 0 {
		problems = append(problems, jsonpos.At(data, root)+`: no answers: give a list of answers, {"model": [answers]} or a transcript`)
	}
	checkAnswers(answers, root, func(p jsonpos.Path, format string, args ...any) {
		problems = append(problems, jsonpos.At(data, p)+": "+fmt.Sprintf(format, args...))
	})
	if len(problems) > 0 {
		return nil, &Error{File: file, Err: errors.New(strings.Join(problems, "; "))}
	}
	return answers, nil
}

// DisplayName is the transcript's name, or its file's base name.
func (tr *Transcript) DisplayName() string {
	if tr.Name != "" {
		return tr.Name
	}
	return filepath.Base(tr.File)
}

// Files expands paths into transcript files: a file is taken as is; a
// directory contributes every *.json file in the folders named tests under
// it (templates/<name>/tests/*.json), sorted. A directory without any is an
// error, so that a mistyped path does not pass silently.
func Files(paths ...string) ([]string, error) {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || filepath.Ext(path) != ".json" {
				return nil
			}
			if filepath.Base(filepath.Dir(path)) == "tests" {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no transcripts (*.json in a tests folder) under this directory", p)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}
