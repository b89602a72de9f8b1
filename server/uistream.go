package server

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
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
}

type uiUsage struct {
	Prompt     int64        `json:"prompt"`
	Completion int64        `json:"completion"`
	Total      int64        `json:"total"`
	Final      bool         `json:"final"`
	Session    *usageTotals `json:"session,omitempty"`
}

type usageTotals struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
}

type uiWarning struct {
	Message string `json:"message"`
}

type uiLimit struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Message string `json:"message"`
}

// doneData is the data of the last frame of every turn.
var doneData = []byte("[DONE]")

// uiMapper turns the chat.Events of one turn into UI stream chunks. It keeps
// the state the mapping needs: whether a text run is open and its ID.
type uiMapper struct {
	turnID string
	// messageID is the start chunk's messageId: the turn's ID, or the
	// client's assistant message that a turn answering approvals goes on.
	messageID string
	textOpen  bool
	textRuns  int
	textID    string
	// keepEvents: items carry a copy of their event (see turn.keepEvents);
	// without it the event is not copied to the heap for every frame.
	keepEvents bool
	// out is the items of the latest mapEvent, reused by the next.
	out []item
	// raw: the frames are the events' JSON (an edge's turn, edge.go).
	raw bool
}

// item is one frame's payload with the event it came from (nil for frames
// that only frame others, like start and text-start).
type item struct {
	data []byte
	ev   *chat.Event
}

func (m *uiMapper) start() item {
	if m.raw {
		return item{data: edgeStart}
	}
	id := m.messageID
	if id == "" {
		id = m.turnID
	}
	return item{data: mustJSON(uiChunk{Type: "start", MessageID: id})}
}

// mapEvent returns the frames of ev, valid until the next call.
//
// Text deltas, most of a turn's events, take a way of their own with a
// small frame (appendText). mapEvent runs at the top of a turn's deepest
// stack, over the model's stream under the service and the agent, and
// mapOther's frame there grew every turn's stack from 8 to 16 KiB on its
// first token: a copy of every frame on the stack, on the first token's
// way (BENCHMARKS.md, fourteenth round).
func (m *uiMapper) mapEvent(ev chat.Event) []item {
	if m.raw {
		return m.rawEvent(ev)
	}
	if ev.Kind == chat.KindTextDelta && !m.keepEvents {
		out := m.appendText(m.out[:0], ev.Text, nil)
		m.out = out[:0]
		return out
	}
	return m.mapOther(ev)
}

