package turns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/turnlog"
)

// StreamedSteps reads a turn's steps from the turn log replicas share
// (Config.Log): it is agent.Options.StreamedSteps for a deployment with
// one, so that a turn whose replica died is recovered from what it
// streamed (docs/deploying.md). A log that lost some of the turn's events
// after `after` (more than MaxEvents) yields nothing, rather than a history
// with a hole.
func StreamedSteps(log turnlog.Log) agent.StreamReader {
	return func(ctx context.Context, key, turnID string, after int64) ([]agent.StreamedStep, bool, error) {
		ref := turnlog.Ref{Session: key, Turn: turnID}
		var steps []agent.StreamedStep
		for {
			b, err := log.Read(ctx, ref, after)
			switch {
			case errors.Is(err, turnlog.ErrNotFound), errors.Is(err, turnlog.ErrAhead):
				return nil, false, nil
			case err != nil:
				return nil, false, err
			case b.Gap:
				return nil, false, nil
			}
			events, err := decodeEvents(b.Frames)
			if err != nil {
				return nil, false, err
			}
			for _, ev := range events {
				steps = addStep(steps, ev)
				after = ev.Seq
			}
			if b.Done || len(b.Frames) == 0 {
				return steps, true, nil
			}
		}
	}
}

// addStep folds a turn's event into the steps it streamed.
func addStep(steps []agent.StreamedStep, ev chat.Event) []agent.StreamedStep {
	current := func() *agent.StreamedStep {
		if len(steps) == 0 {
			steps = append(steps, agent.StreamedStep{})
		}
		return &steps[len(steps)-1]
	}
	switch ev.Kind {
	case chat.KindStepStart:
		steps = append(steps, agent.StreamedStep{})
	case chat.KindRestart:
		// Another replica took the turn over: what came before (since the
		// saved part, where the steps start) is void and follows again.
		steps = nil
	case chat.KindTextDelta:
		current().Text += ev.Text
	case chat.KindToolCall:
		if ev.ToolCall != nil {
			st := current()
			st.Calls = append(st.Calls, *ev.ToolCall)
		}
	case chat.KindToolResult:
		if ev.ToolResult != nil {
			st := current()
			st.Results = append(st.Results, *ev.ToolResult)
		}
	}
	return steps
}

// recoverAbandoned saves what a turn whose writer died had streamed, once
// its lease is free, and says in the stream's last error what became of
// its answer.
func (r *Runtime) recoverAbandoned(ctx context.Context, key string) *chat.Error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RecoverWait+5*time.Second)
	defer cancel()
	rec, err := r.cfg.Agents.RecoverTurn(rctx, key, r.cfg.RecoverWait)
	if err != nil {
		r.log.Warn("recovering an interrupted turn", "session", key, "err", err)
	}
	return abandoned(rec, err)
}

// abandoned is the last error of an interrupted turn's stream, saying what
// its recovery (rec, or err when it failed) did with the partial answer.
func abandoned(rec agent.Recovery, err error) *chat.Error {
	if err != nil {
		return &chat.Error{Code: errAbandoned.Code, Message: errAbandoned.Message +
			"; its partial answer could not be saved yet and will be when the session is next used"}
	}
	if rec.Steps > 0 {
		return &chat.Error{Code: errAbandoned.Code, Message: fmt.Sprintf(
			"the server running this turn stopped before the turn ended; the answer it streamed up to then was saved to the session history (%d step(s) recovered)", rec.Steps)}
	}
	return errAbandoned
}

var errAbandoned = &chat.Error{Code: "turn_interrupted", Message: "the server running this turn stopped before the turn ended; what it saved is in the session history"}
