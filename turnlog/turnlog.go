// Package turnlog keeps the frames of a turn (each one event of the turn,
// chat.Event's JSON, as package turns writes them) so that a client can
// resume its stream after a disconnect, from the replica that runs the turn
// or from any other one. The log does not read its frames: it numbers,
// keeps, and hands them back.
//
// A turn is started once (Start), receives its frames in order (Append),
// and ends with Finish (which may carry the last frames); readers ask for the frames after the last sequence
// number they saw (Read, or Wait to block until there are some). Each turn
// keeps at most Config.MaxFrames frames: the oldest are dropped, and a read
// from before the kept window reports a gap instead of silently skipping
// frames. A finished turn is kept for Config.Retention, then dropped.
//
// Two implementations share one behaviour, checked by the conformance suite
// in turnlogtest: Memory for a single process, and redislog.Log (package
// turnlog/redislog: one Redis Stream per turn) for several replicas behind
// one Redis or Redis Cluster, in a package of its own so that a program
// without Redis does not link a Redis client.
//
// Every turn has one writer: the process that calls Append and Finish for it
// (the replica that runs the turn), until another process takes the turn
// over when its writer died (Taker); the old writer's writes are refused
// from then on. Readers may be anywhere.
package turnlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/session"
)

// Defaults of Config.
const (
	DefaultMaxFrames = 20000
	DefaultRetention = 5 * time.Minute
)

// Errors. Failures to reach the backing store (Redis down or too slow) wrap
// session.ErrUnavailable, so that callers map them as they map the session
// store's; a value in Redis that this package did not write wraps
// session.ErrCorrupt.
var (
	// ErrNotFound: no such turn in that session, or it was dropped after
	// its retention.
	ErrNotFound = errors.New("turn not found")
	// ErrExists: Start with the ID of a turn that is already kept.
	ErrExists = errors.New("turn already exists")
	// ErrFinished: Append to a finished turn.
	ErrFinished = errors.New("turn already finished")
	// ErrAhead: a read after a seq the turn has not reached (a forged or
	// foreign Last-Event-ID).
	ErrAhead = errors.New("read after a frame the turn does not have")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("turn log closed")
	// ErrFenced: a write of a process that is no longer the turn's writer
	// (another process took the turn over, Taker); it was not applied.
	ErrFenced = errors.New("turn taken over by another writer")
)

// Ref names a turn. The session is part of the name because the Redis
// implementation keeps all of a session's keys in one Cluster slot; the
// server always knows both (the session from the URL, the turn from
// Last-Event-ID).
type Ref struct {
	Session string
	Turn    string
}

func (r Ref) String() string { return "session " + r.Session + " turn " + r.Turn }

// Validate reports a Ref whose IDs are not session keys or IDs (session.Key,
// session.ValidID); a Log implementation checks every Ref it is given.
func (r Ref) Validate() error {
	if err := ValidSession(r.Session); err != nil {
		return err
	}
	if !session.ValidID(r.Turn) {
		return fmt.Errorf("turn log: turn ID %q is not valid (8 to 128 characters of A-Z, a-z, 0-9, - and _)", r.Turn)
	}
	return nil
}

// ValidSession reports a session key that is not one (session.ValidKey).
func ValidSession(id string) error {
	if !session.ValidKey(id) {
		return fmt.Errorf("turn log: session key %q is not valid (session.Key of an ID of 8 to 128 characters of A-Z, a-z, 0-9, - and _)", id)
	}
	return nil
}

// Meta describes a turn; it does not change after Start.
type Meta struct {
	Ref
	Owner   string
	AgentID string
	// Started is set by Start when zero; it is kept to the millisecond.
	Started time.Time
}

// Validate reports a Meta with an invalid Ref or oversized fields.
func (m Meta) Validate() error {
	if err := m.Ref.Validate(); err != nil {
		return err
	}
	if len(m.Owner) > 1024 || len(m.AgentID) > 1024 {
		return fmt.Errorf("turn log: %s: owner or agent ID longer than 1024 bytes", m.Ref)
	}
	return nil
}

// Frame is one frame of a turn: Seq counts from 1 without holes within a
// turn, Data is its payload (package turns writes one event's JSON; never
// empty).
// Data is shared, not copied: neither the writer nor readers may modify it.
type Frame struct {
	Seq  int64
	Data []byte
}

