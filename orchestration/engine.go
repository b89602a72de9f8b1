package orchestration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
)

// State is one session's orchestration state. It is plain data so that stores
// can keep it anywhere; only an Engine changes it, through Apply.
type State struct {
	// ActiveStep names the active step; empty means none.
	ActiveStep string `json:"activeStep"`
	// SequenceIndex is the position reached in the active step's sequence.
	SequenceIndex int `json:"sequenceIndex"`
	// RecentlyUsedTools lists executed tools, oldest first, repeats kept,
	// bounded to the engine's history limit. States share it: recording a
	// tool makes a new History without copying or changing the old one.
	RecentlyUsedTools History `json:"recentlyUsedTools"`
	// LastUserMessage is the latest user message; message conditions test it.
	LastUserMessage string `json:"lastUserMessage,omitempty"`
	// UserMessages counts user messages; before the first, message
	// conditions fail.
	UserMessages int `json:"userMessages"`
	// TurnToolUses counts the tools executed since the latest user message.
	TurnToolUses int `json:"turnToolUses"`
	// StepChanges counts the changes of the active step. An offer keeps
	// the count of the state it was made in, so that a call tells whether
	// its model call's step was left since, even for the same step again
	// (Judge: a step entered in the middle of an answer starts its
	// sequence with the next model call).
	StepChanges int `json:"stepChanges,omitempty"`
	// TokenUsage is the session's cumulative token usage, the spend of
	// answers that were dropped and given again included (see
	// RegeneratedUsage).
	TokenUsage chat.Usage `json:"cumulativeTokenUsage"`
	// RegeneratedUsage is the part of TokenUsage spent on answers that a
	// Regenerate input dropped: it was spent, so TokenUsage keeps it, but
	// no answer in the history accounts for it.
	RegeneratedUsage chat.Usage `json:"regeneratedTokenUsage,omitzero"`
	// TurnStart is the state as it was before the latest user message was
	// applied, so that the answer to that message can be dropped and given
	// again from where it started (Regenerate). Nil before the first user
	// message (and in states saved before it was kept). A state never
	// changes the TurnStart it holds: Apply makes a new one.
	TurnStart *TurnStart `json:"turnStart,omitempty"`

	// memo caches the message conditions' results for LastUserMessage, so
	// that the re-evaluation after every tool use does not run every regex
	// again. It is derived data: absent (after a store round trip) or made
	// by another engine, it is recomputed.
	memo *messageMemo
}

// TurnStart is what a Regenerate input restores: the fields of State that
// the answer to the latest user message may have changed, as they were
// before that message. The tool history is kept as its length then and the
// entries the answer's tools pushed out of the bounded history since, so
// that the snapshot costs little more than the tools it must bring back.
type TurnStart struct {
	ActiveStep      string     `json:"activeStep"`
	SequenceIndex   int        `json:"sequenceIndex"`
	LastUserMessage string     `json:"lastUserMessage,omitempty"`
	UserMessages    int        `json:"userMessages"`
	TurnToolUses    int        `json:"turnToolUses"`
	StepChanges     int        `json:"stepChanges,omitempty"`
	TokenUsage      chat.Usage `json:"tokenUsage"`
	// Tools is how many entries RecentlyUsedTools had; Dropped lists those
	// of them that later tool uses pushed out of the history, oldest first.
	Tools   int      `json:"tools"`
	Dropped []string `json:"dropped,omitempty"`
}

// messageMemo holds one engine's message-condition results for one message:
// bit k of known says condition k was evaluated, bit k of value its result.
// It is never modified once a state holds it, so states may share it; new
// results go into a copy.
type messageMemo struct {
	engine       *Engine
	known, value []uint64
}

// InputKind says what an Input reports.
type InputKind uint8

// The inputs an Engine applies.
const (
	// InputUserMessage: the user sent Text.
	InputUserMessage InputKind = iota + 1
	// InputToolUsed: the model called Tool.
	InputToolUsed
	// InputUsage: a model call consumed Usage.
	InputUsage
	// InputRegenerate: the answer to the latest user message was dropped
	// and that message, Text, is answered again.
	InputRegenerate
)

