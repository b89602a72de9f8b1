package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
)

// A message sent while a turn runs on its session meets the session's busy
// policy (docs/api.md, "Busy sessions"): template.BusyReject answers 409
// session_busy; template.BusyEnqueue queues it in the store (a
// session.Queuer), so that whichever replica it reached starts its turn
// once the turns queued before it started, in the order they came;
// template.BusyInterrupt stops the running turn, on whichever replica runs
// it (its partial answer is saved), and starts the message's turn at once.

// queuePoll is how often a message that interrupts a turn, or waits on a
// store without queues, looks whether the session is free.
const queuePoll = 50 * time.Millisecond

// busyPolicy is a request's busy policy: the one it asks for (the chat
// body's busy, or the X-Busy header), else its agent's options.busy,
// else def, the endpoint's.
func busyPolicy(r *http.Request, asked string, node *agent.Agent, def string) (string, *apiError) {
	if asked == "" {
		asked = r.Header.Get("X-Busy")
	}
	if asked != "" {
		if !template.ValidBusy(asked) {
			return "", newParamError(http.StatusBadRequest, "invalid_busy", "busy", "busy must be %s, %s or %s, got %q", template.BusyReject, template.BusyEnqueue, template.BusyInterrupt, asked)
		}
		return asked, nil
	}
	if p := node.Template().Options.Busy; p != "" {
		return p, nil
	}
	return def, nil
}

// startBusy starts a turn with start, under policy when the session (key,
// its store key) is busy. A busy session whose running turn is the
// request's own (reqKey, its idempotency key) is not waited for: the
// error goes back for the caller to replay that turn.
func (s *Server) startBusy(ctx context.Context, policy, key, reqKey string, start func() (*turn, error)) (*turn, error) {
	t, err := start()
	if !errors.Is(err, session.ErrBusy) || policy == template.BusyReject {
		return t, err
	}
	if _, dup := s.duplicateOf(ctx, key, reqKey, err); dup {
		return nil, err
	}
	if policy == template.BusyInterrupt {
		return s.interrupt(ctx, key, start)
	}
	return s.enqueue(ctx, key, start)
}

// interrupt stops the session's running turn and starts the new one as
// soon as the session is free.
func (s *Server) interrupt(ctx context.Context, key string, start func() (*turn, error)) (*turn, error) {
	deadline := time.Now().Add(s.cfg.QueueWait)
	for i := 0; ; i++ {
		// Stopped, the turn takes a moment to save its partial answer
		// and free the session; a turn that took the session meanwhile
		// (a queued message's) is stopped in its turn.
		if i%20 == 0 {
			sess, err := s.readSession(ctx, key)
			if err != nil {
				return nil, err
			}
			if _, err := s.stopSession(ctx, sess); err != nil {
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

func (s *Server) readSession(ctx context.Context, key string) (session.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return s.cfg.Store.Get(ctx, key)
}

// enqueue queues the message in the store and starts its turn when the
// turns queued before it started and the session is free
// (session.Waiters: it waits on the store's notices, not by polling).
func (s *Server) enqueue(ctx context.Context, key string, start func() (*turn, error)) (*turn, error) {
	if s.waiters == nil {
		// A store without queues: the message waits for the session,
		// in no particular order with others that wait.
		deadline := time.Now().Add(s.cfg.QueueWait)
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
	err := s.waiters.Wait(ctx, key, s.cfg.MaxQueue, time.Now().Add(s.cfg.QueueWait), func() (bool, error) {
		var err error
		t, err = start()
		if errors.Is(err, session.ErrBusy) {
			return false, nil
		}
		return true, err
	})
	switch {
	case errors.Is(err, session.ErrQueueFull):
		return nil, newError(http.StatusConflict, "session_queue_full", "a turn is running on this session and %d messages wait for it already (MAX_QUEUE); wait for them, or send with busy: interrupt", s.cfg.MaxQueue)
	case errors.Is(err, session.ErrTooManyWaiting):
		return nil, newError(http.StatusTooManyRequests, "too_many_queued", "this API key has as many messages waiting for busy sessions as it may (MAX_QUEUED_PER_OWNER); wait for them, or send with busy: reject")
	case errors.Is(err, session.ErrWaitedTooLong):
		return nil, errWaitedTooLong()
	}
	return t, err
}

// pause waits queuePoll, or returns why the wait is over: the client went
// away, or the deadline (QueueWait) passed.
func pause(ctx context.Context, deadline time.Time) error {
	if time.Now().After(deadline) {
		return errWaitedTooLong()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(queuePoll):
		return nil
	}
}

func errWaitedTooLong() *apiError {
	return newError(http.StatusConflict, "session_busy", "a turn is running on this session and the message waited for it longer than QUEUE_WAIT; send it again, or with busy: interrupt")
}

// queued is how many messages wait in the session's queue (0 when the
// store keeps no queues).
func (s *Server) queued(ctx context.Context, key string) (int, error) {
	q, ok := s.cfg.Store.(session.Queuer)
	if !ok {
		return 0, nil
	}
	return q.Queued(ctx, key)
}
