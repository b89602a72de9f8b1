package llmorch

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/guardrail"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// Availability is implemented by toolboxes some of whose tools can be
// unable to run for a while (an MCP server starting, restarting or no
// longer listing a tool). Before every model call the orchestration is
// given what can run now (orchestration.Engine.OfferNow), so such a tool is
// never offered, and a call to it is refused with the reason.
type Availability interface {
	// Unavailable reports why the named tool cannot run now.
	Unavailable(name string) (reason string, unavailable bool)
}

// ServiceConfig configures a Service for one agent.
type ServiceConfig struct {
	Template *template.Template
	Engine   *orchestration.Engine
	Store    session.Store
	Model    Model
	Tools    tools.Toolbox
	// Budget bounds each turn (the server's settings); the template's
	// options override it field by field, and unset fields take
	// DefaultBudget.
	Budget Budget
	// Temperature and MaxTokens override the template's model settings.
	Temperature *float64
	MaxTokens   int
	// Telemetry records a chat span per model call and an execute_tool
	// span per tool call, with their metrics; nil records nothing.
	Telemetry *telemetry.Telemetry
	// Context is the agent's context budget; nil: none (the history the
	// turn is given is sent as it is).
	Context *ContextPolicy
	// Judges are the models of the template's model checks (guardrails
	// with check "model"), by the model the check names: "offline" or an
	// llm.* key of the template's nodeConfigurations.
	Judges map[string]Model
	// StepModels are the models of the steps that name one (a step's
	// "model"), by step name; the other steps' calls go to Model.
	StepModels map[string]StepModel
	// MaxAttachments bounds the images and files a model request carries:
	// the newest ones; an older one is a line in its message saying what
	// was there (default DefaultMaxAttachments; negative: no bound).
	MaxAttachments int
}

// StepModel is the model of a step's calls and its settings: those of
// its configuration in the template (nodeConfigurations[Config]).
type StepModel struct {
	Model Model
	// Config is the key of its configuration ("llm.cheap").
	Config      string
	Temperature *float64
	MaxTokens   int
}

// ref names m's model.
func (m StepModel) ref() chat.ModelRef {
	info := m.Model.Info()
	return chat.ModelRef{Config: m.Config, Provider: info.Provider, Model: info.Model}
}

// Service is the LLM orchestration service of one agent: it runs a turn as a
// loop of model calls, and before every call asks the orchestration which
// tools to offer and renders the system prompt for the active step.
type Service struct {
	cfg   ServiceConfig
	modes []Mode
	// stable: every call sends all the agent's tools and names the offered
	// ones apart (template.ToolFilteringStable); system: the system
	// prompt, the same on every call.
	stable bool
	system string
	// tokens counts requests for the context budget.
	tokens *tokenCount
	// guards are the template's guardrails, by step; judge answers their
	// model checks.
	guards *guards
	judge  guardrail.Judge
	// model is the agent's own model, with the settings of its calls.
	model StepModel
}

// NewService checks cfg and returns a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	var missing []string
	if cfg.Template == nil {
		missing = append(missing, "Template")
	}
	if cfg.Engine == nil {
		missing = append(missing, "Engine")
	}
	if cfg.Store == nil {
		missing = append(missing, "Store")
	}
	if cfg.Model == nil {
		missing = append(missing, "Model")
	}
	if cfg.Tools == nil {
		missing = append(missing, "Tools")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("llmorch: ServiceConfig needs %v", missing)
	}
	if err := cfg.Budget.Validate(); err != nil {
		return nil, fmt.Errorf("llmorch: ServiceConfig.Budget: %w", err)
	}
	if cfg.Context != nil {
		if err := cfg.Context.Validate(); err != nil {
			return nil, fmt.Errorf("llmorch: ServiceConfig.Context: %w", err)
		}
	}
	cfg.Budget = templateBudget(cfg.Template).Or(cfg.Budget).Or(DefaultBudget)
	if cfg.MaxAttachments == 0 {
		cfg.MaxAttachments = DefaultMaxAttachments
	}
	_, node := cfg.Template.Provider()
	if cfg.Temperature == nil {
		cfg.Temperature = node.Temperature
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = node.MaxTokens
	}
	guards, judges, err := compileGuards(cfg.Template)
	if err != nil {
		return nil, fmt.Errorf("llmorch: the template's guardrails: %w", err)
	}
	for _, m := range judges {
		if cfg.Judges[m] == nil {
			return nil, fmt.Errorf("llmorch: a guardrail's model check names the model %q, which ServiceConfig.Judges does not have", m)
		}
	}
	for step, m := range cfg.StepModels {
		if m.Model == nil {
			return nil, fmt.Errorf("llmorch: ServiceConfig.StepModels[%q] has no Model", step)
		}
	}
	s := &Service{cfg: cfg, guards: guards, judge: NewJudge(cfg.Judges), tokens: newTokenCount(cfg.Model), system: SystemPrompt(PromptInput{
		Personality: cfg.Template.Personality,
		Guide:       guide(cfg.Template),
		Steps:       cfg.Template.Steps(),
	})}
	s.model = StepModel{Model: cfg.Model, Config: cfg.Template.ModelNode(), Temperature: cfg.Temperature, MaxTokens: cfg.MaxTokens}
	switch cfg.Template.Options.ToolFiltering {
	case template.ToolFilteringStable:
		s.stable = true
	case "":
		s.stable = cfg.Model.Info().RestrictsTools
	}
	for _, st := range cfg.Engine.Steps() {
		s.modes = append(s.modes, Mode{Name: st.Name, Description: st.Description, Sequence: st.Sequence, Tools: st.Tools, Default: st.Default})
	}
	return s, nil
}

// Turn is the input of one turn.
type Turn struct {
	// ID names the turn. The turn's first write (the agent's) sets it as
	// the session's turn marker (session.WithTurn) and its last write
	// clears it; "" leaves the marker alone.
	ID string
	// SessionID is the session's store key (session.Key).
	SessionID string
	// Lease is the turn's hold on the session; every write is fenced by it.
	Lease session.Lease
	// State is the orchestration state after the user message was applied.
	State orchestration.State
	// PreviousStep is the active step before the user message, so that the
	// turn's first snapshot can report a transition the message caused.
	PreviousStep string
	// History is the conversation sent to the model, ending with the user
	// message of this turn (or, for a turn that answers approvals, with the
	// results the session has of the calls waiting for them). With a
	// context budget it starts at a user message.
	History []chat.Message
	// Summary is the summary entry (chat.RoleSummary) of the turns before
	// History, which the model reads first; nil when there is none.
	Summary *chat.Message
	// Fallback cuts the history to the agent's message cap when the
	// context budget is passed and no summary can be made; nil leaves it.
	Fallback func([]chat.Message) []chat.Message
	// Answers are a person's decisions on the calls that waited for
	// approval, in the order the model made them; the turn carries them
	// out before its first model call. The session already records the
	// decisions and, for the denied calls, their results (see
	// DeniedResult): the service runs the approved calls and reports
	// every answer.
	Answers []Answer
	// MessageID names the answer the turn's output belongs to: "" for the
	// turn's own (ID), or the answer a turn that carries out approvals goes
	// on. The approvals the turn asks for record it (session.Approval).
	MessageID string
	// Journal: the turn keeps its journal in the session
	// (session.Journal), so that another replica can take it over if this
	// one dies; the turn's first write (the agent's) started it. Every
	// write of the turn then also refuses to save over writes the store
	// lost (a failover), and the turn ends saying what is lost.
	Journal bool
	// Position is the seq of the last frame of the turn's stream so far
	// (the server's shared turn log), which the journal records with each
	// write of the turn's messages (session.Journal.Frame). Nil: 0.
	Position func() int64
	// Resume goes on with a turn another replica ran until it died, from
	// its journal (agent.Set.TakeOver): the turn's first event says so
	// (chat.KindRestart), then the step under way goes on (see
	// run.restart) and the turn with it. State and History are the
	// session's, which hold the turn's saved steps.
	Resume *session.Journal
	// ClientTools are the tools the request's client brings and runs
	// itself (OpenAI's tools, the AI SDK's client-side tools). The
	// orchestration offers them by its rules (orchestration.Engine.
	// OfferWith); a call of one that is offered is not run but held: the
	// turn yields it (chat.KindClientCall), keeps it in the session
	// (session.Approval with Client set) and ends after the step with
	// chat.FinishToolCalls. The client's next request carries its result.
	ClientTools []chat.ToolSpec
	// Choice is the client's tool_choice (zero: auto): it narrows the
	// offer of every model call of the turn, and Required makes the
	// first one call a tool.
	Choice orchestration.ToolChoice
	// Format, when set, is the format the turn's answer must be in (see
	// Format).
	Format *Format
	// Instructions are the client's own instructions, given to the model
	// after the template's (PromptInput.Client).
	Instructions string
	// OneCallPerAnswer: at most one tool call of each model answer runs
	// (a client's parallel_tool_calls: false). The model is asked for one
	// call (Request.OneCallPerAnswer, and the note); when an answer makes
	// more all the same, the first is carried out and the next gets a
	// refusal the model reads (refusedParallel), standing for the rest,
	// as for calls over MaxToolCalls.
	OneCallPerAnswer bool
	// CallTrail: the client keeps only OpenAI's chat messages (a chat
	// completion without a session), which hold the calls of its own
	// tools and none of the agent's. Each call of a client tool then gets
	// an ID that carries the calls of the agent's tools that ran in the
	// turn before it (orchestration.TrailID), so that the client's next
	// request replays them; the turn shows those calls to the client once
	// the answer that made them is carried out.
	CallTrail bool
	// Guardrails are the events of the guardrails that matched the
	// turn's input (CheckInput) or the results a client sent; the turn
	// yields them first.
	Guardrails []chat.Event
	// Blocked, when set, is the notice of a guardrail that blocked the
	// turn's input: the turn answers with it and does not call the model,
	// and ends with chat.FinishGuardrail.
	Blocked string
}