// mapOther is mapEvent for every event but the text deltas of a turn that
// does not keep its events.
func (m *uiMapper) mapOther(ev chat.Event) []item {
	out := m.out[:0]
	defer func() { m.out = out[:0] }()
	// The chunks are built on the heap (&uiChunk{...}): json.Marshal would
	// copy a value there anyway, and a dozen chunk values on the stack
	// made this the deepest frame of a turn's goroutine (5 KiB), which
	// doubled every waiting turn's stack.
	add := func(c *uiChunk, src *chat.Event) { out = append(out, item{data: mustJSON(c), ev: src}) }
	closeText := func() {
		if m.textOpen {
			add(&uiChunk{Type: "text-end", ID: m.textID}, nil)
			m.textOpen = false
		}
	}
	var src *chat.Event
	if m.keepEvents {
		e := ev
		src = &e
	}
	switch ev.Kind {
	case chat.KindStepStart:
		add(&uiChunk{Type: "start-step"}, src)
	case chat.KindStepFinish:
		closeText()
		add(&uiChunk{Type: "finish-step"}, src)
	case chat.KindTextDelta:
		out = m.appendText(out, ev.Text, src)
	case chat.KindToolCall:
		if ev.ToolCall == nil {
			return nil
		}
		closeText()
		input := ev.ToolCall.Arguments
		if len(input) == 0 || !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		add(&uiChunk{Type: "tool-input-start", ToolCallID: ev.ToolCall.ID, ToolName: ev.ToolCall.Name}, nil)
		add(&uiChunk{Type: "tool-input-available", ToolCallID: ev.ToolCall.ID, ToolName: ev.ToolCall.Name, Input: input}, src)
	case chat.KindToolResult:
		r := ev.ToolResult
		if r == nil {
			return nil
		}
		closeText()
		if r.Denied {
			add(&uiChunk{Type: "tool-output-denied", ToolCallID: r.CallID}, src)
			break
		}
		if r.IsError {
			add(&uiChunk{Type: "tool-output-error", ToolCallID: r.CallID, ErrorText: r.Content}, src)
		} else {
			add(&uiChunk{Type: "tool-output-available", ToolCallID: r.CallID, Output: &uiToolOutput{Content: r.Content, Type: r.Type}}, src)
		}
	case chat.KindApproval:
		if ev.Approval == nil {
			return nil
		}
		closeText()
		add(&uiChunk{Type: "tool-approval-request", ApprovalID: ev.Approval.ID, ToolCallID: ev.Approval.ToolCallID}, src)
	case chat.KindAbort:
		closeText()
		add(&uiChunk{Type: "abort", Reason: ev.Text}, src)
	case chat.KindOrchestration:
		s := ev.Orchestration
		if s == nil {
			return nil
		}
		add(&uiChunk{Type: "data-orchestration", Data: uiOrchestration{
			ActiveStep: s.ActiveStep, SequenceIndex: s.SequenceIndex, Sequence: nonNil(s.Sequence),
			OfferedTools: nonNil(s.OfferedTools), PreviousStep: s.PreviousStep, Transition: s.Transition,
		}}, src)
	case chat.KindUsage:
		if ev.Usage == nil {
			return nil
		}
		u := uiUsage{Prompt: ev.Usage.Prompt, Completion: ev.Usage.Completion, Total: totalOf(*ev.Usage), Final: ev.Final}
		if su := ev.SessionUsage; su != nil {
			u.Session = &usageTotals{Prompt: su.Prompt, Completion: su.Completion, Total: totalOf(*su)}
		}
		add(&uiChunk{Type: "data-usage", Data: u}, src)
	case chat.KindWarning:
		add(&uiChunk{Type: "data-warning", Data: uiWarning{Message: ev.Text}}, src)
	case chat.KindLimit:
		if l := ev.Limit; l != nil {
			closeText()
			add(&uiChunk{Type: "data-limit", Data: uiLimit{Name: l.Name, Value: l.Value, Message: l.Message}}, src)
		}
	case chat.KindError:
		closeText()
		e := ev.Error
		if e == nil {
			e = &chat.Error{Code: "internal_error", Message: "the turn failed"}
		}
		add(&uiChunk{Type: "error", ErrorText: e.Code + ": " + e.Message}, src)
	case chat.KindDone:
		closeText()
		add(&uiChunk{Type: "finish", FinishReason: uiFinishReason(ev.FinishReason)}, src)
		out = append(out, item{data: doneData})
	}
	return out
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
	case chat.FinishApproval:
		return "tool-calls"
	}
	return "other"
}

func totalOf(u chat.Usage) int64 {
	if u.Total == 0 {
		return u.Prompt + u.Completion
	}
	return u.Total
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// appendJSONString appends s as a JSON string, escaped exactly as
// encoding/json escapes it by default (HTML characters and U+2028/U+2029
// as \u escapes, invalid UTF-8 as U+FFFD), so that a hand-written frame
// is byte for byte what json.Marshal would write.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendText appends the frames of a text delta to out: text-start when
// no text run is open, then text-delta. Both are written by hand, byte for
// byte as json.Marshal of their uiChunk would write them: the delta is the
// most frequent frame by far, and this way is kept shallow (see mapEvent).
func (m *uiMapper) appendText(out []item, text string, src *chat.Event) []item {
	if text == "" {
		return out
	}
	if !m.textOpen {
		m.textRuns++
		m.textID = m.turnID + "-text-" + strconv.Itoa(m.textRuns)
		m.textOpen = true
		start := make([]byte, 0, len(`{"type":"text-start","id":""}`)+len(m.textID)+8)
		start = append(start, `{"type":"text-start","id":`...)
		start = appendJSONString(start, m.textID)
		out = append(out, item{data: append(start, '}')})
	}
	data := make([]byte, 0, len(`{"type":"text-delta","id":"","delta":""}`)+len(m.textID)+len(text)+8)
	data = append(data, `{"type":"text-delta","id":`...)
	data = appendJSONString(data, m.textID)
	data = append(data, `,"delta":`...)
	data = appendJSONString(data, text)
	return append(out, item{data: append(data, '}'), ev: src})
}

// mustJSON marshals values whose types cannot fail to marshal (no channels,
// no funcs; RawMessage inputs are validated before).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("server: marshalling a stream chunk: " + err.Error())
	}
	return b
}