// Batch is the answer to a read after a sequence number.
type Batch struct {
	// Frames are the next frames after the sequence number asked for, in
	// order, without a hole. A batch may stop short of the turn's last
	// frame (implementations bound its size): read again after the last
	// one.
	Frames []Frame
	// Done: the turn finished and Frames reach its last frame.
	Done bool
	// Gap: frames right after the sequence number asked for were already
	// dropped (the turn had more than MaxFrames); Frames is then empty.
	Gap bool
}

// Status is a turn's meta data and its progress.
type Status struct {
	Meta
	// Last is the seq of the last frame appended, 0 before the first.
	Last int64
	// First is the seq of the oldest frame still kept (Last+1 when none
	// is kept): a resume after n works when n+1 >= First.
	First int64
	// Done: the turn finished.
	Done bool
	// Written is when the turn was last appended to (an Append of no frames
	// counts) or started, by the writer's clock to the millisecond. A
	// running turn whose Written stops advancing has lost its writer: the
	// writer appends at least every so often, frames or not, to say it is
	// alive.
	Written time.Time
	// Stop: a stop of the running turn was requested (Stop).
	Stop bool
	// Restarts are the seqs at which writers that took the turn over
	// (Taker) began, oldest first: each is the first frame one wrote.
	Restarts []int64
	// HandedOver: the turn's writer handed it over (Taker.HandOver) and
	// no process took it over since: it runs nowhere until one does.
	HandedOver bool
}

// Log keeps the frames of turns. Implementations are safe for concurrent
// use; Append never waits for readers.
type Log interface {
	// Start registers a running turn and makes it its session's latest.
	// It fails with ErrExists when the turn is already kept.
	Start(ctx context.Context, m Meta) error
	// Open is Start without a write of its own: the turn is registered at
	// the latest by its first Append or Finish, as part of that write, so
	// that a turn whose frames all go in one Finish costs one write. Until
	// then other processes may not find it (Lookup, Latest and Stop may
	// answer ErrNotFound); this process watches its stops from the start.
	// ErrExists comes from Open or from the first write.
	Open(m Meta) error
	// Append adds frames to a running turn, numbering them from its last
	// seq + 1, and returns the seq of the last one. Each Append is one
	// write to the backing store whatever the number of frames. An Append
	// of no frames adds nothing but advances Status.Written: the writer's
	// sign of life while the turn produces nothing. An Append or Finish
	// that failed may still have gone in (its reply was lost, or it
	// arrives late): the writer sends its frames again, first in its next
	// call, and the log keeps each frame once.
	Append(ctx context.Context, ref Ref, data ...[]byte) (last int64, err error)
	// Finish appends the turn's last frames, if any (as Append would), and
	// ends the turn, in one write: no frame is added after it, readers get
	// Done, and the turn is dropped Retention later. Finishing a finished
	// turn without frames does nothing; with frames it fails with
	// ErrFinished.
	Finish(ctx context.Context, ref Ref, data ...[]byte) error
	// Read returns the frames after seq `after` without waiting.
	Read(ctx context.Context, ref Ref, after int64) (Batch, error)
	// Wait is Read, but when there is no frame after `after` and the turn
	// is running it waits until there is, the turn finishes or ctx ends
	// (then it returns ctx's error).
	Wait(ctx context.Context, ref Ref, after int64) (Batch, error)
	// Lookup returns a kept turn's status, or ErrNotFound.
	Lookup(ctx context.Context, ref Ref) (Status, error)
	// Latest returns the status of the session's latest turn, running or
	// kept, or ErrNotFound.
	Latest(ctx context.Context, sessionID string) (Status, error)
	// Forget drops every kept turn of the session (the session was
	// deleted). Readers waiting on them get ErrNotFound.
	Forget(ctx context.Context, sessionID string) error
	// Stop asks the writer of a running turn to stop it, from any process:
	// the writer's WatchStops function is called with ref (Redis: within a
	// round trip, through pub/sub, and again when its subscription
	// reconnects while the request stands). It fails with ErrNotFound for
	// a turn that is not kept and ErrFinished for a finished one.
	Stop(ctx context.Context, ref Ref) error
	// WatchStops calls fn, on a goroutine of the Log's, for every stop
	// request of a running turn this process writes (started here and not
	// finished), until the returned function is called. A request may be
	// reported more than once.
	WatchStops(fn func(Ref)) (cancel func())
	// Close releases the Log's own resources; calls after it fail with
	// ErrClosed and waiting calls return ErrClosed.
	Close() error
}

