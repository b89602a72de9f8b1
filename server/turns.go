package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

// Causes of a turn's cancellation that the server reports to the client as an
// error frame before the turn's finish.
var (
	errShutdown   = &chat.Error{Code: "server_shutdown", Message: "the server is shutting down; the partial answer was saved"}
	errClientGone = &chat.Error{Code: "client_gone", Message: "no client was attached to the turn's stream; the turn was stopped and the partial answer was saved"}
)

// A liveReader has every frame of the turn so far and is handed each new
// one by the turn as it adds it, under the turn's mu: a connection's
// r3labs stream (sseConn). The turn never waits for one: push reports
// false when the reader cannot take the frames at once, and the turn drops
// it from its live readers (it reads the log again); end is the turn's
// end, after its last frame.
type liveReader interface {
	push(frames []frame) bool
	end()
}

// turn is one running or recently finished turn: its frames, kept so that a
// client can resume the stream, and the cancellation of its context.
type turn struct {
	id string
	// sessionID is the session's ID as its client knows it; key is its
	// store key (session.Key of the owner and the ID), which names it in
	// the registry and the shared log.
	sessionID string
	key       string
	agentID   string
	owner     string
	// messageID is the start chunk's messageId ("": the turn's ID).
	messageID string
	cancel    context.CancelCauseFunc
	maxFrames int
	grace     time.Duration
	// keepEvents: frames keep their event (see startTurn).
	keepEvents bool
	// raw: the frames are the events' JSON, not AI SDK chunks (an edge's
	// turn: edgeFrames).
	raw bool
	// continued: a turn taken over from a replica that died
	// (takeover.go), whose first frames are those the shared log had;
	// restarts are the seqs at which it was taken over (the last is
	// this replica's first frame).
	continued bool
	restarts  []int64
	// ended is closed by finish.
	ended chan struct{}

	mu      sync.Mutex
	frames  []frame // the kept window, oldest first
	nextSeq int64   // seq of the next frame
	full    bool    // the log reached maxFrames and the turn was stopped
	done    bool
	// changed is closed when frames or done change, and made again by the
	// next read: nil while nobody was given it, so that a frame no reader
	// waits for (a live connection's) costs no channel.
	changed  chan struct{}
	attached int
	timer    *time.Timer // the disconnect grace timer
	// live is the readers that have every frame so far: append hands
	// them the new ones.
	live []liveReader
}

func newTurn(id, sessionID, agentID, owner string, cancel context.CancelCauseFunc, maxFrames int, grace time.Duration) *turn {
	return &turn{id: id, sessionID: sessionID, key: session.Key(owner, sessionID), agentID: agentID, owner: owner, cancel: cancel,
		maxFrames: maxFrames, grace: grace, nextSeq: 1, ended: make(chan struct{})}
}

// FrameSlack is how many frames a turn's log keeps beyond MaxTurnEvents:
// a turn whose stream reaches MaxTurnEvents frames is stopped, and the
// frames that end it (the limit, the usage, finish, [DONE]) still fit, so
// that every frame of a turn stays readable and a stream never ends
// before its turn does. A shared turn log keeps as many (see
// turnlog.Config.MaxFrames).
const FrameSlack = 256

// add appends frames (their seq is the log's to give) and hands them to
// the readers. It never blocks on readers: a slow client only falls behind
// in the log, which keeps every frame of the turn: at MaxTurnEvents frames
// the turn is stopped (a maxTurnEvents limit), and only a turn that goes on
// past FrameSlack more (which the agent does not do) loses its oldest
// frames.
func (t *turn) add(frames ...frame) { t.append(frames, false) }

// addLast appends the turn's last frames and finishes it, in one hold of
// mu: a reader never sees those frames without the turn's end, so the
// connections write them with the response's end, in one write
// (sseConn.Flush), and a /v1 stream returns right after them.
func (t *turn) addLast(frames ...frame) { t.append(frames, true) }

func (t *turn) append(frames []frame, last bool) {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	stop := false
	for _, f := range frames {
		if len(t.frames) >= t.maxFrames && !t.full {
			t.full, stop = true, true
		}
		// Re-slicing without clearing the dropped frame: a reader may
		// still hold a slice that starts there. The backing array is
		// replaced when append outgrows it, which frees the dropped frames
		// (at most about twice the window is held).
		if len(t.frames) >= t.maxFrames+FrameSlack {
			t.frames = t.frames[1:]
		}
		f.seq = t.nextSeq
		if !t.keepEvents {
			f.ev = nil
		}
		t.frames = append(t.frames, f)
		t.nextSeq++
	}
	if len(t.live) > 0 {
		added := t.frames[len(t.frames)-len(frames):]
		t.live = slices.DeleteFunc(t.live, func(r liveReader) bool { return !r.push(added) })
	}
	if last {
		t.finishLocked()
	} else {
		t.notify()
	}
	t.mu.Unlock()
	if stop {
		t.cancel(limitEvents(t.maxFrames))
	}
}

// dropLive drops r from the live readers; t.mu is held.
func (t *turn) dropLive(r liveReader) {
	t.live = slices.DeleteFunc(t.live, func(l liveReader) bool { return l == r })
}

// limitEvents stops a turn whose stream reached MaxTurnEvents frames.
func limitEvents(n int) *chat.Limit {
	return &chat.Limit{Name: chat.LimitEvents, Value: strconv.Itoa(n),
		Message: fmt.Sprintf("the answer's stream reached %d events and was stopped there; the partial answer was saved (MAX_TURN_EVENTS)", n)}
}

