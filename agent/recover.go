package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// A turn saves its messages step by step, as each step completes. When
// the replica running it dies, the step under way is lost, however much
// of it was streamed, unless it is recovered from the stream: the session
// keeps the ID of the turn writing it (session.Session.Turn), set by the
// turn's first write and cleared by its last, and whoever next holds the
// session's lease while the marker is set rebuilds the unsaved steps from
// what the turn streamed (Config.StreamedSteps) and saves them.

// StreamedStep is one model call of a turn as its stream showed it: the
// text, the tool calls and the results of those that completed.
type StreamedStep struct {
	Text    string
	Calls   []chat.ToolCall
	Results []chat.ToolResult
}

// StreamReader reads what a turn streamed, step by step; key is the
// session's store key. ok is false when the turn's stream is not kept.
type StreamReader func(ctx context.Context, key, turnID string) (steps []StreamedStep, ok bool, err error)

// Recovery says what recovering a turn did.
type Recovery struct {
	// Turn is the recovered turn ("" when the session had none to recover).
	Turn string
	// Steps and Messages count what was added to the history.
	Steps, Messages int
	// Stream reports whether the turn's stream was found.
	Stream bool
}

// recoverTurn saves the steps of turn that the session's history lacks and
// clears the session's turn marker, under lease.
func recoverTurn(ctx context.Context, cfg Config, key, turn string, lease session.Lease) (Recovery, error) {
	rec := Recovery{Turn: turn}
	var msgs []chat.Message
	if cfg.StreamedSteps != nil {
		steps, ok, err := cfg.StreamedSteps(ctx, key, turn)
		if err != nil {
			return rec, fmt.Errorf("reading the stream of turn %s: %w", turn, err)
		}
		rec.Stream = ok
		if ok {
			hist, err := cfg.Store.Messages(ctx, key, 0)
			if err != nil {
				return rec, fmt.Errorf("reading the history: %w", err)
			}
			for _, st := range steps[min(savedSteps(hist), len(steps)):] {
				m := stepMessages(st)
				if len(m) > 0 {
					rec.Steps++
					msgs = append(msgs, m...)
				}
			}
		}
	}
	rec.Messages = len(msgs)
	_, _, err := cfg.Store.UpdateAppend(ctx, key, func(*orchestration.State) error { return nil }, msgs, 0,
		session.WithLease(lease), session.WithTurn(""))
	if err != nil {
		return rec, fmt.Errorf("saving the recovered steps: %w", err)
	}
	cfg.Logger.InfoContext(ctx, "recovered an interrupted turn", "turn", turn, "stream_found", rec.Stream, "steps", rec.Steps, "messages", rec.Messages)
	return rec, nil
}

// savedSteps counts the steps of the history's last turn that were saved:
// each saved step is one assistant message after the turn's user message.
func savedSteps(hist []chat.Message) int {
	n := 0
	for i := len(hist) - 1; i >= 0 && hist[i].Role != chat.RoleUser; i-- {
		if hist[i].Role == chat.RoleAssistant {
			n++
		}
	}
	return n
}

// stepMessages are the history messages of a streamed step: its text and
// the calls that have results, with the results. A call whose result was
// never streamed did not complete; it is left out, as a cancelled step's
// are.
func stepMessages(st StreamedStep) []chat.Message {
	results := map[string]chat.ToolResult{}
	for _, r := range st.Results {
		results[r.CallID] = r
	}
	m := chat.Message{Role: chat.RoleAssistant, Content: st.Text}
	var tools []chat.Message
	for _, c := range st.Calls {
		r, ok := results[c.ID]
		if !ok {
			continue
		}
		m.ToolCalls = append(m.ToolCalls, c)
		tools = append(tools, llmorch.ToolMessage(r))
	}
	if m.Content == "" && len(m.ToolCalls) == 0 {
		return nil
	}
	return append([]chat.Message{m}, tools...)
}

// RecoverTurn saves the partial answer of the last turn of the session
// with store key key when that turn ended without its last write (its
// replica died, or the store stopped answering), from what it streamed
// (Config.StreamedSteps). It takes the session's lease, waiting up to wait
// for it: the dead turn's lease lasts until it expires. It does nothing
// when the session's last turn ended properly, and returns session.ErrBusy
// when the lease stays taken (the turn may be alive after all).
func (a *Set) RecoverTurn(ctx context.Context, key string, wait time.Duration) (Recovery, error) {
	deadline := time.Now().Add(wait)
	for {
		lease, err := a.cfg.Store.Lock(ctx, key)
		if errors.Is(err, session.ErrBusy) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return Recovery{}, ctx.Err()
			case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
			}
			continue
		}
		if err != nil {
			return Recovery{}, err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			_ = lease.Release(rctx)
		}()
		sess, err := a.cfg.Store.Get(ctx, key)
		if err != nil || sess.Turn == "" {
			return Recovery{}, err
		}
		return recoverTurn(ctx, a.cfg, key, sess.Turn, lease)
	}
}
