package openai

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/turns"
)

// The OpenAI-compatible endpoint. Only standard chat.completion and
// chat.completion.chunk objects go out; the agent's tool activity,
// orchestration and usage ride in an extension field "agentdock" inside the
// objects, which OpenAI clients ignore.

// oaUsage is OpenAI's usage: prompt_tokens counts the cached input too,
// and prompt_tokens_details.cached_tokens says how much of it was cached.
type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func oaUsageOf(u chat.Usage) oaUsage {
	ou := oaUsage{PromptTokens: u.Prompt, CompletionTokens: u.Completion, TotalTokens: wire.TotalOf(u)}
	ou.PromptTokensDetails.CachedTokens = u.CacheRead
	return ou
}

type oaCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	SystemFingerprint string      `json:"system_fingerprint"`
	Choices           []oaChoice  `json:"choices"`
	Usage             oaUsage     `json:"usage"`
	AgentDock         *oaExtended `json:"agentdock,omitempty"`
}

type oaChoice struct {
	Index        int             `json:"index"`
	Message      oaReplyMessage  `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type oaReplyMessage struct {
	Role      string       `json:"role"`
	Content   *string      `json:"content"`
	Refusal   *string      `json:"refusal"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaToolCall is a call of a client tool, for the client to run.
type oaToolCall struct {
	// Index is a streamed call's position among the answer's calls.
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func oaToolCallOf(call *chat.ToolCall) oaToolCall {
	tc := oaToolCall{ID: call.ID, Type: "function"}
	tc.Function.Name, tc.Function.Arguments = call.Name, argumentsText(call.Arguments)
	return tc
}

// argumentsText is a call's arguments as OpenAI sends them: a string of
// JSON, "{}" when there are none.
func argumentsText(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	return string(args)
}

type oaChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []oaChunkChoice `json:"choices"`
	Usage             *oaUsage        `json:"usage,omitempty"`
	AgentDock         *oaExtended     `json:"agentdock,omitempty"`
}

type oaChunkChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type oaDelta struct {
	Role      string       `json:"role,omitempty"`
	Content   *string      `json:"content,omitempty"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaExtended is the "agentdock" extension field.
type oaExtended struct {
	SessionID     string               `json:"sessionId,omitempty"`
	TurnID        string               `json:"turnId,omitempty"`
	ToolCall      *chat.ToolCall       `json:"toolCall,omitempty"`
	ToolResult    *chat.ToolResult     `json:"toolResult,omitempty"`
	Orchestration *chat.Snapshot       `json:"orchestration,omitempty"`
	Usage         *wire.Usage          `json:"usage,omitempty"`
	Warning       string               `json:"warning,omitempty"`
	Compaction    *wire.CompactionInfo `json:"compaction,omitempty"`
	Limit         *chat.Limit          `json:"limit,omitempty"`
	Error         *chat.Error          `json:"error,omitempty"`
	// Approval: the call of toolCall waits for a person's approval
	// (answer it with POST /api/chat/:agentId, docs/api.md).
	Approval     *chat.Approval `json:"approval,omitempty"`
	FinishReason string         `json:"finishReason,omitempty"`
	// ToolCalls and ToolResults list a whole turn's tool activity in a
	// non-streaming answer.
	ToolCalls   []chat.ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []chat.ToolResult `json:"toolResults,omitempty"`
}

// openAISession picks the session: the x-session-id header, else the body's
// user when it is a valid session ID, else a session derived from user (a
// hash, so that any user string keeps its conversation), else a new one.
func openAISession(r *http.Request, user, owner string) (string, *turns.Problem) {
	if h := r.Header.Get("X-Session-Id"); h != "" {
		if !session.ValidID(h) {
			return "", turns.ErrBadSessionID("the x-session-id header")
		}
		return h, nil
	}
	if user == "" {
		return session.NewID(), nil
	}
	if session.ValidID(user) {
		return user, nil
	}
	sum := sha256.Sum256([]byte(owner + "\x00" + user))
	return "user-" + hex.EncodeToString(sum[:16]), nil
}

func (d *Door) listModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := d.rt.Agents().List()
	out := make([]model, 0, len(list))
	for _, n := range list {
		out = append(out, model{ID: n.ID(), Object: "model", Created: d.cfg.Started.Unix(), OwnedBy: "agentdock"})
	}
	door.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": out})
}

func (d *Door) chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := door.ParseBody(w, r, wire.ParseChatCompletion)
	if !ok {
		return
	}
	node, e := d.openAIModel(body.Model)
	if e != nil {
		door.WriteProblem(w, r, e)
		return
	}
	cr, e := chatClient(body)
	if e != nil {
		door.WriteProblem(w, r, e)
		return
	}
	owner := door.Owner(r)
	var (
		sid, text string
		reqKey    string // the Idempotency-Key, with a session
		in        = turns.Input{Input: cr.input(), Agent: node.ID(), DefaultBusy: template.BusyReject}
		stateless bool
		goOn      bool   // no new message: the turn goes on from the results
		at        string // the new message's field, for errors
	)
	in.Owner = owner
	if r.Header.Get("X-Session-Id") != "" || body.User != "" {
		// A session keeps the conversation: the request adds its last
		// user message, or the results of the client's tools' calls, and
		// the earlier messages are the client's copy.
		msg, ok, results, pe := body.Turn()
		if pe != nil {
			door.WriteProblem(w, r, door.BodyProblem(pe))
			return
		}
		if sid, e = openAISession(r, body.User, owner); e != nil {
			door.WriteProblem(w, r, e)
			return
		}
		if e := checkAttachments(node, []chat.Message{msg}, []int{len(body.Messages) - 1}, "messages"); e != nil {
			door.WriteProblem(w, r, e)
			return
		}
		if results != nil {
			in.Results = results
		}
		if reqKey, e = door.IdempotencyKey(r); e != nil {
			door.WriteProblem(w, r, e)
			return
		}
		in.Key, in.Attachments = reqKey, msg.Attachments
		text, goOn, at = msg.Content, !ok, fmt.Sprintf("messages[%d].content", len(body.Messages)-1)
	} else {
		// No session: the messages are the conversation.
		msgs, index, pe := body.Conversation()
		if pe != nil {
			door.WriteProblem(w, r, door.BodyProblem(pe))
			return
		}
		last := len(msgs) - 1
		if last < 0 || msgs[last].Role != chat.RoleUser && msgs[last].Role != chat.RoleTool {
			door.WriteProblem(w, r, turns.ParamProblem(http.StatusBadRequest, "invalid_message", "messages", `without a session (no user, no x-session-id) the messages are the conversation, and it must end with a message with role "user", or with the results ("tool" messages) of the calls of the client's tools`))
			return
		}
		history := msgs[:last]
		goOn = msgs[last].Role == chat.RoleTool
		if goOn {
			history = msgs
		}
		if e := checkHistory(node, history, index, "messages", cr.names()); e != nil {
			door.WriteProblem(w, r, e)
			return
		}
		if e := checkAttachments(node, msgs, index, "messages"); e != nil {
			door.WriteProblem(w, r, e)
			return
		}
		sid, stateless, at = session.NewID(), true, fmt.Sprintf("messages[%d].content", index[last])
		in.Stateless, in.History, in.CallTrail = true, history, true
		if !goOn {
			text = msgs[last].Content
			in.Attachments = msgs[last].Attachments
		}
	}
	in.Session = sid
	if !goOn {
		in.Text = text
	}
	if !stateless {
		in.Busy = r.Header.Get("X-Busy")
	}
	t, err := d.rt.Start(r.Context(), in)
	if err != nil {
		if p := turns.Describe(err); p.Status < 500 {
			err = startErrorAt(p, at, "messages")
		}
		door.StartError(w, r, d.log, node.ID(), err)
		return
	}
	if t.Replayed() {
		// A retry gets the turn its request started: the completion is
		// made again from its events.
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if stateless {
		// Nothing can read a stateless turn but this request: it ends
		// when the client goes away.
		defer t.Cancel(errNoReader)
		sid = ""
	} else {
		w.Header().Set("X-Session-Id", sid)
	}
	w.Header().Set("X-Turn-Id", t.ID())
	if body.Stream {
		d.streamCompletion(w, r, t, body.Model, sid, body.StreamOptions != nil && body.StreamOptions.IncludeUsage)
		return
	}
	d.completion(w, r, t, body.Model, sid)
}

