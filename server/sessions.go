package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/gin-gonic/gin"
)

// The session routes but the streams (resume.go): a caller's list of
// conversations (docs/api.md, "Conversations"), its sessions newest first
// from a store that lists them (session.Lister); a session read, renamed
// with PATCH, deleted with DELETE; its running turn stopped from any
// replica ("Stopping a turn"). Like every session route, another owner's
// sessions are neither listed nor found.

// defaultListPage is the page size of GET /api/sessions without limit.
const defaultListPage = 50

type conversationView struct {
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

type conversationList struct {
	Sessions []conversationView `json:"sessions"`
	// Next is the cursor of the following page, absent at the end.
	Next string `json:"next,omitempty"`
}

func viewOf(s session.Summary) conversationView {
	return conversationView{ID: s.ID, Agent: s.Agent, Title: s.Title, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// listSessions serves GET /api/sessions?limit=N&cursor=C.
func (s *Server) listSessions(c *gin.Context) {
	lister, ok := s.rt.Store().(session.Lister)
	if !ok {
		abortWith(c, newError(http.StatusNotImplemented, "not_supported", "this server's session store does not list sessions (it does not implement session.Lister)"))
		return
	}
	limit := defaultListPage
	if q := c.Query("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > session.MaxListPage {
			abortWith(c, newParamError(http.StatusBadRequest, "invalid_limit", "limit", "limit must be a whole number from 1 to %d, got %q", session.MaxListPage, q))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	page, err := lister.List(ctx, ownerOf(c), c.Query("cursor"), limit)
	if errors.Is(err, session.ErrBadCursor) {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_cursor", "cursor", "%s", err.Error()))
		return
	}
	if err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("listing sessions", "err", err)
		}
		abortWith(c, e)
		return
	}
	out := conversationList{Sessions: make([]conversationView, 0, len(page.Sessions)), Next: page.Next}
	for _, sum := range page.Sessions {
		out.Sessions = append(out.Sessions, viewOf(sum))
	}
	c.JSON(http.StatusOK, out)
}

// renameRequest is the body of PATCH /api/sessions/:id.
type renameRequest struct {
	Title *string `json:"title"`
}

// renameSession serves PATCH /api/sessions/:id {"title": "..."}: the
// session's name in lists; "" gives it back its first message.
func (s *Server) renameSession(c *gin.Context) {
	var body renameRequest
	if e := decodeJSON(c.Request, &body); e != nil {
		abortWith(c, e)
		return
	}
	if body.Title == nil {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_title", "title", `the body needs "title": the session's new name ("" for its first message)`))
		return
	}
	title, why := cleanTitle(*body.Title)
	if why != "" {
		abortWith(c, newParamError(http.StatusBadRequest, "invalid_title", "title", "%s", why))
		return
	}
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	noop := func(*orchestration.State) error { return nil }
	// The owner and agent only matter if the session expired since it
	// was read: the write then recreates it as the caller's, empty.
	stored, err := session.Update(ctx, s.rt.Store(), sess.ID, noop, session.WithTitle(title), session.WithOwner(sess.Owner), session.WithAgent(sess.Agent))
	if err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("renaming a session", "session", sess.ID, "err", err)
		}
		abortWith(c, e)
		return
	}
	msgs, _ := s.rt.Store().Messages(ctx, sess.ID, 0)
	sum := session.SummaryOf(stored)
	sum.Title = session.TitleOf(stored.Title, msgs)
	c.JSON(http.StatusOK, viewOf(sum))
}

// cleanTitle is a title as stored: white space runs made one space, at
// most session.MaxTitle characters; why says what is wrong with one that
// cannot be.
func cleanTitle(t string) (string, string) {
	if !utf8.ValidString(t) {
		return "", "the title is not valid UTF-8"
	}
	if strings.ContainsFunc(t, func(r rune) bool { return unicode.IsControl(r) && !unicode.IsSpace(r) }) {
		return "", "the title has control characters"
	}
	t = strings.Join(strings.Fields(t), " ")
	if n := utf8.RuneCountInString(t); n > session.MaxTitle {
		return "", "the title is " + strconv.Itoa(n) + " characters; the limit is " + strconv.Itoa(session.MaxTitle)
	}
	return t, ""
}

