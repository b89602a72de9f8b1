// Package agui serves the server's agents over AG-UI, the event protocol
// of CopilotKit and other agent front-ends, as a door.Door:
//
//	POST /api/agui/{agent}   body: RunAgentInput; answer: an SSE stream of AG-UI events
//
// A run is a turn of the session its threadId names: the last user message
// of the input is the turn's message (the session keeps the conversation;
// the client's earlier messages are its copy). The turn's chat.Events
// become RUN_STARTED, STEP_STARTED/STEP_FINISHED around each model call,
// TEXT_MESSAGE_START/CONTENT/END, TOOL_CALL_START/ARGS/END and
// TOOL_CALL_RESULT, STATE_SNAPSHOT with the orchestration (active step,
// sequence position, offered tools) as the shared state, and RUN_FINISHED
// or RUN_ERROR. A tool call held for approval ends the run with an
// interrupt outcome, one interrupt per call (its id the approval's, its
// toolCallId the call's); the next run's resume entries answer them
// ({"approved": bool, "reason"} as payload, or cancelled: denied) and the
// turn that carries them out is streamed as that run. A client that goes
// away stops its run's turn; the partial answer is saved. API keys and
// owners apply: threads are in the key's keyspace.
//
// docs/agui.md is the reference.
package agui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
)

// Edge serves AG-UI; New makes it.
type Edge struct{ rt *turns.Runtime }

// New returns the door, for server.Config.Doors.
func New() *Edge { return &Edge{} }

// Routes implements door.Door.
func (e *Edge) Routes(rt *turns.Runtime) []door.Route {
	e.rt = rt
	return []door.Route{{Method: http.MethodPost, Path: "/api/agui/:agent", Handler: http.HandlerFunc(e.run)}}
}

// RunAgentInput is the body of a run (the fields this server reads).
type RunAgentInput struct {
	ThreadID string        `json:"threadId"`
	RunID    string        `json:"runId"`
	Messages []Message     `json:"messages"`
	Resume   []ResumeEntry `json:"resume,omitempty"`
}

