// Package filestore is a session.Store that keeps each session in a JSON
// file under a directory, so that sessions survive a restart without Redis.
// It is an example of a custom store, proven like the built-in ones by the
// conformance suite (session/sessiontest); copy it and change it.
//
// # One process per directory
//
// Open takes an exclusive lock on the directory (flock(2) on a file named
// LOCK, which the kernel drops when the process exits, however it exits)
// and refuses a second Open of the same directory, in this process or
// another, with ErrLocked. Turn leases live in memory: they die with the
// process, as its turns do. Replicas that share sessions need a shared
// store (session/redisstore), not a shared directory.
//
// # How it keeps session.Store's promises
//
//   - Atomic writes: a session's state, approvals and history are one file,
//     KEY.json. A write encodes the whole session into a temporary file in
//     the same directory, syncs it, renames it over the old file and syncs
//     the directory. A crash leaves the old file or the new one, never a
//     part of one; temporary files a crash left behind are removed by the
//     next Open. Writes to one session are serialised in the process, so
//     UpdateAppend's function runs exactly once.
//   - Fencing: a write WithLease is applied only while that lease holds the
//     session; the check and the write happen under the session's lock, which
//     a new lease also needs.
//   - Sliding TTL: a session's file's modification time is its last access,
//     set (on the Config.Now clock) by every write and, without a rewrite, by
//     every read. A session untouched for Config.TTL is not returned; its
//     file is removed by the access that finds it expired, or by a sweep
//     every TTL/10 (at most every minute), which needs only the directory
//     listing.
//   - Corruption: a file that does not decode as a session is never
//     replaced, dropped or taken for an empty session: every call on that
//     session returns an error that wraps session.ErrCorrupt and names the
//     file, until someone repairs or removes it. Only its expiry removes it.
//   - I/O failures wrap session.ErrUnavailable; a write that failed after
//     its rename (the directory sync) wraps session.ErrMaybeApplied too.
//   - The history is capped by whole turns (Config.MaxMessages) with
//     session.TrimTurns, as in the memory store. Config.MaxSessions and
//     MaxBytes are ignored: the disk holds what it can.
//   - The owners' quotas (Config.SessionsPerOwner, BytesPerOwner) are not
//     enforced: counting an owner's sessions would take an index the
//     directory does not keep. The suite is run with sessiontest.NoQuotas,
//     which checks that no write is refused for them. A store that needs
//     them keeps, per owner, its sessions and their session.Weight, and
//     calls Config.Admit before a write creates a session.
//
// Every write rewrites the session's file, history included, which suits
// histories of hundreds of messages (MaxMessages bounds them).
//
// File names are session keys (session.Key), which are letters, digits, '-',
// '_' and one '.', and are checked with session.ValidKey. On a
// case-insensitive file system (macOS's default) two IDs that differ only in
// case would share a file: the store then refuses the second ID with an
// error rather than mixing the two sessions (each file records its key).
package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// ErrLocked is returned by Open when another store holds the directory.
var ErrLocked = errors.New("the directory is in use by another store (one process per directory)")

const (
	lockName  = "LOCK"
	suffix    = ".json"
	tmpPrefix = ".tmp-" // never a key's first character (see session.ValidKey)
	lockPoll  = 20 * time.Millisecond
)

var _ session.Pinger = (*Store)(nil)

// Store is a session.Store in a directory. Open it with Open.
type Store struct {
	dir  string
	cfg  session.Config
	lock *os.File // holds the directory's lock while open
	dirf *os.File // to sync the directory after a rename

	// stripes serialise the accesses to one session (its file and its
	// lease) while letting other sessions' writes, and their fsyncs, run in
	// parallel. A session's stripe is picked by a hash of its key.
	stripes [64]sync.Mutex
	seed    maphash.Seed
	closed  atomic.Bool

	mu     sync.Mutex // guards leases
	leases map[string]*lease

	stop, done chan struct{}
}

// record is a session's file: everything one write must change together.
type record struct {
	Session  session.Session `json:"session"`
	Messages []chat.Message  `json:"messages,omitempty"`
}

// Open opens the store in dir, creating the directory if needed, locks it
// (see ErrLocked) and starts the sweep; Close stops it and unlocks the
// directory. cfg is completed with session.Config.WithDefaults.
func Open(dir string, cfg session.Config) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("filestore: %s: %w", dir, err)
	}
	s := &Store{dir: dir, cfg: cfg.WithDefaults(), lock: lock, seed: maphash.MakeSeed(),
		leases: make(map[string]*lease), stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.removeTemps(); err != nil {
		lock.Close()
		return nil, err
	}
	if s.dirf, err = os.Open(dir); err != nil {
		lock.Close()
		return nil, fmt.Errorf("filestore: %w", err)
	}
	go s.sweeper(min(max(s.cfg.TTL/10, 10*time.Millisecond), time.Minute))
	return s, nil
}

