package turnlog

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory is the Log of a single process: frames stay in this process, so a
// resume works only against the replica that ran the turn. A janitor
// goroutine drops finished turns after the retention; a turn past its
// retention is already invisible before the janitor gets to it.
type Memory struct {
	cfg Config

	mu     sync.RWMutex
	turns  map[Ref]*memTurn
	latest map[string]*memTurn // by session
	closed bool

	stop chan struct{}
	done chan struct{}

	stops Watchers
}

type memTurn struct {
	meta Meta

	mu      sync.Mutex
	frames  []Frame // the kept window, oldest first
	last    int64
	done    bool
	written time.Time
	expires time.Time     // set by Finish
	gone    bool          // forgotten or expired
	stop    bool          // a stop was requested (Status.Stop)
	changed chan struct{} // closed and replaced on every change
}

// NewMemory returns an empty Memory log and starts its janitor; Close stops
// it.
func NewMemory(cfg Config) (*Memory, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	m := &Memory{
		cfg:    cfg,
		turns:  make(map[Ref]*memTurn),
		latest: make(map[string]*memTurn),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go m.janitor(min(max(cfg.Retention/4, 10*time.Millisecond), time.Minute))
	return m, nil
}

// janitor drops expired turns, so that their frames are freed even when
// nobody asks for them again.
func (m *Memory) janitor(every time.Duration) {
	defer close(m.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-tick.C:
			m.mu.Lock()
			for ref, t := range m.turns {
				if t.expired(now) {
					m.dropLocked(ref, t)
				}
			}
			m.mu.Unlock()
		}
	}
}

// dropLocked removes t; m.mu is held.
func (m *Memory) dropLocked(ref Ref, t *memTurn) {
	delete(m.turns, ref)
	if m.latest[ref.Session] == t {
		delete(m.latest, ref.Session)
	}
	t.mu.Lock()
	t.gone = true
	t.notify()
	t.mu.Unlock()
}

func (t *memTurn) expired(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done && !now.Before(t.expires)
}

func (t *memTurn) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// get returns the kept turn or ErrNotFound.
func (m *Memory) get(ref Ref) (*memTurn, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	t, closed := m.turns[ref], m.closed
	m.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if t == nil || t.expired(time.Now()) {
		return nil, fmt.Errorf("turn log: %s: %w", ref, ErrNotFound)
	}
	return t, nil
}

// Start implements Log.
func (m *Memory) Start(ctx context.Context, meta Meta) error {
	if err := meta.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if meta.Started.IsZero() {
		meta.Started = time.Now()
	}
	meta.Started = meta.Started.Truncate(time.Millisecond)
	t := &memTurn{meta: meta, written: time.Now().Truncate(time.Millisecond), changed: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if old := m.turns[meta.Ref]; old != nil && !old.expired(time.Now()) {
		return fmt.Errorf("turn log: %s: %w", meta.Ref, ErrExists)
	}
	m.turns[meta.Ref] = t
	m.latest[meta.Session] = t
	return nil
}

// Open implements Log: a Memory has no write to save, so it starts the
// turn at once.
func (m *Memory) Open(meta Meta) error { return m.Start(context.Background(), meta) }

// Append implements Log.
func (m *Memory) Append(ctx context.Context, ref Ref, data ...[]byte) (int64, error) {
	return m.write(ref, false, data)
}

// Finish implements Log.
func (m *Memory) Finish(ctx context.Context, ref Ref, data ...[]byte) error {
	_, err := m.write(ref, true, data)
	return err
}

func (m *Memory) write(ref Ref, finish bool, data [][]byte) (int64, error) {
	t, err := m.get(ref)
	if err != nil {
		return 0, err
	}
	if err := CheckFrames(ref, data); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return 0, fmt.Errorf("turn log: %s: %w", ref, ErrNotFound)
	}
	if t.done {
		if finish && len(data) == 0 {
			return t.last, nil
		}
		return t.last, fmt.Errorf("turn log: %s: %w", ref, ErrFinished)
	}
	t.written = time.Now().Truncate(time.Millisecond)
	for _, d := range data {
		// Re-slicing instead of clearing the dropped frame: readers may
		// still hold a slice that starts there. The backing array is
		// replaced when append runs out of capacity, which frees the
		// dropped frames then (at most about twice the window is held).
		if len(t.frames) >= m.cfg.MaxFrames {
			t.frames = t.frames[1:]
		}
		t.last++
		t.frames = append(t.frames, Frame{Seq: t.last, Data: d})
	}
	if finish {
		t.done = true
		t.expires = time.Now().Add(m.cfg.Retention)
	}
	if len(data) > 0 || finish {
		t.notify()
	}
	return t.last, nil
}