// message is the ID of the answer the turn's output belongs to.
func (t Turn) message() string {
	if t.MessageID != "" {
		return t.MessageID
	}
	return t.ID
}

// Answer is a person's decision on one call that waited for approval.
type Answer struct {
	Call     chat.ToolCall
	Approved bool
	Reason   string
	// Offer is what the model call that made the call was offered
	// (session.Approval.Offer): an approved call is judged against it.
	// Nil: against the state it runs in.
	Offer *orchestration.Offer
	// Decisions, when set, are a person's answers to the approvals that
	// an agent the call asked waits for (session.Approval.Agent): the
	// call runs again with them (tools.Call.Decisions), whatever they
	// decide, and Approved is true.
	Decisions []chat.Decision
}

// DeniedResult is what the model reads for a call a person declined: it
// was not run, and why.
func DeniedResult(call chat.ToolCall, reason string) chat.ToolResult {
	content := chat.NotRunPrefix + "the user declined this call of " + call.Name + "."
	if reason != "" {
		content += " The user's reason: " + reason
	}
	return chat.ToolResult{CallID: call.ID, Name: call.Name, Content: content, Type: "denied", IsError: true, NotRun: true, Denied: true}
}

// markNotRun begins the content of a result of a call that did not run
// the way the runtime begins all of them (chat.NotRunContent), so that a
// conversation kept as text still says the call did not run.
func markNotRun(res chat.ToolResult) chat.ToolResult {
	if res.NotRun && !chat.NotRunContent(res.Content) {
		res.Content = chat.NotRunPrefix + res.Content
	}
	return res
}

// ToolMessage is the history entry of a tool result.
func ToolMessage(res chat.ToolResult) chat.Message {
	return chat.Message{Role: chat.RoleTool, Content: res.Content, ToolCallID: res.CallID, ToolName: res.Name, IsError: res.IsError, Denied: res.Denied, NotRun: res.NotRun}
}

// NewApprovalID returns the ID of a new approval request.
func NewApprovalID() string { return "approval-" + session.NewID() }

// modelOf is the model of the calls made in step.
func (s *Service) modelOf(step string) StepModel {
	if m, ok := s.cfg.StepModels[step]; ok {
		return m
	}
	return s.model
}

// Budget returns the budget the service's turns run under: the template's
// options, then ServiceConfig.Budget, then the defaults.
func (s *Service) Budget() Budget { return s.cfg.Budget }

// saveTimeout bounds the writes made after a turn was cancelled, so that the
// partial answer is saved but a dead store cannot hold the turn forever.
const saveTimeout = 5 * time.Second

// StreamWithOrchestration runs one turn and yields its events (without Seq
// numbers; the agent assigns them). The last event is always Done.
//
// Each model call is one step. Before it, the orchestration decides the
// offered tools; after it (onStepFinish), the step's tool calls are executed
// in order, each one only if that model call was offered it (the calls of
// one answer are all judged against the same offer, however the earlier
// ones moved the state: orchestration.Engine.Judge), each executed tool is
// recorded (advancing a sequence only at the position its model call was
// offered, and re-choosing the step, so the next model call of the same
// turn sees the new step's tools), and the step's usage is recorded. The
// step's messages are appended to the history as they complete. All writes are atomic store updates fenced by the turn's lease.
//
// The turn runs under its Budget. Reaching a budget yields a chat.KindLimit
// event; every budget but MaxToolCalls then ends the turn with its finish
// reason, the partial answer saved. A cancellation whose cause (see
// context.WithCancelCause) is a *chat.Limit ends the turn the same way (the
// server's budget on a stream's frames), one whose cause is a
// *chat.Error is reported as that error before Done (shutdown, a lost
// lease), and one whose cause is a *chat.Stop (a person's Stop) ends with
// chat.KindAbort and FinishStopped, the partial answer and usage saved.
//
// A call the orchestration holds for approval (orchestration.Engine.Judge:
// the step of its model call or the step it would run in requires it) is
// not run: the turn yields it as chat.KindApproval, keeps it in the session
// (session.Approval, with its model call's offer) with the step's other
// results, and ends after that step with FinishApproval. The
// calls of the same answer that need no approval run as usual. A later
// turn carries out the answers (Turn.Answers).
func (s *Service) StreamWithOrchestration(ctx context.Context, turn Turn) iter.Seq[chat.Event] {
	return func(yield func(chat.Event) bool) {
		ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Budget.TurnTimeout, LimitTime(s.cfg.Budget.TurnTimeout))
		defer cancel()
		r := &run{s: s, turn: turn, state: turn.State, yield: yield, messages: slices.Clone(turn.History), summary: turn.Summary, system: s.system}
		if turn.Instructions != "" {
			r.system = SystemPrompt(PromptInput{
				Personality: s.cfg.Template.Personality,
				Guide:       guide(s.cfg.Template),
				Steps:       s.cfg.Template.Steps(),
				Client:      turn.Instructions,
			})
		}
		for _, t := range turn.ClientTools {
			r.client = append(r.client, t.Name)
		}
		if turn.Journal {
			r.writes = 1 // the agent's first write started the journal
		}
		if j := turn.Resume; j != nil {
			r.calls, r.output, r.savedOutput, r.turnUsage, r.writes, r.saved = j.Steps, j.Output, j.Output, j.Usage, j.Writes, j.Steps
		}
		r.handOver = handOverSignal(ctx)
		reason, err := r.loop(ctx)
		r.end(ctx, reason, err)
	}
}

// end ends the turn after its loop: its total usage, then why it ended
// early (a budget or an error), then Done.
func (r *run) end(ctx context.Context, reason string, err error) {
	if r.handingOver(ctx) {
		// Handed over: no write and no event more (handover.go).
		return
	}
	if !r.ended && r.turn.ID != "" {
		// No write cleared the turn marker yet (the consumer left,
		// or the turn failed before a write that would have).
		r.saveEnd(ctx, nil, chat.Usage{})
	}
	if r.stopped {
		return
	}
	if err == nil && r.unreplicated != nil {
		// The answer is saved on the store's primary, but its replicas did
		// not acknowledge it: the turn does not finish as if it were safe.
		err = &chat.Error{Code: CodeNotReplicated, Message: "your message and this answer are saved, but no replica of the session store acknowledged them in time: if the store fails over before it copies them, this turn (your message and the whole answer) may be lost; read the session (GET /api/sessions/:id) before relying on it"}
	}
	var last *chat.Event
	if err != nil {
		var (
			lim  *chat.Limit
			ce   *chat.Error
			stop *chat.Stop
		)
		switch {
		case errors.As(err, &lim), ctx.Err() != nil && errors.As(context.Cause(ctx), &lim):
			reason = finishReason(lim)
			last = &chat.Event{Kind: chat.KindLimit, Limit: lim}
		case ctx.Err() != nil && errors.As(context.Cause(ctx), &stop):
			reason = chat.FinishStopped
			last = &chat.Event{Kind: chat.KindAbort, Text: stop.Reason}
		case ctx.Err() != nil:
			reason = chat.FinishCancelled
			if errors.As(context.Cause(ctx), &ce) {
				last = &chat.Event{Kind: chat.KindError, Error: ce}
			}
		default:
			reason = chat.FinishError
			last = &chat.Event{Kind: chat.KindError, Error: publicError(err)}
		}
	}
	if !r.turnUsage.IsZero() {
		u, su := r.turnUsage, r.state.TokenUsage
		ev := chat.Event{Kind: chat.KindUsage, Usage: &u, Final: true, SessionUsage: &su, Models: r.byModel}
		if r.turn.Resume != nil {
			// The usage by model of the steps another server ran is not
			// known here: none rather than a part.
			ev.Models = nil
		}
		if !r.emit(ev) {
			return
		}
	}
	if last != nil && !r.emit(*last) {
		return
	}
	r.emit(chat.Event{Kind: chat.KindDone, FinishReason: reason})
}

type run struct {
	s         *Service
	turn      Turn
	state     orchestration.State
	yield     func(chat.Event) bool
	stopped   bool // the consumer stopped iterating
	messages  []chat.Message
	turnUsage chat.Usage
	lastStep  string
	lastSnap  chat.Snapshot
	announced bool
	calls     int    // model calls so far
	callStep  string // the active step at the latest model call
	output    int    // bytes of text and tool arguments the model streamed
	saved     int    // steps whose messages the store confirmed
	ended     bool   // the turn's last write cleared the session's turn marker
	noTools   bool   // the latest model call offered no tools (the final answer)
	// answering: the call being run was approved, so it is not held for
	// approval again; decisions are the answers it carries to the agent
	// it asked (Answer.Decisions).
	answering bool
	decisions []chat.Decision
	// recordWithStep: the call being run is its step's last, so its record
	// goes in the step's write (toolOutcome.record) instead of a write of
	// its own.
	recordWithStep bool
	// offer is what the latest model call was offered (nothing for the
	// final answer), and callState the state it was made in: every call
	// of its answer is checked against that offer, not against the state
	// its earlier calls moved.
	offer     orchestration.Offer
	callState orchestration.State
	// summary is the summary entry the model reads before messages (see
	// ContextPolicy); compactTried: the turn tried to compact once already;
	// counted: the latest request's token count.
	summary      *chat.Message
	compactTried bool
	counted      int
	// writes counts the turn's writes the store confirmed, while the
	// turn keeps a journal (Turn.Journal); savedOutput is the output of
	// its saved steps.
	writes      int
	savedOutput int
	// unreplicated: the turn's last write was made but its store's
	// replicas did not acknowledge it (session.ErrNotReplicated).
	unreplicated error
	// journaled are the results of the calls of a taken-over step that
	// completed before its replica died (Turn.Resume): they are not run
	// again. interrupt: the first of the step's other calls to reach its
	// tool was under way then.
	journaled map[string]chat.ToolResult
	interrupt bool
	// system is the turn's system prompt; client names its client tools.
	system string
	client []string
	// clientHeld: a call of a client tool was held this turn.
	clientHeld bool
	// ran lists, model call by model call, the calls of the agent's tools
	// that ran in the turn, for the IDs of client calls (Turn.CallTrail).
	ran [][]string
	// argVerdicts are what the tool_arguments guardrails decided about
	// the step's calls, by call ID.
	argVerdicts map[string]argumentsVerdict
	// handOver asks the turn to stop at its next safe point, handed over
	// (WithHandOver); handedOver: it stopped so (handover.go).
	handOver   context.Context
	handedOver bool
	// model is the model of the step under way; answered, the model that
	// answers its call (a fallback's, after a KindFallback); byModel, the
	// turn's usage by the model that answered it.
	model    StepModel
	answered chat.ModelRef
	byModel  []chat.ModelUsage
}