// removeTemps removes the temporary files of writes that a crash
// interrupted before their rename: those writes were not applied, and with
// the directory locked no other store is writing one now.
func (s *Store) removeTemps() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return fmt.Errorf("filestore: removing an interrupted write: %w", err)
			}
		}
	}
	return nil
}

func (s *Store) sweeper(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// An error here is met again, and returned, by the next
			// access to the session.
			_ = s.Sweep()
		}
	}
}

// Sweep removes the files of expired sessions and forgets expired leases.
// The store calls it periodically.
func (s *Store) Sweep() error {
	now := s.cfg.Now()
	s.mu.Lock()
	for key, l := range s.leases {
		if !now.Before(l.expires) {
			delete(s.leases, key)
		}
	}
	s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return s.unavailable(err)
	}
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok || !session.ValidKey(key) {
			continue // the lock, a temporary file, or not ours
		}
		info, err := e.Info()
		if err != nil || now.Before(info.ModTime().Add(s.cfg.TTL)) {
			continue // removed since the listing, or live
		}
		// Expired in the listing; look again under the session's lock,
		// since an access may have refreshed it since.
		err = s.do(context.Background(), key, func(now time.Time) error {
			_, err := s.expire(key, now)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// do runs fn under key's stripe, with the store's clock, once key is known
// valid and the store open.
func (s *Store) do(ctx context.Context, key string, fn func(now time.Time) error) error {
	if !session.ValidKey(key) {
		return fmt.Errorf("filestore: %q is not a session key (see session.Key)", key)
	}
	mu := &s.stripes[maphash.String(s.seed, key)%uint64(len(s.stripes))]
	mu.Lock()
	defer mu.Unlock()
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	return fn(s.cfg.Now())
}

func (s *Store) checkOpen(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("filestore: %s: the store is closed: %w", s.dir, session.ErrUnavailable)
	}
	return ctx.Err()
}

func (s *Store) path(key string) string { return filepath.Join(s.dir, key+suffix) }

func (s *Store) unavailable(err error) error {
	return fmt.Errorf("filestore: %w: %w", session.ErrUnavailable, err)
}

// expire removes key's file if the session expired, and reports whether a
// live one is left. The caller holds key's stripe.
func (s *Store) expire(key string, now time.Time) (live bool, err error) {
	info, err := os.Stat(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, s.unavailable(err)
	}
	if now.Before(info.ModTime().Add(s.cfg.TTL)) {
		return true, nil
	}
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, s.unavailable(err)
	}
	return false, nil
}

// load reads key's live session, or nil when there is none, and slides its
// TTL. The caller holds key's stripe.
func (s *Store) load(key string, now time.Time) (*record, error) {
	if live, err := s.expire(key, now); !live {
		return nil, err
	}
	p := s.path(key)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, s.unavailable(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("filestore: %s: %w: %w", p, session.ErrCorrupt, err)
	}
	if r.Session.ID != key {
		why := ""
		if strings.EqualFold(r.Session.ID, key) {
			why = " (IDs that differ only in case share a file on a case-insensitive file system)"
		}
		return nil, fmt.Errorf("filestore: %s holds session %q, not %q%s: %w", p, r.Session.ID, key, why, session.ErrCorrupt)
	}
	// A read records the access in the modification time, which is cheaper
	// than a rewrite; a crash may forget it, and the session then expires
	// up to one TTL early, from its previous access.
	if err := os.Chtimes(p, now, now); err != nil {
		return nil, s.unavailable(err)
	}
	r.Session.LastAccessed = now
	return &r, nil
}

// save writes r as key's file, atomically (see the package doc). The caller
// holds key's stripe.
func (s *Store) save(key string, r *record, now time.Time) error {
	r.Session.LastAccessed = now
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("filestore: encoding session %s: %w", key, err)
	}
	// The temporary file is in the directory itself, so that the rename
	// stays within one file system and replaces the file in one step.
	tmp, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return s.unavailable(err)
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return s.unavailable(err)
	}
	// The modification time is the last access (see load); set before the
	// sync, so that it is as durable as the content.
	if err := os.Chtimes(tmp.Name(), now, now); err != nil {
		return s.unavailable(err)
	}
	if err := tmp.Sync(); err != nil {
		return s.unavailable(err)
	}
	if err := tmp.Close(); err != nil {
		return s.unavailable(err)
	}
	if err := os.Rename(tmp.Name(), s.path(key)); err != nil {
		return s.unavailable(err)
	}
	renamed = true
	// Without this sync a crash could forget the rename, and with it the
	// write, although the call succeeded.
	if err := s.dirf.Sync(); err != nil {
		return fmt.Errorf("%w (%w)", s.unavailable(err), session.ErrMaybeApplied)
	}
	return nil
}