// A Taker is a Log whose running turns another process can take over when
// their writer stopped (a replica that died mid-turn): the new writer goes
// on appending to the same turn, and whatever the old one still sends (a
// write that was on its way, a process that was only stalled) is refused
// with ErrFenced, so that a turn never has two writers. The Redis log is
// one; the memory log serves one process and is not.
type Taker interface {
	Log
	// TakeOver makes this process the writer of the running turn m names:
	// its frames go on after Status.Last, appended by this process (it
	// watches the turn's stops from now on), and the previous writer's
	// writes fail with ErrFenced. A turn the log does not have yet (its
	// writer died before its first write) is registered with m, without
	// frames. It fails with ErrFinished for a finished turn. The returned
	// Status says whether a stop was requested.
	TakeOver(ctx context.Context, m Meta) (Status, error)
	// HandOver gives up this process's writing of a running turn without
	// finishing it (its process shuts down): its last frames, if any, are
	// appended as Append would, the turn is marked handed over
	// (Status.HandedOver) until a process takes it over, and the
	// WatchHandOvers functions of every process are called with ref. It
	// fails with ErrFenced when another process took the turn over
	// already, ErrFinished for a finished turn.
	HandOver(ctx context.Context, ref Ref, data ...[]byte) error
	// WatchHandOvers calls fn, on a goroutine of the Log's, for the turns
	// handed over (HandOver) by any process and not taken over yet: when
	// one is handed over, and again for those still waiting every so
	// often and when the watch (re)connects (Redis: through pub/sub, and
	// a list of the turns waiting), until the returned function is
	// called. A turn may be reported more than once, and to every
	// process: TakeOver, under the session's lease, decides.
	WatchHandOvers(fn func(Ref)) (cancel func())
}

// Watchers holds the WatchStops functions of a Log, for implementations:
// Add registers one, Call calls them all.
type Watchers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(Ref)
}

// Add registers fn until cancel is called.
func (w *Watchers) Add(fn func(Ref)) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(Ref){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// Call calls every registered function with ref.
func (w *Watchers) Call(ref Ref) {
	w.mu.Lock()
	fns := make([]func(Ref), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn(ref)
	}
}

// Count is the number of registered functions.
func (w *Watchers) Count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fns)
}

// Config is the behaviour every implementation shares.
type Config struct {
	// MaxFrames bounds the frames kept per turn (default 20000); older
	// frames are dropped.
	MaxFrames int
	// Retention is how long a finished turn is kept (default 5 minutes).
	Retention time.Duration
}

// WithDefaults returns c with its zero fields set to the defaults, or an
// error for a negative field.
func (c Config) WithDefaults() (Config, error) {
	if c.MaxFrames < 0 {
		return c, fmt.Errorf("turn log: MaxFrames is negative (%d)", c.MaxFrames)
	}
	if c.Retention < 0 {
		return c, fmt.Errorf("turn log: Retention is negative (%v)", c.Retention)
	}
	if c.MaxFrames == 0 {
		c.MaxFrames = DefaultMaxFrames
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Retention < time.Millisecond {
		return c, fmt.Errorf("turn log: Retention %v is below the 1 ms resolution of the expiry", c.Retention)
	}
	return c, nil
}

// CheckFrames rejects frames that SSE cannot carry as one data line: an empty
// one ends the response in r3labs/sse, a newline breaks framing.
func CheckFrames(ref Ref, data [][]byte) error {
	for i, d := range data {
		if len(d) == 0 {
			return fmt.Errorf("turn log: %s: frame %d of %d is empty", ref, i+1, len(data))
		}
		if bytes.IndexByte(d, '\n') >= 0 || bytes.IndexByte(d, '\r') >= 0 {
			return fmt.Errorf("turn log: %s: frame %d of %d contains a line break", ref, i+1, len(data))
		}
	}
	return nil
}