// spent adds u, the usage of the step under way, to the turn's, and to
// the model that answered it.
func (r *run) spent(u chat.Usage) {
	r.turnUsage = r.turnUsage.Add(u)
	i := slices.IndexFunc(r.byModel, func(m chat.ModelUsage) bool { return m.ModelRef == r.answered })
	if i < 0 {
		r.byModel = append(r.byModel, chat.ModelUsage{ModelRef: r.answered})
		i = len(r.byModel) - 1
	}
	r.byModel[i].Usage = r.byModel[i].Usage.Add(u)
	r.byModel[i].Calls++
}

// errAwaitApproval ends a turn whose step holds calls for approval.
var errAwaitApproval = errors.New("tool calls wait for approval")

var errStopped = errors.New("consumer stopped")

func (r *run) emit(ev chat.Event) bool {
	if r.stopped {
		return false
	}
	if !r.yield(ev) {
		r.stopped = true
		return false
	}
	return true
}

func (r *run) loop(ctx context.Context) (string, error) {
	budget := r.s.cfg.Budget
	for _, ev := range r.turn.Guardrails {
		if !r.emit(ev) {
			return "", errStopped
		}
	}
	if r.turn.Blocked != "" {
		return r.blockInput(ctx)
	}
	if r.turn.Resume != nil {
		if reason, ended, err := r.restart(ctx); ended || err != nil {
			return reason, err
		}
	}
	if err := r.answer(ctx); errors.Is(err, errAwaitApproval) {
		return chat.FinishApproval, nil
	} else if err != nil {
		return "", err
	}
	// The step taken over is behind: the steps after it journal their
	// calls, and none of their calls was under way when a replica died.
	r.journaled, r.interrupt = nil, false
	for step := r.calls + 1; ; step++ {
		if r.handOverDue() {
			// A safe point: the steps so far are saved, the next model
			// call is the taker's.
			return "", ErrHandedOver
		}
		final := step > budget.MaxSteps
		if step == budget.MaxSteps+1 && !r.emit(chat.Event{Kind: chat.KindLimit, Limit: limitSteps(budget.MaxSteps)}) {
			return "", errStopped
		}
		calls, err := r.modelStep(ctx, final)
		if reason, ended, err := stepEnd(calls, final, r.clientHeld, err); ended || err != nil {
			return reason, err
		}
	}
}

// stepEnd says whether a step with these calls (and error) ends the turn,
// and why.
func stepEnd(calls []chat.ToolCall, final, clientHeld bool, err error) (string, bool, error) {
	switch {
	case errors.Is(err, errAwaitApproval) && clientHeld:
		return chat.FinishToolCalls, true, nil
	case errors.Is(err, errAwaitApproval):
		return chat.FinishApproval, true, nil
	case errors.Is(err, errGuardrailBlocked):
		return chat.FinishGuardrail, true, nil
	case err != nil:
		return "", true, err
	case len(calls) == 0 && final:
		return chat.FinishMaxSteps, true, nil
	case len(calls) == 0:
		return chat.FinishStop, true, nil
	case final:
		// The model called tools although none were offered; its calls
		// were refused and the turn ends here.
		return chat.FinishMaxSteps, true, nil
	}
	return "", false, nil
}

// restart begins a turn taken over from a replica that died
// (Turn.Resume): it says so (chat.KindRestart) and shows the
// orchestration, then goes on with the step whose tool calls ran when the
// replica died, if there was one. The step is shown again whole: its text
// and calls, the results of the calls that completed (not run again), the
// call that was under way (run again only when its tool is idempotent,
// else reported interrupted), then the calls that had not started. The
// model call that was under way, if any, is made again by the loop. It
// reports whether the step ended the turn, and why.
func (r *run) restart(ctx context.Context) (string, bool, error) {
	j := r.turn.Resume
	ev := chat.Event{Kind: chat.KindRestart, Restart: &chat.Restart{Step: j.Steps + 1, Since: j.Frame,
		Message: "The server running this answer stopped; another server goes on with it from its last completed step. What was shown after that step is replaced by what follows."}}
	if !r.emit(ev) || !r.announce(r.snapshot(r.available())) {
		return "", true, errStopped
	}
	st := j.Step
	if st == nil {
		return "", false, nil
	}
	r.journaled, r.interrupt = map[string]chat.ToolResult{}, true
	for _, res := range st.Results {
		r.journaled[res.CallID] = res
	}
	if st.Answers {
		// The calls of a person's answers; the loop carries them out
		// (answer) with the results the journal has.
		r.turn.Answers = r.turn.Answers[:0]
		for i, c := range st.Calls {
			a := Answer{Call: c, Approved: true, Decisions: st.Decisions[c.ID]}
			if i < len(st.Offers) {
				a.Offer = st.Offers[i]
			}
			r.turn.Answers = append(r.turn.Answers, a)
		}
		return "", false, nil
	}
	final := st.Final
	r.model = r.s.modelOf(r.state.ActiveStep)
	r.answered = r.model.ref()
	r.calls++
	r.output += st.Output
	r.offer, r.callState, r.noTools = st.Offer, r.state, final
	if !r.emit(chat.Event{Kind: chat.KindStepStart}) {
		return "", true, errStopped
	}
	if st.Text != "" && !r.emit(chat.Event{Kind: chat.KindTextDelta, Text: st.Text}) {
		return "", true, errStopped
	}
	err := r.onStepFinish(ctx, []byte(st.Text), st.Calls, st.Invalid, st.Usage)
	return stepEnd(st.Calls, final, r.clientHeld, err)
}

// interrupted is the result of a call that was under way when the replica
// running its turn died, whose tool is not idempotent: it is not run
// again, and it may or may not have taken effect.
func interrupted(call chat.ToolCall) chat.ToolResult {
	return chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "interrupted", IsError: true, NotRun: true,
		Content: chat.NotRunPrefix + "this call was interrupted: the server running it stopped before it reported a result, so it may or may not have taken effect, and it was not run again. Check its effect before you call it again."}
}