// write is the read-modify-write behind every write: fenced by o.Lease,
// on the live session or a new one made with o, and saved unless change
// fails.
func (s *Store) write(ctx context.Context, key string, o session.WriteOptions, change func(*record) error) error {
	return s.do(ctx, key, func(now time.Time) error {
		if err := s.fence(key, o.Lease, now); err != nil {
			return err
		}
		r, err := s.load(key, now)
		if err != nil {
			return err
		}
		if r == nil {
			r = &record{Session: o.New(key, now)}
		}
		if err := change(r); err != nil {
			return err
		}
		if err := s.save(key, r, now); err != nil {
			return err
		}
		if o.Release && o.Lease != nil {
			// session.WithRelease: the write that ends a turn frees its
			// session; the lease's Release and Extend then do nothing.
			s.mu.Lock()
			if l, ok := s.leases[key]; ok && l.token == o.Lease.Token() {
				delete(s.leases, key)
				l.released = true
			}
			s.mu.Unlock()
		}
		return nil
	})
}

// fence returns session.ErrFenced when l no longer holds key.
func (s *Store) fence(key string, l session.Lease, now time.Time) error {
	if l == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fenceLocked(key, l.Token(), now)
}

// fenceLocked is fence with s.mu held.
func (s *Store) fenceLocked(key, token string, now time.Time) error {
	cur, ok := s.leases[key]
	if !ok || cur.token != token || !now.Before(cur.expires) {
		return session.ErrFenced
	}
	return nil
}

// Get implements session.Store.
func (s *Store) Get(ctx context.Context, key string) (session.Session, error) {
	var out session.Session
	err := s.do(ctx, key, func(now time.Time) error {
		r, err := s.load(key, now)
		if r == nil {
			return cmpOr(err, session.ErrNotFound)
		}
		out = r.Session
		return nil
	})
	return out, err
}

// update applies fn, the approvals, the turn marker and its journal to
// r.Session, as Update and UpdateAppend do.
func update(r *record, fn func(*orchestration.State) error, o session.WriteOptions) error {
	// r was just read from the file: changing it in place leaves the stored
	// session intact when fn or the approvals fail.
	if err := fn(&r.Session.State); err != nil {
		return err
	}
	if err := o.ApplyApprovals(&r.Session); err != nil {
		return err
	}
	r.Session.Version++
	return o.ApplyTurn(&r.Session)
}

// Delete implements session.Store. A session whose file does not decode is
// not deleted: the error names the file, for someone to look at it.
func (s *Store) Delete(ctx context.Context, key string) error {
	return s.do(ctx, key, func(now time.Time) error {
		s.mu.Lock()
		delete(s.leases, key)
		s.mu.Unlock()
		r, err := s.load(key, now)
		if r == nil {
			return cmpOr(err, session.ErrNotFound)
		}
		if err := os.Remove(s.path(key)); err != nil {
			return s.unavailable(err)
		}
		// Like a write, a Delete that returned must survive a crash.
		if err := s.dirf.Sync(); err != nil {
			return fmt.Errorf("%w (%w)", s.unavailable(err), session.ErrMaybeApplied)
		}
		return nil
	})
}

// cmpOr is cmp.Or for errors, which are not comparable.
func cmpOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// Messages implements session.Store.
func (s *Store) Messages(ctx context.Context, key string, limit int) ([]chat.Message, error) {
	var out []chat.Message
	err := s.do(ctx, key, func(now time.Time) error {
		r, err := s.load(key, now)
		if r == nil {
			return cmpOr(err, session.ErrNotFound)
		}
		out = tail(r.Messages, limit)
		return nil
	})
	return out, err
}

// tail returns the newest limit messages (all for limit <= 0).
func tail(msgs []chat.Message, limit int) []chat.Message {
	if limit > 0 && len(msgs) > limit {
		return msgs[len(msgs)-limit:]
	}
	return msgs
}

// UpdateAppend implements session.Store. fn runs exactly once.
func (s *Store) UpdateAppend(ctx context.Context, key string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...session.UpdateOption) (session.Session, []chat.Message, error) {
	o := session.Options(opts...)
	var out session.Session
	var hist []chat.Message
	err := s.write(ctx, key, o, func(r *record) error {
		if err := update(r, fn, o); err != nil {
			return err
		}
		r.Messages = o.Drop(r.Messages)
		if window != 0 {
			// A copy: the append below may write into r.Messages' array.
			hist = append([]chat.Message(nil), session.Window(r.Messages, window, o)...)
		}
		r.Messages = session.TrimTurns(append(r.Messages, msgs...), s.cfg.MaxMessages)
		out = r.Session
		return nil
	})
	if err != nil {
		return session.Session{}, nil, err
	}
	return out, hist, nil
}

