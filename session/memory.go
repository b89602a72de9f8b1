package session

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// Memory is a Store in process memory. Sessions expire after Config.TTL
// without access and are really evicted: a janitor sweeps them.
//
// The store holds at most Config.MaxSessions sessions and Config.MaxBytes
// bytes (Weight). Beyond either it evicts, least recently used first, a
// session of the owner that needs room when that owner holds more than
// its share of the store (the caps divided among the owners that hold
// sessions), else of the owner that holds the largest share: an owner
// within its share never loses a session to another's. A session whose
// lease is held, and the one being written, are not evicted. Each owner's
// sessions are a list of their own, most recently used first, which the
// quotas (Config.SessionsPerOwner, Config.BytesPerOwner) count.
type Memory struct {
	cfg Config

	mu     sync.Mutex
	items  map[string]*list.Element // of *memEntry
	lru    *list.List               // front: most recently used
	leases map[string]*memLease
	closed bool
	// owners are the sessions of each owner that holds any, and bytes
	// the Weight of all sessions.
	owners map[string]*ownerSessions
	bytes  int64
	// queues are the sessions' queues of waiting messages (Queuer), under
	// a lock of their own.
	queues memQueues
	// spent are the owners' counts (Ledger), by period and owner, under
	// a lock of their own.
	spendMu sync.Mutex
	spent   map[string]Spending

	stop chan struct{}
	done chan struct{}
}

// ownerSessions are one owner's sessions.
type ownerSessions struct {
	lru   *list.List // of *memEntry; front: most recently used
	bytes int64      // their Weight
}

type memEntry struct {
	sess    Session
	msgs    []chat.Message
	expires time.Time
	// weight is Weight(sess, msgs); msgWeight is its history's part.
	weight, msgWeight int64
	own               *list.Element // in its owner's lru
}

// session returns a copy of the entry's session. It shares the state's tool
// history with the store, which neither can change (orchestration.History
// is immutable): no copy of it is made per access.
func (e *memEntry) session() Session { return e.sess }

// lockPoll is how often Claim retries a busy session while it waits.
const lockPoll = 20 * time.Millisecond

// NewMemory returns a memory store and starts its janitor; Close stops it.
func NewMemory(cfg Config) *Memory {
	cfg = cfg.WithDefaults()
	m := &Memory{
		cfg:    cfg,
		items:  make(map[string]*list.Element),
		lru:    list.New(),
		leases: make(map[string]*memLease),
		owners: make(map[string]*ownerSessions),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go m.janitor(min(max(cfg.TTL/10, 10*time.Millisecond), time.Minute))
	return m
}

func (m *Memory) janitor(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.Sweep()
		}
	}
}

// Sweep evicts every expired session and lease now. The janitor calls it
// periodically.
func (m *Memory) Sweep() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	// Sliding expiry makes LRU order the expiry order: stop at the first
	// entry that is still alive.
	for el := m.lru.Back(); el != nil; {
		e := el.Value.(*memEntry)
		if now.Before(e.expires) {
			break
		}
		prev := el.Prev()
		m.remove(el)
		el = prev
	}
	for id, l := range m.leases {
		if !now.Before(l.expires) {
			delete(m.leases, id)
		}
	}
}

// Len returns how many sessions the store holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

// OwnerUsage returns how many sessions owner holds and their Weight.
func (m *Memory) OwnerUsage(owner string) (sessions int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if o := m.owners[owner]; o != nil {
		return o.lru.Len(), o.bytes
	}
	return 0, 0
}

// lookup returns the live entry for id and refreshes its TTL. m.mu is held.
func (m *Memory) lookup(id string, now time.Time) *memEntry {
	el, ok := m.items[id]
	if !ok {
		return nil
	}
	e := el.Value.(*memEntry)
	if !now.Before(e.expires) {
		m.remove(el)
		return nil
	}
	e.expires = now.Add(m.cfg.TTL)
	e.sess.LastAccessed = now
	m.lru.MoveToFront(el)
	m.owners[e.sess.Owner].lru.MoveToFront(e.own)
	return e
}