// modelStep runs one model call and its onStepFinish. It returns the step's
// tool calls.
func (r *run) modelStep(ctx context.Context, final bool) ([]chat.ToolCall, error) {
	cfg := r.s.cfg
	avail := r.available()
	offer := r.offerNow(avail)
	snap := r.snapshot(avail)
	r.noTools = final
	if final {
		snap.OfferedTools = nil
		offer.Tools = nil
	}
	require := r.turn.Choice.Required && r.calls == 0 && len(offer.Tools) > 0
	r.model = r.s.modelOf(snap.ActiveStep)
	r.answered = r.model.ref()
	noteFormat := r.turn.Format
	if r.model.Model.Info().Formats {
		noteFormat = nil
	}
	r.offer, r.callState = offer, r.state
	if !r.announce(snap) {
		return nil, errStopped
	}
	if offer.Warning != "" && !r.emit(chat.Event{Kind: chat.KindWarning, Text: offer.Warning}) {
		return nil, errStopped
	}
	remaining := cfg.Budget.MaxOutputBytes - r.output
	req := Request{
		System:         r.system,
		Messages:       r.requestMessages(),
		Note:           Note(PromptInput{Snapshot: snap, FinalAnswer: final, Require: require, Format: noteFormat, OneCall: r.turn.OneCallPerAnswer}),
		Temperature:    r.model.Temperature,
		MaxTokens:      maxTokens(r.model.MaxTokens, remaining),
		MaxOutputBytes: remaining,
		Orchestration:  &snap,
		Modes:          r.s.modes,
		Require:        require,
		Format:         r.turn.Format,
		// Only a call that may call tools is told: a request without
		// tools may not name parallel_tool_calls at all (OpenAI).
		OneCallPerAnswer: r.turn.OneCallPerAnswer && len(offer.Tools) > 0,
	}
	if r.s.stable {
		// The whole tool set, in the engine's order and then the
		// client's, whatever is offered: the prefix of the request stays
		// the same call after call.
		req.Tools = append(cfg.Tools.Specs(cfg.Engine.Tools()), r.turn.ClientTools...)
		req.Offered = append(make([]string, 0, len(offer.Tools)), offer.Tools...)
	} else {
		req.Tools = cfg.Tools.Specs(offer.Tools)
		for _, t := range r.turn.ClientTools {
			if slices.Contains(offer.Tools, t.Name) {
				req.Tools = append(req.Tools, t)
			}
		}
	}
	for _, name := range offer.Tools {
		if cfg.Engine.NeedsApproval(r.state, name) {
			req.ApprovalTools = append(req.ApprovalTools, name)
		}
	}
	// The model call (and the compaction before it) is cut at once when
	// the turn is handed over: the taker makes it again.
	mctx, stopWatch := r.modelContext(ctx)
	defer stopWatch()
	if err := r.fit(mctx, &req); err != nil {
		if r.handingOver(mctx) {
			return nil, ErrHandedOver
		}
		return nil, err
	}
	if !r.emit(chat.Event{Kind: chat.KindStepStart}) {
		return nil, errStopped
	}
	prevStep := r.turn.PreviousStep
	if r.calls > 0 {
		prevStep = r.callStep
	}
	r.calls++
	r.callStep = snap.ActiveStep
	var (
		text    []byte
		calls   []chat.ToolCall
		usage   chat.Usage
		invalid = map[string]string{} // call ID -> why the call is invalid
	)
	// The output guardrails of the step let the text through (a turn
	// whose answer is in a format shows it once it is checked, below).
	var og *outputGuard
	if r.turn.Format == nil {
		og = r.outputGuard(ctx, snap.ActiveStep)
	}
	// over ends the step at the output budget: the text so far is saved
	// (what the guardrails held back is flushed first) and the calls,
	// whose arguments are incomplete or over it, are not.
	over := func() error {
		if og != nil && og.blocked == nil && !r.pass(og, "", true, &text) {
			r.saveEnd(ctx, text, usage)
			return errStopped
		}
		r.saveEnd(ctx, text, usage)
		return limitOutput(cfg.Budget.MaxOutputBytes)
	}
	for ev, err := range r.stream(mctx, req, prevStep) {
		if err != nil {
			if r.handingOver(mctx) {
				return nil, ErrHandedOver
			}
			if errors.Is(err, ErrOutputLimit) {
				return nil, over()
			}
			r.saveEnd(ctx, text, usage)
			return nil, err
		}
		switch ev.Kind {
		case chat.KindTextDelta:
			cut := len(ev.Text) > cfg.Budget.MaxOutputBytes-r.output
			if cut {
				ev.Text = truncateUTF8(ev.Text, cfg.Budget.MaxOutputBytes-r.output)
			}
			r.output += len(ev.Text)
			switch {
			case og != nil:
				if !r.pass(og, ev.Text, false, &text) {
					r.saveEnd(ctx, text, usage)
					return nil, errStopped
				}
				if og.blocked != nil {
					r.saveEnd(ctx, text, usage)
					return nil, errGuardrailBlocked
				}
			default:
				text = append(text, ev.Text...)
				// An answer in a format is shown once it is checked (below).
				if ev.Text != "" && r.turn.Format == nil && !r.emit(ev) {
					r.saveEnd(ctx, text, usage)
					return nil, errStopped
				}
			}
			if cut {
				return nil, over()
			}
		case chat.KindToolCall, chat.KindError:
			if ev.ToolCall == nil || ev.Kind == chat.KindError && ev.Error == nil {
				continue
			}
			call := *ev.ToolCall
			if r.output += len(call.Arguments); r.output > cfg.Budget.MaxOutputBytes {
				return nil, over()
			}
			calls = append(calls, call)
			if ev.Kind == chat.KindError {
				invalid[call.ID] = ev.Error.Message
			}
		case chat.KindUsage:
			usage = usage.Add(*ev.Usage)
		case chat.KindFallback:
			// Another model answers the call: the client is told which.
			if ev.Fallback == nil {
				continue
			}
			r.answered = ev.Fallback.To
			if !r.emit(ev) {
				r.saveEnd(ctx, text, usage)
				return nil, errStopped
			}
		}
		if mctx.Err() != nil || r.handOverDue() {
			break // stop reading the model at once
		}
	}
	if r.handingOver(mctx) {
		return nil, ErrHandedOver
	}
	if err := ctx.Err(); err != nil {
		r.saveEnd(ctx, text, usage)
		return nil, err
	}
	if og != nil {
		// The step's end: what the guardrails held back goes out.
		if !r.pass(og, "", true, &text) {
			r.saveEnd(ctx, text, usage)
			return nil, errStopped
		}
		if og.blocked != nil {
			r.saveEnd(ctx, text, usage)
			return nil, errGuardrailBlocked
		}
	}
	if cfg.Context != nil {
		r.s.tokens.reconcile(r.counted, usage.Prompt)
	}
	if r.turn.Format != nil {
		if len(calls) == 0 {
			var err error
			if text, err = r.conform(mctx, req, text, &usage, prevStep); err != nil {
				if r.handingOver(mctx) {
					return nil, ErrHandedOver
				}
				r.saveEnd(ctx, nil, usage)
				return nil, err
			}
		}
		// The answer, checked, goes through the output guardrails whole.
		checked := text
		text = nil
		if og := r.outputGuard(ctx, snap.ActiveStep); og != nil {
			if !r.pass(og, string(checked), false, &text) || og.blocked == nil && !r.pass(og, "", true, &text) {
				r.saveEnd(ctx, text, usage)
				return nil, errStopped
			}
			if og.blocked != nil {
				r.saveEnd(ctx, text, usage)
				return nil, errGuardrailBlocked
			}
		} else {
			text = checked
			if len(text) > 0 && !r.emit(chat.Event{Kind: chat.KindTextDelta, Text: string(text)}) {
				r.saveEnd(ctx, text, usage)
				return nil, errStopped
			}
		}
	}
	// The step's calls run to their end, a hand-over or not.
	stopWatch()
	return calls, r.onStepFinish(ctx, text, calls, invalid, usage)
}

