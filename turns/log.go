package turns

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
)

// Causes of a turn's cancellation that the turn reports as an error event
// before its Done.
var (
	// ErrShutdown ends the turns and the streams of a replica that shuts
	// down.
	ErrShutdown   = &chat.Error{Code: "server_shutdown", Message: "the server is shutting down; the partial answer was saved"}
	errClientGone = &chat.Error{Code: "client_gone", Message: "no client was attached to the turn's stream; the turn was stopped and the partial answer was saved"}
)

// A Live reader has every event of a turn of this replica so far and is
// handed each new one as the turn logs it, under the turn's lock (see
// Turn.Locked): a connection that writes the events as they come. The
// turn never waits for one: Push reports false when the reader cannot
// take the events at once, and the turn drops it from its live readers (it
// reads the log again); End is the turn's end, after its last event.
type Live interface {
	Push(events []chat.Event) bool
	End()
}

// turn is one running or recently finished turn of this replica: its
// events, kept so that a client can follow or resume it, and the
// cancellation of its context.
type turn struct {
	id string
	// sessionID is the session's ID as its client knows it; key is its
	// store key (session.Key of the owner and the ID), which names it in
	// the registry and the shared log.
	sessionID string
	key       string
	agentID   string
	owner     string
	cancel    context.CancelCauseFunc
	maxEvents int
	grace     time.Duration
	// continued: a turn taken over from a replica that died
	// (takeover.go), whose first events are those the shared log had;
	// restarts are the seqs at which it was taken over (the last is
	// this replica's first event).
	continued bool
	restarts  []int64
	// loaded is the seq of the last event a turn taken over loaded from
	// the shared log: its copy there goes on after it.
	loaded int64
	// ended is closed by finish.
	ended chan struct{}
	// handable: the turn can be handed to another replica (handover.go);
	// signal is its signal to stop at its next safe point, which
	// signalNow fires. handingOff is set once a hand-over was asked for.
	handable   bool
	signal     context.Context
	signalNow  context.CancelFunc
	handingOff atomic.Bool

	mu      sync.Mutex
	events  []chat.Event // the kept window, oldest first
	nextSeq int64        // seq of the next event
	full    bool         // the log reached maxEvents and the turn was stopped
	done    bool
	// handedOver: the turn ended handed over to another replica;
	// announced: the shared log says so (or cannot), and its readers here
	// end with ErrHandedOver after its events, to resume elsewhere.
	handedOver, announced bool
	// changed is closed when events or done change, and made again by the
	// next read: nil while nobody was given it, so that an event no reader
	// waits for (a live connection's) costs no channel.
	changed  chan struct{}
	attached int
	timer    *time.Timer // the disconnect grace timer
	// live is the readers that have every event so far: append hands
	// them the new ones.
	live []Live
}

func newTurn(id, sessionID, agentID, owner string, cancel context.CancelCauseFunc, maxEvents int, grace time.Duration) *turn {
	return &turn{id: id, sessionID: sessionID, key: session.Key(owner, sessionID), agentID: agentID, owner: owner, cancel: cancel,
		maxEvents: maxEvents, grace: grace, nextSeq: 1, ended: make(chan struct{})}
}

// makeHandable makes the turn one that can be handed over, and returns
// ctx with its signal for the agent.
func (t *turn) makeHandable(ctx context.Context) context.Context {
	t.handable = true
	t.signal, t.signalNow = context.WithCancel(context.Background())
	return llmorch.WithHandOver(ctx, t.signal)
}

// handOver asks the turn to stop at its next safe point, handed over; a
// turn that cannot be handed over is left to end (cut cancels it).
func (t *turn) handOver() {
	if t.handable {
		t.handingOff.Store(true)
		t.signalNow()
	}
}

// cut ends the turn at once: handed over when it can be (as a crash would
// stop it), else cancelled with ErrShutdown (its partial answer saved).
func (t *turn) cut() {
	if t.handable {
		t.handingOff.Store(true)
		t.cancel(llmorch.ErrHandedOver)
		return
	}
	t.cancel(ErrShutdown)
}

// finishHandedOver ends a turn that stopped handed over: no event more.
func (t *turn) finishHandedOver() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handedOver = true
	t.finishLocked()
}

