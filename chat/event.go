package chat

// Kind says what an Event carries.
type Kind string

// The kinds of Event. A turn is a sequence of events that begins with Start
// (or, for a turn another server took over, goes on with Restart) and ends
// with exactly one Done; an Error event may precede it.
const (
	// KindStart begins a turn, in Start: the turn's ID and the answer
	// message it writes.
	KindStart Kind = "start"
	// KindTextDelta carries the next piece of the assistant's answer in Text.
	KindTextDelta Kind = "text-delta"
	// KindStepStart and KindStepFinish bracket one model call of a turn.
	KindStepStart  Kind = "step-start"
	KindStepFinish Kind = "step-finish"
	// KindToolCall carries a complete tool call in ToolCall.
	KindToolCall Kind = "tool-call"
	// KindToolResult carries the result of a tool call in ToolResult.
	KindToolResult Kind = "tool-result"
	// KindOrchestration carries the orchestration snapshot (active step,
	// sequence index, offered tools) before each model call and after each
	// transition.
	KindOrchestration Kind = "orchestration"
	// KindUsage carries the token usage of one model call (or, on the turn's
	// last usage event, of the whole turn when Final is set) in Usage.
	KindUsage Kind = "usage"
	// KindWarning carries a warning the user should see in Text.
	KindWarning Kind = "warning"
	// KindCompaction reports that the turn summarized earlier turns of the
	// conversation for the model, in Compaction, before its next model
	// call. (A compaction that failed is a KindWarning: the turn goes on
	// with the history's message cap.)
	KindCompaction Kind = "compaction"
	// KindLimit reports that the turn reached one of its budgets, in Limit.
	// A limit on tool calls per answer refuses the excess calls and the turn
	// goes on; every other limit ends the turn cleanly: the partial answer
	// is saved and Done follows with the limit's finish reason.
	KindLimit Kind = "limit"
	// KindError carries an error in Error. In a turn's stream the turn
	// ends after it. From a model (llmorch.Model.Stream) it may also carry
	// ToolCall: the model made a call that is invalid (unknown tool,
	// arguments that are not a JSON object); the call is answered with an
	// error result and the turn goes on.
	KindError Kind = "error"
	// KindApproval asks a person to approve a tool call before it runs:
	// ToolCall is the call and Approval names the request. The call is
	// not run; the turn ends after the step (FinishApproval) and the
	// session keeps the call pending until it is answered.
	KindApproval Kind = "approval"
	// KindClientCall carries a call of a client tool in ToolCall: a tool
	// the request's client brought and runs itself. It takes the place of
	// KindToolCall for such a call. The call is not run here: the turn
	// ends after the step (FinishToolCalls), and the session keeps the
	// call until the client's next request carries its result, which
	// records it in the orchestration like a tool that ran.
	KindClientCall Kind = "client-call"
	// KindAbort reports that the turn was stopped on request (a person's
	// Stop, a client that closed its stream), with the reason in Text. The
	// partial answer is saved and Done follows with FinishStopped.
	KindAbort Kind = "abort"
	// KindFallback reports that the model call under way failed before
	// its first output, with an error retrying would not soon cure (an
	// outage, a long rate limit, a request longer than its context), and
	// that the next model of its fallbacks answers the call instead, in
	// Fallback. It comes from the model (llmorch.Model.Stream) before the
	// answering model's first event, and the turn's stream carries it on.
	KindFallback Kind = "fallback"
	// KindRestart reports that another server took the turn over, in
	// Restart: the server running it stopped (a replica that died) and
	// the turn goes on from its last completed step. What the stream
	// showed after Restart.Since is void: the step under way is shown
	// again (its model call is made again, or its tool calls go on with
	// the results of those that completed), then the rest of the turn.
	KindRestart Kind = "restart"
	// KindGuardrail reports that a guardrail of the template matched, in
	// Guardrail: which one, where and what it did, never the text it
	// matched. It comes before what the guardrail let through: a redacted
	// text's delta, a tool call, a tool's result. A block of the input or
	// the output ends the turn with FinishGuardrail, after a text delta
	// saying so.
	KindGuardrail Kind = "guardrail"

	// KindToolProgress reports the work of a tool call under way, in
	// Progress: the events of an agent the call asked (an agent tool's
	// child turn), as they come. It is the stream's only: the history
	// keeps the call's result, and the agent's own session its work.
	KindToolProgress Kind = "tool-progress"
	// KindDone ends a turn; FinishReason says why.
	KindDone Kind = "done"
)

