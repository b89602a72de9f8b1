// Package agui serves the server's agents over AG-UI, the event protocol
// of CopilotKit and other agent front-ends, as a door.Door:
//
//	POST /api/agui/{agent}   body: RunAgentInput; answer: an SSE stream of AG-UI events
//
// A run is a turn of the session its threadId names: the last user message
// of the input is the turn's message, its image and document parts the
// turn's attachments (the session keeps the conversation; the client's
// earlier messages are its copy). The input's tools are the turn's client
// tools: a call of one ends the run, and the next run's tool messages for
// those calls carry the results. An Idempotency-Key header makes a retry
// get the run its first attempt started, and the agent's options.busy
// decides what a run for a busy thread gets, as on every door. The
// turn's chat.Events
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
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
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
	// Tools are the front-end's tools: the client tools of the turn.
	Tools []Tool `json:"tools,omitempty"`
	// ForwardedProps may carry {"busy": "reject" | "enqueue" |
	// "interrupt"}.
	ForwardedProps json.RawMessage `json:"forwardedProps,omitempty"`
}

// Message is a message of the input: a user message's text and media, an
// assistant message's tool calls, a tool message's result.
type Message struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and Error are a tool message's.
	ToolCallID string `json:"toolCallId,omitempty"`
	Error      string `json:"error,omitempty"`
}

