package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/turnlog"
)

// StreamedSteps reads a turn's steps from the turn log replicas share: it
// is agent.Config.StreamedSteps for a deployment whose server has
// Config.Turns, so that a turn whose replica died is recovered from what it
// streamed (docs/deploying.md). The frames are the UI message stream this
// package writes, or the events of an edge's turn; a log that lost some of
// the turn's frames after `after` (more than MaxTurnEvents) yields nothing,
// rather than a history with a hole.
func StreamedSteps(log turnlog.Log) agent.StreamReader {
	return func(ctx context.Context, key, turnID string, after int64) ([]agent.StreamedStep, bool, error) {
		ref := turnlog.Ref{Session: key, Turn: turnID}
		var d stepDecoder
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
			for _, f := range b.Frames {
				d.frame(f.Data)
				after = f.Seq
			}
			if b.Done || len(b.Frames) == 0 {
				return d.steps, true, nil
			}
		}
	}
}

// stepDecoder rebuilds steps from a turn's frames: UI stream chunks
// (uiMapper) or, for an edge's turn, the events' JSON (rawEvent).
type stepDecoder struct {
	steps []agent.StreamedStep
}

func (d *stepDecoder) current() *agent.StreamedStep {
	if len(d.steps) == 0 {
		d.steps = append(d.steps, agent.StreamedStep{})
	}
	return &d.steps[len(d.steps)-1]
}

// streamFrame is a frame of either kind: the fields of a UI chunk and
// those of a chat.Event that the steps need.
type streamFrame struct {
	uiChunk
	Text       string           `json:"text"`
	ToolCall   *chat.ToolCall   `json:"toolCall"`
	ToolResult *chat.ToolResult `json:"toolResult"`
}

func (d *stepDecoder) frame(data []byte) {
	var c streamFrame
	if json.Unmarshal(data, &c) != nil {
		return // [DONE], or nothing this package wrote
	}
	switch c.Type {
	case "start-step", string(chat.KindStepStart):
		d.steps = append(d.steps, agent.StreamedStep{})
	case "data-restart", string(chat.KindRestart):
		// Another replica took the turn over: what came before (since the
		// saved part, where the steps start) is void and follows again.
		d.steps = nil
	case "text-delta":
		d.current().Text += c.Delta + c.Text // a chunk has Delta, an event Text
	case "tool-input-available":
		st := d.current()
		st.Calls = append(st.Calls, chat.ToolCall{ID: c.ToolCallID, Name: c.ToolName, Arguments: c.Input})
	case string(chat.KindToolCall):
		if c.ToolCall != nil {
			st := d.current()
			st.Calls = append(st.Calls, *c.ToolCall)
		}
	case "tool-output-available":
		if c.Output != nil {
			st := d.current()
			st.Results = append(st.Results, chat.ToolResult{CallID: c.ToolCallID, Content: c.Output.Content, Type: c.Output.Type})
		}
	case "tool-output-error":
		st := d.current()
		st.Results = append(st.Results, chat.ToolResult{CallID: c.ToolCallID, Content: c.ErrorText, IsError: true})
	case string(chat.KindToolResult):
		if c.ToolResult != nil {
			st := d.current()
			st.Results = append(st.Results, *c.ToolResult)
		}
	}
}

// recoverAbandoned saves what a turn whose writer died had streamed, once
// its lease is free, and says in the stream's last error what became of
// its answer.
func (s *Server) recoverAbandoned(ctx context.Context, key string) *chat.Error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RecoverWait+5*time.Second)
	defer cancel()
	rec, err := s.cfg.Agents.RecoverTurn(rctx, key, s.cfg.RecoverWait)
	if err != nil {
		s.log.Warn("recovering an interrupted turn", "session", key, "err", err)
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