// Input is one input to the orchestration.
type Input struct {
	Kind  InputKind
	Text  string
	Tool  string
	Usage chat.Usage
	// Available, on a tool event, is what the runtime passed to OfferNow
	// (see ToolUsedNow); nil: every tool can run.
	Available Available
	// Client, on a tool event, names the client tools of the request the
	// call was made in (see OfferWith).
	Client []string
	// Offered, on a tool event, is what the model call that made the call
	// was offered (see ToolUsedIn); nil: the offer of the state the event
	// is applied to.
	Offered *Offer
}

// UserMessage is the event of a user message.
func UserMessage(text string) Input { return Input{Kind: InputUserMessage, Text: text} }

// ToolUsed is the event of the model calling a tool.
func ToolUsed(name string) Input { return Input{Kind: InputToolUsed, Tool: name} }

// ToolUsedIn is the event of the model calling a tool in an answer to a
// model call that was offered offered: the call is checked against that
// offer, not against the state's, which earlier calls of the same answer
// may have moved (a sequence exists so that the model sees one tool's
// result before it calls the next; running the calls of one answer side by
// side must not pass it). The calls of one answer are applied in the
// answer's order, each against the same offer.
func ToolUsedIn(name string, offered Offer) Input {
	return Input{Kind: InputToolUsed, Tool: name, Offered: &offered}
}

// UsageReported is the event of a model call's token usage.
func UsageReported(u chat.Usage) Input { return Input{Kind: InputUsage, Usage: u} }

// Regenerate is the event of the answer to the latest user message being
// dropped and text, that message, answered again: the state goes back to
// its TurnStart (active step, sequence position, tool history, message
// counters) and the message is applied again. Token usage is not wound
// back, since it was spent; what the dropped answer spent is added to
// RegeneratedUsage. A state without a TurnStart applies text as a new user
// message.
func Regenerate(text string) Input { return Input{Kind: InputRegenerate, Text: text} }

// Decision is what the engine decided about one event.
type Decision struct {
	// Refused is set when a tool event named a tool that is not offered: it
	// must not be executed, and the state is unchanged. Reason is the message
	// for the model.
	Refused bool
	Reason  string
	// PreviousStep is the active step before the event; Transition reports
	// whether the event changed it.
	PreviousStep string
	Transition   bool
	// Advanced reports whether the event moved the sequence index forward.
	Advanced bool
}

// Offer is the tool set offered to the model in a state.
type Offer struct {
	// Tools is shared with the engine: do not modify it.
	Tools []string
	// Warning is set when the tools at the active step's sequence position
	// cannot run now and the step's tools are offered instead.
	Warning string
	// Step and SequenceIndex are the state's active step (empty when there
	// is none, or the template no longer has it) and sequence position:
	// the refusal of a call made under this offer names them.
	// StepChanges is the state's (State.StepChanges): with the other two
	// it says whether a call of the answer still runs at the position
	// its model call was offered (Judge).
	Step          string
	SequenceIndex int
	StepChanges   int `json:",omitempty"`
	// Blocked is set when the step's sequence is at a position none of
	// whose tools the runtime provides: the sequence cannot pass it, so
	// the step offers its tools, and Blocked says why.
	Blocked string
}

// Engine applies the orchestration rules of one template. It is immutable and
// safe for concurrent use; it keeps no session data.
type Engine struct {
	msgConds     int // message conditions, numbered at compile time
	tools        []string
	steps        []step
	byName       map[string]int
	defaultStep  int
	historyLimit int
	turnScope    bool
	// approval holds the patterns of options.requireApproval.
	approval []string
	// client holds the patterns of options.clientTools.
	client []string
}

type step struct {
	name, description string
	isDefault         bool
	conds             []condition
	tools             []string
	sequence          [][]string
	offers            [][]string // per sequence position
	blocked           []string   // per sequence position: why it cannot be passed, or ""
	approval          []string   // requireApproval patterns
	// allowed and denied are the step's availableTools patterns, which a
	// request's client tools are offered by (OfferWith).
	allowed, denied []string
	// client lists, per sequence position, the tools of its group that
	// are client tools the template declares: a request brings them or
	// not, so the position waits for them like a tool down for a while.
	client [][]string
}

type condKind uint8

const (
	condToolUsed condKind = iota + 1
	condSequenceMatch
	condMessageContains
	condMessageStartsWith
	condMessageRegex
	condNotRecentlyUsed
)

