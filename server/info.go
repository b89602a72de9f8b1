package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/gin-gonic/gin"
)

type modelInfo struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

type agentSummary struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Description     string    `json:"description"`
	Tags            []string  `json:"tags"`
	ChatPrompts     []string  `json:"chatPrompts"`
	InitialMessages []string  `json:"initialMessages"`
	Model           modelInfo `json:"model"`
	// Offline is set when the agent runs on the offline demo model.
	Offline          bool `json:"offline"`
	HasOrchestration bool `json:"hasOrchestration"`
	// MCPServers are the MCP servers the agent's tools come from (absent
	// when none): the tools of one that is not ready are not offered.
	MCPServers []MCPServer `json:"mcpServers,omitempty"`
}

// MCPServer describes one MCP server of an agent, as /api/agents reports it.
type MCPServer struct {
	Name string `json:"name"`
	// Scope is "server" (MCP_SERVERS_FILE) or the agent ID of the template
	// that declares it.
	Scope     string `json:"scope"`
	Transport string `json:"transport"`
	// State is starting, ready, restarting, failed or stopped.
	State string `json:"state"`
	// Error says why it is not ready.
	Error           string    `json:"error,omitempty"`
	Since           time.Time `json:"since"`
	Restarts        int       `json:"restarts"`
	ProtocolVersion string    `json:"protocolVersion,omitempty"`
	// Tools are its tools that can be offered now, under their final names.
	Tools []string `json:"tools"`
	// Skipped are its tools never offered (a name breaking the providers'
	// rule, an unusable schema), each as "name: reason".
	Skipped []string `json:"skipped,omitempty"`
	// MissingTools are the agent's nodes naming a tool it does not list.
	MissingTools []string `json:"missingTools,omitempty"`
}

type agentDetail struct {
	agentSummary
	Tools         []string           `json:"tools"`
	Warnings      []string           `json:"warnings"`
	Orchestration *orchestrationInfo `json:"orchestration"`
}

type orchestrationInfo struct {
	Description []string   `json:"description"`
	StepScope   string     `json:"stepScope"`
	Steps       []stepInfo `json:"steps"`
}

type stepInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	IsDefault   bool   `json:"isDefault"`
	// Sequence lists the enforced tool order; each entry is a group of
	// alternatives.
	Sequence   [][]string      `json:"sequence"`
	Tools      []string        `json:"tools"`
	Conditions []conditionInfo `json:"conditions"`
}

type conditionInfo struct {
	Type        string `json:"type"`
	Value       string `json:"value,omitempty"`
	Window      *int   `json:"window,omitempty"`
	Description string `json:"description,omitempty"`
}

func (s *Server) summarize(n *agent.Agent) agentSummary {
	t := n.Template()
	info := n.ModelInfo()
	return agentSummary{
		ID: n.ID(), Name: t.Name, Description: t.Description, Tags: nonNil(t.Tags),
		ChatPrompts: nonNil(t.ChatSettings.ChatPrompts), InitialMessages: nonNil(t.ChatSettings.InitialMessages),
		Model: modelInfo{Provider: info.Provider, Model: info.Model}, Offline: info.Provider == "offline",
		HasOrchestration: len(t.Steps()) > 0,
		MCPServers:       s.mcpServers(n.ID()),
	}
}

func (s *Server) mcpServers(agentID string) []MCPServer {
	if s.cfg.MCPServers == nil {
		return nil
	}
	return s.cfg.MCPServers(agentID)
}

func (s *Server) listAgents(c *gin.Context) {
	list := s.cfg.Agents.List()
	out := make([]agentSummary, 0, len(list))
	for _, n := range list {
		out = append(out, s.summarize(n))
	}
	c.JSON(http.StatusOK, gin.H{"agents": out})
}