// create adds an empty session, unless its owner is at a quota; it may
// evict others to make room. m.mu is held.
func (m *Memory) create(id string, o WriteOptions, now time.Time) (*memEntry, error) {
	ow := m.owners[o.Owner]
	if ow != nil {
		// Its expired sessions, the last of its list, are not its to count.
		for el := ow.lru.Back(); el != nil && !now.Before(el.Value.(*memEntry).expires); el = ow.lru.Back() {
			m.remove(m.items[el.Value.(*memEntry).sess.ID])
			if ow = m.owners[o.Owner]; ow == nil {
				break
			}
		}
	}
	sessions, bytes := 0, int64(0)
	if ow != nil {
		sessions, bytes = ow.lru.Len(), ow.bytes
	}
	if err := m.cfg.Admit(o.Owner, sessions, bytes); err != nil {
		return nil, err
	}
	if ow == nil {
		ow = &ownerSessions{lru: list.New()}
		m.owners[o.Owner] = ow
	}
	e := &memEntry{
		sess:    Session{ID: id, Owner: o.Owner, Agent: o.Agent, CreatedAt: now, LastAccessed: now},
		expires: now.Add(m.cfg.TTL),
	}
	m.items[id] = m.lru.PushFront(e)
	e.own = ow.lru.PushFront(e)
	m.reweigh(e, now)
	return e, nil
}

// remove drops a session. m.mu is held.
func (m *Memory) remove(el *list.Element) {
	e := el.Value.(*memEntry)
	m.lru.Remove(el)
	delete(m.items, e.sess.ID)
	ow := m.owners[e.sess.Owner]
	ow.lru.Remove(e.own)
	ow.bytes -= e.weight
	m.bytes -= e.weight
	if ow.lru.Len() == 0 {
		delete(m.owners, e.sess.Owner)
	}
}

// setHistory sets e's history to msgs, of which added are the messages
// just appended, trimmed by whole turns (TrimTurns); dropped says whether
// messages were dropped from the old history. m.mu is held.
func (m *Memory) setHistory(e *memEntry, msgs, added []chat.Message, dropped bool) {
	kept := TrimTurns(msgs, m.cfg.MaxMessages)
	if dropped || len(kept) != len(msgs) {
		e.msgWeight = 0
		for _, msg := range kept {
			e.msgWeight += MessageWeight(msg)
		}
	} else {
		for _, msg := range added {
			e.msgWeight += MessageWeight(msg)
		}
	}
	e.msgs = kept
}

// reweigh updates the store's weights after a write to e, and evicts
// sessions if it is now over its caps. m.mu is held.
func (m *Memory) reweigh(e *memEntry, now time.Time) {
	w := StateWeight(e.sess) + e.msgWeight
	m.owners[e.sess.Owner].bytes += w - e.weight
	m.bytes += w - e.weight
	e.weight = w
	for len(m.items) > m.cfg.MaxSessions || m.bytes > m.cfg.MaxBytes {
		v := m.victim(e, now)
		if v == nil {
			return // only sessions that may not go: over the caps for now
		}
		m.remove(m.items[v.sess.ID])
	}
}

// share is the part of the store ow holds, by sessions or by bytes,
// whichever is larger.
func (m *Memory) share(ow *ownerSessions) float64 {
	return max(float64(ow.lru.Len())/float64(m.cfg.MaxSessions), float64(ow.bytes)/float64(m.cfg.MaxBytes))
}

// victim picks the session to evict to make room for keep: the least
// recently used of keep's owner when that owner holds more than its share,
// else of the owner holding the largest share, as long as it holds more
// than its share; nil when there is none that may go. A fair share is the
// store divided among the owners that hold sessions. m.mu is held.
func (m *Memory) victim(keep *memEntry, now time.Time) *memEntry {
	fair := 1 / float64(len(m.owners))
	if ow := m.owners[keep.sess.Owner]; m.share(ow) > fair {
		if v := m.oldest(ow, keep, now); v != nil {
			return v
		}
	}
	var (
		best      *memEntry
		bestShare = fair
	)
	for _, ow := range m.owners {
		if sh := m.share(ow); sh > bestShare {
			if v := m.oldest(ow, keep, now); v != nil {
				best, bestShare = v, sh
			}
		}
	}
	return best
}

