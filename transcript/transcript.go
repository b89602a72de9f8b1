// Package transcript tests templates against a model's possible moves
// before a real model sees them. A transcript is a conversation with an
// agent in which the model's answers are written out: for every turn the
// user's message, the answer to each model call in order (text, tool calls),
// optional stand-ins for tool results, and what the runtime must have done.
//
// Run plays a transcript through the real turn loop, the code `agentdock
// serve` runs: the agent node and its orchestration service, the built-in
// tool registry (arguments validated against each tool's schema, tools run
// for real) and a memory session store. Only the model is scripted: a Model
// that answers each call with the transcript's next answer and records the
// request it was given, so that the tools offered at every model call can be
// checked.
//
// The format:
//
//	{
//	  "name": "evaluation runs its sequence",
//	  "template": "../template.json",       // relative to the file, or:
//	  "agent": "cognitive-reasoner",        // a shipped agent
//	  "turns": [
//	    {"user": "Critique my plan",
//	     "model": [
//	       {"toolCalls": [{"name": "critique", "arguments": {"subject": "the plan", "analysis": "..."}}]},
//	       {"text": "final answer"}
//	     ],
//	     "toolResults": {"search": "1. a stand-in result"},   // or {"search": {"error": "backend down"}}
//	     "expect": {
//	       "offered": [["critique"], ["debate"]],   // the tools offered at each model call, as sets
//	       "refused": ["debate"],                   // the calls the orchestration refused, in order
//	       "activeStep": "EvaluationMode",          // after the turn; null for none
//	       "sequenceIndex": 1,
//	       "recentlyUsedTools": ["critique"],
//	       "awaitingApproval": [],                  // the calls held for approval (requireApproval)
//	       "finishReason": "stop"
//	     }},
//	    {"approvals": [{"tool": "search", "approved": false, "reason": "not now"}],   // instead of "user"
//	     "model": [{"text": "..."}], "expect": {...}}
//	  ]
//	}
//
// An agent whose template has agent tools (its "agents") asks other agents:
// they run as the server runs them, each in its own session with its own
// scripted model. "agents" at the top lists their templates (files, or
// shipped agents' IDs; shipped agents are found without), and a turn's
// "agents" scripts them: {"probe": {"model": [...], "toolResults": {...},
// "expect": {...}}}, every key as the turn's own, checked against the
// asked agent's turns of that turn.
//
// Every expect key is optional; unknown keys are errors, since a misspelt
// expectation would check nothing. There is deliberately no way to rewrite
// expectations from a run: people write them. docs/testing.md is the
// guide.
package transcript

import "github.com/agentdock-go/agentdock/transcript/internal/format"

// The format's types (defined in an internal package, for fuzzing; see
// there).
type (
	// Transcript is one transcript file.
	Transcript = format.Transcript
	// Turn is one user message, the model's answers during the turn it
	// starts, and what must hold.
	Turn = format.Turn
	// Answer is the model's answer to one call: text, tool calls or both.
	Answer = format.Answer
	// ToolCall is one call the model makes.
	ToolCall = format.ToolCall
	// Usage is a model call's token count.
	Usage = format.Usage
	// StandIn replaces a tool's result for a turn.
	StandIn = format.StandIn
	// Approval is the user's answer to a call that waits for approval.
	Approval = format.Approval
	// AgentTurn scripts an agent the turn's agent asks (an agent tool).
	AgentTurn = format.AgentTurn
	// Expect lists what must hold after a turn; absent keys are not
	// checked.
	Expect = format.Expect
	// OptionalString is a JSON value that may be absent, null or a string.
	OptionalString = format.OptionalString
	// Error is a transcript, or the template it names, that cannot be read
	// or is invalid; its message starts with the file and, where it can,
	// the line and column.
	Error = format.Error
)

// MaxFileSize bounds a transcript file.
const MaxFileSize = format.MaxFileSize

// Load reads and parses a transcript file.
func Load(file string) (*Transcript, error) { return format.Load(file) }

// Parse decodes and checks a transcript; file names it in errors and
// anchors a relative template path. Every error says where: line, column
// and the path of the value.
func Parse(file string, data []byte) (*Transcript, error) { return format.Parse(file, data) }

// LoadAnswers reads the model answers of a file for `agentdock mockllm
// --script`; see ParseAnswers.
func LoadAnswers(file string) ([]Answer, error) { return format.LoadAnswers(file) }

// ParseAnswers reads model answers, in the order a model would give them:
// from a transcript (every turn's answers, turn after turn), from {"model":
// [answers]}, or from a bare list of answers.
func ParseAnswers(file string, data []byte) ([]Answer, error) { return format.ParseAnswers(file, data) }

// Files expands paths into transcript files: a file is taken as is; a
// directory contributes every *.json file in the folders named tests under
// it (templates/<name>/tests/*.json), sorted. A directory without any is an
// error, so that a mistyped path does not pass silently.
func Files(paths ...string) ([]string, error) { return format.Files(paths...) }
