package turns

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/turnlog"
)

// Input is what starts a turn through the runtime: the agent's input
// (agent.Input: the message, answers or results, and what the request
// brings), the agent and the session, and what to do when a turn already
// runs on the session.
type Input struct {
	agent.Input
	// Agent is the agent's ID; Session the session's ID as the client
	// knows it (the owner is Input.Owner).
	Agent   string
	Session string
	// Busy is the request's busy policy (template.BusyReject,
	// BusyEnqueue or BusyInterrupt; see docs/api.md, "Busy sessions"):
	// "" takes the agent's options.busy, and without it DefaultBusy, the
	// door's default ("" is BusyReject).
	Busy, DefaultBusy string
}

// Policy is the busy policy of in for node: the request's, else the
// template's, else the door's default. A turn without a message (answers
// to approvals, results of client tools) goes on from the answer the
// session holds, which a running turn may change: it is refused at once
// (BusyReject) rather than queued or run over another.
func (in Input) Policy(node *agent.Agent) string {
	switch {
	case in.Text == "" && len(in.Attachments) == 0:
		return template.BusyReject
	case in.Busy != "":
		return in.Busy
	case node.Template().Options.Busy != "":
		return node.Template().Options.Busy
	case in.DefaultBusy != "":
		return in.DefaultBusy
	}
	return template.BusyReject
}