// conform checks a final answer against the turn's Format: one that
// fails gets one repair call, which sees the answer and why it failed
// and is offered no tools; a repaired answer that fails too ends the turn
// with CodeInvalidOutput. The repair's exchange is not stored: the
// history keeps the answer that passed. Its usage is the step's.
func (r *run) conform(ctx context.Context, req Request, text []byte, usage *chat.Usage, prevStep string) ([]byte, error) {
	f := r.turn.Format
	err := f.Check(string(text))
	if err == nil {
		return text, nil
	}
	repair := req
	repair.Messages = append(slices.Clone(req.Messages), assistantMessage(text, nil))
	repair.Note = f.repair(err)
	repair.Offered = []string{}
	repair.Require = false
	if !r.s.stable {
		repair.Tools = nil
	}
	repair.MaxOutputBytes = r.s.cfg.Budget.MaxOutputBytes - r.output
	var fixed []byte
	for ev, serr := range r.stream(ctx, repair, prevStep) {
		if serr != nil {
			return nil, serr
		}
		switch ev.Kind {
		case chat.KindTextDelta:
			r.output += len(ev.Text)
			fixed = append(fixed, ev.Text...)
		case chat.KindUsage:
			*usage = usage.Add(*ev.Usage)
		case chat.KindFallback:
			if ev.Fallback != nil {
				r.answered = ev.Fallback.To
			}
		}
		if r.output > r.s.cfg.Budget.MaxOutputBytes {
			return nil, limitOutput(r.s.cfg.Budget.MaxOutputBytes)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := f.Check(string(fixed)); err != nil {
		return nil, &chat.Error{Code: CodeInvalidOutput, Message: "the model's answer did not match the response format, also after a repair: " + err.Error()}
	}
	return fixed, nil
}

// onStepFinish executes the step's tool calls, records tools and usage and
// saves the step's messages.
func (r *run) onStepFinish(ctx context.Context, text []byte, calls []chat.ToolCall, invalid map[string]string, usage chat.Usage) error {
	cfg := r.s.cfg
	if len(calls) > 0 {
		if invalid == nil {
			invalid = map[string]string{}
		}
		r.guardArguments(ctx, calls, invalid)
	}
	if r.turn.Journal && len(calls) > 0 && r.journaled == nil {
		if err := r.journalStep(ctx, text, calls, invalid, usage); err != nil {
			return err
		}
	}
	// Over MaxToolCalls, the first excess call stands for all of them: it
	// gets the refusal naming the limit, and the rest leave no trace in the
	// history, which a turn must never fill. A turn that runs one call per
	// answer (OneCallPerAnswer) treats the calls after the first the same
	// way, with a refusal naming the client's setting instead: it is no
	// budget reached, so no limit is reported.
	made, limit := len(calls), cfg.Budget.MaxToolCalls
	over := func(call chat.ToolCall) chat.ToolResult { return refusedOverLimit(call, limit, made) }
	if r.turn.OneCallPerAnswer && limit > 1 {
		limit = 1
		over = func(call chat.ToolCall) chat.ToolResult { return refusedParallel(call, made) }
	} else if made > limit {
		if !r.emit(chat.Event{Kind: chat.KindLimit, Limit: limitToolCalls(limit, made)}) {
			return errStopped
		}
	}
	if made > limit {
		calls = calls[:limit+1]
	}
	msgs := []chat.Message{assistantMessage(text, calls)}
	var (
		held []session.Approval
		// rec is the step's last call when it ran: its record, result and
		// any announcement wait for the step's write, which records it
		// with the step's messages (one write instead of two).
		rec *toolOutcome
		// reached counts the calls the client was shown; unreported is
		// the result of the latest one when the client was not told it.
		reached    int
		unreported *chat.ToolResult
		// ran: the agent's calls of this answer that ran; trailed: the
		// held client calls (their index in held) whose IDs get the
		// turn's trail once the answer is carried out (Turn.CallTrail).
		ran     []string
		trailed []int
	)
	// stop ends a step that was stopped or whose consumer left: the calls
	// the client was shown are saved with their results (see saveStopped),
	// the others are dropped, and err ends the turn.
	stop := func(err error) error {
		r.saveStopped(ctx, text, calls[:reached], msgs[1:], unreported, usage, rec)
		return err
	}
	for i, call := range calls {
		if err := ctx.Err(); err != nil {
			// Stopped between two calls: no new tool starts.
			return stop(err)
		}
		for _, ev := range r.argVerdicts[call.ID].events {
			if !r.emit(ev) {
				return stop(errStopped)
			}
		}
		if i < limit && !r.noTools && slices.Contains(r.client, call.Name) && !cfg.Engine.Judge(r.offer, r.state, call.Name).Refused && !strings.HasPrefix(invalid[call.ID], chat.RefusedPrefix) {
			// A call of a client tool the model was offered: the client
			// runs it; the session keeps it until its result comes.
			a := session.Approval{ID: NewApprovalID(), Call: call, Status: session.ApprovalPending, RequestedAt: time.Now().UTC(), Client: true, MessageID: r.turn.message(), Offer: r.offerOf(call)}
			held = append(held, a)
			r.clientHeld = true
			if r.turn.CallTrail {
				trailed = append(trailed, len(held)-1)
				reached++
				continue
			}
			if !r.emit(chat.Event{Kind: chat.KindClientCall, ToolCall: &call}) {
				return stop(errStopped)
			}
			reached++
			continue
		}
		if !r.emit(chat.Event{Kind: chat.KindToolCall, ToolCall: &call}) {
			return stop(errStopped)
		}
		reached++
		var res toolOutcome
		if i == limit {
			res.result = over(call)
		} else {
			r.recordWithStep = i == len(calls)-1
			res = r.tool(ctx, call, invalid)
			r.recordWithStep = false
		}
		// What an agent the call asked spent is the step's.
		usage = usage.Add(res.usage)
		if res.held {
			hold := r.hold(call, res)
			held = append(held, hold...)
			if !r.announceHeld(call, hold) {
				return stop(errStopped)
			}
			continue
		}
		if res.err != nil {
			return res.err
		}
		msgs = append(msgs, ToolMessage(res.result))
		if !res.refused && !res.result.NotRun {
			ran = append(ran, call.Name)
		}
		if res.record != nil {
			rec = &res
		}
		if err := ctx.Err(); err != nil {
			// Stopped mid-step: the call has its result; the ones after
			// it never start.
			unreported = &res.result
			return stop(err)
		}
		if res.record != nil {
			continue
		}
		if !r.reportTool(res) {
			return stop(errStopped)
		}
	}
	if len(trailed) > 0 {
		// The answer is carried out: its client calls get their IDs,
		// with the turn's trail, and are shown.
		msgs[0].ToolCalls = slices.Clone(msgs[0].ToolCalls)
		for _, k := range trailed {
			call := &held[k].Call
			id := orchestration.TrailID(call.ID, r.ran, ran)
			for j := range msgs[0].ToolCalls {
				if msgs[0].ToolCalls[j].ID == call.ID {
					msgs[0].ToolCalls[j].ID = id
				}
			}
			call.ID = id
			shown := *call
			if !r.emit(chat.Event{Kind: chat.KindClientCall, ToolCall: &shown}) {
				return stop(errStopped)
			}
		}
	}
	r.ran = append(r.ran, ran)
	// The turn's last step (an answer without tool calls, the final call,
	// or calls held for approval, which end the turn) also clears the
	// session's turn marker, in the same write.
	last := len(calls) == 0 || r.noTools || len(held) > 0
	if !r.turn.Journal && usage.IsZero() && len(held) == 0 && !(last && r.turn.ID != "") && rec == nil {
		if err := session.AppendMessages(ctx, cfg.Store, r.turn.SessionID, msgs, r.writeOpts(false)...); err != nil {
			return &storeFailure{saved: r.saved, err: fmt.Errorf("saving the conversation: %w", err)}
		}
	} else {
		// The usage, the step's messages and the calls held for approval
		// in one write: a held call is in the history exactly when the
		// session keeps it pending.
		opts := r.writeOpts(last)
		if len(held) > 0 {
			opts = append(opts, session.WithApprovals(func(cur []session.Approval) ([]session.Approval, error) {
				return KeepAnswered(append(cur, held...)), nil
			}))
		}
		// The journal goes on from the saved step: its content is the
		// stream's up to now (the last call's result, told after the
		// write, is the step's too).
		steps, output, frame := r.calls, r.output, r.position()
		opts = append(opts, r.journal(func(j *session.Journal) {
			j.Steps, j.Output, j.Usage, j.Step, j.Frame = steps, output, j.Usage.Add(usage), nil, frame
		})...)
		st, _, err := cfg.Store.UpdateAppend(ctx, r.turn.SessionID, func(s *orchestration.State) error {
			if rec != nil {
				if err := applyRecord(cfg.Engine, s, *rec); err != nil {
					return err
				}
			}
			if !usage.IsZero() {
				*s, _ = cfg.Engine.Apply(*s, orchestration.UsageReported(usage))
			}
			return nil
		}, msgs, 0, opts...)
		if errors.Is(err, session.ErrNotReplicated) {
			r.unreplicated, err = err, nil // made: the turn's end says what may be lost
		}
		if err != nil {
			what := "recording token usage and saving the conversation"
			if rec != nil {
				what = fmt.Sprintf("recording tool %q and saving the conversation", rec.result.Name)
			}
			return &storeFailure{saved: r.saved, tool: rec != nil, err: fmt.Errorf("%s: %w", what, err)}
		}
		r.wrote(st)
		r.savedOutput = r.output
		r.state = st.State
		if rec != nil {
			r.recorded(ctx, *rec)
		}
		r.spent(usage)
		r.ended = last && r.turn.ID != ""
	}
	r.messages = append(r.messages, msgs...)
	r.saved++
	if rec != nil && !r.reportTool(*rec) {
		return errStopped
	}
	if !r.emit(chat.Event{Kind: chat.KindStepFinish}) {
		return errStopped
	}
	if !usage.IsZero() {
		u, su, m := usage, r.state.TokenUsage, r.answered
		if !r.emit(chat.Event{Kind: chat.KindUsage, Usage: &u, SessionUsage: &su, Model: &m}) {
			return errStopped
		}
	}
	if len(held) > 0 {
		return errAwaitApproval
	}
	return nil
}

// MaxAnsweredApprovals is how many answered approvals a session keeps, so
// that a second answer to one is told it was answered rather than unknown.
const MaxAnsweredApprovals = 32

// KeepAnswered drops the oldest answered approvals beyond
// MaxAnsweredApprovals and the arguments of every answered one (the
// history has them): the session's value, written at every step, stays
// small. Pending ones are kept whole.
func KeepAnswered(list []session.Approval) []session.Approval {
	answered := 0
	for i, a := range list {
		if a.Status != session.ApprovalPending {
			answered++
			list[i].Call.Arguments = nil
			if a.AgentCall != nil {
				c := *a.AgentCall
				c.Arguments = nil
				list[i].AgentCall = &c
			}
		}
	}
	if answered <= MaxAnsweredApprovals {
		return list
	}
	drop := answered - MaxAnsweredApprovals
	out := list[:0:0]
	for _, a := range list {
		if a.Status != session.ApprovalPending && drop > 0 {
			drop--
			continue
		}
		out = append(out, a)
	}
	return out
}

// answer carries out a person's decisions before the turn's first model
// call: a denied call is reported (the session holds its result already),
// an approved one runs now (it was offered to the model call that made it)
// unless it cannot run now, and is recorded like any call, counting as a
// call of the answer that made it.
func (r *run) answer(ctx context.Context) error {
	if err := r.journalAnswers(ctx); err != nil {
		return err
	}
	var held []session.Approval
	for _, a := range r.turn.Answers {
		call := a.Call
		if res, ok := r.journaled[call.ID]; ok {
			// Carried out before the turn was taken over: the history
			// has it.
			if !r.emit(chat.Event{Kind: chat.KindToolResult, ToolResult: &res}) {
				return errStopped
			}
			continue
		}
		if !a.Approved {
			res := DeniedResult(call, a.Reason)
			if !r.emit(chat.Event{Kind: chat.KindToolResult, ToolResult: &res}) {
				return errStopped
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// A call waits for approval only when the model call that made it
		// was offered its tool (one that was not is refused, never held):
		// it is judged against that model call's offer, as the other
		// calls of its answer were, whatever the state did since.
		r.offer = orchestration.Offer{Tools: []string{call.Name}, Step: r.state.ActiveStep, SequenceIndex: r.state.SequenceIndex, StepChanges: r.state.StepChanges}
		if a.Offer != nil {
			r.offer = *a.Offer
			r.offer.Tools = []string{call.Name}
		}
		r.callState = r.state
		r.answering, r.recordWithStep, r.decisions = true, true, a.Decisions
		res := r.tool(ctx, call, nil)
		r.answering, r.recordWithStep, r.decisions = false, false, nil
		if err := ctx.Err(); err != nil {
			return err
		}
		if res.err != nil {
			return res.err
		}
		if res.held {
			// The agent the call asked waits for more answers: the call
			// waits again, and the turn ends once the answers are done.
			hold := r.hold(call, res)
			if err := r.holdAgain(ctx, hold, res.usage); err != nil {
				return fmt.Errorf("saving the approvals an agent waits for: %w", err)
			}
			held = append(held, hold...)
			if !r.announceHeld(call, hold) {
				return errStopped
			}
			continue
		}
		// The call's record and its result in one write.
		msg := ToolMessage(res.result)
		if err := r.record(ctx, res, []chat.Message{msg}); err != nil {
			return fmt.Errorf("saving the result of an approved call: %w", err)
		}
		r.messages = append(r.messages, msg)
		if !r.reportTool(res) {
			return errStopped
		}
	}
	if len(held) > 0 {
		return errAwaitApproval
	}
	return nil
}

// hold is the session's approvals of a call that waits: one asking a
// person to approve it, or, for a call whose agent waits for approvals
// (chat.ToolResult.Pending), one per approval the agent waits for, each
// under the agent's ID, so that the answer reaches it.
func (r *run) hold(call chat.ToolCall, res toolOutcome) []session.Approval {
	now := time.Now().UTC()
	if len(res.pending) == 0 {
		return []session.Approval{{ID: NewApprovalID(), Call: call, Status: session.ApprovalPending, RequestedAt: now, MessageID: r.turn.message(), Offer: r.offerOf(call)}}
	}
	out := make([]session.Approval, 0, len(res.pending))
	for _, p := range res.pending {
		out = append(out, session.Approval{ID: p.ID, Call: call, Status: session.ApprovalPending, RequestedAt: now, MessageID: r.turn.message(), Offer: r.offerOf(call),
			Agent: p.Agent, AgentCall: p.Call})
	}
	return out
}

// announceHeld tells the client that call waits for the approvals hold.
func (r *run) announceHeld(call chat.ToolCall, hold []session.Approval) bool {
	for _, a := range hold {
		ap := &chat.Approval{ID: a.ID, ToolCallID: call.ID, Agent: a.Agent, Call: a.AgentCall}
		if !r.emit(chat.Event{Kind: chat.KindApproval, ToolCall: &call, Approval: ap}) {
			return false
		}
	}
	return true
}

// holdAgain saves the approvals that an approved call waits for again
// (its agent asks for more), with what the call spent, in one write.
func (r *run) holdAgain(ctx context.Context, hold []session.Approval, usage chat.Usage) error {
	cfg := r.s.cfg
	st, err := session.Update(ctx, cfg.Store, r.turn.SessionID, func(s *orchestration.State) error {
		if !usage.IsZero() {
			*s, _ = cfg.Engine.Apply(*s, orchestration.UsageReported(usage))
		}
		return nil
	}, append(r.journal(func(j *session.Journal) { j.Usage = j.Usage.Add(usage) }),
		session.WithLease(r.turn.Lease),
		session.WithApprovals(func(cur []session.Approval) ([]session.Approval, error) {
			return KeepAnswered(append(cur, hold...)), nil
		}))...)
	if err != nil {
		return err
	}
	r.wrote(st)
	r.state = st.State
	r.turnUsage = r.turnUsage.Add(usage)
	return nil
}

// record saves msgs with the record of the call res, if it ran, and the
// call's result in the journal.
func (r *run) record(ctx context.Context, res toolOutcome, msgs []chat.Message) error {
	cfg := r.s.cfg
	if res.record == nil && !r.turn.Journal && res.usage.IsZero() {
		return session.AppendMessages(ctx, cfg.Store, r.turn.SessionID, msgs, session.WithLease(r.turn.Lease))
	}
	frame := r.position()
	st, _, err := cfg.Store.UpdateAppend(ctx, r.turn.SessionID, func(s *orchestration.State) error {
		if !res.usage.IsZero() {
			*s, _ = cfg.Engine.Apply(*s, orchestration.UsageReported(res.usage))
		}
		if res.record == nil {
			return nil
		}
		return applyRecord(cfg.Engine, s, res)
	}, msgs, 0, append(r.journal(func(j *session.Journal) {
		if j.Step != nil {
			j.Step.Results = append(j.Step.Results, res.result)
		}
		j.Frame = frame
		j.Usage = j.Usage.Add(res.usage)
	}), session.WithLease(r.turn.Lease))...)
	if err != nil {
		return err
	}
	r.wrote(st)
	r.state = st.State
	r.turnUsage = r.turnUsage.Add(res.usage)
	if res.record != nil {
		r.recorded(ctx, res)
	}
	return nil
}

// journalAnswers records the calls a person answered before the first
// approved one runs (a turn that keeps a journal), with the results of
// those denied: if this replica dies while they run, the one that takes
// the turn over goes on with them.
func (r *run) journalAnswers(ctx context.Context) error {
	if !r.turn.Journal || r.journaled != nil || !slices.ContainsFunc(r.turn.Answers, func(a Answer) bool { return a.Approved }) {
		return nil
	}
	step := &session.JournalStep{Answers: true}
	for _, a := range r.turn.Answers {
		step.Calls = append(step.Calls, a.Call)
		step.Offers = append(step.Offers, a.Offer)
		if !a.Approved {
			step.Results = append(step.Results, DeniedResult(a.Call, a.Reason))
		}
		if len(a.Decisions) > 0 {
			if step.Decisions == nil {
				step.Decisions = map[string][]chat.Decision{}
			}
			step.Decisions[a.Call.ID] = a.Decisions
		}
	}
	st, err := session.Update(ctx, r.s.cfg.Store, r.turn.SessionID, func(*orchestration.State) error { return nil },
		append(r.journal(func(j *session.Journal) { j.Step = step }), session.WithLease(r.turn.Lease))...)
	if err != nil {
		return fmt.Errorf("recording the answers about to be carried out: %w", err)
	}
	r.wrote(st)
	return nil
}

// journalStep records the model's answer whose calls are about to run,
// before the first runs (a turn that keeps a journal): if this replica
// dies while they run, the one that takes the turn over goes on with
// them instead of making the model call again.
func (r *run) journalStep(ctx context.Context, text []byte, calls []chat.ToolCall, invalid map[string]string, usage chat.Usage) error {
	step := &session.JournalStep{Text: string(text), Calls: calls, Offer: r.offer, Final: r.noTools, Usage: usage, Output: r.output - r.savedOutput}
	if len(invalid) > 0 {
		step.Invalid = invalid
	}
	st, err := session.Update(ctx, r.s.cfg.Store, r.turn.SessionID, func(*orchestration.State) error { return nil },
		append(r.journal(func(j *session.Journal) { j.Step = step }), session.WithLease(r.turn.Lease))...)
	if err != nil {
		return &storeFailure{saved: r.saved, err: fmt.Errorf("recording the tool calls about to run: %w", err)}
	}
	r.wrote(st)
	return nil
}

// journalResult records the result of a call of the step under way in
// the journal, alone (a call that ran records its result with its
// record instead).
func (r *run) journalResult(ctx context.Context, res chat.ToolResult) error {
	st, err := session.Update(ctx, r.s.cfg.Store, r.turn.SessionID, func(*orchestration.State) error { return nil },
		append(r.journal(func(j *session.Journal) {
			if j.Step != nil {
				j.Step.Results = append(j.Step.Results, res)
			}
		}), session.WithLease(r.turn.Lease))...)
	if err != nil {
		return err
	}
	r.wrote(st)
	return nil
}

// journal is the option that keeps the turn's journal with one of its
// writes, none when the turn keeps no journal (Turn.Journal): the write
// is refused when the store lost some of the turn's earlier writes, else
// counted, and change, if any, applies to the journal.
func (r *run) journal(change func(*session.Journal)) []session.UpdateOption {
	if !r.turn.Journal {
		return nil
	}
	made := r.writes
	return []session.UpdateOption{session.WithJournal(func(j *session.Journal) error {
		if j.Writes < made {
			return &lostWrites{kept: j.Steps, message: j.Writes > 0}
		}
		j.Writes++
		if change != nil {
			change(j)
		}
		return nil
	})}
}

// wrote counts a write of the turn that the store confirmed, stored being
// the session it returned.
func (r *run) wrote(stored session.Session) {
	if stored.Journal != nil {
		r.writes = stored.Journal.Writes
	} else {
		r.writes++
	}
}

// position is the stream's position now (Turn.Position).
func (r *run) position() int64 {
	if r.turn.Position == nil {
		return 0
	}
	return r.turn.Position()
}

// applyRecord records the call res ran in s.
func applyRecord(e *orchestration.Engine, s *orchestration.State, res toolOutcome) error {
	next, d := e.Apply(*s, res.record.event)
	if d.Refused {
		// Under the lease the stored state is the one the call was checked
		// against; the store is the authority.
		return fmt.Errorf("%w: recording tool %q: %s", errStateMoved, res.result.Name, d.Reason)
	}
	*s = next
	return nil
}

// recorded notes a transition the record of the call res made, once it is
// stored.
func (r *run) recorded(ctx context.Context, res toolOutcome) {
	if res.transition {
		r.s.cfg.Telemetry.CountTransition(ctx, r.s.cfg.Template.AgentID, res.record.from, r.state.ActiveStep)
	}
}

type toolOutcome struct {
	result     chat.ToolResult
	refused    bool
	transition bool
	// journaled: the call completed before the turn was taken over; its
	// result comes from the journal, its record was made then.
	journaled bool
	// held: the call waits for a person's approval; it did not run, or,
	// with pending, it ran and the agent it asked waits for them.
	held    bool
	pending []chat.Approval
	// usage is what the tool spent on models (chat.ToolResult.Usage).
	usage chat.Usage
	err   error // a store failure: ends the turn
	// record, when set, is the record of a call that ran and is still to
	// be written, with its step's messages (run.recordWithStep).
	record *toolRecord
	// guards are the events of the guardrails that matched the result,
	// reported before it.
	guards []chat.Event
}

// toolRecord is a tool's run as the orchestration records it.
type toolRecord struct {
	event orchestration.Input
	from  string // the active step before the record
}

// errStateMoved: the stored state refused to record a call it offered when
// the call was checked. It cannot happen while the turn holds its lease.
var errStateMoved = errors.New("the session's state changed during the turn")

// reportTool tells the client a call's result and, when recording it moved
// the orchestration to another step, what the new step offers.
func (r *run) reportTool(res toolOutcome) bool {
	for _, ev := range res.guards {
		if !r.emit(ev) {
			return false
		}
	}
	result := res.result
	if !r.emit(chat.Event{Kind: chat.KindToolResult, ToolResult: &result}) {
		return false
	}
	return !res.transition || r.announce(r.snapshot(r.available()))
}

// stream runs one model call, to the step's model (run.model), inside its
// chat span.
func (r *run) stream(ctx context.Context, req Request, prevStep string) iter.Seq2[chat.Event, error] {
	cfg, model := r.s.cfg, r.model.Model
	if cfg.Telemetry == nil {
		return model.Stream(ctx, req)
	}
	return func(yield func(chat.Event, error) bool) {
		info := model.Info()
		ctx, span := cfg.Telemetry.StartChat(ctx, telemetry.ChatInfo{
			AgentID:      cfg.Template.AgentID,
			SessionID:    r.turn.SessionID,
			Provider:     info.Provider,
			Model:        info.Model,
			Config:       r.model.Config,
			Temperature:  req.Temperature,
			MaxTokens:    req.MaxTokens,
			Call:         r.calls,
			Snapshot:     *req.Orchestration,
			PreviousStep: prevStep,
			System:       req.System,
			Messages:     req.Messages,
			Note:         req.Note,
		})
		defer span.End()
		for ev, err := range model.Stream(ctx, req) {
			span.Observe(ev, err)
			if !yield(ev, err) {
				return
			}
		}
	}
}

// tool handles one tool call inside its execute_tool span: an invalid call
// is answered with its error, a valid one goes to runTool.
func (r *run) tool(ctx context.Context, call chat.ToolCall, invalid map[string]string) toolOutcome {
	cfg := r.s.cfg
	if res, ok := r.journaled[call.ID]; ok {
		// It ran and completed before the turn was taken over, and was
		// recorded then: not a call of this replica's.
		return toolOutcome{result: res, journaled: true}
	}
	why, bad := invalid[call.ID]
	var span *telemetry.Tool
	if cfg.Telemetry != nil {
		ctx, span = cfg.Telemetry.StartTool(ctx, telemetry.ToolInfo{
			AgentID:       cfg.Template.AgentID,
			SessionID:     r.turn.SessionID,
			Call:          call,
			ActiveStep:    r.state.ActiveStep,
			SequenceIndex: r.state.SequenceIndex,
			// A name the model invented stays out of metric labels.
			UnknownTool: !slices.Contains(cfg.Engine.Tools(), call.Name),
		})
	}
	var out toolOutcome
	switch {
	case bad && strings.HasPrefix(why, chat.RefusedPrefix):
		// A guardrail blocked the call's arguments (guardArguments).
		out.result, out.refused = chat.ToolResult{CallID: call.ID, Name: call.Name, Content: why, Type: "refused", IsError: true, NotRun: true}, true
	case bad:
		out.result = chat.ToolResult{CallID: call.ID, Name: call.Name, Content: why, Type: "invalid_tool_call", IsError: true, NotRun: true}
	default:
		out = r.runTool(ctx, call)
	}
	if !out.held {
		out.result = markNotRun(out.result)
	}
	span.End(telemetry.ToolEnd{Result: out.result, Refused: out.refused, Transition: out.transition, NextStep: r.state.ActiveStep, Err: out.err})
	return out
}

// runTool executes one call if its model call was offered it (run.offer,
// judged by orchestration.Engine.Judge, which also says whether it waits
// for approval and advances a sequence), and records it when the tool
// ran, whether it succeeded or failed: the contract appends every
// executed tool, and a tool that ran and failed was executed (a web
// search without a backend still completes its place in a sequence; the
// model reads the error). A refused call, or one that never reached the tool
// (unknown tool, invalid arguments), is not recorded, so the model can
// correct it. Every refusal is the orchestration's, whoever noticed the
// call was not offered: it names the step, the sequence position and the
// tools the model may use.
func (r *run) runTool(ctx context.Context, call chat.ToolCall) toolOutcome {
	cfg := r.s.cfg
	judged := cfg.Engine.Judge(r.offer, r.state, call.Name)
	if judged.Refused {
		reason := judged.Reason
		if r.noTools {
			// The final answer's call offered nothing; the state may offer more.
			reason += " (this turn has used its model calls: answer with what you have)"
		} else if a, ok := cfg.Tools.(Availability); ok && slices.Contains(cfg.Engine.Offer(r.callState).Tools, call.Name) {
			if why, no := a.Unavailable(call.Name); no {
				reason = why // the orchestration would offer it: say why it cannot run
			}
		}
		return toolOutcome{result: refused(call, reason), refused: true}
	}
	if !r.answering && (judged.Approval || r.argVerdicts[call.ID].approve) {
		return toolOutcome{held: true, result: chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "approval_requested", Content: "waiting for the user's approval", NotRun: true}}
	}
	if err := ctx.Err(); err != nil {
		// Stopped: a tool does not start.
		return toolOutcome{result: chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "cancelled", Content: chat.NotRunPrefix + "the turn was stopped before this call ran.", IsError: true, NotRun: true}}
	}
	if r.interrupt {
		// The first call of a taken-over step to reach its tool is the
		// one that was under way when the replica running it died.
		r.interrupt = false
		if idem, ok := cfg.Tools.(tools.Idempotency); !ok || !idem.Idempotent(call.Name) {
			res := interrupted(call)
			if !r.recordWithStep {
				// Once and for all: a replica that takes the turn over
				// after this one finds the call answered, and takes the
				// next call without a result for the one under way.
				// (The step's last call is answered by the step's write.)
				if err := r.journalResult(ctx, res); err != nil {
					return toolOutcome{err: &storeFailure{saved: r.saved, err: fmt.Errorf("recording that tool %q was interrupted: %w", call.Name, err)}}
				}
			}
			return toolOutcome{result: res}
		}
	}
	// The tool learns what it runs for (tools.CallFrom): the turn's part
	// comes from the agent, the call's from here.
	c, _ := tools.CallFrom(ctx)
	c.ToolCallID, c.Step = call.ID, r.state.ActiveStep
	c.ResultLimit = cfg.Budget.MaxToolResultBytes
	c.Decisions = r.decisions
	res := r.execute(ctx, c, call)
	res.CallID, res.Name = call.ID, call.Name
	var spent chat.Usage
	if res.Usage != nil {
		spent = *res.Usage
		res.Usage = nil
	}
	pending := res.Pending
	res.Pending = nil
	if res.NotRun || ctx.Err() != nil {
		// Stopped while the tool ran: the call is not recorded, and its
		// result says so (a replay of the history must not record it).
		res.NotRun = true
		return toolOutcome{result: res, usage: spent}
	}
	if len(pending) > 0 {
		// The agent the call asked waits for approvals: the call waits
		// with it, unrecorded, and runs again with the answers.
		return toolOutcome{held: true, pending: pending, usage: spent, result: chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "approval_requested",
			Content: "waiting for the user's approval of what " + pending[0].Agent + " asks", NotRun: true}}
	}
	// The tool_result guardrails see the result before anyone else.
	guarded := toolOutcome{result: res}
	r.guardResult(ctx, call, &guarded)
	res = guarded.result
	withGuards := func(out toolOutcome) toolOutcome {
		out.guards = guarded.guards
		return out
	}
	used := orchestration.ToolUsedIn(call.Name, r.offer)
	if r.recordWithStep {
		// The step's write records the call right after (onStepFinish);
		// until then the state is the one the stored state becomes, as the
		// turn holds the lease.
		st, dec := cfg.Engine.Apply(r.state, used)
		if dec.Refused {
			return toolOutcome{result: refused(call, dec.Reason), refused: true}
		}
		from := r.state.ActiveStep
		r.state = st
		return withGuards(toolOutcome{result: res, transition: dec.Transition, record: &toolRecord{event: used, from: from}, usage: spent})
	}
	var dec orchestration.Decision
	// The journal keeps the result with the record, until the step's
	// write saves it in the history.
	st, err := session.Update(ctx, cfg.Store, r.turn.SessionID, func(s *orchestration.State) error {
		*s, dec = cfg.Engine.Apply(*s, used)
		return nil
	}, append(r.journal(func(j *session.Journal) {
		if j.Step != nil {
			j.Step.Results = append(j.Step.Results, res)
		}
	}), session.WithLease(r.turn.Lease))...)
	if err != nil {
		return toolOutcome{err: &storeFailure{saved: r.saved, tool: true, err: fmt.Errorf("recording tool %q: %w", call.Name, err)}}
	}
	r.wrote(st)
	r.state = st.State
	if dec.Refused {
		// The stored state moved on since this step began (it cannot
		// while the lease is held, but the store is the authority).
		return toolOutcome{result: refused(call, dec.Reason), refused: true}
	}
	if dec.Transition {
		cfg.Telemetry.CountTransition(ctx, cfg.Template.AgentID, dec.PreviousStep, st.State.ActiveStep)
	}
	return withGuards(toolOutcome{result: res, transition: dec.Transition, usage: spent})
}

// offerOf is the offer a held call is judged against when it is carried
// out: its model call's step and sequence position, and its own tool (it
// was offered, or it would not be held).
func (r *run) offerOf(call chat.ToolCall) *orchestration.Offer {
	return &orchestration.Offer{Tools: []string{call.Name}, Step: r.offer.Step, SequenceIndex: r.offer.SequenceIndex, StepChanges: r.offer.StepChanges}

}

// execute runs call in the toolbox, for c, and streams the progress the
// tool reports while it runs (tools.Report) as chat.KindToolProgress
// events, in the order reported, before its result. The tool runs in a
// goroutine of its own so that the turn's events stay on the turn's; a
// consumer that leaves stops the tool.
func (r *run) execute(ctx context.Context, c tools.Call, call chat.ToolCall) chat.ToolResult {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	progress := make(chan chat.Progress, 16)
	returned := make(chan struct{})
	c.Report = func(p chat.Progress) {
		p.CallID, p.Name = call.ID, call.Name
		select {
		case progress <- p:
		case <-returned: // late: the call has its result
		}
	}
	done := make(chan chat.ToolResult, 1)
	go func() { done <- r.s.cfg.Tools.Execute(tools.WithCall(ctx, c), call) }()
	tell := func(p chat.Progress) {
		if !r.stopped && !r.emit(chat.Event{Kind: chat.KindToolProgress, Progress: &p}) {
			cancel(errStopped)
		}
	}
	for {
		select {
		case p := <-progress:
			tell(p)
		case res := <-done:
			close(returned)
			for {
				select {
				case p := <-progress:
					tell(p)
				default:
					return res
				}
			}
		}
	}
}

// available freezes what can run now, for one model call or one tool call
// (nil when every tool can): the offer and the record of a call then agree
// even if a server dies in between.
func (r *run) available() orchestration.Available {
	a, ok := r.s.cfg.Tools.(Availability)
	if !ok {
		return nil
	}
	var down []string
	for _, t := range r.s.cfg.Engine.Tools() {
		if _, no := a.Unavailable(t); no {
			down = append(down, t)
		}
	}
	if len(down) == 0 {
		return nil
	}
	return func(t string) bool { return !slices.Contains(down, t) }
}

// offerNow is what the orchestration offers now: the agent's tools that
// can run, the request's client tools, as the client's tool_choice
// narrows them.
func (r *run) offerNow(avail orchestration.Available) orchestration.Offer {
	return r.turn.Choice.Narrow(r.s.cfg.Engine.OfferWith(r.state, avail, r.client))
}

// snapshot is the engine's snapshot with the tools offered now.
func (r *run) snapshot(avail orchestration.Available) chat.Snapshot {
	snap := r.s.cfg.Engine.Snapshot(r.state)
	snap.OfferedTools = r.offerNow(avail).Tools
	return snap
}

// announce emits the orchestration snapshot when it changed since the last
// one (or for the first model call).
func (r *run) announce(snap chat.Snapshot) bool {
	if r.announced && snap.ActiveStep == r.lastStep && !r.changed(snap) {
		return true
	}
	prev := r.lastStep
	if !r.announced {
		prev = r.turn.PreviousStep
	}
	if snap.ActiveStep != prev {
		snap.Transition, snap.PreviousStep = true, prev
	}
	r.announced, r.lastStep = true, snap.ActiveStep
	r.lastSnap = snap
	return r.emit(chat.Event{Kind: chat.KindOrchestration, Orchestration: &snap})
}

func (r *run) changed(snap chat.Snapshot) bool {
	return snap.SequenceIndex != r.lastSnap.SequenceIndex || !slices.Equal(snap.OfferedTools, r.lastSnap.OfferedTools)
}

// saveEnd is the write of a turn that ends early (cancelled, failed, cut
// at a budget, or its consumer gone): the step's text so far and its
// usage, if any, in one write that also clears the session's turn marker.
// It is made even when ctx is cancelled, within saveTimeout; a failure is
// not reported because the turn is already ending (the marker then stays,
// and the next turn recovers what it can).
func (r *run) saveEnd(ctx context.Context, text []byte, usage chat.Usage) {
	var msgs []chat.Message
	if len(text) > 0 {
		msgs = append(msgs, assistantMessage(text, nil))
	}
	r.saveEndWith(ctx, msgs, usage, nil)
}

// saveStopped is saveEnd for a step stopped among its tool calls: the
// calls the client was shown (shown) stay in the history, each with its
// result (from results, the step's tool messages so far), so that what
// the client saw is kept and the history stays one a provider accepts. A
// shown call without a result (held for approval, or stopped before its
// result came) gets one saying it did not run. rec, the step's last call
// when it ran, is recorded in the same write; every other call that ran
// was recorded already. Once the write is made, the client is told the
// results it has not heard: unreported and those made here.
func (r *run) saveStopped(ctx context.Context, text []byte, shown []chat.ToolCall, results []chat.Message, unreported *chat.ToolResult, usage chat.Usage, rec *toolOutcome) {
	if len(text) == 0 && len(shown) == 0 {
		r.saveEndWith(ctx, nil, usage, nil)
		return
	}
	msgs := []chat.Message{assistantMessage(text, shown)}
	var tell []chat.ToolResult
	if unreported != nil {
		tell = append(tell, *unreported)
	}
	for _, call := range shown {
		k := slices.IndexFunc(results, func(m chat.Message) bool { return m.ToolCallID == call.ID })
		if k >= 0 {
			msgs = append(msgs, results[k])
			continue
		}
		res := chat.ToolResult{CallID: call.ID, Name: call.Name, Type: "cancelled", Content: chat.NotRunPrefix + "the turn was stopped before this call ran.", IsError: true, NotRun: true}
		tell = append(tell, res)
		msgs = append(msgs, ToolMessage(res))
	}
	r.saveEndWith(ctx, msgs, usage, rec)
	if r.handedOver {
		return
	}
	for i := range tell {
		r.emit(chat.Event{Kind: chat.KindToolResult, ToolResult: &tell[i]})
	}
}

func (r *run) saveEndWith(ctx context.Context, msgs []chat.Message, usage chat.Usage, rec *toolOutcome) {
	if r.handingOver(ctx) {
		return // the taker saves the turn
	}
	cfg := r.s.cfg
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	// The in-memory state already holds rec's record: the write applies
	// it to the stored state, which is the state before it.
	st, _, err := cfg.Store.UpdateAppend(ctx, r.turn.SessionID, func(s *orchestration.State) error {
		if rec != nil {
			if err := applyRecord(cfg.Engine, s, *rec); err != nil {
				return err
			}
		}
		if !usage.IsZero() {
			*s, _ = cfg.Engine.Apply(*s, orchestration.UsageReported(usage))
		}
		return nil
	}, msgs, 0, r.writeOpts(true)...)
	if errors.Is(err, session.ErrNotReplicated) {
		r.unreplicated, err = err, nil
	}
	if err == nil {
		r.state = st.State
		if !usage.IsZero() {
			r.spent(usage)
		}
		r.ended = true
	}
}

// writeOpts are the options of the turn's writes: fenced by its lease, and
// the last one clears the session's turn marker and frees the session
// (session.WithRelease), saving the release's own round trip; the agent's
// Release after it then does nothing.
func (r *run) writeOpts(last bool) []session.UpdateOption {
	opts := []session.UpdateOption{session.WithLease(r.turn.Lease)}
	if last {
		if r.turn.ID != "" {
			opts = append(opts, session.WithTurn(""))
		}
		opts = append(opts, session.WithRelease())
	}
	return opts
}

func refused(call chat.ToolCall, reason string) chat.ToolResult {
	return chat.ToolResult{CallID: call.ID, Name: call.Name, Content: chat.RefusedPrefix + reason + ".", Type: "refused", IsError: true, NotRun: true}
}

func assistantMessage(text []byte, calls []chat.ToolCall) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Content: string(text), ToolCalls: calls}
}