// Event is one thing that happened during a turn. The field that belongs to
// Kind is set (an invalid tool call from a model sets Error and ToolCall).
type Event struct {
	Kind Kind `json:"type"`
	// Seq numbers the events of a turn from 1; it is assigned by the agent
	// and used as the SSE event ID for resuming streams.
	Seq int64 `json:"seq,omitempty"`

	Text          string      `json:"text,omitempty"`
	Start         *Start      `json:"start,omitempty"`
	ToolCall      *ToolCall   `json:"toolCall,omitempty"`
	ToolResult    *ToolResult `json:"toolResult,omitempty"`
	Orchestration *Snapshot   `json:"orchestration,omitempty"`
	Usage         *Usage      `json:"usage,omitempty"`
	Error         *Error      `json:"error,omitempty"`
	Limit         *Limit      `json:"limit,omitempty"`
	Approval      *Approval   `json:"approval,omitempty"`
	Compaction    *Compaction `json:"compaction,omitempty"`
	Restart       *Restart    `json:"restart,omitempty"`
	Guardrail     *Guardrail  `json:"guardrail,omitempty"`
	Fallback      *Fallback   `json:"fallback,omitempty"`
	Progress      *Progress   `json:"progress,omitempty"`
	FinishReason  string      `json:"finishReason,omitempty"`
	// Final marks the turn-total usage event.
	Final bool `json:"final,omitempty"`
	// Model, on the usage event of one model call, names the model that
	// answered it (a fallback's, when one answered).
	Model *ModelRef `json:"model,omitempty"`
	// Models, on the turn-total usage event, is the turn's usage by the
	// model that spent it, in the order each first answered (absent on a
	// turn another server took over: KindRestart).
	Models []ModelUsage `json:"models,omitempty"`
	// SessionUsage, on a usage event, is the session's cumulative usage
	// once this usage was recorded, when the sender knows it (the
	// orchestration service does: it comes back from the write that
	// recorded it), so that no consumer needs to read the session again.
	SessionUsage *Usage `json:"sessionUsage,omitempty"`
}

// Start begins a turn (KindStart).
type Start struct {
	// Turn is the turn's ID.
	Turn string `json:"turn"`
	// Message names the answer message the turn writes: the turn's own
	// ID, or, for a turn that carries out answers to approvals or takes
	// the results of a client's tools, the answer that asked for them,
	// which it goes on.
	Message string `json:"message"`
}

// Snapshot is the orchestration as the model sees it at one moment.
type Snapshot struct {
	ActiveStep    string   `json:"activeStep"`
	SequenceIndex int      `json:"sequenceIndex"`
	Sequence      []string `json:"sequence,omitempty"`
	OfferedTools  []string `json:"offeredTools"`
	// Blocked is set when the step's sequence is at a position that no
	// tool the runtime provides can fill: it says which, and that the
	// sequence stops there (the step's tools are offered instead).
	Blocked string `json:"blocked,omitempty"`
	// Transition is set when this snapshot follows a step change.
	PreviousStep string `json:"previousStep,omitempty"`
	Transition   bool   `json:"transition,omitempty"`
}

