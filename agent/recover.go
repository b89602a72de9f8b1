package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// session's lease while the marker is set either takes the turn over
// (TakeOver: the turn goes on) or rebuilds the unsaved steps from what the
// turn streamed (Options.StreamedSteps) and saves them.
//
// The history and the stream agree on where the saved part ends: a turn
// that keeps a journal records with each write the frame of its stream
// that the history's content reaches (session.Journal.Frame), so the
// rebuild starts there, and the saved answer is always a prefix of the
// streamed one, never more.

// StreamedStep is one model call of a turn as its stream showed it: the
// text, the tool calls and the results the stream had (Results may answer
// a call of an earlier step, one that a person approved).
type StreamedStep struct {
	Text    string
	Calls   []chat.ToolCall
	Results []chat.ToolResult
}

// StreamReader reads what a turn streamed after its frame after, step by
// step; key is the session's store key. ok is false when the turn's
// stream is not kept. A step the stream later said was restarted
// (chat.KindRestart) is not among them.
type StreamReader func(ctx context.Context, key, turnID string, after int64) (steps []StreamedStep, ok bool, err error)

// Recovery says what recovering a turn did.
type Recovery struct {
	// Turn is the recovered turn ("" when the session had none to recover).
	Turn string
	// Steps and Messages count what was added to the history.
	Steps, Messages int
	// Stream reports whether the turn's stream was found.
	Stream bool
}

// recoverTurn saves the part of the answer of sess's turn that the history
// lacks and clears the session's turn marker, under lease.
func recoverTurn(ctx context.Context, cfg Options, key string, sess session.Session, lease session.Lease) (Recovery, error) {
	turn, j := sess.Turn, sess.Journal
	rec := Recovery{Turn: turn}
	var msgs []chat.Message
	if cfg.StreamedSteps != nil {
		var after int64
		if j != nil {
			after = j.Frame
		}
		steps, ok, err := cfg.StreamedSteps(ctx, key, turn, after)
		if err != nil {
			return rec, fmt.Errorf("reading the stream of turn %s: %w", turn, err)
		}
		rec.Stream = ok
		if ok || j != nil && j.Step != nil {
			hist, err := cfg.Store.Messages(ctx, key, 0)
			if err != nil {
				return rec, fmt.Errorf("reading the history: %w", err)
			}
			if j == nil {
				// Saved by a version that kept no journal: the steps the
				// history holds are counted instead.
				steps = steps[min(savedSteps(hist), len(steps)):]
			}
			msgs = rebuild(hist, steps, j)
			for _, m := range msgs {
				if m.Role == chat.RoleAssistant {
					rec.Steps++
				}
			}
		}
	}
	rec.Messages = len(msgs)
	_, _, err := cfg.Store.UpdateAppend(ctx, key, func(*orchestration.State) error { return nil }, msgs, 0,
		session.WithLease(lease), session.WithTurn(""))
	if errors.Is(err, session.ErrNotReplicated) {
		// Saved; a failover before the replicas catch up may lose it,
		// as it may any write of the store.
		cfg.Logger.WarnContext(ctx, "the recovered steps were saved but no replica acknowledged them in time", "turn", turn)
		err = nil
	}
	if err != nil {
		return rec, fmt.Errorf("saving the recovered steps: %w", err)
	}
	cfg.Logger.InfoContext(ctx, "recovered an interrupted turn", "turn", turn, "stream_found", rec.Stream, "steps", rec.Steps, "messages", rec.Messages)
	return rec, nil
}