type condition struct {
	kind   condKind
	msgIdx int    // for message conditions: its number in the memo
	value  string // folded (foldString) for message_contains and message_starts_with
	window int
	re     *regexp.Regexp
}

// Tools returns the tools the engine may offer: the agent's available tools.
func (e *Engine) Tools() []string { return e.tools }

// HistoryLimit returns how many tool uses a state keeps.
func (e *Engine) HistoryLimit() int { return e.historyLimit }

// TurnScoped reports whether the template opted into the "turn" step scope.
func (e *Engine) TurnScoped() bool { return e.turnScope }

// Apply applies ev to s and returns the new state and the decision. It does
// not modify s: the returned state may share s's history, which neither can
// change.
func (e *Engine) Apply(s State, ev Input) (State, Decision) {
	d := Decision{PreviousStep: s.ActiveStep}
	switch ev.Kind {
	case InputRegenerate:
		if s.TurnStart != nil {
			s = e.restore(s)
			d.PreviousStep = s.ActiveStep
		}
		e.userMessage(&s, ev.Text)
	case InputUserMessage:
		e.userMessage(&s, ev.Text)
	case InputToolUsed:
		var offer Offer
		if ev.Offered != nil {
			offer = *ev.Offered
		} else {
			offer = e.OfferWith(s, ev.Available, ev.Client)
		}
		call := e.Judge(offer, s, ev.Tool)
		if call.Refused {
			d.Refused = true
			d.Reason = call.Reason
			return s, d
		}
		s.TurnStart = s.TurnStart.keepDropped(s.RecentlyUsedTools, e.historyLimit)
		s.RecentlyUsedTools = s.RecentlyUsedTools.Append(ev.Tool, e.historyLimit)
		s.TurnToolUses++
		if call.Advances {
			s.SequenceIndex++
			d.Advanced = true
		}
		e.choose(&s)
	case InputUsage:
		s.TokenUsage = s.TokenUsage.Add(ev.Usage)
	}
	d.Transition = s.ActiveStep != d.PreviousStep
	return s, d
}

// userMessage applies a user message to s, first keeping what a
// Regenerate of its answer restores.
func (e *Engine) userMessage(s *State, text string) {
	s.TurnStart = &TurnStart{
		ActiveStep: s.ActiveStep, SequenceIndex: s.SequenceIndex,
		LastUserMessage: s.LastUserMessage, UserMessages: s.UserMessages, TurnToolUses: s.TurnToolUses,
		StepChanges: s.StepChanges, TokenUsage: s.TokenUsage, Tools: s.RecentlyUsedTools.Len(),
	}
	s.LastUserMessage = text
	s.UserMessages++
	s.TurnToolUses = 0
	if e.turnScope {
		// The opt-in: every turn starts from no step, so that the step
		// is chosen by this message and this turn's tools alone.
		s.ActiveStep, s.SequenceIndex = "", 0
	}
	s.memo = nil // the results belonged to the previous message
	e.choose(s)
}

// restore returns s as it was before its latest user message: s's
// TurnStart, with the tool history rebuilt from the entries still in it and
// those the answer pushed out, and the answer's token usage counted as
// regenerated. The TurnStart itself goes: the message is applied again.
func (e *Engine) restore(s State) State {
	ts := s.TurnStart
	h := s.RecentlyUsedTools.view()
	kept := min(max(ts.Tools-len(ts.Dropped), 0), len(h))
	names := make([]string, 0, len(ts.Dropped)+kept)
	names = append(append(names, ts.Dropped...), h[:kept]...)
	spent := chat.Usage{
		Prompt:     s.TokenUsage.Prompt - ts.TokenUsage.Prompt,
		Completion: s.TokenUsage.Completion - ts.TokenUsage.Completion,
		Total:      s.TokenUsage.Total - ts.TokenUsage.Total,
	}
	out := State{
		ActiveStep: ts.ActiveStep, SequenceIndex: ts.SequenceIndex,
		RecentlyUsedTools: NewHistory(names...),
		LastUserMessage:   ts.LastUserMessage, UserMessages: ts.UserMessages, TurnToolUses: ts.TurnToolUses,
		StepChanges:      ts.StepChanges,
		TokenUsage:       s.TokenUsage,
		RegeneratedUsage: s.RegeneratedUsage,
	}
	if !spent.IsZero() {
		out.RegeneratedUsage = out.RegeneratedUsage.Add(spent)
	}
	return out
}