func guide(t *template.Template) []string {
	if t.Orchestration == nil {
		return nil
	}
	return t.Orchestration.Description
}

// Codes of the turn errors that come from the session store. Clients,
// metrics and the HTTP layer match on them.
const (
	CodeStoreUnavailable = "store_unavailable"
	CodeLeaseLost        = "session_lease_lost"
)

// storeFailure is a store write of a turn that failed: it tells the client
// exactly what the session kept, so that a retry does not repeat what was
// saved.
type storeFailure struct {
	saved int  // the steps of the answer saved before it
	tool  bool // recording a tool that ran failed (its step is not saved)
	err   error
}

func (f *storeFailure) Error() string { return f.err.Error() }
func (f *storeFailure) Unwrap() error { return f.err }

// message says what the session keeps. A write whose fate is unknown
// (session.ErrMaybeApplied) may have saved its step, the answer's last
// one included: the message says what is saved for sure and that the
// rest may be, never that nothing is when all may be.
func (f *storeFailure) message() string {
	sure := "your message is saved"
	if f.saved > 0 {
		sure = fmt.Sprintf("your message and the first %d step(s) of this answer are saved", f.saved)
	}
	ran := ""
	if f.tool {
		ran = " (a tool of that step ran)"
	}
	if errors.Is(f.err, session.ErrMaybeApplied) {
		return "the session store stopped answering and the turn stopped: " + sure + "; the write of the next step" + ran +
			" reached the store but was not acknowledged, so it may be saved too, and with it the rest of this answer when it was the last: read the session (GET /api/sessions/:id) before sending your message again"
	}
	rest := "none of this answer"
	if f.saved > 0 {
		rest = "not the rest"
	}
	return "the session store stopped answering and the turn stopped: " + sure + ", but " + rest + ran
}