// oldest returns ow's least recently used session that may be evicted:
// not keep, and not held by a lease. m.mu is held.
func (m *Memory) oldest(ow *ownerSessions, keep *memEntry, now time.Time) *memEntry {
	for el := ow.lru.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*memEntry)
		if l, held := m.leases[e.sess.ID]; e == keep || held && now.Before(l.expires) {
			continue
		}
		return e
	}
	return nil
}

func (m *Memory) checkOpen(ctx context.Context) error {
	if m.closed {
		return ErrUnavailable
	}
	return ctx.Err()
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, id string) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(ctx); err != nil {
		return Session{}, err
	}
	e := m.lookup(id, m.cfg.Now())
	if e == nil {
		return Session{}, ErrNotFound
	}
	return e.session(), nil
}

// releaseWith releases the write's lease when it asks to (WithRelease);
// the write was fenced by it, so it holds the session. m.mu is held.
func (m *Memory) releaseWith(id string, o WriteOptions) {
	if !o.Release || o.Lease == nil {
		return
	}
	delete(m.leases, id)
	if l, ok := o.Lease.(*memLease); ok && l.m == m {
		l.released = true
	}
	m.released(id, m.cfg.Now())
}

// fence returns ErrFenced when l no longer holds session id. m.mu is held.
func (m *Memory) fence(id string, l Lease, now time.Time) error {
	if l == nil {
		return nil
	}
	cur, ok := m.leases[id]
	if !ok || cur.token != l.Token() || !now.Before(cur.expires) {
		return ErrFenced
	}
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(ctx); err != nil {
		return err
	}
	delete(m.leases, id)
	el, ok := m.items[id]
	if !ok {
		return ErrNotFound
	}
	m.remove(el)
	return nil
}

// Messages implements Store.
func (m *Memory) Messages(ctx context.Context, id string, limit int) ([]chat.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(ctx); err != nil {
		return nil, err
	}
	e := m.lookup(id, m.cfg.Now())
	if e == nil {
		return nil, ErrNotFound
	}
	msgs := e.msgs
	if limit > 0 && len(msgs) > limit {
		msgs = msgs[len(msgs)-limit:]
	}
	return append([]chat.Message(nil), msgs...), nil
}

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, id string, opts ...UpdateOption) (Session, Lease, error) {
	o := Options(opts...)
	deadline := time.Now().Add(m.cfg.LockWait)
	for {
		s, l, err := m.tryClaim(ctx, id, o)
		wait := time.Until(deadline)
		if err != ErrBusy || wait <= 0 {
			return s, l, err
		}
		select {
		case <-ctx.Done():
			return Session{}, nil, ctx.Err()
		case <-time.After(min(lockPoll, wait)):
		}
	}
}

func (m *Memory) tryClaim(ctx context.Context, id string, o WriteOptions) (Session, Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(ctx); err != nil {
		return Session{}, nil, err
	}
	now := m.cfg.Now()
	e := m.lookup(id, now)
	existed := e != nil
	if !existed {
		if o.Charged {
			var used int64
			if ow := m.owners[o.Owner]; ow != nil {
				used = ow.bytes
			}
			if err := m.cfg.AdmitTurn(o.Owner, used, o.Brings); err != nil {
				return Session{}, nil, err
			}
		}
		var err error
		if e, err = m.create(id, o, now); err != nil {
			return Session{}, nil, err
		}
	}
	if o.Foreign(e.sess) {
		return e.session(), nil, ErrForeign
	}
	if cur, ok := m.leases[id]; ok && now.Before(cur.expires) {
		return Session{}, nil, ErrBusy
	}
	if o.Charged && existed {
		if err := m.cfg.AdmitTurn(e.sess.Owner, m.owners[e.sess.Owner].bytes, o.Brings); err != nil {
			return Session{}, nil, err
		}
	}
	l := &memLease{m: m, id: id, token: newToken(), expires: now.Add(m.cfg.LockTTL)}
	m.leases[id] = l
	return e.session(), l, nil
}