// Compaction is a summary the turn made of earlier turns (KindCompaction):
// the model reads it in their place from the next model call on.
type Compaction struct {
	// Summary is the summary entry, as the history stores it.
	Summary Message `json:"summary"`
	// InputBefore and InputAfter are the next model call's input tokens
	// without and with the summary, as the turn counted them.
	InputBefore int `json:"inputBefore"`
	InputAfter  int `json:"inputAfter"`
}

// ModelRef names a model: Config is the key of its configuration in the
// template's nodeConfigurations ("llm.cheap"; empty for a model the
// server configures, such as LLM_FALLBACK_PROVIDER's), Provider and
// Model what it is.
type ModelRef struct {
	Config   string `json:"config,omitempty"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// String renders m for people: "llm.cheap (openai gpt-4o-mini)".
func (m ModelRef) String() string {
	s := m.Provider + " " + m.Model
	if m.Config != "" {
		s = m.Config + " (" + s + ")"
	}
	return s
}

// ModelUsage is the usage one model spent (Event.Models).
type ModelUsage struct {
	ModelRef
	Usage Usage `json:"usage"`
	// Calls counts the model calls it answered.
	Calls int `json:"calls"`
}

// Fallback is a model call that another model answers (KindFallback):
// From failed, with Error, before its first output; To answers.
type Fallback struct {
	From  ModelRef `json:"from"`
	To    ModelRef `json:"to"`
	Error Error    `json:"error"`
}

// Restart is a turn that another server took over (KindRestart).
type Restart struct {
	// Step is the turn's model call it goes on from, 1 for its first:
	// the steps before it are complete and saved.
	Step int `json:"step"`
	// Since is the seq of the last frame of the turn's stream whose
	// content (text, tool calls and results) stands: everything the
	// stream showed after it and before this event is void.
	Since int64 `json:"since"`
	// Message says what happened, safe to show.
	Message string `json:"message"`
}

// Guardrail is a match of one of the template's guardrails
// (KindGuardrail). It never holds the text that matched.
type Guardrail struct {
	// Name is the guardrail's name in the template.
	Name string `json:"name"`
	// On is where it matched: input, output, tool_arguments or
	// tool_result.
	On string `json:"on"`
	// Action is what it did: block, redact, approve or log.
	Action string `json:"action"`
	// Kind is what matched: a kind of personal data or of secret
	// ("credit_card", "openai_key"), or the check ("regex", "deny",
	// "max_length", "model").
	Kind string `json:"kind"`
	// ToolCallID and ToolName name the call, at the tool stages.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	// Message says what happened, safe to show.
	Message string `json:"message"`
}

// Error is an error as shown to a client: a stable code and a message that is
// safe to show (no keys, no raw provider bodies).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Approval is a request for a person's decision on one tool call.
type Approval struct {
	// ID names the request; the answer quotes it.
	ID string `json:"id"`
	// ToolCallID is the call's ID (ToolCall.ID).
	ToolCallID string `json:"toolCallId"`
	// Agent is set when the call waiting is not the turn's own but one
	// that an agent the turn asked made (an agent tool's child turn, or
	// an agent that one asked): it names that agent, Call is its call,
	// and ToolCallID is the turn's call that asked it. The answer goes to
	// that agent, and the turn's call goes on with it.
	Agent string    `json:"agent,omitempty"`
	Call  *ToolCall `json:"call,omitempty"`
}

// Progress is the work of a tool call under way (KindToolProgress).
type Progress struct {
	// CallID and Name are the call's (ToolCall.ID and Name).
	CallID string `json:"callId"`
	Name   string `json:"name"`
	// Agent names the agent the call asked, and Event is one event of
	// its turn: its text, its tool calls and results, its orchestration,
	// the approvals it asks for, its warnings and errors, and the
	// progress of its own calls (nested the same way).
	Agent string `json:"agent,omitempty"`
	Event *Event `json:"event,omitempty"`
}

// Decision is a person's answer to one approval request (Approval.ID).
type Decision struct {
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	// Reason, optional, is told to the model with a denial.
	Reason string `json:"reason,omitempty"`
}

// Stop is the cause of a turn's context cancellation (see
// context.WithCancelCause) when the turn was stopped on request rather than
// failed: the turn ends with KindAbort and FinishStopped, the partial
// answer saved, and no error.
type Stop struct {
	// Reason says who stopped the turn, safe to show.
	Reason string `json:"reason"`
}

func (s *Stop) Error() string { return "stopped: " + s.Reason }

// StoppedByUser is the cause of a turn stopped through the API's stop
// endpoint.
var StoppedByUser = &Stop{Reason: "stopped by the user"}

// Limit is a turn budget that was reached: which one, its value, and a
// message for the user that names the setting that changes it.
type Limit struct {
	// Name is one of the Limit* constants.
	Name string `json:"name"`
	// Value is the budget's value, e.g. 16 or "10m0s".
	Value string `json:"value"`
	// Message says what happened, safe to show.
	Message string `json:"message"`
}

func (l *Limit) Error() string { return "limit " + l.Name + ": " + l.Message }

// The budgets of a turn (llmorch.Budget), as named in Limit.Name.
const (
	// LimitToolCalls: tool calls that run per model answer.
	LimitToolCalls = "maxToolCalls"
	// LimitSteps: model calls per turn before the final answer.
	LimitSteps = "maxSteps"
	// LimitOutput: bytes of text and tool arguments the model streams per
	// turn.
	LimitOutput = "maxOutputBytes"
	// LimitTime: the turn's duration.
	LimitTime = "turnTimeout"
	// LimitEvents: the frames of one turn's stream the server keeps.
	LimitEvents = "maxTurnEvents"
)

// Finish reasons of a Done event.
const (
	FinishStop      = "stop"
	FinishMaxSteps  = "max-steps"
	FinishError     = "error"
	FinishCancelled = "cancelled"
	// FinishLength: the turn reached its output budget (or its stream's
	// event budget).
	FinishLength = "length"
	// FinishTimeout: the turn reached its time budget.
	FinishTimeout = "timeout"
	// FinishStopped: the turn was stopped on request (KindAbort).
	FinishStopped = "stopped"
	// FinishApproval: the turn ended waiting for a person to approve tool
	// calls (KindApproval).
	FinishApproval = "approval"
	// FinishToolCalls: the turn ended with calls of client tools, whose
	// results the client's next request carries (KindClientCall).
	FinishToolCalls = "tool-calls"
	// FinishGuardrail: a guardrail blocked the user's message (the model
	// was not called) or the answer (it stops where the match began); a
	// KindGuardrail event names it.
	FinishGuardrail = "guardrail"
)

// AnswerText is a turn's answer text as its events build it, for an edge
// that shows or keeps the answer whole: a restart (KindRestart) drops the
// text of the steps it shows again, so that the text is what the session
// saves, whichever server ran each part.
type AnswerText struct {
	b []byte
	// starts is the text's length when each step of the turn began.
	starts []int
}

// WriteString adds text that comes before the turn's (an answer the turn
// goes on).
func (a *AnswerText) WriteString(s string) { a.b = append(a.b, s...) }

// Add folds ev into the text.
func (a *AnswerText) Add(ev Event) {
	switch ev.Kind {
	case KindStepStart:
		a.starts = append(a.starts, len(a.b))
	case KindTextDelta:
		a.b = append(a.b, ev.Text...)
	case KindRestart:
		if r := ev.Restart; r != nil && r.Step >= 1 && r.Step <= len(a.starts) {
			a.b, a.starts = a.b[:a.starts[r.Step-1]], a.starts[:r.Step-1]
		}
	}
}

// String is the text.
func (a *AnswerText) String() string { return string(a.b) }

// Len is the text's length in bytes.
func (a *AnswerText) Len() int { return len(a.b) }
