package server

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
)

// The AI SDK "UI message stream" (v1 protocol of AI SDK 5 and later): one
// JSON object per SSE frame. These types are its chunks as this server emits
// them; see docs/api.md for the mapping from chat.Event.

type uiChunk struct {
	Type       string          `json:"type"`
	ID         string          `json:"id,omitempty"`
	MessageID  string          `json:"messageId,omitempty"`
	Delta      string          `json:"delta,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     *uiToolOutput   `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	Data       any             `json:"data,omitempty"`
	ApprovalID string          `json:"approvalId,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	// FinishReason is one of the AI SDK's reasons: stop, length, error,
	// other.
	FinishReason string `json:"finishReason,omitempty"`
	// Transient marks a data part the AI SDK hands to onData without
	// adding it to the message.
	Transient bool `json:"transient,omitempty"`
}

// uiAgent is a data-agent part: an event of the turn of an agent that a
// tool call asked (chat.KindToolProgress), under the call.
type uiAgent struct {
	ToolCallID string      `json:"toolCallId"`
	ToolName   string      `json:"toolName"`
	Agent      string      `json:"agent"`
	Event      *chat.Event `json:"event"`
}

type uiToolOutput struct {
	Content string `json:"content"`
	Type    string `json:"type,omitempty"`
}

type uiOrchestration struct {
	ActiveStep    string   `json:"activeStep"`
	SequenceIndex int      `json:"sequenceIndex"`
	Sequence      []string `json:"sequence"`
	OfferedTools  []string `json:"offeredTools"`
	PreviousStep  string   `json:"previousStep"`
	Transition    bool     `json:"transition"`
	// Blocked: the sequence stops at a position no provided tool can fill.
	Blocked string `json:"blocked,omitempty"`
}

type uiWarning struct {
	Message string `json:"message"`
}

// uiRestart is a chat.Restart on the wire, with the parts the client
// drops: the text parts and tool calls the stream showed after Since.
type uiRestart struct {
	Step        int      `json:"step"`
	Since       int64    `json:"since"`
	TextIDs     []string `json:"textIds"`
	ToolCallIDs []string `json:"toolCallIds"`
	Message     string   `json:"message"`
}

type uiLimit struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Message string `json:"message"`
}

// doneData is the data of the last frame of every turn.
var doneData = []byte("[DONE]")

// uiMapper turns the chat.Events of one turn, in order from its first,
// into the chunks of its UI message stream, each one SSE frame, numbered
// from 1: one connection's mapping, made again by every connection (a
// resumed one maps the events its client has without writing them), so
// that every replica gives the same chunks and frame numbers for the same
// events. It keeps the state the mapping needs: whether a text part is
// open and its ID, the parts shown (for a restart to name the ones to
// drop) and where each event's frames end.
type uiMapper struct {
	turnID string
	// frames counts the frames so far; frameOf[i] is the number of the
	// last frame of the event of seq i+1 (the events come from the first,
	// without a hole).
	frames  int64
	frameOf []int32
	// textOpen: a text part is open, textID; textRuns counts the parts.
	textOpen bool
	textRuns int
	textID   string
	// restarts counts the turn's takeovers so far: the text parts after
	// one are named apart ("<turn>-r<n>-text-<k>"), so that none takes
	// the ID of a part a dead replica showed and the shared log never got.
	restarts int
	// shown are the parts shown so far, with the event that began each:
	// a restart names those after its Since, which the client drops.
	shown []shownPart
	// out is the chunks of the latest add, reused by the next.
	out [][]byte
}

// shownPart is a text part or a tool call the stream showed, and the seq
// of the event that began it.
type shownPart struct {
	seq        int64
	text, call string
}

// add returns the chunks of ev, valid until the next call; none for an
// event the stream does not show. Without encode the chunks are counted
// but not made (nil): a client already has them.
func (m *uiMapper) add(ev chat.Event, encode bool) [][]byte {
	out := m.out[:0]
	defer func() {
		m.frames += int64(len(out))
		m.frameOf = append(m.frameOf, int32(m.frames))
		m.out = out[:0]
	}()
	add := func(c *uiChunk) {
		if encode {
			out = append(out, mustJSON(c))
		} else {
			out = append(out, nil)
		}
	}
	closeText := func() {
		if m.textOpen {
			add(&uiChunk{Type: "text-end", ID: m.textID})
			m.textOpen = false
		}
	}
	switch ev.Kind {
	case chat.KindStart:
		if st := ev.Start; st != nil {
			add(&uiChunk{Type: "start", MessageID: cmp.Or(st.Message, st.Turn)})
		}
	case chat.KindStepStart:
		add(&uiChunk{Type: "start-step"})
	case chat.KindStepFinish:
		closeText()
		add(&uiChunk{Type: "finish-step"})
	case chat.KindTextDelta:
		if ev.Text == "" {
			return nil
		}
		if !m.textOpen {
			m.textRuns++
			prefix := m.turnID
			if m.restarts > 0 {
				prefix += "-r" + strconv.Itoa(m.restarts)
			}
			m.textID = prefix + "-text-" + strconv.Itoa(m.textRuns)
			m.textOpen = true
			m.shown = append(m.shown, shownPart{seq: ev.Seq, text: m.textID})
			add(&uiChunk{Type: "text-start", ID: m.textID})
		}
		add(&uiChunk{Type: "text-delta", ID: m.textID, Delta: ev.Text})
	case chat.KindToolCall, chat.KindClientCall:
		// A client's call is the AI SDK's client-side tool call: its
		// input without an output, which the client's addToolResult
		// answers.
		if ev.ToolCall == nil {
			return nil
		}
		closeText()
		input := ev.ToolCall.Arguments
		if len(input) == 0 || !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		m.shown = append(m.shown, shownPart{seq: ev.Seq, call: ev.ToolCall.ID})
		add(&uiChunk{Type: "tool-input-start", ToolCallID: ev.ToolCall.ID, ToolName: ev.ToolCall.Name})
		add(&uiChunk{Type: "tool-input-available", ToolCallID: ev.ToolCall.ID, ToolName: ev.ToolCall.Name, Input: input})
	case chat.KindToolResult:
		r := ev.ToolResult
		if r == nil {
			return nil
		}
		closeText()
		switch {
		case r.Denied:
			add(&uiChunk{Type: "tool-output-denied", ToolCallID: r.CallID})
		case r.IsError:
			add(&uiChunk{Type: "tool-output-error", ToolCallID: r.CallID, ErrorText: r.Content})
		default:
			add(&uiChunk{Type: "tool-output-available", ToolCallID: r.CallID, Output: &uiToolOutput{Content: r.Content, Type: r.Type}})
		}
	case chat.KindApproval:
		if ev.Approval == nil {
			return nil
		}
		closeText()
		add(&uiChunk{Type: "tool-approval-request", ApprovalID: ev.Approval.ID, ToolCallID: ev.Approval.ToolCallID})
	case chat.KindToolProgress:
		if p := ev.Progress; p != nil && p.Event != nil {
			// The asked agent's work, nested under the call; transient,
			// since the call's output is its answer.
			closeText()
			add(&uiChunk{Type: "data-agent", Data: uiAgent{ToolCallID: p.CallID, ToolName: p.Name, Agent: p.Agent, Event: p.Event}, Transient: true})
		}
	case chat.KindAbort:
		closeText()
		add(&uiChunk{Type: "abort", Reason: ev.Text})
	case chat.KindOrchestration:
		s := ev.Orchestration
		if s == nil {
			return nil
		}
		add(&uiChunk{Type: "data-orchestration", Data: uiOrchestration{
			ActiveStep: s.ActiveStep, SequenceIndex: s.SequenceIndex, Sequence: nonNil(s.Sequence),
			OfferedTools: nonNil(s.OfferedTools), PreviousStep: s.PreviousStep, Transition: s.Transition, Blocked: s.Blocked,
		}})
	case chat.KindUsage:
		if ev.Usage == nil {
			return nil
		}
		u := wire.Usage{Totals: wire.TotalsOf(*ev.Usage), Final: ev.Final, Model: ev.Model}
		if su := ev.SessionUsage; su != nil {
			st := wire.TotalsOf(*su)
			u.Session = &st
		}
		for _, m := range ev.Models {
			u.Models = append(u.Models, wire.ModelUsage{ModelRef: m.ModelRef, Usage: wire.TotalsOf(m.Usage), Calls: m.Calls})
		}
		add(&uiChunk{Type: "data-usage", Data: u})
	case chat.KindFallback:
		if ev.Fallback != nil {
			add(&uiChunk{Type: "data-fallback", Data: ev.Fallback})
		}
	case chat.KindWarning:
		add(&uiChunk{Type: "data-warning", Data: uiWarning{Message: ev.Text}})
	case chat.KindCompaction:
		if ev.Compaction != nil {
			add(&uiChunk{Type: "data-compaction", Data: wire.CompactionOf(ev.Compaction)})
		}
	case chat.KindRestart:
		if r := ev.Restart; r != nil {
			// The parts shown after Since go; what follows shows the step
			// again, in parts of its own.
			m.textOpen = false
			m.restarts++
			d := uiRestart{Step: r.Step, Since: m.frameAt(r.Since), TextIDs: []string{}, ToolCallIDs: []string{}, Message: r.Message}
			for _, p := range m.shown {
				if p.seq <= r.Since {
					continue
				}
				if p.text != "" {
					d.TextIDs = append(d.TextIDs, p.text)
				} else if !slices.Contains(d.ToolCallIDs, p.call) {
					d.ToolCallIDs = append(d.ToolCallIDs, p.call)
				}
			}
			m.shown = slices.DeleteFunc(m.shown, func(p shownPart) bool { return p.seq > r.Since })
			add(&uiChunk{Type: "data-restart", Data: d})
		}
	case chat.KindGuardrail:
		if g := ev.Guardrail; g != nil {
			add(&uiChunk{Type: "data-guardrail", Data: g})
		}
	case chat.KindLimit:
		if l := ev.Limit; l != nil {
			closeText()
			add(&uiChunk{Type: "data-limit", Data: uiLimit{Name: l.Name, Value: l.Value, Message: l.Message}})
		}
	case chat.KindError:
		closeText()
		e := ev.Error
		if e == nil {
			e = &chat.Error{Code: "internal_error", Message: "the turn failed"}
		}
		add(&uiChunk{Type: "error", ErrorText: e.Code + ": " + e.Message})
	case chat.KindDone:
		closeText()
		add(&uiChunk{Type: "finish", FinishReason: uiFinishReason(ev.FinishReason)})
		out = append(out, doneData)
	}
	return out
}

// frameAt is the number of the last frame of the event of seq seq (0
// before the first).
func (m *uiMapper) frameAt(seq int64) int64 {
	if seq <= 0 || len(m.frameOf) == 0 {
		return 0
	}
	return int64(m.frameOf[min(seq, int64(len(m.frameOf)))-1])
}

// uiFinishReason maps a chat finish reason to the AI SDK's enumeration.
func uiFinishReason(r string) string {
	switch r {
	case chat.FinishStop:
		return "stop"
	case chat.FinishLength, chat.FinishMaxSteps:
		return "length"
	case chat.FinishTimeout:
		return "other"
	case chat.FinishError:
		return "error"
	case chat.FinishApproval, chat.FinishToolCalls:
		return "tool-calls"
	}
	return "other"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
