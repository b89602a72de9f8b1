package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/coder/websocket"
)

// The Responses API beyond creating and reading a response: compaction
// (POST /v1/responses/compact), cancelling a background response
// (POST /v1/responses/{id}/cancel) and the WebSocket mode of
// /v1/responses.

// oaCompaction is the object of POST /v1/responses/compact.
type oaCompaction struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"`
	CreatedAt int64           `json:"created_at"`
	Output    []any           `json:"output"`
	Usage     oaResponseUsage `json:"usage"`
}

// oaCompactionItem stands for the messages a compaction left out.
type oaCompactionItem struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	EncryptedContent string `json:"encrypted_content"`
	CreatedBy        string `json:"created_by,omitempty"`
}

type oaInputText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type oaInputImage struct {
	Type     string  `json:"type"`
	ImageURL *string `json:"image_url"`
	Detail   string  `json:"detail"`
}

type oaInputFile struct {
	Type     string `json:"type"`
	Filename string `json:"filename,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	FileData string `json:"file_data,omitempty"`
}

type oaInputMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// compactResponse serves POST /v1/responses/compact: the conversation
// (its input, after the conversation of previous_response_id) compacted
// by Config.Compactor, as a compaction item and the items kept.
func (d *Door) compactResponse(w http.ResponseWriter, r *http.Request) {
	body, ok := door.ParseBody(w, r, wire.ParseCompact)
	if !ok {
		return
	}
	node, e := d.openAIModel(body.Model)
	if e != nil {
		door.WriteProblem(w, r, e)
		return
	}
	owner := door.Owner(r)
	var msgs []chat.Message
	if body.PreviousResponseID != "" {
		sid, e := d.continueFrom(r.Context(), owner, body.PreviousResponseID)
		if e != nil {
			door.WriteProblem(w, r, e)
			return
		}
		var err error
		if msgs, err = d.rt.Store().Messages(r.Context(), session.Key(owner, sid), 0); err != nil {
			door.WriteProblem(w, r, storeError(err))
			return
		}
	}
	var dropped []chat.Message
	if !isAbsentJSON(body.Input) {
		in, pe := body.Conversation(d.cfg.CompactionKey)
		if pe != nil {
			door.WriteProblem(w, r, door.BodyProblem(pe))
			return
		}
		if len(msgs) > 0 && len(in.Compacted) > 0 {
			door.WriteProblem(w, r, turns.ParamProblem(http.StatusBadRequest, "invalid_request", "input", "a compaction item cannot follow previous_response_id's conversation"))
			return
		}
		dropped = in.Compacted
		msgs = append(msgs, in.Messages...)
		if e := checkHistory(node, append(slices.Clone(dropped), in.Messages...), append(make([]int, len(dropped)), in.Index...), "input", nil); e != nil {
			door.WriteProblem(w, r, e)
			return
		}
	}
	comp, err := d.cfg.Compactor.Compact(r.Context(), node, msgs)
	if err != nil {
		d.log.Error("compacting a conversation", "agent", node.ID(), "err", err)
		door.WriteProblem(w, r, turns.NewProblem(http.StatusBadGateway, "compaction_failed", "the conversation could not be compacted"))
		return
	}
	content, err := wire.EncodeCompaction(wire.Compaction{Messages: append(dropped, comp.Dropped...), Summary: comp.Summary}, d.cfg.CompactionKey)
	if err != nil {
		door.WriteProblem(w, r, turns.NewProblem(http.StatusInternalServerError, "internal_error", "the compaction could not be encoded"))
		return
	}
	id := "cmp_" + session.NewID()
	out := oaCompaction{ID: id, Object: "response.compaction", CreatedAt: time.Now().Unix(),
		Output: append([]any{oaCompactionItem{ID: id + "_0", Type: "compaction", EncryptedContent: content, CreatedBy: node.ID()}}, outputItems(id, comp.Kept)...)}
	out.Usage = oaResponseUsage{InputTokens: comp.Usage.Prompt, OutputTokens: comp.Usage.Completion, TotalTokens: wire.TotalOf(comp.Usage)}
	out.Usage.InputTokensDetails.CachedTokens = comp.Usage.CacheRead
	door.WriteJSON(w, http.StatusOK, out)
}

// outputItems turns messages into Responses items, which an input takes
// back as they are: user and assistant messages, function calls and their
// outputs. IDs are prefix and the item's position.
func outputItems(prefix string, msgs []chat.Message) []any {
	var out []any
	id := func(kind string) string { return kind + "_" + prefix + "_" + strconv.Itoa(len(out)+1) }
	for _, m := range msgs {
		switch m.Role {
		case chat.RoleUser:
			content := []any{}
			if m.Content != "" || len(m.Attachments) == 0 {
				content = append(content, oaInputText{Type: "input_text", Text: m.Content})
			}
			for _, a := range m.Attachments {
				if a.Kind == chat.AttachImage {
					detail := a.Detail
					if detail == "" {
						detail = "auto"
					}
					content = append(content, oaInputImage{Type: "input_image", ImageURL: ptr(a.URL), Detail: detail})
					continue
				}
				f := oaInputFile{Type: "input_file", Filename: a.Filename, FileURL: a.URL}
				if len(a.URL) > 5 && a.URL[:5] == "data:" {
					f.FileURL, f.FileData = "", a.URL
				}
				content = append(content, f)
			}
			out = append(out, oaInputMessage{ID: id("msg"), Type: "message", Status: "completed", Role: "user", Content: content})
		case chat.RoleAssistant:
			if m.Content != "" {
				out = append(out, oaMessageItem{ID: id("msg"), Type: "message", Status: "completed", Role: "assistant", Content: []oaOutputText{*newOutputText(m.Content)}})
			}
			for _, call := range m.ToolCalls {
				out = append(out, oaFunctionCall{ID: id("fc"), Type: "function_call", Status: "completed", CallID: call.ID, Name: call.Name, Arguments: argumentsText(call.Arguments)})
			}
		case chat.RoleTool:
			out = append(out, oaFunctionCallOutput{ID: id("fco"), Type: "function_call_output", Status: "completed", CallID: m.ToolCallID, Output: m.Content})
		}
	}
	return out
}

// cancelResponse serves POST /v1/responses/{id}/cancel: a background
// response still running is stopped (on whichever replica runs it) and
// answered once stored as cancelled; one that ended is answered as it is.
func (d *Door) cancelResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	notFound := turns.ParamProblem(http.StatusNotFound, "response_not_found", "id", "no response %q", id)
	if !session.ValidID(id) {
		door.WriteProblem(w, r, notFound)
		return
	}
	owner := door.Owner(r)
	key := session.Key(owner, id)
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	rec, err := d.cfg.Responses.Get(ctx, key)
	switch {
	case errors.Is(err, responses.ErrNotFound):
		door.WriteProblem(w, r, notFound)
		return
	case err != nil:
		d.log.Error("reading a stored response", "err", err)
		door.WriteProblem(w, r, storeError(err))
		return
	}
	var obj struct {
		Background bool `json:"background"`
	}
	_ = json.Unmarshal(rec.Response, &obj)
	if !obj.Background {
		door.WriteProblem(w, r, turns.ParamProblem(http.StatusBadRequest, "invalid_request", "id", "response %q was not created with background: true; only background responses can be cancelled (stop a session's turn with POST /api/sessions/{id}/stop)", id))
		return
	}
	if rec.UserMessages == responses.Running {
		sess, err := d.rt.Store().Get(ctx, session.Key(owner, rec.SessionID))
		if err != nil {
			door.WriteProblem(w, r, storeError(err))
			return
		}
		if _, err := d.rt.StopSession(ctx, sess); err != nil {
			d.log.Error("cancelling a response", "response", id, "err", err)
			door.WriteProblem(w, r, storeError(err))
			return
		}
		// The response is stored as cancelled once its turn ended.
		for rec.UserMessages == responses.Running && ctx.Err() == nil {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
			if r, err := d.cfg.Responses.Get(ctx, key); err == nil {
				rec = r
			}
		}
	}
	writeRaw(w, rec.Response)
}

// wsError is the WebSocket mode's error envelope.
type wsError struct {
	Type   string         `json:"type"`
	Status int            `json:"status"`
	Error  oaErrorPayload `json:"error"`
}

// maxSocketResponses bounds the store: false responses a WebSocket
// connection keeps to continue from.
const maxSocketResponses = 16

// responsesSocket serves the WebSocket mode of /v1/responses: each
// response.create message (a POST /v1/responses body with "type", without
// stream and background) starts a response whose events come back as
// messages, its final object last; a failure before the response starts
// is an error message. One response runs at a time per connection. A
// store: false response can be continued, by previous_response_id, on the
// connection that made it and there only: the connection keeps its
// conversation (the newest maxSocketResponses of them), and a
// continuation that fails drops the one it named.
func (d *Door) responsesSocket(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the request
	}
	defer conn.CloseNow()
	conn.SetReadLimit(d.cfg.MaxMessageBytes)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-d.rt.Closing():
			_ = conn.Close(websocket.StatusGoingAway, "the server is shutting down")
		case <-ctx.Done():
		}
	}()
	owner := door.Owner(r)
	kept := map[string][]chat.Message{} // store: false responses' conversations
	var order []string
	keep := func(id string, conv []chat.Message) {
		kept[id] = conv
		order = append(order, id)
		if len(order) > maxSocketResponses {
			delete(kept, order[0])
			order = order[1:]
		}
	}
	send := func(v any) error { return conn.Write(ctx, websocket.MessageText, mustJSON(v)) }
	fail := func(e *turns.Problem) error {
		var param *string
		if e.Param != "" {
			param = ptr(e.Param)
		}
		return send(wsError{Type: "error", Status: e.Status, Error: oaErrorPayload{Type: door.OpenAIErrorType(e.Status), Code: e.Code, Message: e.Message, Param: param}})
	}
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			if fail(turns.NewProblem(http.StatusBadRequest, "invalid_request", "messages must be text: JSON response.create events")) != nil {
				return
			}
			continue
		}
		body, prev, e := parseSocketCreate(data)
		var prior []chat.Message
		if e == nil && prev != "" && (body.Store != nil && !*body.Store) {
			var ok bool
			if prior, ok = kept[prev]; !ok {
				e = turns.ParamProblem(http.StatusNotFound, "previous_response_not_found", "previous_response_id", "no store: false response %q on this connection: such a response can be continued only on the connection that made it; start a new chain, or store responses", prev)
			}
		}
		var rs *responseStart
		if e == nil {
			rs, e = d.startResponse(ctx, owner, "", body, prior)
		}
		if e != nil {
			if prior != nil {
				delete(kept, prev)
			}
			if fail(e) != nil {
				return
			}
			continue
		}
		var answer []chat.Message
		status := d.sendResponseEvents(ctx, rs.t, rs.run, func(ev oaRespEvent) error { return send(ev) }, nil, func(ev chat.Event) { answer = appendAnswer(answer, ev) })
		if rs.stateless {
			rs.t.Cancel(errNoReader)
			if status == "completed" {
				keep(rs.run.base.ID, append(rs.conv, answer...))
			} else if prior != nil {
				delete(kept, prev)
			}
		}
		if status == "" {
			return // the connection failed
		}
	}
}

// parseSocketCreate reads a response.create message: a Responses body
// with "type", which may not ask to stream or run in the background (the
// connection streams, and a background response is HTTP's).
func parseSocketCreate(data []byte) (*wire.ResponsesRequest, string, *turns.Problem) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, "", door.BodyProblem(wire.Unmarshal(data, &fields))
	}
	var typ string
	if json.Unmarshal(fields["type"], &typ) != nil || typ != "response.create" {
		return nil, "", turns.ParamProblem(http.StatusBadRequest, "invalid_request", "type", `a message must be a response.create event: {"type": "response.create", ...}`)
	}
	for _, f := range []string{"stream", "stream_options", "background"} {
		if _, ok := fields[f]; ok {
			return nil, "", turns.ParamProblem(http.StatusBadRequest, "invalid_request", f, "%s is not taken in the WebSocket mode: the connection streams every response", f)
		}
	}
	delete(fields, "type")
	body, err := wire.ParseResponses(mustJSON(fields))
	if err != nil {
		return nil, "", door.BodyProblem(err)
	}
	return body, body.PreviousResponseID, nil
}

// appendAnswer adds a turn's event to the conversation it makes: each
// model call an assistant message with its text and calls, each result a
// tool message.
func appendAnswer(msgs []chat.Message, ev chat.Event) []chat.Message {
	open := func() *chat.Message {
		if n := len(msgs); n > 0 && msgs[n-1].Role == chat.RoleAssistant {
			return &msgs[n-1]
		}
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant})
		return &msgs[len(msgs)-1]
	}
	switch ev.Kind {
	case chat.KindStepStart:
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant})
	case chat.KindTextDelta:
		m := open()
		m.Content += ev.Text
	case chat.KindToolCall, chat.KindClientCall:
		m := open()
		m.ToolCalls = append(m.ToolCalls, *ev.ToolCall)
	case chat.KindToolResult:
		r := *ev.ToolResult
		msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: r.CallID, ToolName: r.Name, Content: r.Content, IsError: r.IsError, NotRun: r.NotRun, Denied: r.Denied})
	case chat.KindDone:
		msgs = slices.DeleteFunc(msgs, func(m chat.Message) bool {
			return m.Role == chat.RoleAssistant && m.Content == "" && len(m.ToolCalls) == 0
		})
	}
	return msgs
}