// ToolCall is a call of an assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// Tool is a front-end tool: the client runs it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ResumeEntry answers one interrupt of the previous run.
type ResumeEntry struct {
	InterruptID string `json:"interruptId"`
	// Status is "resolved" or "cancelled".
	Status  string          `json:"status"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// part is a content part: AG-UI 1.0's text, image, audio, video and
// document parts (a media part's source is inline data, a URL or a file
// ID), and the binary part of the versions before it.
type part struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type     string `json:"type"`
		Value    string `json:"value"`
		MimeType string `json:"mimeType"`
	} `json:"source"`
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
	URL      string `json:"url"`
	Filename string `json:"filename"`
}

// content reads a message's content: a string, or parts whose text is
// joined and whose images and documents are attachments (by the rules of
// every door, wire.Attachment); at names the message in errors.
func content(raw json.RawMessage, at string) (string, []chat.Attachment, *turns.Problem) {
	var s string
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []part
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil, turns.ParamProblem(http.StatusBadRequest, "invalid_message", at, "%s: content must be a string or a list of parts", at)
	}
	var (
		texts []string
		atts  []chat.Attachment
	)
	for i, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, i)
		var fp wire.FilePart
		switch p.Type {
		case "text":
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
			continue
		case "image", "document":
			if p.Source == nil {
				return "", nil, turns.ParamProblem(http.StatusBadRequest, "invalid_message", pat, "%s: a %s part needs its source", pat, p.Type)
			}
			switch p.Source.Type {
			case "data":
				fp = wire.FilePart{Raw: p.Source.Value, MediaType: p.Source.MimeType}
			case "url":
				fp = wire.FilePart{URL: p.Source.Value, MediaType: p.Source.MimeType}
			default:
				return "", nil, turns.ParamProblem(http.StatusBadRequest, "unsupported_attachment", pat, "%s: a source of type %q is not taken (there is no file store here); send the content inline (data) or by https URL (url)", pat, p.Source.Type)
			}
		case "binary":
			fp = wire.FilePart{Raw: p.Data, URL: p.URL, MediaType: p.MimeType, Filename: p.Filename}
		case "audio", "video":
			return "", nil, turns.ParamProblem(http.StatusBadRequest, "unsupported_attachment", pat, "%s: %s parts are not taken; the agents' models read text, images and documents", pat, p.Type)
		default:
			return "", nil, turns.ParamProblem(http.StatusBadRequest, "invalid_message", pat, "%s: unknown part type %q", pat, p.Type)
		}
		a, pe := wire.Attachment(fp, pat)
		if pe != nil {
			return "", nil, door.BodyProblem(pe)
		}
		atts = append(atts, a)
	}
	return strings.Join(texts, "\n\n"), atts, nil
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

// clientTools reads the front-end tools.
func clientTools(tools []Tool) ([]chat.ToolSpec, *turns.Problem) {
	var out []chat.ToolSpec
	for i, t := range tools {
		params := t.Parameters
		var obj map[string]json.RawMessage
		switch {
		case len(params) == 0 || string(params) == "null":
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		case json.Unmarshal(params, &obj) != nil:
			return nil, turns.ParamProblem(http.StatusBadRequest, "invalid_request", fmt.Sprintf("tools[%d].parameters", i), "tools[%d].parameters must be a JSON Schema object", i)
		}
		out = append(out, chat.ToolSpec{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out, nil
}

// results are the front-end tools' results the input brings: the tool
// messages after its last user message that answer calls of the input's
// tools (the client's copy of the thread holds the results of the agent's
// own tools too, which the session has).
func results(in *RunAgentInput) ([]chat.ToolResult, *turns.Problem) {
	client := map[string]bool{}
	for _, t := range in.Tools {
		client[t.Name] = true
	}
	from := 0
	for i, m := range in.Messages {
		if m.Role == "user" {
			from = i + 1
		}
	}
	calls := map[string]bool{}
	var out []chat.ToolResult
	for i, m := range in.Messages[from:] {
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				if client[c.Function.Name] {
					calls[c.ID] = true
				}
			}
		case "tool":
			if !calls[m.ToolCallID] {
				continue
			}
			at := fmt.Sprintf("messages[%d].content", from+i)
			text, _, p := content(m.Content, at)
			if p != nil {
				return nil, p
			}
			r := chat.ToolResult{CallID: m.ToolCallID, Content: text}
			if m.Error != "" {
				r.IsError, r.Content = true, strings.TrimSpace(text+"\n"+m.Error)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// parse reads a run's body: the input, and the agent's input it brings
// (the user's message, the answers its resume entries carry, or the
// results of the front-end tools' calls, with those tools).
func parse(data []byte) (*RunAgentInput, agent.Input, *turns.Problem) {
	var ai agent.Input
	in := new(RunAgentInput)
	if err := json.Unmarshal(data, in); err != nil {
		return nil, ai, turns.NewProblem(http.StatusBadRequest, "invalid_json", "the body is not a RunAgentInput: %s", err.Error())
	}
	switch {
	case !session.ValidID(in.ThreadID):
		return nil, ai, turns.ParamProblem(http.StatusBadRequest, "invalid_thread_id", "threadId", "threadId is the session: want 8 to 128 letters, digits, '-' or '_'")
	case in.RunID == "" || len(in.RunID) > 256:
		return nil, ai, turns.ParamProblem(http.StatusBadRequest, "invalid_request", "runId", "runId is required (at most 256 bytes)")
	}
	if len(in.Resume) > 0 {
		list, err := answers(in.Resume)
		if err != nil {
			return nil, ai, turns.ParamProblem(http.StatusBadRequest, "invalid_resume", "resume", "%s", err.Error())
		}
		ai.Answers = list
		return in, ai, nil
	}
	var p *turns.Problem
	if ai.ClientTools, p = clientTools(in.Tools); p != nil {
		return nil, ai, p
	}
	last := len(in.Messages) - 1
	if last >= 0 && in.Messages[last].Role == "user" {
		if ai.Text, ai.Attachments, p = content(in.Messages[last].Content, fmt.Sprintf("messages[%d].content", last)); p != nil {
			return nil, ai, p
		}
		if strings.TrimSpace(ai.Text) == "" && len(ai.Attachments) == 0 {
			return nil, ai, turns.ParamProblem(http.StatusBadRequest, "invalid_message", "messages", "the last user message has neither text nor an image or document")
		}
		return in, ai, nil
	}
	if ai.Results, p = results(in); p != nil {
		return nil, ai, p
	}
	if len(ai.Results) == 0 {
		return nil, ai, turns.ParamProblem(http.StatusBadRequest, "invalid_message", "messages", "messages must end with a user message that has text (or an image or document), or with the results of the calls of the input's tools (or resume answers the previous run's interrupts)")
	}
	return in, ai, nil
}

// busyOf is the busy policy a run asks for: forwardedProps.busy, else
// the X-Busy header; "" takes the agent's options.busy.
func busyOf(r *http.Request, in *RunAgentInput) string {
	var fp struct {
		Busy string `json:"busy"`
	}
	if json.Unmarshal(in.ForwardedProps, &fp) == nil && fp.Busy != "" {
		return fp.Busy
	}
	return r.Header.Get("X-Busy")
}

func (e *Edge) run(w http.ResponseWriter, r *http.Request) {
	agentID := r.PathValue("agent")
	if _, ok := e.rt.Agents().Get(agentID); !ok {
		door.WriteProblem(w, r, turns.NewProblem(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", agentID))
		return
	}
	data, p := door.ReadBody(r)
	if p != nil {
		door.WriteProblem(w, r, p)
		return
	}
	in, ai, p := parse(data)
	if p != nil {
		door.WriteProblem(w, r, p)
		return
	}
	ai.Owner = door.Owner(r)
	if ai.Key, p = door.IdempotencyKey(r); p != nil {
		door.WriteProblem(w, r, p)
		return
	}
	turn, err := e.rt.Start(r.Context(), turns.Input{Input: ai, Agent: agentID, Session: in.ThreadID, Busy: busyOf(r, in)})
	if err != nil {
		door.StartError(w, r, slog.Default(), agentID, err)
		return
	}
	if turn.Replayed() {
		// A retry (the same Idempotency-Key) gets the run its request
		// started, from its first event.
		w.Header().Set("Idempotent-Replayed", "true")
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
	case chat.KindToolCall, chat.KindClientCall:
		// A client call is a front-end tool's: the run ends after it
		// (finishReason tool-calls), and the client's next run brings
		// its result as a tool message.
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
	s := door.Open(w)
	s.Header().Set("X-Session-Id", in.ThreadID)
	// The turn is the session's like any: GET /api/sessions/{threadId}/
	// turns/{turnId} reads its status, /stream its events.
	s.Header().Set("X-Turn-Id", turn.ID())
	send := func(evs ...event) bool {
		vs := make([]any, len(evs))
		for i, ev := range evs {
			ev["timestamp"] = time.Now().UnixMilli()
			vs[i] = ev
		}
		return s.Send(vs...)
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
