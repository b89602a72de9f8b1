package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// Redis is a Store in Redis (one server, Sentinel or Cluster), shared by
// every replica of the service.
//
// Each event is one optimistic compare-and-set: the session is read (HGET)
// and written back by a Lua script that checks the version read (and the
// lease token under WithLease) and sets value and TTL in one step; on a
// conflict the script hands back the current value and the update is
// retried without another read. Goroutines of one process that update the
// same session queue locally first, so that the compare-and-set only races
// with other replicas. The steady state is one HGET and one EVALSHA per
// event.
type Redis struct {
	cfg    Config
	client redis.UniversalClient
	prefix string
	// budget bounds one round trip, including go-redis's own retries.
	budget time.Duration

	locks keyLocks
}

// maxConflicts bounds the compare-and-set retries of one write; reaching it
// means other replicas win every race on this session for a long time.
const maxConflicts = 1000

// NewRedis connects to Redis, checks that it answers and loads the store's
// scripts. It returns an error wrapping ErrUnavailable when Redis cannot be
// reached, and a plain error for an invalid configuration.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	return newRedis(context.Background(), cfg)
}

func newRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	opts, err := cfg.universalOptions()
	if err != nil {
		return nil, err
	}
	r := &Redis{
		cfg:    cfg.Config.withDefaults(),
		client: redis.NewUniversalClient(opts),
		prefix: cfg.Prefix,
		budget: opts.DialTimeout + opts.ReadTimeout + opts.WriteTimeout,
	}
	if r.prefix == "" {
		r.prefix = DefaultPrefix
	}
	if err := r.preload(ctx); err != nil {
		r.client.Close()
		return nil, err
	}
	return r, nil
}

// preload pings Redis and loads the scripts, so that the steady state needs
// no EVAL. After a restart or SCRIPT FLUSH, go-redis falls back to EVAL on
// NOSCRIPT, which loads the script again.
func (r *Redis) preload(ctx context.Context) error {
	ctx, cancel := r.roundTrip(ctx)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return r.fail("", "connect", err)
	}
	for _, s := range allScripts {
		if err := s.Load(ctx, r.client).Err(); err != nil {
			return r.fail("", "load scripts", err)
		}
	}
	return nil
}

// Client returns the underlying go-redis client, for callers that keep
// their own data next to the sessions (the same connection pool) and for
// tests that install hooks. Closing the store closes it.
func (r *Redis) Client() redis.UniversalClient { return r.client }

func (r *Redis) key(id, kind string) string { return r.prefix + ":{" + id + "}:" + kind }

func (r *Redis) keys(id string) []string {
	return []string{r.key(id, "state"), r.key(id, "messages"), r.key(id, "lease")}
}

// roundTrip bounds one round trip so that an unresponsive Redis fails the
// call within the configured timeouts; an earlier deadline of ctx wins.
func (r *Redis) roundTrip(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.budget)
}

func (r *Redis) ttlMillis() string { return strconv.FormatInt(r.cfg.TTL.Milliseconds(), 10) }
func (r *Redis) lockMillis() string {
	return strconv.FormatInt(max(r.cfg.LockTTL.Milliseconds(), 1), 10)
}

// fail classifies a go-redis error: a WRONGTYPE reply means a key holds
// something this store did not write (ErrCorrupt); every other failure
// means the store cannot be used right now (ErrUnavailable).
func (r *Redis) fail(id, op string, err error) error {
	where := "redis session store: " + op
	if id != "" {
		where = "redis session store: session " + id + ": " + op
	}
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("%s: %w: %w", where, ErrCorrupt, err)
	}
	return fmt.Errorf("%s: %w: %w", where, ErrUnavailable, err)
}

func (r *Redis) decode(id string, data string) (Session, error) {
	var s Session
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		return Session{}, fmt.Errorf("redis session store: session %s: state value: %w: %w", id, ErrCorrupt, err)
	}
	if s.ID != id {
		return Session{}, fmt.Errorf("redis session store: session %s: state value names session %q: %w", id, s.ID, ErrCorrupt)
	}
	return s, nil
}

