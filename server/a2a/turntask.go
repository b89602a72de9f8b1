package a2a

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
)

// A turn started through another door (the chat API, /v1, AG-UI, MCP)
// is the task "<sessionId>.<turnId>" here, a view of the turn that
// GetTask, SubscribeToTask and CancelTask serve from its events, on any
// replica: an A2A client can follow any turn of its owner's sessions
// (the chat API's responses name both IDs: x-session-id, x-turn-id). The
// view is not stored and not listed (ListTasks), and takes no messages:
// its contextId continues the conversation.

// turnTask splits the ID of a turn's task; false for a task of this door
// (whose IDs have no '.').
func turnTask(id string) (sessionID, turnID string, ok bool) {
	sessionID, turnID, ok = strings.Cut(id, ".")
	return sessionID, turnID, ok && session.ValidID(sessionID) && session.ValidID(turnID)
}

// findTurn finds the turn of a turn's task.
func (e *Edge) findTurn(ctx context.Context, owner, id string) (*turns.Turn, *rpcError) {
	sid, tid, _ := turnTask(id)
	t, err := e.rt.Turn(ctx, owner, sid, tid)
	switch {
	case errors.Is(err, turns.ErrTurnNotFound):
		return nil, errf(codeTaskNotFound, "no task %q: no such turn of session %s is kept (a finished turn's events are kept for STREAM_RETENTION; its answer is in the session)", clip(id), sid)
	case err != nil:
		return nil, fromServer(err)
	}
	return t, nil
}

// turnTaskBegun is a turn's task as its turn began.
func turnTaskBegun(id string, t *turns.Turn) Task {
	return Task{ID: id, ContextID: t.SessionID(), Status: TaskStatus{State: StateWorking, Timestamp: timestamp(time.Now())},
		Metadata: map[string]any{"agent": t.Agent(), "turnId": t.ID()}}
}

// turnView is a turn's task now: its events so far, folded.
func (e *Edge) turnView(ctx context.Context, owner, id string) (Task, *rpcError) {
	t, rerr := e.findTurn(ctx, owner, id)
	if rerr != nil {
		return Task{}, rerr
	}
	events, done, err := t.Read(ctx, 0)
	if err != nil {
		return Task{}, fromServer(err)
	}
	k := newTracker(turnTaskBegun(id, t))
	for _, ev := range events {
		k.add(ev)
	}
	if !done && k.text.Len() > 0 {
		k.task.Artifacts = []Artifact{{ArtifactID: answerArtifact, Name: answerArtifact, Parts: []Part{textPart(k.text.String())}}}
	}
	return k.task, nil
}

// subscribeTurn serves SubscribeToTask for a turn's task: the task as
// its turn began, then its updates from the turn's first event.
func (e *Edge) subscribeTurn(ctx context.Context, owner, id string, emit func(StreamResponse) bool) *rpcError {
	t, rerr := e.findTurn(ctx, owner, id)
	if rerr != nil {
		return rerr
	}
	if _, done, _, err := t.Last(ctx); err != nil {
		return fromServer(err)
	} else if done {
		return errf(codeUnsupported, "task %s ended: there is nothing to subscribe to; GetTask reads it", clip(id))
	}
	task := turnTaskBegun(id, t)
	if !emit(StreamResponse{Task: &task}) {
		return nil
	}
	return relay(newTracker(task), t.Events(ctx, 0), emit)
}

// cancelTurn serves CancelTask for a turn's task: its turn is stopped on
// whichever replica runs it, and the task answered once it ended.
func (e *Edge) cancelTurn(ctx context.Context, owner, id string) (any, *rpcError) {
	t, rerr := e.findTurn(ctx, owner, id)
	if rerr != nil {
		return nil, rerr
	}
	if _, done, _, err := t.Last(ctx); err != nil {
		return nil, fromServer(err)
	} else if done {
		task, rerr := e.turnView(ctx, owner, id)
		if rerr != nil {
			return nil, rerr
		}
		return nil, errf(codeNotCancelable, "task %s is %s and cannot be canceled", clip(id), task.Status.State)
	}
	if err := t.Stop(ctx); err != nil {
		return nil, fromServer(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, err := range t.Events(wait, 0) {
		if err != nil {
			break
		}
	}
	return e.turnView(ctx, owner, id)
}
