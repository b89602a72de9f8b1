package server

import (
	"net/http"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/gin-gonic/gin"
)

// Resuming a stream: a turn's frames from the client's Last-Event-ID, on
// the replica that runs the turn or, through the shared turn log, on any
// other (docs/api.md, "Resuming").

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
				src, after = &sharedTurn{s: s, ref: turnlog.Ref{Session: key, Turn: turnID}, sessionID: id, restarts: restarts, ahead: seq > last}, seq
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