func (s *Server) getAgent(c *gin.Context) {
	n, ok := s.cfg.Agents.Get(c.Param("id"))
	if !ok {
		abortWith(c, newError(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", c.Param("id")))
		return
	}
	t := n.Template()
	d := agentDetail{agentSummary: s.summarize(n), Tools: nonNil(t.Tools()), Warnings: nonNil(n.Warnings())}
	if spec := t.Orchestration; spec != nil && len(spec.Steps) > 0 {
		compiled := map[string]orchestration.StepInfo{}
		for _, st := range n.Engine().Steps() {
			compiled[st.Name] = st
		}
		oi := &orchestrationInfo{Description: nonNil(spec.Description), StepScope: spec.StepScope, Steps: []stepInfo{}}
		if oi.StepScope == "" {
			oi.StepScope = orchestration.ScopeSession
		}
		for _, st := range spec.Steps {
			si := stepInfo{Name: st.Name, Description: st.Description, IsDefault: st.IsDefault, Sequence: [][]string{}, Tools: []string{}, Conditions: []conditionInfo{}}
			if cs, ok := compiled[st.Name]; ok {
				for _, g := range cs.Sequence {
					si.Sequence = append(si.Sequence, nonNil(g))
				}
				si.Tools = nonNil(cs.Tools)
				si.IsDefault = cs.Default
			}
			for _, cond := range st.Conditions {
				si.Conditions = append(si.Conditions, conditionInfo{Type: cond.Type, Value: cond.Value, Window: cond.Window, Description: cond.Description})
			}
			oi.Steps = append(oi.Steps, si)
		}
		d.Orchestration = oi
	}
	c.JSON(http.StatusOK, d)
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
	Usage         usageTotals    `json:"usage"`
	Messages      []chat.Message `json:"messages"`
	// Turn is the session's latest turn while its stream is kept.
	Turn *turnView `json:"turn"`
	// PendingApprovals are the tool calls that wait for a person's
	// approval (answer them through POST /api/chat/:agentId).
	PendingApprovals []approvalView `json:"pendingApprovals"`
}

type approvalView struct {
	ApprovalID  string          `json:"approvalId"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Input       json.RawMessage `json:"input"`
	RequestedAt time.Time       `json:"requestedAt"`
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
	sess, err := s.cfg.Store.Get(ctx, session.Key(ownerOf(c), id))
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
	if sess.Turn != "" && !s.runsHere(sess.Turn) && !s.mayGoOn(c.Request.Context(), sess) {
		// The session's last turn did not clear its marker and does not
		// run here: if no replica holds the session, the turn is over and
		// its streamed answer is saved before the history is read. (A
		// turn that can be taken over goes on instead: latestTurn.)
		ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
		rec, err := s.cfg.Agents.RecoverTurn(ctx, sess.ID, 0)
		cancel()
		switch {
		case err == nil && rec.Turn != "":
			if sess, ok = s.loadSession(c); !ok {
				return
			}
		case err != nil && !errors.Is(err, session.ErrBusy):
			s.log.Warn("recovering an interrupted turn", "session", sess.ID, "err", err)
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
	msgs, err := s.cfg.Store.Messages(ctx, sess.ID, limit)
	if err != nil {
		e := storeError(err)
		s.log.Error("reading a session's history", "session", sess.ID, "err", err)
		abortWith(c, e)
		return
	}
	st := sess.State
	n, served := s.cfg.Agents.Get(sess.Agent)
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
		State: st, Usage: totalsOf(u),
		Messages: msgs,
	}
	if u := sess.SummarizerUsage; !u.IsZero() {
		su := totalsOf(u)
		v.Usage.Summarizer = &su
	}
	if r := st.RegeneratedUsage; !r.IsZero() {
		rt := totalsOf(r)
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
		v.PendingApprovals = append(v.PendingApprovals, approvalView{ApprovalID: a.ID, ToolCallID: a.Call.ID, ToolName: a.Call.Name, Input: in, RequestedAt: a.RequestedAt})
	}
	if served {
		snap := n.Engine().Snapshot(st)
		v.Orchestration = &snap
	}
	if v.Turn, err = s.latestTurn(ctx, sess); err != nil {
		s.log.Warn("reading a session's latest turn", "session", sess.ID, "err", err)
	}
	c.JSON(http.StatusOK, v)
}

// mayGoOn reports whether sess's turn, which does not run here, may go
// on: the shared log's turns can be taken over, and the log does not say
// the turn ended.
func (s *Server) mayGoOn(ctx context.Context, sess session.Session) bool {
	if _, ok := s.cfg.Turns.(turnlog.Taker); !ok {
		return false
	}
	st, found, err := s.sharedLookup(ctx, sess.ID, sess.Turn, sess.Owner)
	return err != nil || !found || !st.Done
}

// runsHere reports whether the turn runs on this replica.
func (s *Server) runsHere(turnID string) bool {
	t := s.turns.get(turnID)
	if t == nil {
		return false
	}
	_, done := t.state()
	return !done
}

// latestTurn describes the session's latest turn, nil when none is kept.
// A turn this replica runs or ran is described from its own log, which is
// ahead of the shared one; a newer turn can only be another replica's
// (turns of a session never overlap), and a running turn whose writer
// stopped showing signs of life is not running any more.
func (s *Server) latestTurn(ctx context.Context, sess session.Session) (*turnView, error) {
	var local *turnView
	if t := s.turns.latest(sess.ID); t != nil { // sess.ID is the store key
		last, done := t.state()
		local = &turnView{ID: t.id, Running: !done, LastEventID: wire.RestartedEventID(t.id, last, len(t.restarts))}
		if local.Running {
			return local, nil
		}
	}
	st, found, err := s.sharedLookup(ctx, sess.ID, "", sess.Owner)
	if err != nil {
		return local, err
	}
	if u, ok := s.unlistedHeld(ctx, sess, st, found, true); ok {
		st, found = u, true
	}
	if !found || s.turns.get(st.Turn) != nil {
		return local, nil
	}
	running := s.runsElsewhere(sess, st) || sess.Turn == st.Turn && !st.Done && s.goesOn(st)
	return &turnView{ID: st.Turn, Running: running, LastEventID: wire.RestartedEventID(st.Turn, st.Last, len(st.Restarts))}, nil
}

func (s *Server) deleteSession(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	if t, err := s.latestTurn(ctx, sess); err != nil {
		s.log.Error("deleting a session", "session", sess.ID, "err", err)
		abortWith(c, storeError(err))
		return
	} else if t != nil && t.Running {
		abortWith(c, newError(http.StatusConflict, "session_busy", "a turn is running on this session; wait for it to finish before deleting the session"))
		return
	}
	if err := s.cfg.Store.Delete(ctx, sess.ID); err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("deleting a session", "session", sess.ID, "err", err)
		}
		abortWith(c, e)
		return
	}
	s.turns.forgetSession(sess.ID)
	if err := s.forgetShared(ctx, sess.ID); err != nil {
		// The session is gone; its turns' events expire with the retention.
		s.log.Warn("deleting a session's turns from the shared log", "session", sess.ID, "err", err)
	}
	c.Status(http.StatusNoContent)
}

// resumeStream serves GET /api/sessions/:id/stream. The rule (docs/api.md,
// "Resuming"):
//   - Last-Event-ID "<turnId>:<n>" naming a kept turn of this session: the
//     frames after n, then live until the turn ends; 204 when the turn is
//     finished and n is its last frame, unless a newer turn of the session
//     is running, which is then streamed from its start.
//   - no Last-Event-ID, or one naming a turn no longer kept: the session's
//     running turn from its first frame; 204 when none is running.
func (s *Server) resumeStream(c *gin.Context) { s.resume(c, "") }

// resumeChat serves GET /api/chat/:agentId/:id/stream, the URL the AI
// SDK's DefaultChatTransport resumes from (its api plus /<chatId>/stream):
// resumeStream for the agent's turns only.
func (s *Server) resumeChat(c *gin.Context) {
	agentID := c.Param("agentId")
	if _, ok := s.cfg.Agents.Get(agentID); !ok {
		abortWith(c, newError(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", agentID))
		return
	}
	s.resume(c, agentID)
}

// resume serves a resume of the session named by the :id parameter; with
// agentID set, another agent's turn is treated as not kept.
func (s *Server) resume(c *gin.Context, agentID string) {
	id := c.Param("id")
	if !session.ValidID(id) {
		abortWith(c, errBadSessionID("the session ID in the path"))
		return
	}
	owner := ownerOf(c)
	otherAgent := func(a string) bool { return agentID != "" && a != agentID }
	key := session.Key(owner, id)
	var src source
	var after int64
	if lei := c.GetHeader("Last-Event-ID"); lei != "" {
		turnID, seq, restart, err := wire.ParseEventID(lei)
		if err != nil {
			abortWith(c, newError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID %q: %s", lei, err.Error()))
			return
		}
		// A turn of another session, or another owner's, is treated as
		// not kept, so that its existence does not show; one this
		// replica ran that another took over since (the client saw
		// more takeovers than it knows) is read from the shared log.
		var (
			kept        = s.turns.get(turnID)
			found, done bool
			first, last int64
			restarts    []int64
		)
		if kept != nil && (kept.key != key || otherAgent(kept.agentID) || kept.raw || restart > len(kept.restarts)) {
			kept = nil
		}
		switch {
		case kept != nil:
			found = true
			last, done = kept.state()
			first = kept.firstKept()
			restarts = kept.restarts
		case s.cfg.Turns != nil:
			st, ok, err := s.sharedLookup(c.Request.Context(), key, turnID, owner)
			if err == nil && !ok {
				st, ok, err = s.unlistedRunning(c.Request.Context(), key, owner, st, ok)
				ok = ok && st.Turn == turnID
			}
			if err != nil {
				s.log.Error("resuming a stream", "session", id, "err", err)
				abortWith(c, storeError(err))
				return
			}
			found, last, done, first, restarts = ok && !otherAgent(st.AgentID), st.Last, st.Done, st.First, st.Restarts
		}
		if found && restart > len(restarts) {
			abortWith(c, newError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID %q counts %d takeovers of the turn; it had %d", lei, restart, len(restarts)))
			return
		}
		if found {
			// A frame of a replica that died and whose frames the turn's
			// takeover does not have: resume from the takeover.
			seq = resumeAfter(restarts, seq, restart)
			// On the turn's own replica the log is complete; in the shared
			// log a running turn's last frames may still be on their way,
			// so a client ahead of it waits for them there.
			if seq > last && (kept != nil || done) {
				abortWith(c, newError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID %q is ahead of the turn's last event %q", lei, wire.RestartedEventID(turnID, last, len(restarts))))
				return
			}
			if seq+1 < first {
				abortWith(c, newError(http.StatusGone, "stream_gap", "the events after %q were dropped (the turn had more than %d); read the answer from GET /api/sessions/%s", lei, s.cfg.MaxTurnEvents, id))
				return
			}
			switch {
			case done && seq == last:
			case kept != nil:
				src, after = kept, seq
			default:
				// When the writer died, the stream gives what the shared
				// log got, then closing frames that say so.
				src, after = &sharedTurn{s: s, ref: turnlog.Ref{Session: key, Turn: turnID}, sessionID: id, restarts: restarts}, seq
			}
		}
	}
	if src == nil {
		if latest := s.turns.latest(key); latest != nil && !otherAgent(latest.agentID) && !latest.raw {
			if _, done := latest.state(); !done {
				src, after = latest, 0
			}
		}
	}
	if src == nil && s.cfg.Turns != nil {
		st, found, err := s.sharedLookup(c.Request.Context(), key, "", owner)
		if err == nil && (!found || st.Done) {
			st, found, err = s.unlistedRunning(c.Request.Context(), key, owner, st, found)
		}
		if err != nil {
			s.log.Error("resuming a stream", "session", id, "err", err)
			abortWith(c, storeError(err))
			return
		}
		if found && !st.Done && s.turns.get(st.Turn) == nil && !otherAgent(st.AgentID) && s.goesOn(st) {
			src, after = &sharedTurn{s: s, ref: st.Ref, sessionID: id, restarts: st.Restarts}, 0
		}
	}
	if src == nil {
		c.Header("X-Session-Id", id)
		c.Status(http.StatusNoContent)
		return
	}
	s.streamTurn(c, src, after)
}
