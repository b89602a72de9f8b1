package server

import (
	"context"
	"errors"
	"net/http"
	"time"
	"unicode"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/gin-gonic/gin"
)

// maxIdempotencyKey bounds an idempotency key, which the session keeps.
const maxIdempotencyKey = 256

// idempotencyKey is a request's idempotency key (agent.WithRequest): its
// Idempotency-Key header, else, for a chat request that sends a new
// message, the AI SDK's ID of that message. The two are kept apart
// ("key:", "msg:"), so that one never matches the other. A regenerate or
// an edit resends a message ID that already started a turn, to have it
// answered again: it has no key but its header's.
func idempotencyKey(r *http.Request, body *wire.ChatRequest) (string, *apiError) {
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if len(h) > maxIdempotencyKey || !printable(h) {
			return "", newParamError(http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key", "the Idempotency-Key header must be 1 to %d printable ASCII characters", maxIdempotencyKey)
		}
		return "key:" + h, nil
	}
	if body == nil || body.Trigger == "regenerate-message" || body.Edits() {
		return "", nil
	}
	if id := body.LastUserID(); id != "" && len(id) <= maxIdempotencyKey && printable(id) {
		return "msg:" + id, nil
	}
	return "", nil
}

func printable(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// duplicateOf reports the request that already started a turn under key
// when err says a turn could not start because of it: the agent's
// *DuplicateError, or a busy session whose running turn is that request's
// own (a client retrying while its first attempt still runs), which one
// read of the session tells.
func (s *Server) duplicateOf(ctx context.Context, storeKey, key string, err error) (session.Request, bool) {
	if dup, ok := errors.AsType[*agent.DuplicateError](err); ok {
		return dup.Request, true
	}
	if key == "" || !errors.Is(err, session.ErrBusy) {
		return session.Request{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, gerr := s.cfg.Store.Get(ctx, storeKey)
	if gerr != nil {
		return session.Request{}, false
	}
	return sess.RequestOf(key)
}

// replay is what a retried request is given instead of a second turn: the
// stream of the turn its first attempt started, from its first frame,
// while this replica or the shared turn log keeps it; else that turn's
// answer as the session stored it, as a finished stream. nil after an
// answer to the request (an error).
func (s *Server) replay(c *gin.Context, agentID, sessionID string, req session.Request) source {
	owner := ownerOf(c)
	key := session.Key(owner, sessionID)
	c.Header("Idempotent-Replayed", "true")
	if t := s.turns.get(req.Turn); t != nil && t.key == key && !t.raw {
		return t
	}
	if s.cfg.Turns != nil {
		st, ok, err := s.sharedLookup(c.Request.Context(), key, req.Turn, owner)
		if err == nil && !ok {
			// Not listed: its replica died before its first frames
			// reached the log, and the turn goes on, taken over.
			st, ok, err = s.unlistedRunning(c.Request.Context(), key, owner, st, ok)
			ok = ok && st.Turn == req.Turn
		}
		if err == nil && ok && st.AgentID == agentID {
			return &sharedTurn{s: s, ref: turnlog.Ref{Session: key, Turn: req.Turn}, sessionID: sessionID}
		}
	}
	t, e := s.storedAnswer(c.Request.Context(), key, sessionID, agentID, owner, req)
	if e != nil {
		abortWith(c, e)
		return nil
	}
	return t
}

// storedAnswer is the answer the session stored for the turn req started
// (agent.AnswerTo), as the finished stream of a turn of that ID: its
// text, tool calls and results, and finish stop; a turn that ended
// without its answer ends with turn_interrupted instead.
func (s *Server) storedAnswer(ctx context.Context, key, sessionID, agentID, owner string, req session.Request) (*turn, *apiError) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := s.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, storeError(err)
	}
	msgs, err := s.cfg.Store.Messages(ctx, key, 0)
	if err != nil {
		return nil, storeError(err)
	}
	answer, err := agent.AnswerTo(sess, msgs, req)
	if errors.Is(err, agent.ErrAnswerGone) {
		return nil, newError(http.StatusConflict, "duplicate_request", "this request already started turn %s on session %s, and its answer is no longer kept apart from the session's history: read it from GET /api/sessions/%s", req.Turn, sessionID, sessionID)
	}
	end := []chat.Event{{Kind: chat.KindDone, FinishReason: chat.FinishStop}}
	if errors.Is(err, agent.ErrTurnInterrupted) {
		end = []chat.Event{{Kind: chat.KindError, Error: errNoAnswer}, {Kind: chat.KindDone, FinishReason: chat.FinishError}}
	}
	t := newTurn(req.Turn, sessionID, agentID, owner, func(error) {}, s.cfg.MaxTurnEvents, 0)
	m := &uiMapper{turnID: t.id}
	t.add(m.start())
	for _, msg := range answer {
		for _, ev := range answerEvents(msg) {
			t.add(m.mapEvent(ev)...)
		}
	}
	for i, ev := range end {
		if i == len(end)-1 {
			t.addLast(m.mapEvent(ev)...)
		} else {
			t.add(m.mapEvent(ev)...)
		}
	}
	return t, nil
}

// errNoAnswer ends the replay of a turn that ended without its answer.
var errNoAnswer = &chat.Error{Code: errAbandoned.Code, Message: "the turn this request started ended before it answered (the server running it stopped, or the turn was stopped), and no server went on with it: your message is in the session's history without an answer; send it again as a new request (a new key), or regenerate the answer"}

// answerEvents are the events that stream a stored message of an answer.
func answerEvents(msg chat.Message) []chat.Event {
	var out []chat.Event
	switch msg.Role {
	case chat.RoleAssistant:
		if msg.Content != "" {
			out = append(out, chat.Event{Kind: chat.KindTextDelta, Text: msg.Content})
		}
		for i := range msg.ToolCalls {
			out = append(out, chat.Event{Kind: chat.KindToolCall, ToolCall: &msg.ToolCalls[i]})
		}
	case chat.RoleTool:
		out = append(out, chat.Event{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{
			CallID: msg.ToolCallID, Name: msg.ToolName, Content: msg.Content, IsError: msg.IsError, NotRun: msg.NotRun, Denied: msg.Denied,
		}})
	}
	return out
}