// Start starts a turn and returns once it started (its session claimed,
// its first event out), or with the error that kept it from starting
// (Describe says how every door answers it). The turn runs in a goroutine
// of its own under a context that keeps ctx's values (an embedder's
// middleware may put its user there, for tools to read) but not its
// cancellation: the request that started the turn may go away; the
// runtime's shutdown still ends it. ctx bounds the wait for a busy session
// (enqueue, interrupt).
//
// A message for a session where a turn runs meets the busy policy
// (Input.Policy): BusyReject fails with session.ErrBusy; BusyEnqueue
// queues it in the store (a session.Queuer), so that whichever replica it
// reached starts its turn once the turns queued before it started, in the
// order they came (ErrQueueFull past Config.MaxQueue, a *Problem
// session_busy past Config.QueueWait); BusyInterrupt stops the running
// turn, on whichever replica runs it (its partial answer is saved), and
// starts the message's turn at once.
//
// When in.Key names a request that already started a turn on the session
// (a client's retry), Start returns that turn instead (Turn.Replayed):
// from this replica, the shared log or, once neither keeps it, rebuilt
// from the answer the session stored.
func (r *Runtime) Start(ctx context.Context, in Input) (*Turn, error) {
	node, ok := r.cfg.Agents.Get(in.Agent)
	if !ok {
		return nil, NewProblem(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", in.Agent)
	}
	if r.cfg.MaxMessageBytes > 0 && len(in.Text) > r.cfg.MaxMessageBytes {
		// The door names the field (its request's shape).
		return nil, NewProblem(http.StatusBadRequest, "invalid_message", "the message is %d bytes; the limit is %d", len(in.Text), r.cfg.MaxMessageBytes)
	}
	if in.Busy != "" && !template.ValidBusy(in.Busy) {
		return nil, ParamProblem(http.StatusBadRequest, "invalid_busy", "busy", "busy must be %s, %s or %s, got %q", template.BusyReject, template.BusyEnqueue, template.BusyInterrupt, in.Busy)
	}
	key := session.Key(in.Owner, in.Session)
	start := func() (*turn, error) { return r.run(ctx, node, in.Session, in.Input) }
	t, err := start()
	if errors.Is(err, session.ErrBusy) && !in.Stateless {
		if _, dup := r.duplicateOf(ctx, key, in.Key, err); !dup {
			switch in.Policy(node) {
			case template.BusyInterrupt:
				t, err = r.interrupt(ctx, key, start)
			case template.BusyEnqueue:
				t, err = r.enqueue(ctx, key, start)
			}
		}
	}
	if err == nil {
		return r.localTurn(t), nil
	}
	if req, ok := r.duplicateOf(ctx, key, in.Key, err); ok {
		return r.replay(ctx, node.ID(), in.Owner, in.Session, req)
	}
	return nil, err
}

// queuePoll is how often a queued message looks whether its turn came: a
// replica cannot hear another's release, so it asks the store, one round
// trip per waiting message per poll.
const queuePoll = 50 * time.Millisecond

// interrupt stops the session's running turn and starts the new one as
// soon as the session is free.
func (r *Runtime) interrupt(ctx context.Context, key string, start func() (*turn, error)) (*turn, error) {
	deadline := time.Now().Add(r.cfg.QueueWait)
	for i := 0; ; i++ {
		// Stopped, the turn takes a moment to save its partial answer
		// and free the session; a turn that took the session meanwhile
		// (a queued message's) is stopped in its turn.
		if i%20 == 0 {
			sess, err := r.readSession(ctx, key)
			if err != nil {
				return nil, err
			}
			if _, err := r.stopSession(ctx, sess); err != nil {
				return nil, err
			}
		}
		t, err := start()
		if !errors.Is(err, session.ErrBusy) {
			return t, err
		}
		if err := pause(ctx, deadline); err != nil {
			return nil, err
		}
	}
}

func (r *Runtime) readSession(ctx context.Context, key string) (session.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return r.cfg.Store.Get(ctx, key)
}

// enqueue queues the message in the store and starts its turn when the
// turns queued before it started and the session is free: it wakes on the
// store's notice of the session's release (session.Waiters), not by
// polling. The message leaves the queue when its turn starts, or when its
// client goes away.
func (r *Runtime) enqueue(ctx context.Context, key string, start func() (*turn, error)) (*turn, error) {
	if r.waiters == nil {
		// A store without queues: the message waits for the session,
		// in no particular order with others that wait.
		deadline := time.Now().Add(r.cfg.QueueWait)
		for {
			if err := pause(ctx, deadline); err != nil {
				return nil, err
			}
			if t, err := start(); !errors.Is(err, session.ErrBusy) {
				return t, err
			}
		}
	}
	var t *turn
	err := r.waiters.Wait(ctx, key, r.cfg.MaxQueue, time.Now().Add(r.cfg.QueueWait), func() (bool, error) {
		var err error
		t, err = start()
		if errors.Is(err, session.ErrBusy) {
			return false, nil
		}
		return true, err
	})
	switch {
	case errors.Is(err, session.ErrQueueFull):
		return nil, errQueueFull(r.cfg.MaxQueue)
	case errors.Is(err, session.ErrTooManyWaiting):
		return nil, NewProblem(http.StatusTooManyRequests, "too_many_queued", "this API key has as many messages waiting for busy sessions as it may (MAX_QUEUED_PER_OWNER); wait for them, or send with busy: reject")
	case errors.Is(err, session.ErrWaitedTooLong):
		return nil, errQueueWait
	}
	return t, err
}

// pause waits queuePoll, or returns why the wait is over: the client went
// away, or the deadline (QueueWait) passed.
func pause(ctx context.Context, deadline time.Time) error {
	if time.Now().After(deadline) {
		return errQueueWait
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(queuePoll):
		return nil
	}
}

// Queued is how many messages wait in the queue of the session with store
// key key (0 when the store keeps no queues).
func (r *Runtime) Queued(ctx context.Context, key string) (int, error) {
	q, ok := r.cfg.Store.(session.Queuer)
	if !ok {
		return 0, nil
	}
	return q.Queued(ctx, key)
}

// duplicateOf reports the request that already started a turn under key
// when err says a turn could not start because of it: the agent's
// *DuplicateError, or a busy session whose running turn is that request's
// own (a client retrying while its first attempt still runs), which one
// read of the session tells.
func (r *Runtime) duplicateOf(ctx context.Context, storeKey, key string, err error) (session.Request, bool) {
	if dup, ok := errors.AsType[*agent.DuplicateError](err); ok {
		return dup.Request, true
	}
	if key == "" || !errors.Is(err, session.ErrBusy) {
		return session.Request{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, gerr := r.cfg.Store.Get(ctx, storeKey)
	if gerr != nil {
		return session.Request{}, false
	}
	return sess.RequestOf(key)
}

// replay is the turn a retried request gets instead of a second one: the
// turn its first attempt started, while this replica or the shared turn
// log keeps it; else that turn's answer as the session stored it, as a
// finished turn.
func (r *Runtime) replay(ctx context.Context, agentID, owner, sessionID string, req session.Request) (*Turn, error) {
	key := session.Key(owner, sessionID)
	var out *Turn
	st, shared, err := r.sharedLookup(ctx, key, req.Turn, owner)
	if err == nil && !shared && r.turns.get(req.Turn) == nil {
		// Not listed: its replica died before its first events reached
		// the log, and the turn goes on, taken over.
		st, shared, err = r.unlistedRunning(ctx, key, owner, st, shared)
		shared = shared && st.Turn == req.Turn
	}
	if t := r.turns.get(req.Turn); t != nil && t.key == key {
		out = r.localTurn(t)
	} else if err == nil && shared && st.AgentID == agentID {
		out = r.sharedTurn(turnlog.Ref{Session: key, Turn: req.Turn}, owner, sessionID, agentID)
	} else {
		t, err := r.storedAnswer(ctx, key, sessionID, agentID, owner, req)
		if err != nil {
			return nil, err
		}
		out = r.localTurn(t)
	}
	out.replayed = true
	return out, nil
}

// storedAnswer is the answer the session stored for the turn req started
// (agent.AnswerTo), as the finished turn of that ID: its text, tool calls
// and results, and Done with finish stop; a turn that ended without its
// answer ends with turn_interrupted instead.
func (r *Runtime) storedAnswer(ctx context.Context, key, sessionID, agentID, owner string, req session.Request) (*turn, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := r.cfg.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading the session of a retried request: %w", err)
	}
	msgs, err := r.cfg.Store.Messages(ctx, key, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the history of a retried request: %w", err)
	}
	answer, err := agent.AnswerTo(sess, msgs, req)
	if errors.Is(err, agent.ErrAnswerGone) {
		return nil, NewProblem(http.StatusConflict, "duplicate_request", "this request already started turn %s on session %s, and its answer is no longer kept apart from the session's history: read it from GET /api/sessions/%s", req.Turn, sessionID, sessionID)
	}
	end := []chat.Event{{Kind: chat.KindDone, FinishReason: chat.FinishStop}}
	if errors.Is(err, agent.ErrTurnInterrupted) {
		end = []chat.Event{{Kind: chat.KindError, Error: errNoAnswer}, {Kind: chat.KindDone, FinishReason: chat.FinishError}}
	}
	t := newTurn(req.Turn, sessionID, agentID, owner, func(error) {}, r.cfg.MaxEvents, 0)
	t.add(chat.Event{Kind: chat.KindStart, Start: &chat.Start{Turn: req.Turn, Message: req.Turn}})
	for _, msg := range answer {
		t.add(answerEvents(msg)...)
	}
	t.add(end[:len(end)-1]...)
	t.addLast(end[len(end)-1])
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
