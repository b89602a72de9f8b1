package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
)

// The webhook calls a server owes go through an outbox (package outbox) on
// Config.Outbox, so that they outlive the replica that owes them: a
// background run's call is queued when the run starts, naming its turn,
// and made by the replica that runs it once the turn ended; if that
// replica dies or shuts down first (its turn going on elsewhere), the
// replica that takes the call up follows the turn to its end, wherever it
// runs, and makes it. A call that failed is made again, with a doubling
// wait, by whichever replica's sweep finds it due. Every call of one event
// has the same webhook-id; a receiver may get it more than once and keeps
// the first.

// startOutbox makes the outbox of the server's webhook calls: none when
// the server calls no webhook (no hosts of its own, nor keys that may
// have theirs).
func (s *Server) startOutbox() error {
	if len(s.cfg.WebhookHosts) == 0 && s.cfg.Webhooks == nil {
		return nil
	}
	o, err := outbox.New(outbox.Config{
		Store:    s.cfg.Outbox,
		Send:     s.sendWebhook,
		Resolve:  s.resolveRun,
		Attempts: s.cfg.WebhookAttempts,
		Backoff:  s.cfg.WebhookBackoff,
		Hold:     s.cfg.WebhookHold,
		Logger:   s.log,
	})
	if err != nil {
		return fmt.Errorf("server: the webhooks' outbox: %w", err)
	}
	s.outbox = o
	return nil
}

// closeOutbox ends the outbox's work on this replica: a call under way is
// left to the other replicas.
func (s *Server) closeOutbox(ctx context.Context) {
	if s.outbox == nil {
		return
	}
	if err := s.outbox.Close(ctx); err != nil {
		s.log.Warn("shutdown: webhook calls still under way", "err", err)
	}
}

// queueWebhook queues a webhook call.
func (s *Server) queueWebhook(d outbox.Delivery) {
	if s.outbox == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.outbox.Add(ctx, d); err != nil {
		s.log.Error("a webhook call could not be queued; it will not be made", "host", hostOf(d.Target), "err", err)
	}
}

// sendWebhook makes one call of a queued webhook (outbox.Config.Send),
// signed with the secret of the delivery's owner on this replica (every
// replica has the same keys): a network error, 408, 429 or a 5xx is tried
// again later; another failure is final, and so is a target this replica
// does not post to for the owner.
func (s *Server) sendWebhook(ctx context.Context, d outbox.Delivery) error {
	if err := s.checkWebhook(d.Owner, d.Target); err != nil {
		return fmt.Errorf("%w: %w", outbox.ErrGiveUp, err)
	}
	status, err := s.postWebhook(ctx, s.webhooksOf(d.Owner).Secret, d.Target, d.ID, d.Body)
	switch {
	case err != nil:
		return err
	case status < 300:
		return nil
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return fmt.Errorf("the receiver answered %d", status)
	}
	return fmt.Errorf("the receiver answered %d: %w", status, outbox.ErrGiveUp)
}

// resolveRun follows the background run a queued call reports on to its
// end, wherever its turn runs (reading it from another replica takes it
// over when its replica died), and makes the call's event
// (outbox.Config.Resolve). It fails when the turn cannot be followed to
// its end from here now (this replica shuts down, handing the turn over;
// the shared log does not answer): the call is taken up again.
func (s *Server) resolveRun(ctx context.Context, d outbox.Delivery) ([]byte, error) {
	r := d.Run
	out := turnOutcome{SessionID: r.Session, TurnID: r.Turn, AgentID: r.Agent, Status: "completed"}
	t, err := s.rt.Turn(ctx, d.Owner, r.Session, r.Turn)
	switch {
	case errors.Is(err, turns.ErrTurnNotFound) || errors.Is(err, session.ErrNotFound):
		// Its events are no longer kept (the call waited past
		// STREAM_RETENTION): the session has the answer.
		out.Status, out.Error = "failed", turns.ErrTurnGone
	case err != nil:
		return nil, err
	default:
		if out, err = followRun(ctx, t, out); err != nil {
			return nil, err
		}
	}
	return mustJSON(webhookEvent{Type: "turn.completed", Owner: d.Owner, Timestamp: time.Now().UTC(), Data: out}), nil
}

// followRun reads the run's turn to its end into out; an error that does
// not end the turn (this replica shutting down, the shared log out of
// reach, ctx) fails it, to be followed again later.
func followRun(ctx context.Context, t *turns.Turn, out turnOutcome) (turnOutcome, error) {
	var text chat.AnswerText
	for ev, err := range t.Events(ctx, 0) {
		if err != nil {
			ce, ok := err.(*chat.Error)
			if !ok || ce.Code == turns.ErrHandedOver.Code || ce.Code == turns.ErrShutdown.Code || ce.Code == llmorch.CodeStoreUnavailable {
				return out, err
			}
			if out.Error == nil {
				out.Error = ce
			}
			break
		}
		text.Add(ev)
		switch ev.Kind {
		case chat.KindError:
			out.Error = ev.Error
		case chat.KindDone:
			out.FinishReason = string(ev.FinishReason)
		}
	}
	out.Text = text.String()
	switch {
	case out.Error != nil:
		out.Status = "failed"
	case out.FinishReason == string(chat.FinishStop):
	case out.FinishReason == string(chat.FinishLength), out.FinishReason == chat.FinishGuardrail:
		out.Status = "incomplete"
	default:
		out.Status = "cancelled"
	}
	return out, nil
}
