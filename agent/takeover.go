package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/tools"
)

// ErrTurnOver: the turn to take over is not running any more: the
// session's marker no longer names it (it ended, or was recovered), or the
// session is gone.
var ErrTurnOver = errors.New("the turn is not running")

// Takeover is a turn whose replica died, held by this process under the
// session's lease (Set.TakeOver): Run goes on with it, Recover saves what
// it streamed instead, Release gives it back. Exactly one of them must be
// called.
type Takeover struct {
	set   *Set
	agent *Agent
	key   string
	sess  session.Session
	lease session.Lease
}

// TakeOver takes the lease of the session with store key key, whose turn
// turnID's replica died, waiting up to wait for it (the dead turn's lease
// lasts until it expires), and returns the turn to go on with. It returns
// ErrTurnOver when the session's marker does not name turnID (the turn
// ended or was recovered meanwhile), and session.ErrBusy when the lease
// stays taken (the turn's replica is alive after all, or another replica
// took the turn over first).
func (a *Set) TakeOver(ctx context.Context, key, turnID string, wait time.Duration) (*Takeover, error) {
	sess, lease, err := a.lock(ctx, key, wait)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, ErrTurnOver
	case err != nil:
		return nil, err
	case sess.Turn != turnID:
		releaseNow(ctx, lease)
		return nil, ErrTurnOver
	}
	return &Takeover{set: a, agent: a.byID[sess.Agent], key: key, sess: sess, lease: lease}, nil
}

// Owner, Agent and Turn name the turn taken over: its session's owner and
// agent, and the turn's ID.
func (t *Takeover) Owner() string { return t.sess.Owner }
func (t *Takeover) Agent() string { return t.sess.Agent }
func (t *Takeover) Turn() string  { return t.sess.Turn }

// Frame is the seq of the last frame of the turn's stream whose content
// the session holds: what the stream showed after it is void once the
// turn goes on (chat.Restart.Since).
func (t *Takeover) Frame() int64 {
	if t.sess.Journal == nil {
		return 0
	}
	return t.sess.Journal.Frame
}

// CanContinue reports whether Run can go on with the turn: it kept a
// journal, and its agent is served here. Otherwise only Recover can save
// what it streamed.
func (t *Takeover) CanContinue() bool { return t.sess.Journal != nil && t.agent != nil }

// Release gives the session back without touching the turn.
func (t *Takeover) Release(ctx context.Context) { releaseNow(ctx, t.lease) }

// Recover saves what the turn streamed after its saved part and ends it
// (see Set.RecoverTurn), then releases the session.
func (t *Takeover) Recover(ctx context.Context) (Recovery, error) {
	defer releaseNow(ctx, t.lease)
	return recoverTurn(ctx, t.set.cfg, t.key, t.sess, t.lease)
}

// Run goes on with the turn from its last completed step
// (llmorch.Turn.Resume): its first event is chat.KindRestart; the events
// are numbered from 1, like a turn's. position is the turn's stream
// position, as Input.Position gives it. The turn runs under ctx, whose
// values reach its tools, and holds the session's lease until it ends, as
// a turn of Run does; the iteration must be ranged over, to the end or
// broken off, to release it. It must only be called when CanContinue.
func (t *Takeover) Run(ctx context.Context, position func() int64) iter.Seq[chat.Event] {
	n, sess := t.agent, t.sess
	sessionID := t.key
	if _, id, scoped := strings.Cut(t.key, "."); scoped {
		sessionID = id // the session's ID as its client knows it (session.Key)
	}
	ctx = tools.WithCall(ctx, tools.Call{SessionID: sessionID, AgentID: n.ID(), Owner: sess.Owner, TurnID: sess.Turn})
	ctx = telemetry.WithLogAttrs(ctx, slog.String("agent", n.ID()), slog.String("session", sessionID), slog.String("turn", sess.Turn))
	return func(yield func(chat.Event) bool) {
		turn, err := t.continuation(ctx, position)
		if err != nil {
			t.Release(ctx)
			n.cfg.Logger.WarnContext(ctx, "taking over an interrupted turn failed", "err", err)
			yield(chat.Event{Kind: chat.KindError, Seq: 1, Error: &chat.Error{Code: llmorch.CodeStoreUnavailable, Message: "the turn could not be taken over: the session store did not answer"}})
			yield(chat.Event{Kind: chat.KindDone, Seq: 2, FinishReason: chat.FinishError})
			return
		}
		n.cfg.Logger.InfoContext(ctx, "taking over an interrupted turn", "from_step", sess.Journal.Steps+1, "tools_under_way", sess.Journal.Step != nil)
		ctx, obs := n.cfg.Telemetry.StartTurn(ctx, telemetry.TurnInfo{
			AgentID: n.ID(), AgentName: n.Template().Name, SessionID: sessionID,
			Provider: n.model.Info().Provider, Model: n.model.Info().Model,
		})
		defer obs.End()
		for ev := range n.stream(ctx, n.service, turn, func() {}) {
			obs.Observe(ev)
			if ev.Kind == chat.KindError {
				n.recordStoreError(ctx, ev.Error)
			}
			if !yield(ev) {
				return
			}
		}
	}
}

// continuation is the turn Run goes on with: the session's state, and
// the history the model reads, assembled as the turn's own start
// assembled it, from the session (whose history holds the turn's saved
// steps).
func (t *Takeover) continuation(ctx context.Context, position func() int64) (llmorch.Turn, error) {
	n, sess := t.agent, t.sess
	hist, err := n.cfg.Store.Messages(ctx, t.key, 0)
	if err != nil {
		return llmorch.Turn{}, fmt.Errorf("reading the history: %w", err)
	}
	// The calls a person approved that are under way keep their place
	// without a result (the turn adds them).
	keep := map[string]bool{}
	if st := sess.Journal.Step; st != nil && st.Answers {
		for _, c := range st.Calls {
			keep[c.ID] = true
		}
	}
	var summary *chat.Message
	if n.compacts() {
		summary, hist = splitSummary(hist[session.VerbatimStart(hist):])
	} else {
		hist = continuationWindow(hist, n.historyWindow())
	}
	turn := llmorch.Turn{ID: sess.Turn, SessionID: t.key, Lease: t.lease, State: sess.State, PreviousStep: sess.State.ActiveStep,
		History: wellFormed(trimToUserStart(hist), keep), Journal: true, Position: position, Resume: sess.Journal}
	if n.compacts() {
		turn.Summary, turn.Fallback = summary, n.fallback
	}
	return turn, nil
}