// UpdateAppend implements Store. fn runs exactly once, under the store's
// lock.
func (m *Memory) UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...UpdateOption) (Session, []chat.Message, error) {
	o := Options(opts...)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(ctx); err != nil {
		return Session{}, nil, err
	}
	now := m.cfg.Now()
	if err := m.fence(id, o.Lease, now); err != nil {
		return Session{}, nil, err
	}
	e := m.lookup(id, now)
	st := orchestration.State{}
	if e != nil {
		st = e.sess.State
	}
	if err := fn(&st); err != nil {
		return Session{}, nil, err
	}
	// The write is made on a copy, next, so that a refused approval or
	// journal change leaves the stored session as it was; it replaces the
	// stored session whole, so a field a write option sets cannot be left
	// behind.
	next := Session{}
	if e != nil {
		next = e.sess
	}
	next.State = st // ApplyTurn reads the state after fn (WithRequest)
	if err := o.ApplyApprovals(&next); err != nil {
		return Session{}, nil, err
	}
	if err := o.ApplyTurn(&next); err != nil {
		return Session{}, nil, err
	}
	if e == nil {
		var err error
		if e, err = m.create(id, o, now); err != nil {
			return Session{}, nil, err
		}
		// A new session: its identity is the one create gave it.
		next.ID, next.Owner, next.Agent, next.CreatedAt, next.LastAccessed = e.sess.ID, e.sess.Owner, e.sess.Agent, e.sess.CreatedAt, e.sess.LastAccessed
	}
	next.Version++
	e.sess = next
	had := len(e.msgs) // a drop below makes e.msgs shorter
	if o.DropAnswer || o.DropTurn {
		// A new array: the dropped messages must not stay reachable, and
		// a slice handed out before must not see the append.
		e.msgs = append([]chat.Message(nil), o.Drop(e.msgs)...)
	}
	dropped := len(e.msgs) != had
	var hist []chat.Message
	if window != 0 {
		hist = append([]chat.Message(nil), Window(e.msgs, window, o)...)
	}
	m.setHistory(e, append(e.msgs, msgs...), msgs, dropped)
	m.releaseWith(id, o)
	m.reweigh(e, now)
	return e.session(), hist, nil
}

var _ Pinger = (*Memory)(nil)

// Ping implements Pinger.
func (m *Memory) Ping(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkOpen(ctx)
}

// Close stops the janitor. Later calls return ErrUnavailable.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	return nil
}

type memLease struct {
	m       *Memory
	id      string
	token   string
	expires time.Time // guarded by m.mu
	// released: a write released it (WithRelease); guarded by m.mu.
	released bool
}

func (l *memLease) SessionID() string { return l.id }
func (l *memLease) Token() string     { return l.token }

func (l *memLease) Extend(ctx context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.released {
		return nil
	}
	now := l.m.cfg.Now()
	if err := l.m.fence(l.id, l, now); err != nil {
		return err
	}
	l.expires = now.Add(l.m.cfg.LockTTL)
	return nil
}

func (l *memLease) Expiry() time.Time {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.expires
}

func (l *memLease) Release(ctx context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if cur, ok := l.m.leases[l.id]; ok && cur.token == l.token {
		delete(l.m.leases, l.id)
		l.m.released(l.id, l.m.cfg.Now())
	}
	return nil
}

// newToken returns 128 random bits in hex.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// List implements Lister. It walks the store's sessions, most recently used
// first, so a list costs a pass over up to Config.MaxSessions entries.
func (m *Memory) List(ctx context.Context, owner, cursor string, limit int) (Page, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkOpen(ctx); err != nil {
		return Page{}, err
	}
	now := m.cfg.Now()
	var all []Summary
	for el := m.lru.Front(); el != nil && len(all) < MaxListed; el = el.Next() {
		e := el.Value.(*memEntry)
		if e.sess.Owner == owner && OwnsKey(owner, e.sess.ID) && now.Before(e.expires) {
			all = append(all, SummaryOf(e.sess))
		}
	}
	p, err := ListPage(all, cursor, limit)
	if err != nil {
		return Page{}, err
	}
	for i, s := range p.Sessions {
		e := m.items[s.Key].Value.(*memEntry)
		p.Sessions[i].Title = TitleOf(e.sess.Title, e.msgs)
	}
	return p, nil
}
