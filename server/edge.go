package server

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/gin-gonic/gin"
)

// Edges are the other protocols an agent is called by (A2A, AG-UI, MCP:
// packages server/a2a, server/agui and server/mcpserver). Each lives in a
// package of its own, so that an embedder links only the ones it serves,
// and each runs its turns through the methods below: the same turn loop,
// turn log, stop from any replica and owners as the API's own endpoints.
// An edge converts chat.Event to its protocol itself, once.
//
// A turn an edge starts logs its events as their own JSON (chat.Event's
// encoding), after a first frame that says so (edgeStart), instead of the
// AI SDK's chunks: a replica that did not run the turn reads the events
// back from the shared turn log (Follow) without a second conversion.

type ownerCtxKey struct{}

// OwnerOf returns the owner (Config.Owner) of a request an edge's route
// serves; "" without the hook.
func OwnerOf(r *http.Request) string {
	o, _ := r.Context().Value(ownerCtxKey{}).(string)
	return o
}

// mountEdges adds the edges' routes to e behind guard.
func (s *Server) mountEdges(e *gin.Engine, guard gin.HandlerFunc) {
	for _, edge := range s.edgeRoutes {
		h := edge.Handler
		serve := func(c *gin.Context) {
			r := c.Request.WithContext(context.WithValue(c.Request.Context(), ownerCtxKey{}, ownerOf(c)))
			for _, p := range c.Params {
				r.SetPathValue(p.Key, p.Value)
			}
			h.ServeHTTP(c.Writer, r)
		}
		if edge.Method == "*" {
			e.Any(edge.Path, guard, serve)
		} else {
			e.Handle(edge.Method, edge.Path, guard, serve)
		}
	}
}

// Agents returns the agents the server serves.
func (s *Server) Agents() *agent.Set { return s.cfg.Agents }

// Turn is a turn an edge started.
type Turn struct {
	s *Server
	t *turn
}

// ID names the turn.
func (t *Turn) ID() string { return t.t.id }

// SessionID is the turn's session, as its client knows it.
func (t *Turn) SessionID() string { return t.t.sessionID }

// Events yields the turn's events from its first until Done, or an error:
// ctx ended, or the server shut down first (*chat.Error).
func (t *Turn) Events(ctx context.Context) iter.Seq2[chat.Event, error] {
	return t.s.localEvents(ctx, t.t)
}

// Stop stops the turn as a person's Stop does: its partial answer is saved
// and it ends with KindAbort and Done. It does nothing to a finished turn.
func (t *Turn) Stop() {
	if _, done := t.t.state(); !done {
		t.t.cancel(chat.StoppedByUser)
	}
}

// Start starts a turn of agentID on the owner's session sessionID with the
// user's message; it returns once the turn started (its session claimed),
// or with the error that kept it from starting (see ErrorStatus). opts
// are the agent's (agent.WithRequest, say: the error is then the agent's
// *agent.DuplicateError when the key already started a turn).
func (s *Server) Start(ctx context.Context, owner, agentID, sessionID, message string, opts ...agent.Option) (*Turn, error) {
	node, err := s.edgeAgent(agentID)
	if err != nil {
		return nil, err
	}
	if s.cfg.MaxMessageBytes > 0 && len(message) > s.cfg.MaxMessageBytes {
		return nil, newError(http.StatusBadRequest, "invalid_message", "the message is %d bytes; the limit is %d", len(message), s.cfg.MaxMessageBytes)
	}
	t, err := s.run(ctx, node, sessionID, owner, turnMode{keepEvents: true, raw: true}, func(ctx context.Context, turnID string, more ...agent.Option) iter.Seq2[chat.Event, error] {
		return node.Run(ctx, sessionID, message, append(append([]agent.Option{agent.WithOwner(owner), agent.WithTurnID(turnID)}, opts...), more...)...)
	})
	if err != nil {
		return nil, err
	}
	return &Turn{s: s, t: t}, nil
}

// Answer starts the turn that carries out answers to the session's calls
// that wait for approval (agent.Agent.Answer), like Start.
func (s *Server) Answer(ctx context.Context, owner, agentID, sessionID string, answers []agent.ApprovalAnswer, opts ...agent.Option) (*Turn, error) {
	node, err := s.edgeAgent(agentID)
	if err != nil {
		return nil, err
	}
	t, err := s.run(ctx, node, sessionID, owner, turnMode{keepEvents: true, raw: true}, func(ctx context.Context, turnID string, more ...agent.Option) iter.Seq2[chat.Event, error] {
		return node.Answer(ctx, sessionID, answers, append(append([]agent.Option{agent.WithOwner(owner), agent.WithTurnID(turnID)}, opts...), more...)...)
	})
	if err != nil {
		return nil, err
	}
	return &Turn{s: s, t: t}, nil
}

func (s *Server) edgeAgent(id string) (*agent.Agent, error) {
	node, ok := s.cfg.Agents.Get(id)
	if !ok {
		return nil, newError(http.StatusNotFound, "agent_not_found", "no agent %q", id)
	}
	return node, nil
}