// keepDropped returns ts with the entry that appending one tool to h
// (bounded to limit) pushes out, when that entry was in the history at the
// turn's start: a Regenerate must bring it back. ts is not modified.
func (ts *TurnStart) keepDropped(h History, limit int) *TurnStart {
	if ts == nil {
		return nil
	}
	drop := h.Len() + 1 - max(limit, 1) // entries Append pushes out, from the front
	kept := ts.Tools - len(ts.Dropped)  // entries of the turn's start still in h, at its front
	n := min(drop, kept)
	if n <= 0 {
		return ts
	}
	next := *ts
	next.Dropped = append(slices.Clip(ts.Dropped), h.view()[:n]...)
	return &next
}

// NeedsApproval reports whether a model call made in state s is told that
// a call of tool waits for a person's approval: the template's
// options.requireApproval or the active step's requireApproval names it.
// It decides nothing about a call the model made: Judge does, with the
// offer of the model call that made it.
func (e *Engine) NeedsApproval(s State, tool string) bool {
	return e.approves(s.ActiveStep, tool)
}

// approves reports whether options.requireApproval or the requireApproval
// of the step named step (none when "" or unknown) names tool.
func (e *Engine) approves(step, tool string) bool {
	if matchAny(e.approval, tool) {
		return true
	}
	st := e.step(step)
	return st != nil && matchAny(st.approval, tool)
}

// Call is the engine's decision on one call of a model answer.
type Call struct {
	// Refused: the model call that made it was not offered the tool. It
	// must not run, nothing records it, and Reason is what the model reads.
	Refused bool
	Reason  string
	// Advances: recording the call moves the active step's sequence one
	// position on.
	Advances bool
	// Approval: the call waits for a person's approval before it runs.
	Approval bool
}

// Judge decides the call of tool that a model call made under offer, s
// being the state the call would run in (after the answer's earlier calls
// were recorded). It is the one decision about a call, for every path that
// makes one (a live turn, a replayed conversation, a scenario, a
// transcript), and it reads the state only where the contract says so:
//
//   - the call is refused when offer, the model call's, lacks the tool,
//     whatever the answer's earlier calls changed since;
//   - it advances a sequence only when the model call was offered the very
//     position s is at (offer.Step is s's active step, offer.SequenceIndex
//     its sequenceIndex, and the step did not change in between, not even
//     to leave and come back) and the tool is in that position's group:
//     one answer advances a sequence by one position at most, and a step
//     entered in the middle of an answer starts its sequence with the next
//     model call;
//   - it waits for approval when options.requireApproval, the step of the
//     model call (offer.Step) or the step active in s requires approval
//     for it: the stricter of the two steps.
//
// Judge is pure: it changes nothing.
func (e *Engine) Judge(offer Offer, s State, tool string) Call {
	if !slices.Contains(offer.Tools, tool) {
		return Call{Refused: true, Reason: e.refusal(offer, tool)}
	}
	c := Call{Approval: e.approves(offer.Step, tool) || e.approves(s.ActiveStep, tool)}
	if st := e.step(offer.Step); st != nil && offer.Step == s.ActiveStep && offer.SequenceIndex == s.SequenceIndex && offer.StepChanges == s.StepChanges &&
		s.SequenceIndex >= 0 && s.SequenceIndex < len(st.sequence) && slices.Contains(st.sequence[s.SequenceIndex], tool) {
		c.Advances = true
	}
	return c
}

// Offer returns the tools offered to the model in state s.
func (e *Engine) Offer(s State) Offer {
	st := e.step(s.ActiveStep)
	if st == nil {
		return Offer{Tools: e.tools}
	}
	o := Offer{Tools: st.tools, Step: st.name, SequenceIndex: s.SequenceIndex, StepChanges: s.StepChanges}
	if s.SequenceIndex >= 0 && s.SequenceIndex < len(st.offers) {
		o.Tools, o.Blocked = st.offers[s.SequenceIndex], st.blocked[s.SequenceIndex]
	}
	return o
}

// Current returns s as the engine sees it now: a state saved under an
// earlier version of the template whose active step the template no
// longer has takes the step the rules choose now (the default step, or
// none), as the next input would; any other state is returned as it is.
// What a session shows and the turn that resumes it start from Current.
func (e *Engine) Current(s State) State {
	if s.ActiveStep == "" || e.step(s.ActiveStep) != nil {
		return s
	}
	e.choose(&s)
	return s
}