// isHandedOver reports whether the turn ended handed over.
func (t *turn) isHandedOver() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handedOver
}

// announceHandedOver ends the streams of the turn's readers here, once
// the shared log has the hand-over (or failed to take it): a reader that
// resumes elsewhere then finds the turn handed over, and another replica
// takes it over at once.
func (t *turn) announceHandedOver() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.announced = true
	t.endLive()
	t.notify()
}

// handOverAnnounced reports whether the turn's readers here end (see
// announceHandedOver).
func (t *turn) handOverAnnounced() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.announced
}

// EventSlack is how many events a turn's log keeps beyond MaxEvents: a
// turn whose log reaches MaxEvents events is stopped, and the events that
// end it (the limit, the usage, Done) still fit, so that every event of a
// turn stays readable and a stream never ends before its turn does. A
// shared turn log keeps as many (see turnlog.Config.MaxFrames).
const EventSlack = 256

// add logs events (their seq is the log's to give) and hands them to the
// live readers. It never blocks on readers: a slow client only falls
// behind in the log, which keeps every event of the turn: at MaxEvents
// events the turn is stopped (a maxTurnEvents limit), and only a turn that
// goes on past EventSlack more (which the agent does not do) loses its
// oldest events.
func (t *turn) add(events ...chat.Event) { t.append(events, false) }

// addLast logs the turn's last events and finishes it, in one hold of
// mu: a reader never sees those events without the turn's end.
func (t *turn) addLast(events ...chat.Event) { t.append(events, true) }

func (t *turn) append(events []chat.Event, last bool) {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	stop := false
	for _, ev := range events {
		if len(t.events) >= t.maxEvents && !t.full {
			t.full, stop = true, true
		}
		// Re-slicing without clearing the dropped event: a reader may
		// still hold a slice that starts there. The backing array is
		// replaced when append outgrows it, which frees the dropped events
		// (at most about twice the window is held).
		if len(t.events) >= t.maxEvents+EventSlack {
			t.events = t.events[1:]
		}
		ev.Seq = t.nextSeq
		t.events = append(t.events, ev)
		t.nextSeq++
	}
	if len(t.live) > 0 {
		added := t.events[len(t.events)-len(events):]
		t.live = slices.DeleteFunc(t.live, func(r Live) bool { return !r.Push(added) })
	}
	if last {
		t.finishLocked()
	} else {
		t.notify()
	}
	t.mu.Unlock()
	if stop {
		t.cancel(limitEvents(t.maxEvents))
	}
}

// limitEvents stops a turn whose log reached MaxEvents events.
func limitEvents(n int) *chat.Limit {
	return &chat.Limit{Name: chat.LimitEvents, Value: strconv.Itoa(n),
		Message: fmt.Sprintf("the answer's stream reached %d events and was stopped there; the partial answer was saved (MAX_TURN_EVENTS)", n)}
}

// finish marks the turn complete: no event is added after it.
func (t *turn) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finishLocked()
}

// finishLocked is finish with t.mu held. The events move into a slice of
// their own size: a finished turn is kept for the retention, and the
// slack append left would stay with it.
func (t *turn) finishLocked() {
	if t.done {
		return
	}
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if !t.handedOver || t.announced {
		t.endLive()
	}
	t.events = slices.Clip(slices.Clone(t.events))
	t.notify()
	close(t.ended)
}

// endLive ends the live readers' streams; t.mu is held.
func (t *turn) endLive() {
	for _, r := range t.live {
		r.End()
	}
	t.live = nil
}

func (t *turn) notify() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// read returns the events after seq after, whether the turn is done, a
// channel closed on the next change, and gap when events after `after`
// were already dropped from the window.
func (t *turn) read(after int64) (events []chat.Event, done, gap bool, changed <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	events, gap = t.after(after)
	return events, t.done, gap, t.changed
}

// after returns the events after seq `after`, or gap when some of them
// were already dropped from the window; t.mu is held.
func (t *turn) after(after int64) (events []chat.Event, gap bool) {
	if len(t.events) == 0 {
		return nil, false
	}
	if after+1 < t.events[0].Seq {
		return nil, true
	}
	if i := int(after + 1 - t.events[0].Seq); i < len(t.events) {
		events = t.events[i:len(t.events):len(t.events)]
	}
	return events, false
}

