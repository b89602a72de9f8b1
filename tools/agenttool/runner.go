package agenttool

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

// Runner runs the turns that local agent tools ask: the server's turn
// runtime (cmd/server adapts turns.Runtime to it), or, for a program
// without a server, the agents of the Set itself (agent.Direct, what
// agent.Load gives them when agent.Options.AgentTools has no Runner). Whatever runs them, a child turn is a
// turn like a person's: its session is its own, and it can be followed
// and stopped.
type Runner interface {
	// Start starts a turn of r.Agent on the owner's session r.Session
	// with r.Message (the session is created on its first turn), and
	// returns once it started. When the session already has the turn
	// that r.Key started (a call run again after a takeover), it returns
	// that turn, running or ended, whose events come from its first.
	Start(ctx context.Context, r Request) (Turn, error)
	// Answer starts the turn that carries out decisions on the approvals
	// the session waits for, with r.Key as Start's (r.Message is unused).
	Answer(ctx context.Context, r Request, decisions []chat.Decision) (Turn, error)
}

// Request is a turn a local agent tool asks for.
type Request struct {
	// Owner owns the session (the caller's owner); Agent is the agent
	// asked, Session its session (session.ChildID).
	Owner, Agent, Session string
	Message               string
	// Key is the turn's idempotency key: one per call of the caller.
	Key string
}

// Turn is a turn a Runner started or found.
type Turn interface {
	// Events yields the turn's events from its first until Done, or an
	// error when they cannot be read (ctx ended).
	Events(ctx context.Context) iter.Seq2[chat.Event, error]
	// Stop stops the turn (a person's stop: its partial answer is
	// saved, and it ends with KindAbort and Done), wherever it runs; it
	// does nothing to a turn that ended.
	Stop()
}

// Answered is the turn that a request key started on a session, once
// that turn ended and is no longer kept: its answer as the session's
// history has it (the text after the request's user message), as one
// text event and Done. It is what a Runner whose turns are kept only a
// while gives for such a key.
func Answered(ctx context.Context, store session.Store, owner, sessionID, key string) (Turn, error) {
	k := session.Key(owner, sessionID)
	sess, err := store.Get(ctx, k)
	if err != nil {
		return nil, err
	}
	r, ok := sess.RequestOf(key)
	if !ok {
		return nil, fmt.Errorf("the session keeps no turn of request %s", key)
	}
	msgs, err := store.Messages(ctx, k, 0)
	if err != nil {
		return nil, err
	}
	users, text := 0, ""
	for _, m := range msgs {
		if m.Role == chat.RoleUser {
			users++
			continue
		}
		if users == r.UserMessages && m.Role == chat.RoleAssistant {
			text += m.Content
		}
	}
	// Numbered as the history counts them; a history cut to its cap
	// has lost the answer.
	if users < r.UserMessages {
		return nil, errors.New("the session no longer keeps the answer")
	}
	e := ended{text: text}
	// A turn that ended waiting for approvals waits for them still when it
	// is the session's latest: a later turn would have denied them.
	if n := len(sess.Requests); n > 0 && sess.Requests[n-1].Key == key {
		for _, a := range sess.PendingApprovals() {
			if !a.Client {
				e.pending = append(e.pending, a)
			}
		}
	}
	return e, nil
}

// ended is a turn that ended before it was asked for: its answer, and the
// approvals it waits for.
type ended struct {
	text    string
	pending []session.Approval
}

func (e ended) Events(context.Context) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		if e.text != "" && !yield(chat.Event{Kind: chat.KindTextDelta, Text: e.text}, nil) {
			return
		}
		for _, a := range e.pending {
			call := a.Call
			ap := &chat.Approval{ID: a.ID, ToolCallID: call.ID, Agent: a.Agent, Call: a.AgentCall}
			if !yield(chat.Event{Kind: chat.KindApproval, ToolCall: &call, Approval: ap}, nil) {
				return
			}
		}
		finish := chat.FinishStop
		if len(e.pending) > 0 {
			finish = chat.FinishApproval
		}
		yield(chat.Event{Kind: chat.KindDone, FinishReason: finish}, nil)
	}
}

func (ended) Stop() {}