// chatClient reads what a chat completion request brings besides its
// messages.
func chatClient(body *wire.ChatCompletionRequest) (clientRequest, *turns.Problem) {
	tools, pe := body.Tools()
	if pe != nil {
		return clientRequest{}, door.BodyProblem(pe)
	}
	choice, pe := body.Choice()
	if pe != nil {
		return clientRequest{}, door.BodyProblem(pe)
	}
	wf, pe := body.Format()
	if pe != nil {
		return clientRequest{}, door.BodyProblem(pe)
	}
	instructions, _, pe := body.Instructions()
	if pe != nil {
		return clientRequest{}, door.BodyProblem(pe)
	}
	return newClientRequest(tools, choice, wf, "response_format", instructions)
}

// openAIModel finds the agent an OpenAI request names as its model.
func (d *Door) openAIModel(model string) (*agent.Agent, *turns.Problem) {
	if model == "" {
		return nil, turns.ParamProblem(http.StatusBadRequest, "invalid_request", "model", "model is required: an agent ID (GET /v1/models lists them)")
	}
	node, ok := d.rt.Agents().Get(model)
	if !ok {
		return nil, turns.ParamProblem(http.StatusNotFound, "model_not_found", "model", "no agent %q; GET /v1/models lists them", model)
	}
	return node, nil
}

