package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
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

func summarize(n *agent.Node) agentSummary {
	t := n.Template()
	info := n.ModelInfo()
	return agentSummary{
		ID: n.ID(), Name: t.Name, Description: t.Description, Tags: nonNil(t.Tags),
		ChatPrompts: nonNil(t.ChatSettings.ChatPrompts), InitialMessages: nonNil(t.ChatSettings.InitialMessages),
		Model: modelInfo{Provider: info.Provider, Model: info.Model}, Offline: info.Provider == "offline",
		HasOrchestration: len(t.Steps()) > 0,
	}
}

func (s *Server) listAgents(c *gin.Context) {
	list := s.cfg.Agents.List()
	out := make([]agentSummary, 0, len(list))
	for _, n := range list {
		out = append(out, summarize(n))
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
	d := agentDetail{agentSummary: summarize(n), Tools: nonNil(t.Tools()), Warnings: nonNil(n.Warnings())}
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
	ID           string              `json:"id"`
	Agent        string              `json:"agent"`
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
}

type turnView struct {
	ID      string `json:"id"`
	Running bool   `json:"running"`
	// LastEventID is the ID of the turn's latest frame.
	LastEventID string `json:"lastEventId"`
}

// loadSession reads the session named by the :id parameter and checks that
// the caller owns it; another owner's session is reported as not found.
func (s *Server) loadSession(c *gin.Context) (session.Session, bool) {
	id := c.Param("id")
	if !session.ValidID(id) {
		abortWith(c, errBadSessionID("the session ID in the path"))
		return session.Session{}, false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	sess, err := s.cfg.Store.Get(ctx, id)
	if err == nil && sess.Owner != ownerOf(c) {
		err = session.ErrNotFound
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
	u := sess.State.TokenUsage
	v := sessionView{
		ID: sess.ID, Agent: sess.Agent, CreatedAt: sess.CreatedAt, LastAccessed: sess.LastAccessed,
		State: sess.State, Usage: usageTotals{Prompt: u.Prompt, Completion: u.Completion, Total: totalOf(u)},
		Messages: msgs,
	}
	if v.Messages == nil {
		v.Messages = []chat.Message{}
	}
	if v.State.RecentlyUsedTools == nil {
		v.State.RecentlyUsedTools = []string{}
	}
	if n, ok := s.cfg.Agents.Get(sess.Agent); ok {
		snap := n.Engine().Snapshot(sess.State)
		v.Orchestration = &snap
	}
	if t := s.turns.latest(sess.ID); t != nil {
		last, done := t.state()
		v.Turn = &turnView{ID: t.id, Running: !done, LastEventID: eventID(t.id, last)}
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) deleteSession(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	if t := s.turns.latest(sess.ID); t != nil {
		if _, done := t.state(); !done {
			abortWith(c, newError(http.StatusConflict, "session_busy", "a turn is running on this session; wait for it to finish before deleting the session"))
			return
		}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Store.Delete(ctx, sess.ID); err != nil {
		e := storeError(err)
		if e.Status >= 500 {
			s.log.Error("deleting a session", "session", sess.ID, "err", err)
		}
		abortWith(c, e)
		return
	}
	s.turns.forgetSession(sess.ID)
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
func (s *Server) resumeStream(c *gin.Context) {
	id := c.Param("id")
	if !session.ValidID(id) {
		abortWith(c, errBadSessionID("the session ID in the path"))
		return
	}
	owner := ownerOf(c)
	var t *turn
	var after int64
	if lei := c.GetHeader("Last-Event-ID"); lei != "" {
		turnID, seq, err := parseEventID(lei)
		if err != nil {
			abortWith(c, newError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID %q: %s", lei, err.Error()))
			return
		}
		// Another owner's turn is treated as not kept, so that its
		// existence does not show.
		if kept := s.turns.get(turnID); kept != nil && kept.owner == owner {
			if kept.sessionID != id {
				abortWith(c, newError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID names a turn of another session"))
				return
			}
			last, done := kept.state()
			if seq > last {
				abortWith(c, newError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID %q is ahead of the turn's last event %q", lei, eventID(turnID, last)))
				return
			}
			if seq+1 < kept.firstKept() {
				abortWith(c, newError(http.StatusGone, "stream_gap", "the events after %q were dropped (the turn had more than %d); read the answer from GET /api/sessions/%s", lei, s.cfg.MaxTurnEvents, id))
				return
			}
			t, after = kept, seq
			if done && seq == last {
				t = nil
			}
		}
	}
	if t == nil {
		if latest := s.turns.latest(id); latest != nil && latest.owner == owner {
			if _, done := latest.state(); !done {
				t, after = latest, 0
			}
		}
	}
	if t == nil {
		c.Header("X-Session-Id", id)
		c.Status(http.StatusNoContent)
		return
	}
	s.streamTurn(c, t, after)
}