type sessionView struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// Title is the name a person gave the session ("" until then).
	Title        string              `json:"title"`
	CreatedAt    time.Time           `json:"createdAt"`
	LastAccessed time.Time           `json:"lastAccessed"`
	State        orchestration.State `json:"state"`
	// Orchestration is the snapshot of the state under the session's agent
	// (null when that agent is no longer served).
	Orchestration *chat.Snapshot `json:"orchestration"`
	Usage         wire.Totals    `json:"usage"`
	Messages      []chat.Message `json:"messages"`
	// Turn is the session's latest turn while its stream is kept.
	Turn *turnView `json:"turn"`
	// PendingApprovals are the tool calls that wait for a person's
	// approval (answer them through POST /api/chat/:agentId).
	PendingApprovals []approvalView `json:"pendingApprovals"`
	// Queued is how many messages wait for the running turn (busy policy
	// enqueue).
	Queued int `json:"queued"`
	// Children are the sessions of the agents this session's agent asked
	// (its agent tools).
	Children []childView `json:"children"`
}

type approvalView struct {
	ApprovalID  string          `json:"approvalId"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Input       json.RawMessage `json:"input"`
	RequestedAt time.Time       `json:"requestedAt"`
	// AgentCall is the call of an agent the session's call asked, when
	// that agent waits for the approval (ToolCallID is then the session's
	// call, an agent tool's).
	AgentCall *agentCallView `json:"agentCall,omitempty"`
}

type turnView struct {
	ID      string `json:"id"`
	Running bool   `json:"running"`
	// LastEventID is the ID of the turn's latest frame.
	LastEventID string `json:"lastEventId"`
}

// loadSession reads the session named by the :id parameter in the
// caller's keyspace (session.Key): another owner's session with the same ID
// is another session, so "not yours" is "absent", with the same work. The
// Session's ID is its store key.
func (s *Server) loadSession(c *gin.Context) (session.Session, bool) {
	id := c.Param("id")
	if !session.ValidID(id) {
		abortWith(c, errBadSessionID("the session ID in the path"))
		return session.Session{}, false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	sess, err := s.rt.Store().Get(ctx, session.Key(ownerOf(c), id))
	if err == nil && sess.Owner != ownerOf(c) {
		err = session.ErrNotFound // a digest collision, or data written by hand
	}
	if err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("reading a session", "session", id, "err", err)
		}
		abortWith(c, e)
		return session.Session{}, false
	}
	return sess, true
}

func (s *Server) getSession(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	if s.rt.Settle(c.Request.Context(), sess) {
		// The session's last turn was interrupted and its streamed answer
		// is saved now: the history is read after it.
		if sess, ok = s.loadSession(c); !ok {
			return
		}
	}
	limit := 0
	if q := c.Query("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			abortWith(c, newError(http.StatusBadRequest, "invalid_limit", "limit must be a non-negative integer, got %q", q))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	msgs, err := s.rt.Store().Messages(ctx, sess.ID, limit)
	if err != nil {
		e := storeError(err)
		s.log.Error("reading a session's history", "session", sess.ID, "err", err)
		abortWith(c, e)
		return
	}
	st := sess.State
	n, served := s.rt.Agents().Get(sess.Agent)
	if served {
		// As the agent's template is now: a step it no longer has is not
		// shown as active until the next message moves the session.
		st = n.Engine().Current(st)
	}
	// What a regenerated answer restores is bookkeeping, not state to show.
	st.TurnStart = nil
	u := st.TokenUsage
	v := sessionView{
		ID: c.Param("id"), Agent: sess.Agent, Title: sess.Title, CreatedAt: sess.CreatedAt, LastAccessed: sess.LastAccessed,
		State: st, Usage: wire.TotalsOf(u),
		Messages: msgs,
	}
	if u := sess.SummarizerUsage; !u.IsZero() {
		su := wire.TotalsOf(u)
		v.Usage.Summarizer = &su
	}
	if r := st.RegeneratedUsage; !r.IsZero() {
		rt := wire.TotalsOf(r)
		v.Usage.Regenerated = &rt
	}
	if v.Messages == nil {
		v.Messages = []chat.Message{}
	}
	v.PendingApprovals = []approvalView{}
	for _, a := range sess.PendingApprovals() {
		in := a.Call.Arguments
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		v.PendingApprovals = append(v.PendingApprovals, approvalView{ApprovalID: a.ID, ToolCallID: a.Call.ID, ToolName: a.Call.Name, Input: in, RequestedAt: a.RequestedAt,
			AgentCall: agentCallOf(a)})
	}
	v.Children = s.children(ctx, ownerOf(c), c.Param("id"), n, served)
	if served {
		snap := n.Engine().Snapshot(st)
		v.Orchestration = &snap
	}
	if v.Turn, err = s.latestTurn(ctx, sess); err != nil {
		s.log.Warn("reading a session's latest turn", "session", sess.ID, "err", err)
	}
	if v.Queued, err = s.rt.Queued(ctx, sess.ID); err != nil {
		s.log.Warn("reading a session's queue", "session", sess.ID, "err", err)
	}
	c.JSON(http.StatusOK, v)
}

// latestTurn describes the session's latest turn, nil when none is kept.
func (s *Server) latestTurn(ctx context.Context, sess session.Session) (*turnView, error) {
	st, err := s.rt.Latest(ctx, sess)
	if st == nil {
		return nil, err
	}
	v := &turnView{ID: st.ID, Running: st.Running}
	_, id, _ := strings.Cut(sess.ID, ".")
	t, terr := s.rt.Turn(ctx, sess.Owner, cmp.Or(id, sess.ID), st.ID)
	if terr != nil {
		return v, cmp.Or(err, terr)
	}
	pos, perr := s.position(ctx, t)
	v.LastEventID = wire.RestartedEventID(st.ID, pos.frames, len(pos.restarts))
	return v, cmp.Or(err, perr)
}

func (s *Server) deleteSession(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	if err := s.rt.Delete(c.Request.Context(), sess); err != nil {
		e := turns.Describe(err)
		if e.Status >= 500 {
			s.log.Error("deleting a session", "session", sess.ID, "err", err)
		}
		abortWith(c, e)
		return
	}
	c.Status(http.StatusNoContent)
}

// stopTurn serves POST /api/sessions/:id/stop: 202 when a turn of the
// session was running and is being stopped, 204 when none was. The turn
// runs here or on another replica: there the request goes through the
// shared turn log (turnlog.Log.Stop), whose writer cancels the turn.
func (s *Server) stopTurn(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	turnID, err := s.rt.StopSession(c.Request.Context(), sess)
	switch {
	case err != nil:
		s.log.Error("stopping a turn", "session", c.Param("id"), "err", err)
		abortWith(c, storeError(err))
	case turnID != "":
		c.JSON(http.StatusAccepted, gin.H{"turnId": turnID, "status": "stopping"})
	default:
		c.Header("X-Session-Id", c.Param("id"))
		c.Status(http.StatusNoContent)
	}
}

// childView is a session in which a session's agent asked another agent
// of the server (an agent tool): readable by the same owner at
// GET /api/sessions/:sessionId.
type childView struct {
	// Tool is the agent tool's name, Agent the agent it asks.
	Tool      string `json:"tool"`
	Agent     string `json:"agent"`
	SessionID string `json:"sessionId"`
}

// children lists the child sessions of the owner's session id, one per
// local agent tool of its agent that was called (session.ChildID).
func (s *Server) children(ctx context.Context, owner, id string, n *agent.Agent, served bool) []childView {
	out := []childView{}
	if !served {
		return out
	}
	t := n.Template()
	for _, name := range t.AgentTools() {
		a := t.Agents[name]
		if !a.Local() {
			continue
		}
		child := session.ChildID(owner, id, name, a.Agent)
		if _, err := s.rt.Session(ctx, owner, child); err == nil {
			out = append(out, childView{Tool: name, Agent: a.Agent, SessionID: child})
		}
	}
	return out
}

// agentCallView is the call of an agent that a session's call asked,
// waiting for approval.
type agentCallView struct {
	Agent      string          `json:"agent"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
}

func agentCallOf(a session.Approval) *agentCallView {
	if a.Agent == "" || a.AgentCall == nil {
		return nil
	}
	in := a.AgentCall.Arguments
	if len(in) == 0 {
		in = json.RawMessage("{}")
	}
	return &agentCallView{Agent: a.Agent, ToolCallID: a.AgentCall.ID, ToolName: a.AgentCall.Name, Input: in}
}
