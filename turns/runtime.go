package turns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// Defaults of Config.
const (
	DefaultRetention   = 5 * time.Minute
	DefaultHeartbeat   = 15 * time.Second
	DefaultLiveness    = 2 * time.Second
	DefaultMaxEvents   = 100000
	DefaultRecoverWait = 15 * time.Second
	DefaultMaxQueue    = 8
	DefaultQueueWait   = 10 * time.Minute
)

// Config configures a Runtime. New validates it once and fills the
// defaults.
type Config struct {
	// Agents are the agents whose turns run. Required.
	Agents *agent.Set
	// Store is the session store; nil means Agents.Store().
	Store session.Store
	// Log, when set, is the turn log the replicas of a deployment share
	// (redislog.Log on the session store's Redis): every turn's events
	// are copied there, so that a turn can be followed and resumed on any
	// replica, and taken over by another when its replica dies. Nil: a
	// turn can be read on the replica that runs it only. The runtime does
	// not close it.
	Log turnlog.Log
	// Logger gets the runtime's warnings (never chat content); nil means
	// slog.Default().
	Logger *slog.Logger

	// Retention is how long a finished turn's events are kept for
	// reading (default 5 min).
	Retention time.Duration
	// MaxEvents bounds the events of one turn (default 100000, enough for
	// the default output budget in token-sized deltas): a turn that
	// reaches it is stopped like one at its output budget (finishReason
	// length, a maxTurnEvents limit), and every event of it stays
	// readable.
	MaxEvents int
	// Heartbeat is how often a reader that waits (Turn.Events, Next's
	// tick) hears from the turn when it logs nothing, so that a stream can
	// tell the proxies it lives (default 15 s).
	Heartbeat time.Duration
	// Liveness is how often a running turn that copies nothing to the
	// shared log tells it that its writer lives, and how often a reader on
	// another replica that waits for it checks: a writer silent for three
	// Livenesses is given up, and its turn taken over once its session's
	// lease expired (default 2 s: keep it under a third of the store's
	// LockTTL, so that the lease, not the sign of life, bounds a
	// takeover).
	Liveness time.Duration
	// DisconnectGrace, when positive, cancels a running turn once no
	// reader has been attached to it (Turn.Attach) for that long. Zero
	// (the default) never cancels: the turn finishes and its answer is
	// saved.
	DisconnectGrace time.Duration
	// RecoverWait is how long a replica that finds a turn abandoned (its
	// writer died) waits for the session's lease before saving what the
	// turn streamed, or taking it over (default 15 s: keep it above the
	// store's LockTTL).
	RecoverWait time.Duration
	// MaxQueue bounds the messages that wait in a session's queue for its
	// running turn (busy policy enqueue; default 8): one more is refused
	// with ErrQueueFull.
	MaxQueue int
	// QueueWait bounds how long a message waits for a busy session
	// (enqueue, interrupt; default 10 min) before it is refused with
	// ErrQueueWait.
	QueueWait time.Duration
	// MaxQueuedPerOwner bounds the messages of one owner that wait for
	// busy sessions at once on this replica (default
	// session.DefaultMaxWaitingPerOwner; negative: no bound): one more is
	// refused with 429 too_many_queued.
	MaxQueuedPerOwner int
	// MaxMessageBytes, when positive, bounds the user message before the
	// agent sees it (the agent applies its own limit as well).
	MaxMessageBytes int
}