func (r *Redis) newSession(id string, o updateOptions, now time.Time) Session {
	return Session{ID: id, Owner: o.owner, Agent: o.agent, CreatedAt: now, LastAccessed: now}
}

func encode(s Session) string {
	b, err := json.Marshal(s)
	if err != nil {
		// Session holds only strings, numbers and times.
		panic("session: encoding a session: " + err.Error())
	}
	return string(b)
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, id string) (Session, error) {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	data, err := scriptGet.Run(rctx, r.client, r.keys(id)[:2], r.ttlMillis()).Text()
	if errors.Is(err, redis.Nil) {
		return Session{}, ErrNotFound
	}
	if err != nil {
		return Session{}, r.fail(id, "get", err)
	}
	s, err := r.decode(id, data)
	if err != nil {
		return Session{}, err
	}
	s.LastAccessed = r.cfg.Now()
	return s, nil
}

// GetOrCreate implements Store.
func (r *Redis) GetOrCreate(ctx context.Context, id string, opts ...UpdateOption) (Session, bool, error) {
	o := collect(opts)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	now := r.cfg.Now()
	fresh := r.newSession(id, o, now)
	reply, err := scriptGetOrCreate.Run(rctx, r.client, r.keys(id)[:2], r.ttlMillis(), encode(fresh), newToken()).Slice()
	if err != nil {
		return Session{}, false, r.fail(id, "get or create", err)
	}
	if len(reply) != 2 {
		return Session{}, false, fmt.Errorf("redis session store: session %s: get or create: unexpected reply %v: %w", id, reply, ErrUnavailable)
	}
	created, _ := reply[0].(int64)
	data, _ := reply[1].(string)
	s, err := r.decode(id, data)
	if err != nil {
		return Session{}, false, err
	}
	s.LastAccessed = now
	return s, created == 1, nil
}

// Update implements Store. fn may run more than once: again after every
// conflict with another replica's write.
func (r *Redis) Update(ctx context.Context, id string, fn func(*orchestration.State) error, opts ...UpdateOption) (Session, error) {
	s, _, err := r.mutate(ctx, id, fn, collect(opts), false, nil)
	return s, err
}

// UpdateAppend implements Store: Update's compare-and-set and the append
// in one script. fn may run more than once, as with Update.
func (r *Redis) UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...UpdateOption) (Session, []chat.Message, error) {
	ap := &appendArgs{window: window, msgs: make([]any, len(msgs))}
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return Session{}, nil, fmt.Errorf("redis session store: session %s: message %d: %w", id, i, err)
		}
		ap.msgs[i] = string(b)
	}
	s, raw, err := r.mutate(ctx, id, fn, collect(opts), false, ap)
	if err != nil {
		return Session{}, nil, err
	}
	hist, err := decodeMessages(id, raw)
	if err != nil {
		return Session{}, nil, err
	}
	return s, hist, nil
}

// appendArgs is the append half of UpdateAppend.
type appendArgs struct {
	window int
	msgs   []any // chat.Message JSON
}

func decodeMessages(id string, raw []string) ([]chat.Message, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	msgs := make([]chat.Message, len(raw))
	for i, s := range raw {
		if err := json.Unmarshal([]byte(s), &msgs[i]); err != nil {
			return nil, fmt.Errorf("redis session store: session %s: message %d of the history: %w: %w", id, i, ErrCorrupt, err)
		}
	}
	return msgs, nil
}

// Reset implements Store.
func (r *Redis) Reset(ctx context.Context, id string) error {
	_, _, err := r.mutate(ctx, id, func(s *orchestration.State) error {
		*s = orchestration.State{}
		return nil
	}, updateOptions{}, true, nil)
	return err
}

