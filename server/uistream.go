package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/agentdock-go/agentdock/chat"
)

// frame is one SSE frame of a turn's stream, the one form a turn's event
// takes between the turn and the socket: its sequence number (the part
// after the colon of its SSE id, given by the turn's log), its data line,
// made once for every reader, and the event it carries when the turn keeps
// them (turn.keepEvents).
type frame struct {
	seq  int64
	data []byte
	ev   *chat.Event
}

// A turn's frames are made from its events by a frameEncoder, once, for
// every reader: the AI SDK's UI message stream (uiMapper), or an edge's
// events (edgeFrames).
type frameEncoder interface {
	// start is the turn's first frame.
	start() frame
	// mapEvent returns the frames of ev, valid until the next call.
	mapEvent(ev chat.Event) []frame
}

// edgeFrames are the frames of a turn an edge started (Server.Start): the
// events in their own JSON encoding after a first frame that says so
// (edgeStart), which a replica that did not run the turn decodes from the
// shared turn log (Server.Follow).
type edgeFrames struct{ out [1]frame }

// edgeStart is the first frame of a turn an edge started.
var edgeStart = []byte(`{"type":"agentdock-events"}`)

func (*edgeFrames) start() frame { return frame{data: edgeStart} }

func (m *edgeFrames) mapEvent(ev chat.Event) []frame {
	e := ev
	data, _ := json.Marshal(&e) // chat.Event always encodes
	m.out[0] = frame{data: data, ev: &e}
	return m.out[:]
}

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

type uiUsage struct {
	usageTotals
	Final   bool         `json:"final"`
	Session *usageTotals `json:"session,omitempty"`
}

// usageTotals is a token count as clients read it: prompt counts the
// cached input too, cacheRead and cacheWrite the parts of it the
// provider's prompt cache served and stored (absent when none).
type usageTotals struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
	CacheRead  int64 `json:"cacheRead,omitempty"`
	CacheWrite int64 `json:"cacheWrite,omitempty"`
	// Regenerated, in a session's usage, is the part of it spent on
	// answers that were dropped and given again (absent when none).
	Regenerated *usageTotals `json:"regenerated,omitempty"`
	// Summarizer, in a session's usage, is what the summaries of its
	// history cost, apart from the agent's model calls above (absent when
	// none).
	Summarizer *usageTotals `json:"summarizer,omitempty"`
}

func totalsOf(u chat.Usage) usageTotals {
	return usageTotals{Prompt: u.Prompt, Completion: u.Completion, Total: totalOf(u), CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}
}

// uiCompaction is a chat.Compaction on the wire: the turns a summary
// replaces for the model from now on, the summary and what it saved.
type uiCompaction struct {
	From        int         `json:"from"`
	Through     int         `json:"through"`
	Kept        int         `json:"kept"`
	Tokens      int         `json:"tokens"`
	By          string      `json:"by,omitempty"`
	InputBefore int         `json:"inputBefore"`
	InputAfter  int         `json:"inputAfter"`
	Usage       usageTotals `json:"usage"`
	Summary     string      `json:"summary"`
}