// rebuild is what the history hist lacks of a turn that streamed steps
// after its saved part, j being its journal (nil when it kept none). A
// result the history has is never added again (the turn saves some results
// before it streams them). A step whose tool calls were running is taken
// from the journal, which has the results of the calls that completed
// whether or not the stream got them: every call of it is kept, the one
// that was running with an interrupted result and the ones after it with
// one saying they did not run, as a stopped step's.
func rebuild(hist []chat.Message, steps []StreamedStep, j *session.Journal) []chat.Message {
	answered := map[string]bool{}
	for _, m := range hist {
		if m.Role == chat.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	streamed := map[string]chat.ToolResult{}
	for _, st := range steps {
		for _, r := range st.Results {
			streamed[r.CallID] = r
		}
	}
	var msgs []chat.Message
	if j != nil && j.Step != nil {
		// The calls of the step under way: each gets its result.
		st := j.Step
		results := map[string]chat.ToolResult{}
		for _, r := range st.Results {
			results[r.CallID] = r
		}
		var tools []chat.Message
		first := true
		for _, c := range st.Calls {
			r, ok := results[c.ID]
			if !ok {
				r, ok = streamed[c.ID]
			}
			_, invalid := st.Invalid[c.ID]
			ran := !invalid && (st.Answers || slices.Contains(st.Offer.Tools, c.Name))
			switch {
			case answered[c.ID]:
				continue
			case !ok && first && ran:
				// The first call to reach its tool without a result.
				r, first = interruptedResult(c), false
			case !ok:
				r = notStarted(c)
			}
			tools = append(tools, llmorch.ToolMessage(r))
		}
		if !st.Answers {
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: st.Text, ToolCalls: st.Calls})
		}
		return append(msgs, tools...)
	}
	// Results of calls an earlier message made (answered approvals) that
	// the history lacks, right after it.
	if k := lastAssistant(hist); k >= 0 {
		for _, c := range hist[k].ToolCalls {
			if r, ok := streamed[c.ID]; ok && !answered[c.ID] && !inSteps(steps, c.ID) {
				msgs = append(msgs, llmorch.ToolMessage(r))
				answered[c.ID] = true
			}
		}
	}
	for _, st := range steps {
		msgs = append(msgs, stepMessages(st, answered)...)
	}
	return msgs
}

// interruptedResult and notStarted are the results a recovered step gives
// the call that was running when its replica died and those after it.
func interruptedResult(c chat.ToolCall) chat.ToolResult {
	return chat.ToolResult{CallID: c.ID, Name: c.Name, Type: "interrupted", IsError: true, NotRun: true,
		Content: chat.NotRunPrefix + "this call was interrupted: the server running it stopped before it reported a result, so it may or may not have taken effect."}
}

func notStarted(c chat.ToolCall) chat.ToolResult {
	return chat.ToolResult{CallID: c.ID, Name: c.Name, Type: "cancelled", IsError: true, NotRun: true,
		Content: chat.NotRunPrefix + "the turn was stopped before this call ran."}
}

func lastAssistant(hist []chat.Message) int {
	for i := len(hist) - 1; i >= 0 && hist[i].Role != chat.RoleUser; i-- {
		if hist[i].Role == chat.RoleAssistant {
			if i == len(hist)-1 || hist[i+1].Role == chat.RoleTool {
				return i
			}
			return -1
		}
	}
	return -1
}

func inSteps(steps []StreamedStep, callID string) bool {
	for _, st := range steps {
		if slices.ContainsFunc(st.Calls, func(c chat.ToolCall) bool { return c.ID == callID }) {
			return true
		}
	}
	return false
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
// are. A result the history has (answered) is not added twice.
func stepMessages(st StreamedStep, answered map[string]bool) []chat.Message {
	results := map[string]chat.ToolResult{}
	for _, r := range st.Results {
		results[r.CallID] = r
	}
	m := chat.Message{Role: chat.RoleAssistant, Content: st.Text}
	var tools []chat.Message
	for _, c := range st.Calls {
		r, ok := results[c.ID]
		if !ok || answered[c.ID] {
			continue
		}
		answered[c.ID] = true
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
// (Options.StreamedSteps). It takes the session's lease, waiting up to wait
// for it: the dead turn's lease lasts until it expires. It does nothing
// when the session's last turn ended properly, and returns session.ErrBusy
// when the lease stays taken (the turn may be alive after all).
func (a *Set) RecoverTurn(ctx context.Context, key string, wait time.Duration) (Recovery, error) {
	sess, lease, err := a.lock(ctx, key, wait)
	if err != nil {
		return Recovery{}, err
	}
	defer releaseNow(ctx, lease)
	if sess.Turn == "" {
		return Recovery{}, nil
	}
	return recoverTurn(ctx, a.cfg, key, sess, lease)
}

// lock takes the lease of the existing session with store key key,
// waiting up to wait for it, and returns the session as it holds it
// (session.ErrNotFound when there is none).
func (a *Set) lock(ctx context.Context, key string, wait time.Duration) (session.Session, session.Lease, error) {
	deadline := time.Now().Add(wait)
	for {
		sess, lease, err := session.Lock(ctx, a.cfg.Store, key)
		if errors.Is(err, session.ErrBusy) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return session.Session{}, nil, ctx.Err()
			case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
			}
			continue
		}
		return sess, lease, err
	}
}

// releaseNow frees a lease taken for a moment, whatever ctx has become.
func releaseNow(ctx context.Context, lease session.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = lease.Release(rctx)
}