// mutate is the compare-and-set loop behind Update, UpdateAppend (ap not
// nil: it returns the history window) and Reset.
func (r *Redis) mutate(ctx context.Context, id string, fn func(*orchestration.State) error, o updateOptions, mustExist bool, ap *appendArgs) (Session, []string, error) {
	kl, err := r.locks.lock(ctx, id)
	if err != nil {
		return Session{}, nil, err
	}
	defer r.locks.unlock(id, kl)

	keys := r.keys(id)
	var data string
	exists := true
	// A goroutine of this process that just wrote the session left what it
	// wrote, and a lease remembers the session as its turn last read or
	// wrote it: start from that instead of reading it back. If another
	// replica wrote since, the compare-and-set says so and hands over its
	// value.
	rl, _ := o.lease.(*redisLease)
	if rl != nil && (rl.r != r || rl.id != id) {
		rl = nil
	}
	cached := kl.last
	kl.last = nil
	if cached == nil && rl != nil {
		cached = rl.seen
	}
	if cached == nil {
		rctx, cancel := r.roundTrip(ctx)
		data, err = r.client.HGet(rctx, keys[0], "data").Result()
		cancel()
		switch {
		case errors.Is(err, redis.Nil):
			exists = false
		case err != nil:
			return Session{}, nil, r.fail(id, "read", err)
		}
	}
	lease := ""
	if o.lease != nil {
		lease = o.lease.Token()
	}
	for attempt := 0; ; attempt++ {
		var cur Session
		if cached != nil {
			cur, cached = *cached, nil
		} else if exists {
			if cur, err = r.decode(id, data); err != nil {
				return Session{}, nil, err
			}
		} else if mustExist {
			return Session{}, nil, ErrNotFound
		}
		now := r.cfg.Now()
		next := cur
		if !exists {
			next = r.newSession(id, o, now)
		}
		// fn gets a copy of the state; its history is immutable, so a
		// failing fn cannot leave a half-written state behind.
		st := next.State
		if err := fn(&st); err != nil {
			if exists {
				kl.last = &cur // unchanged, still current as far as we know
			}
			return Session{}, nil, err
		}
		if err := o.applyApprovals(&next); err != nil {
			if exists {
				kl.last = &cur
			}
			return Session{}, nil, err
		}
		next.State, next.LastAccessed = st, now
		next.Version = cur.Version + 1
		expected := ""
		if exists {
			expected = strconv.FormatInt(cur.Version, 10)
		}

		args := []any{expected, strconv.FormatInt(next.Version, 10), encode(next), newToken(), r.ttlMillis(), lease}
		script := scriptUpdate
		if ap != nil {
			script = scriptUpdateAppend
			args = append(append(args, ap.window, r.cfg.MaxMessages), ap.msgs...)
		}
		rctx, cancel := r.roundTrip(ctx)
		reply, err := script.Run(rctx, r.client, keys, args...).Slice()
		cancel()
		if err != nil {
			return Session{}, nil, r.fail(id, "write", err)
		}
		status, _ := reply[0].(string)
		switch status {
		case "ok":
			kl.last = &next
			if rl != nil {
				rl.seen = &next
			}
			out := next
			var hist []string
			if ap != nil && len(reply) > 1 {
				list, _ := reply[1].([]any)
				hist = make([]string, len(list))
				for i, v := range list {
					hist[i], _ = v.(string)
				}
			}
			return out, hist, nil
		case "fenced":
			return Session{}, nil, fmt.Errorf("redis session store: session %s: %w", id, ErrFenced)
		case "conflict":
		default:
			return Session{}, nil, fmt.Errorf("redis session store: session %s: write: unexpected reply %v: %w", id, reply, ErrUnavailable)
		}
		if attempt >= maxConflicts {
			return Session{}, nil, fmt.Errorf("redis session store: session %s: gave up after %d conflicting writes from other replicas: %w", id, attempt+1, ErrBusy)
		}
		data, exists = "", false
		if len(reply) > 1 && reply[1] != nil {
			data, exists = reply[1].(string), true
		}
		if attempt > 2 {
			// Replicas racing on one session: spread them out.
			select {
			case <-ctx.Done():
				return Session{}, nil, fmt.Errorf("redis session store: session %s: write: %w", id, ctx.Err())
			case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt-2, 5)))):
			}
		}
	}
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, id string) error {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	n, err := scriptDelete.Run(rctx, r.client, r.keys(id)).Int64()
	if err != nil {
		return r.fail(id, "delete", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// AppendMessages implements Store.
func (r *Redis) AppendMessages(ctx context.Context, id string, msgs []chat.Message, opts ...UpdateOption) error {
	o := collect(opts)
	lease := ""
	if o.lease != nil {
		lease = o.lease.Token()
	}
	args := make([]any, 0, 5+len(msgs))
	args = append(args, r.ttlMillis(), r.cfg.MaxMessages, lease, newToken(), encode(r.newSession(id, o, r.cfg.Now())))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("redis session store: session %s: message %d: %w", id, i, err)
		}
		args = append(args, string(b))
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	status, err := scriptAppend.Run(rctx, r.client, r.keys(id), args...).Text()
	if err != nil {
		return r.fail(id, "append messages", err)
	}
	if status == "fenced" {
		return fmt.Errorf("redis session store: session %s: %w", id, ErrFenced)
	}
	return nil
}

// Messages implements Store.
func (r *Redis) Messages(ctx context.Context, id string, limit int) ([]chat.Message, error) {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	raw, err := scriptMessages.Run(rctx, r.client, r.keys(id)[:2], r.ttlMillis(), max(limit, 0)).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, r.fail(id, "messages", err)
	}
	msgs, err := decodeMessages(id, raw)
	if msgs == nil && err == nil {
		msgs = []chat.Message{}
	}
	return msgs, err
}

// lockPoll is how often Lock retries a busy session while it waits.
const lockPoll = 20 * time.Millisecond

// Claim implements Store: GetOrCreate and Lock in one script.
func (r *Redis) Claim(ctx context.Context, id string, opts ...UpdateOption) (Session, Lease, error) {
	o := collect(opts)
	deadline := time.Now().Add(r.cfg.LockWait)
	now := r.cfg.Now()
	fresh := encode(r.newSession(id, o, now))
	// One nonce and token for every attempt: a retried script recognises
	// the session it created and the lease it took.
	nonce, token := newToken(), newToken()
	keys := r.keys(id)
	for {
		sent := time.Now()
		rctx, cancel := r.roundTrip(ctx)
		reply, err := scriptClaim.Run(rctx, r.client, keys, r.ttlMillis(), fresh, nonce, o.owner, o.agent, token, r.lockMillis()).Slice()
		cancel()
		if err != nil {
			return Session{}, nil, r.fail(id, "claim", err)
		}
		if len(reply) != 3 {
			return Session{}, nil, fmt.Errorf("redis session store: session %s: claim: unexpected reply %v: %w", id, reply, ErrUnavailable)
		}
		status, _ := reply[0].(string)
		data, _ := reply[1].(string)
		s, err := r.decode(id, data)
		if err != nil {
			if status == "ok" {
				// Not reached (the script decodes it first), but never
				// keep a lease on a session we cannot use.
				_ = (&redisLease{r: r, id: id, key: keys[2], token: token}).Release(ctx)
			}
			return Session{}, nil, err
		}
		s.LastAccessed = now
		switch status {
		case "ok":
			l := &redisLease{r: r, id: id, key: keys[2], token: token}
			l.expiry.Store(sent.Add(r.cfg.LockTTL).UnixNano())
			seen := s
			l.seen = &seen
			return s, l, nil
		case "foreign":
			return s, nil, fmt.Errorf("redis session store: session %s: %w", id, ErrForeign)
		case "busy":
		default:
			return Session{}, nil, fmt.Errorf("redis session store: session %s: claim: unexpected reply %v: %w", id, reply, ErrUnavailable)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return Session{}, nil, fmt.Errorf("redis session store: session %s: %w", id, ErrBusy)
		}
		select {
		case <-ctx.Done():
			return Session{}, nil, fmt.Errorf("redis session store: session %s: waiting for the lease: %w", id, ctx.Err())
		case <-time.After(min(lockPoll, wait)):
		}
	}
}

// Lock implements Store.
func (r *Redis) Lock(ctx context.Context, id string) (Lease, error) {
	deadline := time.Now().Add(r.cfg.LockWait)
	key := r.key(id, "lease")
	for {
		token := newToken()
		sent := time.Now()
		rctx, cancel := r.roundTrip(ctx)
		ok, err := r.client.SetNX(rctx, key, token, r.cfg.LockTTL).Result()
		cancel()
		if err != nil {
			return nil, r.fail(id, "lock", err)
		}
		if ok {
			l := &redisLease{r: r, id: id, key: key, token: token}
			l.expiry.Store(sent.Add(r.cfg.LockTTL).UnixNano())
			return l, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, fmt.Errorf("redis session store: session %s: %w", id, ErrBusy)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redis session store: session %s: waiting for the lease: %w", id, ctx.Err())
		case <-time.After(min(lockPoll, wait)):
		}
	}
}

// Ping implements Store.
func (r *Redis) Ping(ctx context.Context) error {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	if err := r.client.Ping(rctx).Err(); err != nil {
		return r.fail("", "ping", err)
	}
	return nil
}

// Close implements Store.
func (r *Redis) Close() error { return r.client.Close() }

type redisLease struct {
	r     *Redis
	id    string
	key   string
	token string
	// expiry is Expiry in Unix nanoseconds: Extend runs on the turn's
	// renewal timer while the turn reads it.
	expiry atomic.Int64
	// seen is the session as this lease's turn last read (Claim) or wrote
	// it, so that its next write needs no read; only mutate touches it,
	// under the session's keyLock.
	seen *Session
}

func (l *redisLease) SessionID() string { return l.id }
func (l *redisLease) Token() string     { return l.token }

// Expiry is measured from when the request that took or extended the lease
// was sent: Redis set the key's TTL after that, never before.
func (l *redisLease) Expiry() time.Time { return time.Unix(0, l.expiry.Load()) }

func (l *redisLease) Extend(ctx context.Context) error {
	sent := time.Now()
	rctx, cancel := l.r.roundTrip(ctx)
	defer cancel()
	n, err := scriptExtend.Run(rctx, l.r.client, []string{l.key}, l.token, l.r.lockMillis()).Int64()
	if err != nil {
		return l.r.fail(l.id, "extend lease", err)
	}
	if n == 0 {
		return fmt.Errorf("redis session store: session %s: extend lease: %w", l.id, ErrFenced)
	}
	l.expiry.Store(sent.Add(l.r.cfg.LockTTL).UnixNano())
	return nil
}

func (l *redisLease) Release(ctx context.Context) error {
	rctx, cancel := l.r.roundTrip(ctx)
	defer cancel()
	if err := scriptRelease.Run(rctx, l.r.client, []string{l.key}, l.token).Err(); err != nil {
		return l.r.fail(l.id, "release lease", err)
	}
	return nil
}

// keyLocks queues the goroutines of one process that write the same
// session, so that they do not race one another's compare-and-set.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int // guarded by keyLocks.mu
	// last is the session as the previous holder wrote it; only the holder
	// touches it, and it lives only while goroutines queue on the session.
	last *Session
}

func (k *keyLocks) lock(ctx context.Context, id string) (*keyLock, error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyLock)
	}
	l := k.m[id]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[id] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.ch <- struct{}{}:
		return l, nil
	case <-ctx.Done():
		k.release(id, l)
		return nil, fmt.Errorf("redis session store: session %s: waiting for a local write: %w", id, ctx.Err())
	}
}

func (k *keyLocks) unlock(id string, l *keyLock) {
	<-l.ch
	k.release(id, l)
}

func (k *keyLocks) release(id string, l *keyLock) {
	k.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(k.m, id)
	}
	k.mu.Unlock()
}