// checkHistory refuses a conversation the agent cannot take, naming the
// message: index maps the history's messages to their position in the
// request's list param.
func checkHistory(node *agent.Agent, history []chat.Message, index []int, param string, client []string) *turns.Problem {
	err := node.CheckHistory(history, client)
	var he *agent.HistoryError
	if !errors.As(err, &he) {
		return nil
	}
	at := fmt.Sprintf("%s[%d]", param, index[he.Index])
	return turns.ParamProblem(http.StatusBadRequest, "invalid_message", at, "%s: %s", at, he.Reason)
}

var errNoReader = &chat.Error{Code: "client_gone", Message: "the client went away, and a turn without a session has no other reader; it was stopped"}

func oaFinish(reason string) string {
	switch reason {
	case chat.FinishLength, chat.FinishMaxSteps, chat.FinishTimeout:
		return "length"
	case chat.FinishToolCalls:
		return "tool_calls"
	case chat.FinishGuardrail:
		return "content_filter"
	}
	return "stop"
}

// completion waits for the turn and answers one chat.completion. The turn
// runs on when the client goes away. sessionID is "" for a stateless turn.
func (d *Door) completion(w http.ResponseWriter, r *http.Request, t *turns.Turn, model, sessionID string) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	var (
		text   strings.Builder
		ext    = &oaExtended{SessionID: sessionID, TurnID: t.ID()}
		usage  chat.Usage
		errEv  *chat.Error
		reason string
		newRun bool
		calls  []oaToolCall
	)
	err := door.Follow(r.Context(), d.rt, t, 0, d.cfg.Heartbeat, func(ev chat.Event) {
		switch ev.Kind {
		case chat.KindTextDelta:
			if newRun && text.Len() > 0 {
				text.WriteString("\n\n")
			}
			newRun = false
			text.WriteString(ev.Text)
		case chat.KindToolCall, chat.KindStepFinish:
			newRun = true
			if ev.ToolCall != nil {
				ext.ToolCalls = append(ext.ToolCalls, *ev.ToolCall)
			}
		case chat.KindClientCall:
			calls = append(calls, oaToolCallOf(ev.ToolCall))
		case chat.KindToolResult:
			ext.ToolResults = append(ext.ToolResults, *ev.ToolResult)
		case chat.KindOrchestration:
			ext.Orchestration = ev.Orchestration
		case chat.KindLimit:
			ext.Limit = ev.Limit
		case chat.KindUsage:
			if ev.Final {
				usage = *ev.Usage
			}
		case chat.KindError:
			errEv = ev.Error
		case chat.KindDone:
			reason = ev.FinishReason
		}
	}, nil)
	if err != nil {
		if ce, ok := err.(*chat.Error); ok {
			errEv = ce
		} else {
			return // the client went away; the turn runs on
		}
	}
	if errEv != nil {
		door.WriteProblem(w, r, turns.Describe(errEv))
		return
	}
	ext.FinishReason = reason
	reply := oaReplyMessage{Role: "assistant", ToolCalls: calls}
	if text.Len() > 0 || len(calls) == 0 {
		reply.Content = ptr(text.String())
	}
	door.WriteJSON(w, http.StatusOK, oaCompletion{
		ID: "chatcmpl-" + t.ID(), Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		SystemFingerprint: "agentdock",
		Choices:           []oaChoice{{Index: 0, Message: reply, FinishReason: oaFinish(reason), Logprobs: json.RawMessage("null")}},
		Usage:             oaUsageOf(usage),
		AgentDock:         ext,
	})
}

// openEventStream starts an SSE response that the OpenAI-compatible
// streams write themselves: no deadline (the http.Server's WriteTimeout
// and ReadTimeout would cut a long stream), the SSE headers, the status.
func openEventStream(w http.ResponseWriter) *http.ResponseController {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return rc
}