// Snapshot describes state s for clients and tracing.
func (e *Engine) Snapshot(s State) chat.Snapshot {
	o := e.Offer(s)
	snap := chat.Snapshot{ActiveStep: s.ActiveStep, SequenceIndex: s.SequenceIndex, OfferedTools: o.Tools, Blocked: o.Blocked}
	if st := e.step(s.ActiveStep); st != nil {
		for _, g := range st.sequence {
			snap.Sequence = append(snap.Sequence, strings.Join(g, "|"))
		}
	}
	return snap
}

func (e *Engine) step(name string) *step {
	if name == "" {
		return nil
	}
	i, ok := e.byName[name]
	if !ok {
		return nil
	}
	return &e.steps[i]
}

// choose runs the step-choice rule on s.
func (e *Engine) choose(s *State) {
	ev := evaluation{engine: e, message: s.LastUserMessage, messages: s.UserMessages, history: s.RecentlyUsedTools.view()}
	if s.memo != nil && s.memo.engine == e {
		ev.memo = s.memo
	}
	if e.turnScope {
		n := min(s.TurnToolUses, len(ev.history))
		ev.history = ev.history[len(ev.history)-n:]
	}
	chosen := -1
	for i := range e.steps {
		st := &e.steps[i]
		if st.isDefault || len(st.conds) == 0 {
			continue
		}
		if ev.passes(st) {
			chosen = i
			break
		}
	}
	s.memo = ev.memo
	if chosen < 0 {
		if e.step(s.ActiveStep) != nil {
			return // sticky: keep the current step
		}
		if e.defaultStep >= 0 {
			chosen = e.defaultStep
		}
	}
	name := ""
	if chosen >= 0 {
		name = e.steps[chosen].name
	}
	if name == s.ActiveStep {
		return
	}
	s.ActiveStep, s.SequenceIndex = name, 0
	s.StepChanges++
	if e.turnScope && chosen >= 0 && e.steps[chosen].hasSequenceMatch() {
		// Under the opt-in, a step entered because its sequence was just
		// run starts with that sequence done, instead of asking for it again.
		s.SequenceIndex = len(e.steps[chosen].sequence)
	}
}

func (st *step) hasSequenceMatch() bool {
	for _, c := range st.conds {
		if c.kind == condSequenceMatch {
			return true
		}
	}
	return false
}

type evaluation struct {
	engine *Engine
	memo   *messageMemo
	owned  bool // memo is this evaluation's own copy, not yet shared
	// message and messages are copied from the state rather than pointed
	// to, so that the state does not escape to the heap.
	message  string
	messages int
	history  []string
	folded   string
	isFolded bool
}

// foldedMessage returns the message under simple case folding, computed
// once per evaluation (see fold.go).
func (ev *evaluation) foldedMessage() string {
	if !ev.isFolded {
		ev.folded, ev.isFolded = foldString(ev.message), true
	}
	return ev.folded
}

func (ev *evaluation) passes(st *step) bool {
	for i := range st.conds {
		if !ev.test(&st.conds[i], st) {
			return false
		}
	}
	return true
}

func (ev *evaluation) test(c *condition, st *step) bool {
	h := ev.history
	switch c.kind {
	case condToolUsed:
		return slices.Contains(h, c.value)
	case condNotRecentlyUsed:
		return !slices.Contains(h[max(0, len(h)-c.window):], c.value)
	case condSequenceMatch:
		n := len(st.sequence)
		if n == 0 || len(h) < n {
			return false
		}
		tail := h[len(h)-n:]
		for i, g := range st.sequence {
			if !slices.Contains(g, tail[i]) {
				return false
			}
		}
		return true
	}
	if ev.messages == 0 {
		return false
	}
	word, bit := c.msgIdx/64, uint64(1)<<(c.msgIdx%64)
	if ev.memo != nil && ev.memo.known[word]&bit != 0 {
		return ev.memo.value[word]&bit != 0
	}
	ok := ev.testMessage(c)
	ev.remember(word, bit, ok)
	return ok
}