// ErrorStatus describes an error of Start, Answer, Stop, Follow or
// Session as the API would answer it: an HTTP status, a stable code and a
// message safe to show.
func ErrorStatus(err error) (status int, code, message string) {
	var ce *chat.Error
	if errors.As(err, &ce) {
		e := turnErrorStatus(ce)
		return e.Status, e.Code, e.Message
	}
	if errors.Is(err, ErrTurnNotFound) {
		return http.StatusNotFound, "turn_not_found", "no such turn"
	}
	e := turnStartError(err)
	return e.Status, e.Code, e.Message
}

// ErrTurnNotFound: Follow found no turn of that ID in the session (never
// started there, another owner's, not started by an edge, or no longer
// kept).
var ErrTurnNotFound = errors.New("turn not found")

// Stop stops the running turn of the owner's session, on whichever replica
// runs it (the API's POST /api/sessions/:id/stop): the ID of the turn being
// stopped, "" when none was running.
func (s *Server) Stop(ctx context.Context, owner, sessionID string) (turnID string, err error) {
	if !session.ValidID(sessionID) {
		return "", errBadSessionID("the session ID")
	}
	sess, err := s.ownSession(ctx, owner, sessionID)
	if err != nil {
		return "", err
	}
	return s.stopSession(ctx, sess)
}

// Session reads the owner's session; another owner's is session.ErrNotFound.
func (s *Server) Session(ctx context.Context, owner, sessionID string) (session.Session, error) {
	if !session.ValidID(sessionID) {
		return session.Session{}, errBadSessionID("the session ID")
	}
	return s.ownSession(ctx, owner, sessionID)
}

func (s *Server) ownSession(ctx context.Context, owner, id string) (session.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := s.cfg.Store.Get(ctx, session.Key(owner, id))
	if err == nil && sess.Owner != owner {
		err = session.ErrNotFound
	}
	return sess, err
}

// Follow yields the events of a turn an edge started on the owner's
// session, from its first until Done, wherever it runs: from this
// replica's log, or from the shared turn log (Config.Turns). It fails with
// ErrTurnNotFound when no such turn is kept.
func (s *Server) Follow(ctx context.Context, owner, sessionID, turnID string) (iter.Seq2[chat.Event, error], error) {
	key := session.Key(owner, sessionID)
	if t := s.turns.get(turnID); t != nil && t.key == key {
		if !t.raw {
			return nil, ErrTurnNotFound
		}
		return s.localEvents(ctx, t), nil
	}
	if s.cfg.Turns == nil || !session.ValidID(sessionID) || !session.ValidID(turnID) {
		return nil, ErrTurnNotFound
	}
	st, found, err := s.sharedLookup(ctx, key, turnID, owner)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrTurnNotFound
	}
	src := &sharedTurn{s: s, ref: turnlog.Ref{Session: key, Turn: st.Turn}, sessionID: sessionID}
	return s.sharedEvents(ctx, src), nil
}

// localEvents yields the events of a turn of this replica.
func (s *Server) localEvents(ctx context.Context, t *turn) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		stopped := false
		err := follow(ctx, t, s.cfg.Heartbeat, func(ev chat.Event) {
			if !stopped && !yield(ev, nil) {
				stopped = true
			}
		}, nil)
		if err != nil && !stopped {
			yield(chat.Event{}, err)
		}
	}
}

// sharedEvents yields the events of a turn another replica runs, decoded
// from the shared log's frames.
func (s *Server) sharedEvents(ctx context.Context, src *sharedTurn) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		tick := time.NewTicker(s.cfg.Heartbeat)
		defer tick.Stop()
		var after int64
		for {
			frames, done, cerr := src.next(ctx, after, tick.C, s.closing)
			if cerr != nil {
				yield(chat.Event{}, cerr)
				return
			}
			for _, f := range frames {
				after = f.seq
				if f.seq == 1 {
					if string(f.data) != string(edgeStart) {
						yield(chat.Event{}, ErrTurnNotFound)
						return
					}
					continue
				}
				var ev chat.Event
				if err := json.Unmarshal(f.data, &ev); err != nil {
					yield(chat.Event{}, &chat.Error{Code: "internal_error", Message: "a frame of the turn could not be read"})
					return
				}
				if !yield(ev, nil) || ev.Kind == chat.KindDone {
					return
				}
			}
			switch {
			case done && len(frames) == 0:
				return
			case ctx.Err() != nil:
				yield(chat.Event{}, ctx.Err())
				return
			case isClosed(s.closing) && len(frames) == 0:
				yield(chat.Event{}, errShutdown)
				return
			}
		}
	}
}

// TurnStatus reports whether a turn of the owner's session is kept (on
// this replica or in the shared log) and whether it has ended.
func (s *Server) TurnStatus(ctx context.Context, owner, sessionID, turnID string) (found, done bool, err error) {
	key := session.Key(owner, sessionID)
	if t := s.turns.get(turnID); t != nil && t.key == key {
		_, done := t.state()
		return true, done, nil
	}
	st, found, err := s.sharedLookup(ctx, key, turnID, owner)
	if err != nil || !found {
		return false, false, err
	}
	return true, st.Done || !s.alive(st), nil
}

// edgePaths are the edges' route patterns: every edge may stream, so none
// gets a request span (traceRequests).
func (s *Server) edgePaths() []string {
	var out []string
	for _, r := range s.edgeRoutes {
		out = append(out, r.Path)
	}
	return out
}
