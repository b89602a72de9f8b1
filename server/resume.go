package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
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
	if _, ok := s.rt.Agents().Get(agentID); !ok {
		abortWith(c, newError(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", agentID))
		return
	}
	s.resume(c, agentID)
}

// resume serves a resume of the session named by the :id parameter; with
// agentID set, another agent's turn is treated as not kept. The rule
// (docs/api.md, "Resuming"):
//   - Last-Event-ID "<turnId>:<n>[.<k>]" naming a kept turn of this
//     session: the frames after n, then live until the turn ends; 204 when
//     the turn is finished and n is its last frame, unless a newer turn of
//     the session is running, which is then streamed from its start. A
//     takeover the client did not count (k), at or before n, means its
//     frames from there on were a dead replica's: it gets the frames from
//     the takeover's restart on.
//   - no Last-Event-ID, or one naming a turn no longer kept: the session's
//     running turn from its first frame; 204 when none is running.
func (s *Server) resume(c *gin.Context, agentID string) {
	id := c.Param("id")
	if !session.ValidID(id) {
		abortWith(c, errBadSessionID("the session ID in the path"))
		return
	}
	ctx, owner := c.Request.Context(), ownerOf(c)
	otherAgent := func(a string) bool { return agentID != "" && a != agentID }
	if lei := c.GetHeader("Last-Event-ID"); lei != "" {
		turnID, n, k, err := wire.ParseEventID(lei)
		if err != nil {
			abortWith(c, newParamError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID", "Last-Event-ID %q: %s", lei, err.Error()))
			return
		}
		t, err := s.rt.Turn(ctx, owner, id, turnID)
		switch {
		case errors.Is(err, turns.ErrTurnNotFound):
		case err != nil:
			s.abortStore(c, "resuming a stream", id, err)
			return
		case !otherAgent(t.Agent()):
			pos, err := s.position(ctx, t)
			if err != nil {
				if errors.Is(err, turns.ErrGap) {
					abortWith(c, newParamError(http.StatusGone, "stream_gap", "Last-Event-ID", "the events after %q were dropped (the turn had more than %d); read the answer from GET /api/sessions/%s", lei, s.rt.MaxEvents(), id))
					return
				}
				s.abortStore(c, "resuming a stream", id, err)
				return
			}
			// The client's frames from an uncounted takeover on are void.
			at := n
			for i, r := range pos.restarts {
				if i >= k && r <= at {
					at = r - 1
					break
				}
			}
			final := pos.done || t.Local()
			switch {
			case k > len(pos.restarts) && final:
				abortWith(c, newParamError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID", "Last-Event-ID %q counts %d takeovers of the turn; it had %d", lei, k, len(pos.restarts)))
				return
			case at > pos.frames && final:
				// On the turn's own replica its events are all there; in
				// the shared log a running turn's last ones may still be
				// on their way, so a client ahead of it waits for them.
				abortWith(c, newParamError(http.StatusBadRequest, "invalid_last_event_id", "Last-Event-ID", "Last-Event-ID %q is ahead of the turn's last event %q", lei, wire.RestartedEventID(turnID, pos.frames, len(pos.restarts))))
				return
			case pos.done && at == pos.frames:
				// Read to its end: a newer turn, if one runs, follows.
			default:
				s.streamTurn(c, t, seen{after: n, restarts: k})
				return
			}
		}
	}
	t, err := s.rt.Running(ctx, owner, id)
	if err != nil {
		s.abortStore(c, "resuming a stream", id, err)
		return
	}
	if t == nil || otherAgent(t.Agent()) {
		c.Header("X-Session-Id", id)
		c.Status(http.StatusNoContent)
		return
	}
	s.streamTurn(c, t, wholeReplay(ctx, t))
}

// abortStore answers a failure of the stores (the session's, the shared
// turn log's), logged as what failed.
func (s *Server) abortStore(c *gin.Context, what, sessionID string, err error) {
	e := turns.Describe(err)
	if e.Status >= 500 {
		s.log.Error(what, "session", sessionID, "err", err)
	}
	abortWith(c, e)
}

// streamPosition is where a turn's stream is: its frames so far, the first
// frame of each takeover's restart, and whether it ended.
type streamPosition struct {
	frames   int64
	restarts []int64
	done     bool
}

// position maps the events of t that are there now, without writing
// them: the numbers of its frames depend on every event before them.
func (s *Server) position(ctx context.Context, t *turns.Turn) (streamPosition, error) {
	events, done, err := t.Read(ctx, 0)
	if err != nil {
		return streamPosition{}, err
	}
	m := uiMapper{turnID: t.ID()}
	var pos streamPosition
	for _, ev := range events {
		if ev.Kind == chat.KindRestart {
			pos.restarts = append(pos.restarts, m.frames+1)
		}
		m.add(ev, false)
	}
	pos.frames, pos.done = m.frames, done
	return pos, nil
}