// Claim implements session.Store.
func (s *Store) Claim(ctx context.Context, key string, opts ...session.UpdateOption) (session.Session, session.Lease, error) {
	o := session.Options(opts...)
	return s.claim(ctx, key, &o)
}

// claim takes key's lease, waiting up to Config.LockWait; with o it gets or
// creates the session first, as Claim does.
func (s *Store) claim(ctx context.Context, key string, o *session.WriteOptions) (session.Session, session.Lease, error) {
	deadline := time.Now().Add(s.cfg.LockWait)
	for {
		var sess session.Session
		var l *lease
		err := s.do(ctx, key, func(now time.Time) error {
			if o != nil {
				r, err := s.load(key, now)
				switch {
				case err != nil:
					return err
				case r == nil:
					r = &record{Session: o.New(key, now)}
					if err := s.save(key, r, now); err != nil {
						return err
					}
				case o.Foreign(r.Session):
					sess = r.Session
					return session.ErrForeign
				}
				sess = r.Session
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if cur, ok := s.leases[key]; ok && now.Before(cur.expires) {
				return session.ErrBusy
			}
			l = &lease{s: s, key: key, token: session.NewID(), expires: now.Add(s.cfg.LockTTL)}
			s.leases[key] = l
			return nil
		})
		wait := time.Until(deadline)
		switch {
		case err == nil:
			return sess, l, nil
		case err != session.ErrBusy || wait <= 0:
			if errors.Is(err, session.ErrForeign) {
				return sess, nil, err
			}
			return session.Session{}, nil, err
		}
		select {
		case <-ctx.Done():
			return session.Session{}, nil, ctx.Err()
		case <-time.After(min(lockPoll, wait)):
		}
	}
}

// Ping implements session.Pinger: the store is open and its directory there.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.checkOpen(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(s.dir); err != nil {
		return s.unavailable(err)
	}
	return nil
}

// Close waits for the calls under way, stops the sweep and unlocks the
// directory. Later calls return session.ErrUnavailable; leases are gone.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(s.stop)
	<-s.done
	// A call holds its session's stripe from its check of closed to its
	// end: once every stripe was free, none is under way.
	for i := range s.stripes {
		s.stripes[i].Lock()
		s.stripes[i].Unlock()
	}
	return errors.Join(s.dirf.Close(), s.lock.Close())
}

// lease is a turn's hold on a session, in the store's memory.
type lease struct {
	s       *Store
	key     string
	token   string
	expires time.Time // guarded by s.mu
	// released: a write released it (session.WithRelease); guarded by s.mu.
	released bool
}

func (l *lease) SessionID() string { return l.key }
func (l *lease) Token() string     { return l.token }

func (l *lease) Extend(ctx context.Context) error {
	now := l.s.cfg.Now()
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.released {
		return nil
	}
	if err := l.s.fenceLocked(l.key, l.token, now); err != nil {
		return err
	}
	l.expires = now.Add(l.s.cfg.LockTTL)
	return nil
}

func (l *lease) Expiry() time.Time {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.expires
}

func (l *lease) Release(ctx context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if cur, ok := l.s.leases[l.key]; ok && cur == l {
		delete(l.s.leases, l.key)
	}
	return nil
}

var _ session.Lister = (*Store)(nil)

// List implements session.Lister from the directory listing: the owner's
// live files by modification time, then the page's files read (without
// counting as a use).
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) (session.Page, error) {
	if err := s.checkOpen(ctx); err != nil {
		return session.Page{}, err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return session.Page{}, s.unavailable(err)
	}
	now := s.cfg.Now()
	var all []session.Summary
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok || !session.ValidKey(key) || !session.OwnsKey(owner, key) {
			continue
		}
		info, err := e.Info()
		if err != nil || !now.Before(info.ModTime().Add(s.cfg.TTL)) {
			continue // removed since the listing, or expired
		}
		all = append(all, session.Summary{Key: key, ID: session.IDOfKey(key), UpdatedAt: info.ModTime()})
	}
	p, err := session.ListPage(all, cursor, limit)
	if err != nil {
		return session.Page{}, err
	}
	listed := p.Sessions[:0]
	for _, sum := range p.Sessions {
		var r record
		err := s.do(ctx, sum.Key, func(time.Time) error {
			b, err := os.ReadFile(s.path(sum.Key))
			if err != nil {
				return err
			}
			return json.Unmarshal(b, &r)
		})
		if err != nil || r.Session.Owner != owner || r.Session.ID != sum.Key {
			continue // gone since the listing, or corrupt: opening it says so
		}
		sum.Agent, sum.CreatedAt = r.Session.Agent, r.Session.CreatedAt
		sum.Title = session.TitleOf(r.Session.Title, r.Messages)
		listed = append(listed, sum)
	}
	p.Sessions = listed
	return p, nil
}