// finish marks the turn complete: no frame is added after it. The frames'
// data, kept for resuming during the retention, move into one buffer: a
// finished turn is then a handful of allocations instead of one per frame,
// less for the GC to mark while thousands of turns are kept.
func (t *turn) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finishLocked()
}

// finishLocked is finish with t.mu held.
func (t *turn) finishLocked() {
	if t.done {
		return
	}
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	for _, r := range t.live {
		r.end()
	}
	t.live = nil
	t.compact()
	t.notify()
	close(t.ended)
}

// compact copies the frames into a new slice whose data share one buffer;
// readers holding the old slice keep it.
func (t *turn) compact() {
	size := 0
	for _, f := range t.frames {
		size += len(f.data)
	}
	buf := make([]byte, 0, size)
	frames := make([]frame, len(t.frames))
	for i, f := range t.frames {
		start := len(buf)
		buf = append(buf, f.data...)
		frames[i] = frame{seq: f.seq, data: buf[start:len(buf):len(buf)], ev: f.ev}
	}
	t.frames = frames
}

func (t *turn) notify() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// read returns the frames after seq after, whether the turn is done, a
// channel closed on the next change, and gap when frames after `after` were
// already dropped from the window.
func (t *turn) read(after int64) (frames []frame, done, gap bool, changed <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	frames, gap = t.after(after)
	return frames, t.done, gap, t.changed
}

// after returns the frames after seq `after`, or gap when some of them
// were already dropped from the window; t.mu is held.
func (t *turn) after(after int64) (frames []frame, gap bool) {
	if len(t.frames) == 0 {
		return nil, false
	}
	if after+1 < t.frames[0].seq {
		return nil, true
	}
	if i := int(after + 1 - t.frames[0].seq); i < len(t.frames) {
		frames = t.frames[i:len(t.frames):len(t.frames)]
	}
	return frames, false
}

// next waits for the frames after seq `after` (see source).
func (t *turn) next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) ([]frame, bool, *chat.Error) {
	for {
		frames, done, gap, changed := t.read(after)
		switch {
		case gap:
			return nil, false, errGap
		case len(frames) > 0 || done:
			return frames, done, nil
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

func (t *turn) ids() (string, string) { return t.sessionID, t.id }

// state reports the last frame's seq and whether the turn is done.
func (t *turn) state() (last int64, done bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nextSeq - 1, t.done
}

// firstKept is the seq of the oldest frame still kept.
func (t *turn) firstKept() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.frames) == 0 {
		return t.nextSeq
	}
	return t.frames[0].seq
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

// turnRegistry holds the running turns and the finished ones still kept for
// resuming.
type turnRegistry struct {
	retention time.Duration

	mu        sync.Mutex
	byID      map[string]*turn
	bySession map[string]*turn // the latest turn of each session
	running   sync.WaitGroup
	closing   bool
}

func newTurnRegistry(retention time.Duration) *turnRegistry {
	return &turnRegistry{retention: retention, byID: make(map[string]*turn), bySession: make(map[string]*turn)}
}

// register adds a new turn; it fails once the server is shutting down.
func (r *turnRegistry) register(t *turn) bool {
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
func (r *turnRegistry) ended(t *turn) {
	r.running.Done()
	time.AfterFunc(r.retention, func() { r.remove(t) })
}

func (r *turnRegistry) remove(t *turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[t.id] == t {
		delete(r.byID, t.id)
	}
	if r.bySession[t.key] == t {
		delete(r.bySession, t.key)
	}
}

func (r *turnRegistry) get(id string) *turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

// latest returns the latest turn of the session with this store key.
func (r *turnRegistry) latest(key string) *turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bySession[key]
}

// forgetSession drops the kept turns of a deleted session (its store key).
func (r *turnRegistry) forgetSession(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, t := range r.byID {
		if t.key == key {
			delete(r.byID, id)
		}
	}
	delete(r.bySession, key)
}

// shutdown refuses new turns and cancels the running ones.
func (r *turnRegistry) shutdown() {
	r.mu.Lock()
	r.closing = true
	var all []*turn
	for _, t := range r.byID {
		all = append(all, t)
	}
	r.mu.Unlock()
	for _, t := range all {
		t.cancel(errShutdown)
	}
}

// wait waits for the running turns to end, or for ctx.
func (r *turnRegistry) wait(ctx context.Context) error { return waitGroup(ctx, &r.running) }

// waitGroup waits for wg, or for ctx.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
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

func (r *turnRegistry) isClosing() bool {
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

// follow calls fn for each event of the turn, in order, until the turn ends
// or ctx is done; tick, when not nil, is called on idle heartbeats.
func follow(ctx context.Context, t *turn, heartbeat time.Duration, fn func(chat.Event), tick func()) error {
	var after int64
	hb := time.NewTicker(heartbeat)
	defer hb.Stop()
	for {
		frames, done, gap, changed := t.read(after)
		if gap {
			return errGap
		}
		for _, f := range frames {
			if f.ev != nil {
				fn(*f.ev)
			}
			after = f.seq
		}
		if len(frames) > 0 {
			continue
		}
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-hb.C:
			if tick != nil {
				tick()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var errGap = &chat.Error{Code: "stream_gap", Message: "events of this turn were dropped before they could be sent; read the answer from the session history"}