// CodeNotReplicated is the code of a turn whose last write the session
// store's replicas did not acknowledge in time (session.ErrNotReplicated):
// the answer is saved, but a failover may still lose it.
const CodeNotReplicated = "store_not_replicated"

// CodeLostWrites is the code of a turn that stopped because the session
// store lost some of its writes (lostWrites).
const CodeLostWrites = "store_lost_writes"

// lostWrites refuses a write of a turn whose earlier writes the session
// store lost: its primary failed over to a replica that had not received
// them. Saving the turn's next step over them would leave a history with
// a hole that no one is told of; the turn stops and says what is kept.
type lostWrites struct {
	kept    int  // the answer's steps the store still has
	message bool // the store still has the turn's message
}

func (e *lostWrites) Error() string {
	return "the session store lost some of this turn's writes"
}

func (e *lostWrites) public() *chat.Error {
	kept := "your message is no longer saved, nor any of this answer"
	switch {
	case e.message && e.kept > 0:
		kept = fmt.Sprintf("the session keeps your message and the first %d step(s) of this answer, not the rest", e.kept)
	case e.message:
		kept = "the session keeps your message but none of this answer"
	}
	return &chat.Error{Code: CodeLostWrites, Message: "the session store lost some of this turn's writes (its primary failed over to a replica that had not received them) and the turn stopped: " + kept}
}

// ErrLeaseLost ends a turn whose hold on its session was lost: its writes
// are refused. It is also the cancellation cause of such a turn.
var ErrLeaseLost = &chat.Error{Code: CodeLeaseLost,
	Message: "this turn lost its hold on the session (the session store restarted without its data, or another turn took over after this one stalled) and stopped; the session keeps what was saved before"}

// publicError turns an error into one that is safe to show a client.
func publicError(err error) *chat.Error {
	var (
		ce *chat.Error
		sf *storeFailure
		lw *lostWrites
	)
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &lw):
		return lw.public()
	case errors.As(err, &sf) && errors.Is(err, session.ErrUnavailable):
		return &chat.Error{Code: CodeStoreUnavailable, Message: sf.message()}
	case errors.Is(err, session.ErrFenced):
		return ErrLeaseLost
	case errors.Is(err, session.ErrUnavailable):
		return &chat.Error{Code: CodeStoreUnavailable, Message: "the session store is unavailable; try again shortly"}
	case errors.Is(err, context.DeadlineExceeded):
		return &chat.Error{Code: "timeout", Message: "the turn took too long"}
	}
	return &chat.Error{Code: "internal_error", Message: "the turn failed"}
}