func compactionOf(c *chat.Compaction) *uiCompaction {
	out := &uiCompaction{Summary: c.Summary.Content, InputBefore: c.InputBefore, InputAfter: c.InputAfter}
	if s := c.Summary.Summary; s != nil {
		out.From, out.Through, out.Kept, out.Tokens, out.By, out.Usage = s.From, s.Through, s.Kept, s.Tokens, s.By, totalsOf(s.Usage)
	}
	return out
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

// uiMapper turns the chat.Events of one turn into the frames of its UI
// message stream. It keeps the state the mapping needs: whether a text run
// is open and its ID.
type uiMapper struct {
	turnID string
	// messageID is the start chunk's messageId: the turn's ID, or the
	// client's assistant message that a turn answering approvals goes on.
	messageID string
	textOpen  bool
	textRuns  int
	textID    string
	// textPrefix starts the IDs of the text parts, the turn's ID unless
	// the turn was taken over (continueAfter).
	textPrefix string
	// keepEvents: frames carry a copy of their event (see turn.keepEvents);
	// without it the event is not copied to the heap for every frame.
	keepEvents bool
	// out is the frames of the latest mapEvent, reused by the next.
	out []frame
	// shown are the parts a turn taken over showed (continueAfter): the
	// restart drops those after its Since.
	shown []shownPart
}

// shownPart is a text part or a tool call a turn's stream showed, and the
// frame that began it.
type shownPart struct {
	seq        int64
	text, call string
}

// continueAfter prepares the mapper of a turn taken over to go on after
// frames, those the shared log had: its text parts are numbered after the
// ones they show, and its restart chunk names the parts they show after
// frame since, which the client drops.
func (m *uiMapper) continueAfter(frames []frame, since int64) {
	restarts := 0
	for _, f := range frames {
		var c uiChunk
		if isRestart(f.data) {
			restarts++
		}
		if json.Unmarshal(f.data, &c) != nil {
			continue
		}
		switch c.Type {
		case "text-start":
			m.textRuns++
			m.shown = append(m.shown, shownPart{seq: f.seq, text: c.ID})
		case "tool-input-start", "tool-input-available":
			m.shown = append(m.shown, shownPart{seq: f.seq, call: c.ToolCallID})
		}
	}
	m.shown = slices.DeleteFunc(m.shown, func(p shownPart) bool { return p.seq <= since })
	// The text parts of this takeover are its own.
	m.textPrefix = m.turnID + "-r" + strconv.Itoa(restarts+1)
}

func (m *uiMapper) start() frame {
	id := m.messageID
	if id == "" {
		id = m.turnID
	}
	return frame{data: mustJSON(uiChunk{Type: "start", MessageID: id})}
}

// mapEvent returns the frames of ev, valid until the next call. A frame
// that only frames others (text-start, tool-input-start) carries no event.
func (m *uiMapper) mapEvent(ev chat.Event) []frame {
	out := m.out[:0]
	defer func() { m.out = out[:0] }()
	add := func(c *uiChunk, src *chat.Event) { out = append(out, frame{data: mustJSON(c), ev: src}) }
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
		if ev.Text == "" {
			return nil
		}
		if !m.textOpen {
			m.textRuns++
			prefix := m.textPrefix
			if prefix == "" {
				prefix = m.turnID
			}
			m.textID = prefix + "-text-" + strconv.Itoa(m.textRuns)
			m.textOpen = true
			add(&uiChunk{Type: "text-start", ID: m.textID}, nil)
		}
		add(&uiChunk{Type: "text-delta", ID: m.textID, Delta: ev.Text}, src)
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
	case chat.KindToolProgress:
		if p := ev.Progress; p != nil && p.Event != nil {
			// The asked agent's work, nested under the call; transient,
			// since the call's output is its answer.
			closeText()
			add(&uiChunk{Type: "data-agent", Data: uiAgent{ToolCallID: p.CallID, ToolName: p.Name, Agent: p.Agent, Event: p.Event}, Transient: true}, src)
		}
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
			OfferedTools: nonNil(s.OfferedTools), PreviousStep: s.PreviousStep, Transition: s.Transition, Blocked: s.Blocked,
		}}, src)
	case chat.KindUsage:
		if ev.Usage == nil {
			return nil
		}
		u := uiUsage{usageTotals: totalsOf(*ev.Usage), Final: ev.Final}
		if su := ev.SessionUsage; su != nil {
			st := totalsOf(*su)
			u.Session = &st
		}
		add(&uiChunk{Type: "data-usage", Data: u}, src)
	case chat.KindWarning:
		add(&uiChunk{Type: "data-warning", Data: uiWarning{Message: ev.Text}}, src)
	case chat.KindCompaction:
		if ev.Compaction != nil {
			add(&uiChunk{Type: "data-compaction", Data: compactionOf(ev.Compaction)}, src)
		}
	case chat.KindRestart:
		if r := ev.Restart; r != nil {
			// The parts shown after Since go; what follows shows the step
			// again.
			m.textOpen = false
			d := uiRestart{Step: r.Step, Since: r.Since, TextIDs: []string{}, ToolCallIDs: []string{}, Message: r.Message}
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
			add(&uiChunk{Type: "data-restart", Data: d}, src)
		}
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
		out = append(out, frame{data: doneData})
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
	case chat.FinishApproval, chat.FinishToolCalls:
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

// isRestart reports whether a frame is a turn's restart (a takeover's
// first frame): a data-restart chunk, or a restart event for an edge.
func isRestart(data []byte) bool {
	return bytes.HasPrefix(data, []byte(`{"type":"data-restart"`)) || bytes.HasPrefix(data, []byte(`{"type":"restart"`))
}