// remember records a message condition's result, in a copy of the memo the
// first time in this evaluation, so that states sharing the old memo are
// unaffected.
func (ev *evaluation) remember(word int, bit uint64, ok bool) {
	if !ev.owned {
		n := (ev.engine.msgConds + 63) / 64
		m := &messageMemo{engine: ev.engine, known: make([]uint64, 2*n)}
		m.known, m.value = m.known[:n:n], m.known[n:]
		if ev.memo != nil {
			copy(m.known, ev.memo.known)
			copy(m.value, ev.memo.value)
		}
		ev.memo, ev.owned = m, true
	}
	ev.memo.known[word] |= bit
	if ok {
		ev.memo.value[word] |= bit
	}
}

func (ev *evaluation) testMessage(c *condition) bool {
	switch c.kind {
	case condMessageContains:
		return strings.Contains(ev.foldedMessage(), c.value)
	case condMessageStartsWith:
		return strings.HasPrefix(strings.TrimSpace(ev.foldedMessage()), c.value)
	case condMessageRegex:
		return c.re.MatchString(ev.message)
	}
	return false
}

func (c *condition) isMessage() bool {
	return c.kind == condMessageContains || c.kind == condMessageStartsWith || c.kind == condMessageRegex
}

// Refusal is the message the model receives when it called tool in state s
// while offered were the tools it might use (nil: none, as in a turn's last
// model call): it names the step, its sequence and the position reached, and
// the tools that may be used. It is RefusalIn for an offer made in s.
func (e *Engine) Refusal(s State, tool string, offered []string) string {
	o := e.Offer(s)
	o.Tools = offered
	return e.refusal(o, tool)
}

// RefusalIn is the message the model receives when it called tool in an
// answer to a model call made under offer (offer.Tools nil: none, as in a
// turn's last model call): it names the step, its sequence and the
// position the model call was made at, and the tools it was offered,
// whatever earlier calls of the same answer did since. Apply uses it for
// the calls it refuses; callers that refuse a call themselves use it too,
// so that every refusal the model reads says the same things.
func (e *Engine) RefusalIn(offer Offer, tool string) string {
	return e.refusal(offer, tool)
}

// maxNameInRefusal bounds the echo of a model-chosen tool name: a model can
// invent names of any length, and the refusal goes back into the history.
const maxNameInRefusal = 64

func (e *Engine) refusal(o Offer, tool string) string {
	if len(tool) > maxNameInRefusal {
		cut := maxNameInRefusal
		for cut > 0 && !utf8.RuneStart(tool[cut]) {
			cut--
		}
		tool = tool[:cut] + "…"
	}
	var b strings.Builder
	st := e.step(o.Step)
	if st == nil {
		fmt.Fprintf(&b, "tool %q is not available to this agent", tool)
	} else {
		fmt.Fprintf(&b, "tool %q is not available in step %q", tool, st.name)
		if o.SequenceIndex >= 0 && o.SequenceIndex < len(st.sequence) {
			fmt.Fprintf(&b, ", which requires the sequence %s and is at position %d", seqString(st.sequence), o.SequenceIndex+1)
			if o.Blocked != "" {
				b.WriteString(", which no tool this runtime provides can fill, so the sequence stops there")
			}
		}
	}
	if len(o.Tools) == 0 {
		b.WriteString("; no tools may be used now")
	} else {
		fmt.Fprintf(&b, "; tools you may use now: %s", strings.Join(o.Tools, ", "))
	}
	return b.String()
}

func seqString(seq [][]string) string {
	parts := make([]string, len(seq))
	for i, g := range seq {
		parts[i] = strings.Join(g, "|")
	}
	return strings.Join(parts, " -> ")
}

// StepInfo describes one compiled step.
type StepInfo struct {
	Name        string
	Description string
	Default     bool
	// Sequence lists the groups of the step's sequence.
	Sequence [][]string
	// Tools are the step's tools: allowed minus denied, available ones only.
	Tools []string
	// RequireApproval are the step's requireApproval patterns.
	RequireApproval []string
}

// Steps describes the compiled steps in template order. The slices are
// shared with the engine: do not modify them.
func (e *Engine) Steps() []StepInfo {
	out := make([]StepInfo, len(e.steps))
	for i, s := range e.steps {
		out[i] = StepInfo{Name: s.name, Description: s.description, Default: s.isDefault, Sequence: s.sequence, Tools: s.tools, RequireApproval: s.approval}
	}
	return out
}