// streamCompletion streams the turn as chat.completion.chunk objects.
func (d *Door) streamCompletion(w http.ResponseWriter, r *http.Request, t *turns.Turn, model, sessionID string, includeUsage bool) {
	defer d.cfg.Telemetry.TrackStream(r.Context(), "openai")()
	rc := openEventStream(w)

	id, created := "chatcmpl-"+t.ID(), time.Now().Unix()
	var buf bytes.Buffer
	send := func(v any) {
		buf.Reset()
		buf.WriteString("data: ")
		buf.Write(mustJSON(v))
		buf.WriteString("\n\n")
		_, _ = w.Write(buf.Bytes())
		_ = rc.Flush()
	}
	chunk := func(delta oaDelta, finish *string, ext *oaExtended) oaChunk {
		return oaChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, SystemFingerprint: "agentdock",
			Choices: []oaChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}}, AgentDock: ext}
	}
	empty := ""
	send(chunk(oaDelta{Role: "assistant", Content: &empty}, nil, &oaExtended{SessionID: sessionID, TurnID: t.ID()}))

	var usage chat.Usage
	finished := false
	finish := func(reason string, ext *oaExtended) {
		fr := oaFinish(reason)
		send(chunk(oaDelta{}, &fr, ext))
		if includeUsage {
			send(oaChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, SystemFingerprint: "agentdock",
				Choices: []oaChunkChoice{}, Usage: ptr(oaUsageOf(usage))})
		}
		// Not flushed: the handler returns right after, and net/http
		// writes [DONE] with the response's end in one write, so that a
		// client that stops at [DONE] can keep the connection.
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
		finished = true
	}
	// sendError writes an error object the way OpenAI streams errors; OpenAI
	// clients raise it. The finish chunk and [DONE] follow.
	sendError := func(e *chat.Error) {
		send(door.ProblemBody(&turns.Problem{Status: http.StatusBadGateway, Code: e.Code, Message: e.Message}, true))
	}
	var failed *chat.Error
	clientCalls := 0
	err := door.Follow(r.Context(), d.rt, t, 0, d.cfg.Heartbeat, func(ev chat.Event) {
		switch ev.Kind {
		case chat.KindTextDelta:
			text := ev.Text
			send(chunk(oaDelta{Content: &text}, nil, nil))
		case chat.KindClientCall:
			tc := oaToolCallOf(ev.ToolCall)
			tc.Index = ptr(clientCalls)
			clientCalls++
			send(chunk(oaDelta{ToolCalls: []oaToolCall{tc}}, nil, nil))
		case chat.KindToolCall:
			send(chunk(oaDelta{}, nil, &oaExtended{ToolCall: ev.ToolCall}))
		case chat.KindToolResult:
			send(chunk(oaDelta{}, nil, &oaExtended{ToolResult: ev.ToolResult}))
		case chat.KindApproval:
			send(chunk(oaDelta{}, nil, &oaExtended{ToolCall: ev.ToolCall, Approval: ev.Approval}))
		case chat.KindOrchestration:
			send(chunk(oaDelta{}, nil, &oaExtended{Orchestration: ev.Orchestration}))
		case chat.KindWarning:
			send(chunk(oaDelta{}, nil, &oaExtended{Warning: ev.Text}))
		case chat.KindCompaction:
			send(chunk(oaDelta{}, nil, &oaExtended{Compaction: wire.CompactionOf(ev.Compaction)}))
		case chat.KindLimit:
			send(chunk(oaDelta{}, nil, &oaExtended{Limit: ev.Limit}))
		case chat.KindUsage:
			u := wire.Usage{Totals: wire.TotalsOf(*ev.Usage), Final: ev.Final}
			if ev.Final {
				usage = *ev.Usage
			}
			send(chunk(oaDelta{}, nil, &oaExtended{Usage: &u}))
		case chat.KindError:
			failed = ev.Error
			sendError(ev.Error)
		case chat.KindDone:
			reason := ev.FinishReason
			finish(reason, &oaExtended{FinishReason: reason, Error: failed})
		}
	}, func() {
		_, _ = w.Write([]byte(": heartbeat\n\n"))
		_ = rc.Flush()
	})
	if err != nil && !finished {
		if ce, ok := err.(*chat.Error); ok {
			sendError(ce)
			finish(chat.FinishError, &oaExtended{FinishReason: chat.FinishError, Error: ce})
			return
		}
		// The client closed its streaming connection: nobody reads this
		// turn now, so it stops like one a person stopped (its partial
		// answer is saved; its stream can still be read from the session).
		t.Cancel(errStreamClosed)
	}
}

// errStreamClosed stops a /v1 streaming turn whose client went away.
var errStreamClosed = &chat.Stop{Reason: "the client closed its streaming connection"}