// next waits for the events after seq `after` (see Turn.Next).
func (t *turn) next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) ([]chat.Event, bool, *chat.Error) {
	for {
		events, done, gap, changed := t.read(after)
		switch {
		case gap:
			return nil, false, ErrGap
		case done && len(events) == 0 && t.isHandedOver():
			if t.handOverAnnounced() {
				// The turn goes on elsewhere, from the shared log.
				return nil, false, ErrHandedOver
			}
			// Wait for the shared log to have the hand-over.
		case len(events) > 0 || done:
			return events, done, nil
		}
		select {
		case <-changed:
		case <-tick:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, nil
		case <-stop:
			return nil, false, nil
		}
	}
}

// state reports the last event's seq and whether the turn is done.
func (t *turn) state() (last int64, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nextSeq - 1, t.done
}

// firstKept is the seq of the oldest event still kept.
func (t *turn) firstKept() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) == 0 {
		return t.nextSeq
	}
	return t.events[0].Seq
}

// attach and detach count the clients reading the turn's stream on this
// replica; they drive the disconnect grace.
func (t *turn) attach() (detach func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attached++
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	return t.detach
}

func (t *turn) detach() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attached--
	if t.attached > 0 || t.done || t.grace <= 0 {
		return
	}
	t.timer = time.AfterFunc(t.grace, func() {
		t.mu.Lock()
		gone := t.attached == 0 && !t.done
		t.mu.Unlock()
		if gone {
			t.cancel(errClientGone)
		}
	})
}

// registry holds the turns of this replica: the running ones and the
// finished ones still kept for reading.
type registry struct {
	retention time.Duration

	mu        sync.Mutex
	byID      map[string]*turn
	bySession map[string]*turn // the latest turn of each session
	running   sync.WaitGroup
	closing   bool
}

func newRegistry(retention time.Duration) *registry {
	return &registry{retention: retention, byID: make(map[string]*turn), bySession: make(map[string]*turn)}
}

// register adds a new turn; it fails once the runtime is shutting down.
func (r *registry) register(t *turn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return false
	}
	r.byID[t.id] = t
	r.bySession[t.key] = t
	r.running.Add(1)
	return true
}

// ended is called once the turn finished: the turn is dropped after the
// retention.
func (r *registry) ended(t *turn) {
	r.running.Done()
	time.AfterFunc(r.retention, func() { r.remove(t) })
}

// handedOver is called once the turn ended handed over: it is dropped at
// once, so that this replica finds it in the shared log from now on.
func (r *registry) handedOver(t *turn) {
	r.remove(t)
	r.running.Done()
}

func (r *registry) remove(t *turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[t.id] == t {
		delete(r.byID, t.id)
	}
	if r.bySession[t.key] == t {
		delete(r.bySession, t.key)
	}
}

func (r *registry) get(id string) *turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// latest returns the latest turn of the session with this store key.
func (r *registry) latest(key string) *turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bySession[key]
}

// forgetSession drops the kept turns of a deleted session (its store key).
func (r *registry) forgetSession(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, t := range r.byID {
		if t.key == key {
			delete(r.byID, id)
		}
	}
	delete(r.bySession, key)
}

// shutdown refuses new turns and returns the running ones.
func (r *registry) shutdown() []*turn {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	return r.runningTurns()
}

// runningTurns returns the turns that still run.
func (r *registry) runningTurns() []*turn {
	r.mu.Lock()
	all := make([]*turn, 0, len(r.byID))
	for _, t := range r.byID {
		all = append(all, t)
	}
	r.mu.Unlock()
	return slices.DeleteFunc(all, func(t *turn) bool { _, done := t.state(); return done })
}

// wait waits for the running turns to end, or for ctx.
func (r *registry) wait(ctx context.Context) error { return WaitGroup(ctx, &r.running) }

// WaitGroup waits for wg, or for ctx.
func WaitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *registry) isClosing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closing
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// ErrGap ends a stream whose next events were dropped before they could
// be read.
var ErrGap = &chat.Error{Code: "stream_gap", Message: "events of this turn were dropped before they could be sent; read the answer from the session history"}