// Message is a message of the input; only user messages' text is read.
type Message struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ResumeEntry answers one interrupt of the previous run.
type ResumeEntry struct {
	InterruptID string `json:"interruptId"`
	// Status is "resolved" or "cancelled".
	Status  string          `json:"status"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// text is a user message's text: a string, or its text parts.
func (m Message) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var out []string
	for _, p := range parts {
		if p.Type == "text" && p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n\n")
}

// badRequest answers an input that cannot start a run, before the stream.
func badRequest(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": fmt.Sprintf(format, args...)}})
}

// answers maps resume entries to approval answers.
func answers(resume []ResumeEntry) ([]agent.ApprovalAnswer, error) {
	out := make([]agent.ApprovalAnswer, len(resume))
	for i, r := range resume {
		if r.InterruptID == "" {
			return nil, fmt.Errorf("resume[%d].interruptId is required", i)
		}
		a := agent.ApprovalAnswer{ID: r.InterruptID}
		switch r.Status {
		case "cancelled":
			a.Reason = "the user cancelled the request"
		case "resolved":
			var p struct {
				Approved *bool  `json:"approved"`
				Reason   string `json:"reason"`
			}
			if err := json.Unmarshal(r.Payload, &p); err != nil || p.Approved == nil {
				return nil, fmt.Errorf(`resume[%d].payload must be {"approved": true|false, "reason": "..."}`, i)
			}
			a.Approved, a.Reason = *p.Approved, p.Reason
		default:
			return nil, fmt.Errorf(`resume[%d].status must be "resolved" or "cancelled", not %q`, i, r.Status)
		}
		out[i] = a
	}
	return out, nil
}

// inputError is an input that cannot start a run: a code and a message.
type inputError struct{ code, msg string }

// parseInput reads a run's body: the input, and either the user's text or
// the answers its resume entries carry.
func parseInput(data []byte) (in *RunAgentInput, text string, list []agent.ApprovalAnswer, e *inputError) {
	in = new(RunAgentInput)
	if err := json.Unmarshal(data, in); err != nil {
		return nil, "", nil, &inputError{"invalid_json", "the body is not a RunAgentInput: " + err.Error()}
	}
	switch {
	case !session.ValidID(in.ThreadID):
		return nil, "", nil, &inputError{"invalid_thread_id", "threadId is the session: want 8 to 128 letters, digits, '-' or '_'"}
	case in.RunID == "" || len(in.RunID) > 256:
		return nil, "", nil, &inputError{"invalid_request", "runId is required (at most 256 bytes)"}
	}
	if len(in.Resume) > 0 {
		list, err := answers(in.Resume)
		if err != nil {
			return nil, "", nil, &inputError{"invalid_resume", err.Error()}
		}
		return in, "", list, nil
	}
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == "user" {
			text = in.Messages[i].text()
			break
		}
	}
	if strings.TrimSpace(text) == "" {
		return nil, "", nil, &inputError{"invalid_message", "messages must end with a user message that has text (or resume answers the previous run's interrupts)"}
	}
	return in, text, nil, nil
}

func (e *Edge) run(w http.ResponseWriter, r *http.Request) {
	agentID := r.PathValue("agent")
	if _, ok := e.rt.Agents().Get(agentID); !ok {
		badRequest(w, http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", agentID)
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			badRequest(w, http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over the limit of %d bytes", mbe.Limit)
		}
		return
	}
	in, text, list, perr := parseInput(data)
	if perr != nil {
		badRequest(w, http.StatusBadRequest, perr.code, "%s", perr.msg)
		return
	}
	owner := door.Owner(r)
	var turn *turns.Turn
	if list != nil {
		turn, err = e.rt.Start(r.Context(), turns.Input{Input: agent.Input{Answers: list, Owner: owner}, Agent: agentID, Session: in.ThreadID})
	} else {
		turn, err = e.rt.Start(r.Context(), turns.Input{Input: agent.Input{Text: text, Owner: owner}, Agent: agentID, Session: in.ThreadID})
	}
	if err != nil {
		p := turns.Describe(err)
		badRequest(w, p.Status, p.Code, "%s", p.Message)
		return
	}
	e.stream(w, r, turn, in)
}

// event is one AG-UI event; the fields of its type are set.
type event map[string]any

// mapper turns a run's chat.Events into AG-UI events: the one conversion
// of this edge. It keeps which message, tool calls and step are open.
type mapper struct {
	threadID, runID string
	textID          string // the open text message ("": none)
	step            string // the open step ("": none)
	steps           int
	started         map[string]bool // tool calls whose START went out
	interrupts      []map[string]any
	failure         *chat.Error
}

func newID() string { return session.NewID() }

func (m *mapper) closeText(out []event) []event {
	if m.textID != "" {
		out = append(out, event{"type": "TEXT_MESSAGE_END", "messageId": m.textID})
		m.textID = ""
	}
	return out
}

func (m *mapper) toolCall(out []event, tc *chat.ToolCall) []event {
	if m.started[tc.ID] {
		return out
	}
	m.started[tc.ID] = true
	args := string(tc.Arguments)
	if args == "" {
		args = "{}"
	}
	return append(out,
		event{"type": "TOOL_CALL_START", "toolCallId": tc.ID, "toolCallName": tc.Name},
		event{"type": "TOOL_CALL_ARGS", "toolCallId": tc.ID, "delta": args},
		event{"type": "TOOL_CALL_END", "toolCallId": tc.ID})
}

var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approved": map[string]any{"type": "boolean", "description": "let the call run"},
		"reason":   map[string]any{"type": "string", "description": "told to the model with a denial"},
	},
	"required": []string{"approved"},
}

func (m *mapper) add(ev chat.Event) []event {
	var out []event
	switch ev.Kind {
	case chat.KindStepStart:
		out = m.closeText(out)
		m.steps++
		m.step = "model call " + strconv.Itoa(m.steps)
		out = append(out, event{"type": "STEP_STARTED", "stepName": m.step})
	case chat.KindStepFinish:
		out = m.closeStep(m.closeText(out))
	case chat.KindTextDelta:
		if ev.Text == "" {
			return nil
		}
		if m.textID == "" {
			m.textID = newID()
			out = append(out, event{"type": "TEXT_MESSAGE_START", "messageId": m.textID, "role": "assistant"})
		}
		out = append(out, event{"type": "TEXT_MESSAGE_CONTENT", "messageId": m.textID, "delta": ev.Text})
	case chat.KindToolCall:
		out = m.toolCall(m.closeText(out), ev.ToolCall)
	case chat.KindToolResult:
		out = m.closeText(out)
		out = append(out, event{"type": "TOOL_CALL_RESULT", "messageId": newID(), "toolCallId": ev.ToolResult.CallID, "content": ev.ToolResult.Content, "role": "tool"})
	case chat.KindOrchestration:
		out = append(out, event{"type": "STATE_SNAPSHOT", "snapshot": map[string]any{"orchestration": ev.Orchestration}})
	case chat.KindApproval:
		out = m.toolCall(m.closeText(out), ev.ToolCall)
		m.interrupts = append(m.interrupts, map[string]any{
			"id": ev.Approval.ID, "reason": "tool_approval", "toolCallId": ev.ToolCall.ID,
			"message":        fmt.Sprintf("The agent wants to call %s with %s. Approve it?", ev.ToolCall.Name, ev.ToolCall.Arguments),
			"responseSchema": approvalSchema,
		})
	case chat.KindWarning:
		out = append(out, event{"type": "CUSTOM", "name": "agentdock.warning", "value": ev.Text})
	case chat.KindCompaction:
		if s := ev.Compaction.Summary.Summary; s != nil {
			out = append(out, event{"type": "CUSTOM", "name": "agentdock.compaction", "value": map[string]int{
				"from": s.From, "through": s.Through, "kept": s.Kept, "inputBefore": ev.Compaction.InputBefore, "inputAfter": ev.Compaction.InputAfter}})
		}
	case chat.KindLimit:
		out = append(out, event{"type": "CUSTOM", "name": "agentdock.limit", "value": ev.Limit})
	case chat.KindRestart:
		// Another server took the turn over: the text of the steps from
		// Restart.Step on follows again.
		out = append(m.closeText(out), event{"type": "CUSTOM", "name": "agentdock.restart", "value": ev.Restart})
	case chat.KindError:
		m.failure = ev.Error
	case chat.KindDone:
		return m.done(ev.FinishReason)
	}
	return out
}

func (m *mapper) closeStep(out []event) []event {
	if m.step != "" {
		out = append(out, event{"type": "STEP_FINISHED", "stepName": m.step})
		m.step = ""
	}
	return out
}

// done closes what is open and ends the run.
func (m *mapper) done(reason string) []event {
	out := m.closeStep(m.closeText(nil))
	switch {
	case m.failure != nil || reason == chat.FinishError:
		e := m.failure
		if e == nil {
			e = &chat.Error{Code: "internal_error", Message: "the turn failed"}
		}
		return append(out, event{"type": "RUN_ERROR", "message": e.Message, "code": e.Code})
	case reason == chat.FinishApproval && len(m.interrupts) > 0:
		return append(out, event{"type": "RUN_FINISHED", "threadId": m.threadID, "runId": m.runID,
			"outcome": map[string]any{"type": "interrupt", "interrupts": m.interrupts}})
	case reason == chat.FinishStopped:
		return append(out, event{"type": "RUN_FINISHED", "threadId": m.threadID, "runId": m.runID, "outcome": map[string]any{"type": "cancelled"}})
	}
	return append(out, event{"type": "RUN_FINISHED", "threadId": m.threadID, "runId": m.runID,
		"outcome": map[string]any{"type": "success"}, "result": map[string]any{"finishReason": reason}})
}

// stream writes the run's events until the turn ends; a client that goes
// away stops the turn.
func (e *Edge) stream(w http.ResponseWriter, r *http.Request, turn *turns.Turn, in *RunAgentInput) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Session-Id", in.ThreadID)
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func(evs ...event) bool {
		buf.Reset()
		for _, ev := range evs {
			ev["timestamp"] = time.Now().UnixMilli()
			data, _ := json.Marshal(ev)
			buf.WriteString("data: ")
			buf.Write(data)
			buf.WriteString("\n\n")
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	m := &mapper{threadID: in.ThreadID, runID: in.RunID, started: map[string]bool{}}
	if !send(event{"type": "RUN_STARTED", "threadId": in.ThreadID, "runId": in.RunID}) {
		turn.Stop(context.WithoutCancel(r.Context()))
		return
	}
	for ev, err := range turn.Events(r.Context(), 0) {
		if err != nil {
			if r.Context().Err() != nil {
				turn.Stop(context.WithoutCancel(r.Context())) // nobody reads this run now
				return
			}
			p := turns.Describe(err)
			send(append(m.closeStep(m.closeText(nil)), event{"type": "RUN_ERROR", "message": p.Message, "code": p.Code})...)
			return
		}
		if out := m.add(ev); len(out) > 0 && !send(out...) {
			turn.Stop(context.WithoutCancel(r.Context()))
			return
		}
	}
}
