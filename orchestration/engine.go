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
	// TokenUsage is the session's cumulative token usage.
	TokenUsage chat.Usage `json:"cumulativeTokenUsage"`

	// memo caches the message conditions' results for LastUserMessage, so
	// that the re-evaluation after every tool use does not run every regex
	// again. It is derived data: absent (after a store round trip) or made
	// by another engine, it is recomputed.
	memo *messageMemo
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
}

// UserMessage is the event of a user message.
func UserMessage(text string) Input { return Input{Kind: InputUserMessage, Text: text} }

// ToolUsed is the event of the model calling a tool.
func ToolUsed(name string) Input { return Input{Kind: InputToolUsed, Tool: name} }

// UsageReported is the event of a model call's token usage.
func UsageReported(u chat.Usage) Input { return Input{Kind: InputUsage, Usage: u} }

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
	// Warning is set when the active step's sequence asks for tools that are
	// not available and the step's tools are offered instead.
	Warning string
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
}

type step struct {
	name, description string
	isDefault         bool
	conds             []condition
	tools             []string
	sequence          [][]string
	offers            [][]string // per sequence position
	warnings          []string   // per sequence position
	approval          []string   // requireApproval patterns
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
	case InputUserMessage:
		s.LastUserMessage = ev.Text
		s.UserMessages++
		s.TurnToolUses = 0
		if e.turnScope {
			// The opt-in: every turn starts from no step, so that the step
			// is chosen by this message and this turn's tools alone.
			s.ActiveStep, s.SequenceIndex = "", 0
		}
		s.memo = nil // the results belonged to the previous message
		e.choose(&s)
	case InputToolUsed:
		offer := e.OfferNow(s, ev.Available)
		if !slices.Contains(offer.Tools, ev.Tool) {
			d.Refused = true
			d.Reason = e.refusal(s, ev.Tool, offer.Tools)
			return s, d
		}
		s.RecentlyUsedTools = s.RecentlyUsedTools.Append(ev.Tool, e.historyLimit)
		s.TurnToolUses++
		if st := e.step(s.ActiveStep); st != nil && s.SequenceIndex < len(st.sequence) &&
			slices.Contains(st.sequence[s.SequenceIndex], ev.Tool) {
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

// NeedsApproval reports whether a call of tool in state s must wait for a
// person's approval before it runs: the template's options.requireApproval
// or the active step's requireApproval names it. It decides nothing about
// whether the tool is offered; the runtime asks it for calls that would
// run.
func (e *Engine) NeedsApproval(s State, tool string) bool {
	if matchAny(e.approval, tool) {
		return true
	}
	st := e.step(s.ActiveStep)
	return st != nil && matchAny(st.approval, tool)
}

// Offer returns the tools offered to the model in state s.
func (e *Engine) Offer(s State) Offer {
	st := e.step(s.ActiveStep)
	if st == nil {
		return Offer{Tools: e.tools}
	}
	if s.SequenceIndex >= 0 && s.SequenceIndex < len(st.offers) {
		return Offer{Tools: st.offers[s.SequenceIndex], Warning: st.warnings[s.SequenceIndex]}
	}
	return Offer{Tools: st.tools}
}

// Snapshot describes state s for clients and tracing.
func (e *Engine) Snapshot(s State) chat.Snapshot {
	snap := chat.Snapshot{ActiveStep: s.ActiveStep, SequenceIndex: s.SequenceIndex, OfferedTools: e.Offer(s).Tools}
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
// the tools that may be used. Apply uses it for the tools of Offer(s);
// callers that offered fewer tools for a model call use it directly, so
// that every refusal the model reads says the same things.
func (e *Engine) Refusal(s State, tool string, offered []string) string {
	return e.refusal(s, tool, offered)
}

// maxNameInRefusal bounds the echo of a model-chosen tool name: a model can
// invent names of any length, and the refusal goes back into the history.
const maxNameInRefusal = 64

func (e *Engine) refusal(s State, tool string, offered []string) string {
	if len(tool) > maxNameInRefusal {
		cut := maxNameInRefusal
		for cut > 0 && !utf8.RuneStart(tool[cut]) {
			cut--
		}
		tool = tool[:cut] + "…"
	}
	var b strings.Builder
	if s.ActiveStep == "" {
		fmt.Fprintf(&b, "tool %q is not available to this agent", tool)
	} else {
		fmt.Fprintf(&b, "tool %q is not available in step %q", tool, s.ActiveStep)
		if st := e.step(s.ActiveStep); st != nil && s.SequenceIndex < len(st.sequence) {
			fmt.Fprintf(&b, ", which requires the sequence %s and is at position %d", seqString(st.sequence), s.SequenceIndex+1)
		}
	}
	if len(offered) == 0 {
		b.WriteString("; no tools may be used now")
	} else {
		fmt.Fprintf(&b, "; tools you may use now: %s", strings.Join(offered, ", "))
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