// validate fills the defaults and reports every problem in one error.
func (c *Config) validate() error {
	var probs []string
	if c.Agents == nil {
		probs = append(probs, "Agents is required")
	}
	if c.Store == nil && c.Agents != nil {
		c.Store = c.Agents.Store()
	}
	if c.Store == nil {
		probs = append(probs, "Store is required (Agents.Store() is nil)")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for name, v := range map[string]int64{
		"Retention": int64(c.Retention), "MaxEvents": int64(c.MaxEvents), "Heartbeat": int64(c.Heartbeat), "Liveness": int64(c.Liveness),
		"DisconnectGrace": int64(c.DisconnectGrace), "RecoverWait": int64(c.RecoverWait), "MaxQueue": int64(c.MaxQueue),
		"QueueWait": int64(c.QueueWait), "MaxMessageBytes": int64(c.MaxMessageBytes),
	} {
		if v < 0 {
			probs = append(probs, fmt.Sprintf("%s must not be negative (got %d)", name, v))
		}
	}
	setDefault(&c.Retention, DefaultRetention)
	setDefault(&c.MaxEvents, DefaultMaxEvents)
	setDefault(&c.Heartbeat, DefaultHeartbeat)
	setDefault(&c.Liveness, DefaultLiveness)
	setDefault(&c.RecoverWait, DefaultRecoverWait)
	setDefault(&c.MaxQueue, DefaultMaxQueue)
	setDefault(&c.QueueWait, DefaultQueueWait)
	if c.MaxEvents > 0 && c.MaxEvents < 16 {
		probs = append(probs, fmt.Sprintf("MaxEvents must be at least 16 (got %d)", c.MaxEvents))
	}
	if len(probs) > 0 {
		return errors.New("turns: invalid Config: " + strings.Join(probs, "; "))
	}
	return nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Runtime runs the turns of a set of agents: on this replica, and, with a
// shared turn log (Config.Log), across the replicas of a deployment. It
// is safe for concurrent use; Shutdown ends it.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	turns   *registry
	mirrors mirrors // copies this replica's turns to Config.Log
	// takeovers are the turns of dead replicas this one is taking over.
	takeovers takeovers

	// base is the context of every turn; cancelled only when Shutdown
	// ends.
	base     context.Context
	stopBase context.CancelFunc
	// closing is closed when streams must end (shutdown).
	closing   chan struct{}
	closeOnce sync.Once
	// unwatch ends the watch for stop requests from other replicas.
	unwatch func()
	// waiters wait for busy sessions (Start's enqueue); nil when the
	// store keeps no queues.
	waiters *session.Waiters
}

// New validates cfg and makes the runtime.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg:     cfg,
		log:     cfg.Logger,
		turns:   newRegistry(cfg.Retention),
		closing: make(chan struct{}),
	}
	r.base, r.stopBase = context.WithCancel(context.Background())
	r.unwatch = r.watchStops()
	if q, ok := cfg.Store.(session.Queuer); ok {
		r.waiters = session.NewWaiters(q, session.WaitersConfig{MaxPerOwner: cfg.MaxQueuedPerOwner})
	}
	return r, nil
}

// Agents returns the agents the runtime runs.
func (r *Runtime) Agents() *agent.Set { return r.cfg.Agents }

// Store returns the session store.
func (r *Runtime) Store() session.Store { return r.cfg.Store }

// Heartbeat is Config.Heartbeat.
func (r *Runtime) Heartbeat() time.Duration { return r.cfg.Heartbeat }

// MaxEvents is Config.MaxEvents.
func (r *Runtime) MaxEvents() int { return r.cfg.MaxEvents }

// Closing is closed once the runtime shuts down: a reader that waits
// ends its stream then (ErrShutdown).
func (r *Runtime) Closing() <-chan struct{} { return r.closing }

// Draining reports whether the runtime refuses new turns (Shutdown began).
func (r *Runtime) Draining() bool { return r.turns.isClosing() }

// Shutdown refuses new turns and ends the running ones, then ends every
// reader that waits; ctx bounds it. With a shared log whose turns can be
// taken over (a turnlog.Taker), each running turn is handed to another
// replica (handover.go): at its next safe point, or at once when ctx is
// about to end. Otherwise the running turns are waited for, and those
// still running when ctx is about to end are cancelled: each saves its
// partial answer and ends with ErrShutdown. Calls after the first do
// nothing more.
func (r *Runtime) Shutdown(ctx context.Context) {
	r.handOverAll(ctx)
	r.closeOnce.Do(func() {
		close(r.closing)
		r.stopBase()
		r.unwatch()
	})
}

// Base is the context every turn of the runtime runs under (values
// aside): it ends when Shutdown does. Work that outlives a request but not
// the runtime (a webhook call after a turn, say) may run under it.
func (r *Runtime) Base() context.Context { return r.base }

// StreamEnd is the error that ends the stream of a reader this replica
// stops serving as it shuts down: ErrHandedOver when its turns go on on
// other replicas (the client resumes there), else ErrShutdown.
func (r *Runtime) StreamEnd() *chat.Error {
	if r.handsOver() {
		return ErrHandedOver
	}
	return ErrShutdown
}

// watchStops cancels the turns this replica runs when a stop request for
// one arrives through the shared turn log; it also takes over the turns
// other replicas hand over (watchHandOvers).
func (r *Runtime) watchStops() (cancel func()) {
	if r.cfg.Log == nil {
		return func() {}
	}
	unwatch := r.cfg.Log.WatchStops(func(ref turnlog.Ref) {
		if t := r.turns.get(ref.Turn); t != nil && t.key == ref.Session {
			t.cancel(chat.StoppedByUser)
		}
	})
	unwatchHandOvers := r.watchHandOvers()
	return func() { unwatch(); unwatchHandOvers() }
}