// read is Read on t; it also returns the channel closed on t's next change.
func (t *memTurn) read(ref Ref, after int64) (Batch, <-chan struct{}, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return Batch{}, nil, fmt.Errorf("turn log: %s: %w", ref, ErrNotFound)
	}
	if after < 0 || after > t.last {
		return Batch{}, nil, fmt.Errorf("turn log: %s: read after %d, but the last frame is %d: %w", ref, after, t.last, ErrAhead)
	}
	var b Batch
	first := t.last + 1
	if len(t.frames) > 0 {
		first = t.frames[0].Seq
	}
	switch {
	case after+1 < first:
		b.Gap = true
	case after < t.last:
		i := int(after + 1 - first)
		b.Frames = t.frames[i:len(t.frames):len(t.frames)]
	}
	b.Done = t.done && !b.Gap
	return b, t.changed, nil
}

// Read implements Log.
func (m *Memory) Read(ctx context.Context, ref Ref, after int64) (Batch, error) {
	t, err := m.get(ref)
	if err != nil {
		return Batch{}, err
	}
	b, _, err := t.read(ref, after)
	return b, err
}

// Wait implements Log.
func (m *Memory) Wait(ctx context.Context, ref Ref, after int64) (Batch, error) {
	t, err := m.get(ref)
	if err != nil {
		return Batch{}, err
	}
	for {
		b, changed, err := t.read(ref, after)
		if err != nil || len(b.Frames) > 0 || b.Done || b.Gap {
			return b, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		case <-m.stop:
			return Batch{}, ErrClosed
		}
	}
}

func (t *memTurn) status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Status{Meta: t.meta, Last: t.last, First: t.last + 1, Done: t.done, Written: t.written, Stop: t.stop}
	if len(t.frames) > 0 {
		s.First = t.frames[0].Seq
	}
	return s
}

// Lookup implements Log.
func (m *Memory) Lookup(ctx context.Context, ref Ref) (Status, error) {
	t, err := m.get(ref)
	if err != nil {
		return Status{}, err
	}
	return t.status(), nil
}

// Latest implements Log.
func (m *Memory) Latest(ctx context.Context, sessionID string) (Status, error) {
	if err := ValidSession(sessionID); err != nil {
		return Status{}, err
	}
	m.mu.RLock()
	t, closed := m.latest[sessionID], m.closed
	m.mu.RUnlock()
	if closed {
		return Status{}, ErrClosed
	}
	if t == nil || t.expired(time.Now()) {
		return Status{}, fmt.Errorf("turn log: session %s: latest turn: %w", sessionID, ErrNotFound)
	}
	return t.status(), nil
}

// Forget implements Log.
func (m *Memory) Forget(ctx context.Context, sessionID string) error {
	if err := ValidSession(sessionID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	for ref, t := range m.turns {
		if ref.Session == sessionID {
			m.dropLocked(ref, t)
		}
	}
	return nil
}

// Stop implements Log: the process's Watchers are called at once.
func (m *Memory) Stop(ctx context.Context, ref Ref) error {
	t, err := m.get(ref)
	if err != nil {
		return err
	}
	t.mu.Lock()
	gone, done := t.gone, t.done
	if !gone && !done {
		t.stop = true
	}
	t.mu.Unlock()
	switch {
	case gone:
		return fmt.Errorf("turn log: %s: %w", ref, ErrNotFound)
	case done:
		return fmt.Errorf("turn log: %s: %w", ref, ErrFinished)
	}
	go m.stops.Call(ref)
	return nil
}

// WatchStops implements Log.
func (m *Memory) WatchStops(fn func(Ref)) (cancel func()) { return m.stops.Add(fn) }

// Close implements Log: it stops the janitor and drops every turn.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stop)
	m.turns, m.latest = nil, nil
	m.mu.Unlock()
	<-m.done
	return nil
}
