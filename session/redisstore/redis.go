package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
)

// Redis is a session.Store in Redis (one server, Sentinel or Cluster), shared by
// every replica of the service.
//
// Each event is one optimistic compare-and-set: the session is read (HGET)
// and written back by a Lua script that checks the version read (and the
// lease token under session.WithLease) and sets value and TTL in one step; on a
// conflict the script hands back the current value and the update is
// retried without another read. Goroutines of one process that update the
// same session queue locally first, so that the compare-and-set only races
// with other replicas. The steady state is one HGET and one EVALSHA per
// event.
type Store struct {
	cfg    session.Config
	client redis.UniversalClient
	prefix string
	// budget bounds one round trip, including go-redis's own retries.
	budget time.Duration
	// wait is how many replicas acknowledge a turn's claim and last
	// write (Config.WaitReplicas), within waitTimeout; 0: none. With
	// Config.WaitReplicas 0 in a Cluster, waitAt says how many for the
	// primary at an address (its shard's replicas), wait being the
	// fewest of any shard, for a primary waitAt does not know.
	wait        int
	waitAt      map[string]int
	waitTimeout time.Duration

	locks keyLocks
	// recent is what ClaimStart expects of the sessions this process
	// wrote last.
	recent recent
	// books are the bytes written that the owners' index does not count
	// yet (owners.go).
	books ownerBooks
	// watch hears the queues' notices (queue.go).
	watch queueWatch
}

// maxConflicts bounds the compare-and-set retries of one write; reaching it
// means other replicas win every race on this session for a long time.
const maxConflicts = 1000

// New connects to Store, checks that it answers and loads the store's
// scripts. It returns an error wrapping session.ErrUnavailable when Redis cannot be
// reached, and a plain error for an invalid configuration.
func New(cfg Config) (*Store, error) {
	return newStore(context.Background(), cfg)
}

func newStore(ctx context.Context, cfg Config) (*Store, error) {
	opts, err := cfg.universalOptions()
	if err != nil {
		return nil, err
	}
	r := &Store{
		cfg:    cfg.Config.WithDefaults(),
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
	r.wait, r.waitTimeout = cfg.WaitReplicas, cfg.WaitTimeout
	if r.waitTimeout <= 0 {
		r.waitTimeout = time.Second
	}
	if r.wait == 0 {
		r.wait, r.waitAt = r.replicas(ctx)
	}
	r.wait = max(r.wait, 0)
	return r, nil
}

// replicas is the default of Config.WaitReplicas: every replica of the
// primary, so that any replica a failover promotes has the writes a turn
// finished on (Sentinel may promote any replica it deems good, not the
// most advanced one: a replica's priority, or replication offsets it read
// up to a second ago, decide; a Cluster's replicas elect one ranked by
// offsets gossiped a moment ago). It counts the replicas connected to the
// primary now (INFO replication); 0 when it cannot tell. In a Cluster it
// counts each shard's, by the address of every node of the shard (its
// primary and the replicas the primary lists), which a failover keeps
// within it; min is the fewest of any shard.
func (r *Store) replicas(ctx context.Context) (min int, byAddr map[string]int) {
	ctx, cancel := r.roundTrip(ctx)
	defer cancel()
	c, ok := r.client.(*redis.ClusterClient)
	if !ok {
		info, err := r.client.Info(ctx, "replication").Result()
		if err != nil {
			return 0, nil
		}
		n, _ := replicasIn(info)
		return n, nil
	}
	var mu sync.Mutex
	byAddr = map[string]int{}
	min = -1
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		n, addrs := replicasIn(info)
		mu.Lock()
		defer mu.Unlock()
		byAddr[node.Options().Addr] = n
		for _, a := range addrs {
			byAddr[a] = n
		}
		if min < 0 || n < min {
			min = n
		}
		return nil
	})
	if err != nil || min < 0 {
		return 0, nil
	}
	return min, byAddr
}

// replicasIn reads a primary's INFO replication: how many replicas are
// connected, and their addresses.
func replicasIn(info string) (n int, addrs []string) {
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			n, _ = strconv.Atoi(v)
			continue
		}
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=...,lag=0
		name, fields, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "slave") {
			continue
		}
		var ip, port string
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		if ip != "" && port != "" {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
	}
	return n, addrs
}

// Waits returns how many replicas acknowledge a turn's claim and last
// write (Config.WaitReplicas as resolved when the store opened); in a
// Cluster whose shards have different numbers of replicas, the fewest.
func (r *Store) Waits() int { return r.wait }

// waitsFor is how many replicas acknowledge a write to the primary at
// addr.
func (r *Store) waitsFor(addr string) int {
	if n, ok := r.waitAt[addr]; ok {
		return n
	}
	return r.wait
}

// waited runs script like runWrite and then, on the same connection (the
// node owning the session's slot in a Cluster), WAIT for r.wait replicas:
// WAIT counts the replicas that have every write the connection made. It
// returns how many acknowledged, -1 when the wait itself failed.
func (r *Store) waited(ctx context.Context, script *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, maybe bool, acked int64, want int) {
	if r.wait == 0 && r.waitAt == nil {
		cmd, maybe = r.runWrite(ctx, script, keys, args...)
		return cmd, maybe, 0, 0
	}
	var node redis.Cmdable = r.client
	want = r.wait
	if c, ok := r.client.(*redis.ClusterClient); ok {
		n, err := c.MasterForKey(ctx, keys[0])
		if err != nil {
			cmd = redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd, false, -1, want
		}
		node, want = n, r.waitsFor(n.Options().Addr)
	}
	if want == 0 {
		cmd, maybe = r.runWrite(ctx, script, keys, args...)
		return cmd, maybe, 0, 0
	}
	cmd, maybe = r.runWrite(ctx, script, keys, args...)
	if cmd.Err() != nil {
		return cmd, maybe, -1, want
	}
	// The script ran on some connection; WAIT on another one counts the
	// replicas that have the replication stream up to that connection's
	// last write, so the pipeline writes nothing but a no-op after the
	// script's (PEXPIRE of a key the write just set keeps the offset
	// moving past it) and waits on the same connection.
	wctx, cancel := context.WithTimeout(ctx, r.budget+r.waitTimeout)
	defer cancel()
	var w *redis.Cmd
	_, err := node.Pipelined(wctx, func(p redis.Pipeliner) error {
		p.PExpire(wctx, keys[0], r.cfg.TTL)
		w = p.Do(wctx, "WAIT", want, r.waitTimeout.Milliseconds())
		return nil
	})
	n, werr := w.Int64()
	if err != nil || werr != nil {
		return cmd, false, -1, want
	}
	return cmd, false, n, want
}

// preload pings Redis and loads the scripts, so that the steady state needs
// no EVAL. After a restart or SCRIPT FLUSH, go-redis falls back to EVAL on
// NOSCRIPT, which loads the script again.
func (r *Store) preload(ctx context.Context) error {
	ctx, cancel := r.roundTrip(ctx)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return r.fail("", "connect", err)
	}
	if _, ok := r.client.(*redis.ClusterClient); ok {
		// Its SCRIPT LOAD goes to every shard; a pipeline's to one.
		for _, s := range allScripts {
			if err := s.Load(ctx, r.client).Err(); err != nil {
				return r.fail("", "load scripts", err)
			}
		}
		return nil
	}
	// One round trip for all of them: a distant Redis (every reply late)
	// does not multiply start-up by the number of scripts.
	cmds, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range allScripts {
			p.ScriptLoad(ctx, scriptSource[s])
		}
		return nil
	})
	if err == nil {
		for i, c := range cmds {
			if h := c.(*redis.StringCmd).Val(); h != allScripts[i].Hash() {
				err = fmt.Errorf("script %d loaded as %q, want %q", i, h, allScripts[i].Hash())
				break
			}
		}
	}
	if err != nil {
		return r.fail("", "load scripts", err)
	}
	return nil
}

// Client returns the underlying go-redis client, for callers that keep
// their own data next to the sessions (the same connection pool) and for
// tests that install hooks. Closing the store closes it.
func (r *Store) Client() redis.UniversalClient { return r.client }

func (r *Store) key(id, kind string) string { return r.prefix + ":{" + id + "}:" + kind }

func (r *Store) keys(id string) []string {
	return []string{r.key(id, "state"), r.key(id, "messages"), r.key(id, "lease"), r.key(id, "queue")}
}

// runWrite runs one of the store's write scripts. When a round trip fails
// after the script may have reached Redis (a timeout, a broken
// connection: Redis paused, a network blip), whether it was applied is
// unknown, and reporting a failure could make a client repeat what was
// saved. Every write script recognises its own earlier success by the nonce
// among its arguments, so the same call is sent again, until Redis answers
// or session.Config.WriteRetry has passed since the first failure. A call that
// cannot have reached Redis (no connection could be made, the pool had
// none) is not retried, unless an earlier attempt might have.
//
// A failed result that may still have been applied is marked by maybe:
// callers report it wrapping session.ErrMaybeApplied.
func (r *Store) runWrite(ctx context.Context, script *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, maybe bool) {
	var (
		firstFailure time.Time
		maybeApplied bool
		pause        = 50 * time.Millisecond
	)
	for {
		rctx, cancel := r.roundTrip(ctx)
		cmd = script.Run(rctx, r.client, keys, args...)
		cancel()
		err := cmd.Err()
		if err == nil || errors.Is(err, redis.Nil) {
			return cmd, false
		}
		if mayHaveRun(err) {
			maybeApplied = true
		}
		if !maybeApplied || ctx.Err() != nil {
			return cmd, maybeApplied
		}
		if firstFailure.IsZero() {
			firstFailure = time.Now()
		}
		if time.Since(firstFailure)+pause > r.cfg.WriteRetry {
			return cmd, true
		}
		select {
		case <-ctx.Done():
			return cmd, true
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// mayHaveRun reports whether a failed command may have been executed by
// Redis: not when Redis answered with an error, when no connection could
// be made or the pool had none to give.
func mayHaveRun(err error) bool {
	var (
		re redis.Error
		oe *net.OpError
	)
	switch {
	case errors.As(err, &re):
		return false
	case errors.As(err, &oe) && oe.Op == "dial":
		return false
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return false
	}
	return true
}

// roundTrip bounds one round trip so that an unresponsive Redis fails the
// call within the configured timeouts; an earlier deadline of ctx wins.
func (r *Store) roundTrip(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.budget)
}

func (r *Store) ttlMillis() string { return strconv.FormatInt(r.cfg.TTL.Milliseconds(), 10) }
func (r *Store) lockMillis() string {
	return strconv.FormatInt(max(r.cfg.LockTTL.Milliseconds(), 1), 10)
}

// fail classifies a go-redis error: a WRONGTYPE reply means a key holds
// something this store did not write (session.ErrCorrupt); every other failure
// means the store cannot be used right now (session.ErrUnavailable).
func (r *Store) fail(id, op string, err error) error {
	where := "redis session store: " + op
	if id != "" {
		where = "redis session store: session " + id + ": " + op
	}
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("%s: %w: %w", where, session.ErrCorrupt, err)
	}
	return fmt.Errorf("%s: %w: %w", where, session.ErrUnavailable, err)
}

// failWrite is fail for a write; one that may have been applied wraps
// session.ErrMaybeApplied too.
func (r *Store) failWrite(id, op string, err error, maybe bool) error {
	e := r.fail(id, op, err)
	if maybe {
		return fmt.Errorf("%w (%w)", e, session.ErrMaybeApplied)
	}
	return e
}

func (r *Store) decode(id string, data string) (session.Session, error) {
	var s session.Session
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		return session.Session{}, fmt.Errorf("redis session store: session %s: state value: %w: %w", id, session.ErrCorrupt, err)
	}
	if s.ID != id {
		return session.Session{}, fmt.Errorf("redis session store: session %s: state value names session %q: %w", id, s.ID, session.ErrCorrupt)
	}
	return s, nil
}

func (r *Store) newSession(id string, o session.WriteOptions, now time.Time) session.Session {
	return session.Session{ID: id, Owner: o.Owner, Agent: o.Agent, CreatedAt: now, LastAccessed: now}
}

// encode is a session's JSON, sent to Redis as it is (go-redis writes a
// []byte argument without copying it to a string first).
func encode(s session.Session) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		// session.Session holds only strings, numbers and times.
		panic("session: encoding a session: " + err.Error())
	}
	return b
}

// Get implements session.Store.
func (r *Store) Get(ctx context.Context, id string) (session.Session, error) {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	data, err := scriptGet.Run(rctx, r.client, r.keys(id)[:2], r.ttlMillis()).Text()
	if errors.Is(err, redis.Nil) {
		return session.Session{}, session.ErrNotFound
	}
	if err != nil {
		return session.Session{}, r.fail(id, "get", err)
	}
	s, err := r.decode(id, data)
	if err != nil {
		return session.Session{}, err
	}
	s.LastAccessed = r.cfg.Now()
	return s, nil
}

// UpdateAppend implements session.Store: a compare-and-set of the state and
// the append in one script, or the state's alone when the write leaves the
// history as it is (session.Update). fn may run more than once: again
// after every conflict with another replica's write.
func (r *Store) UpdateAppend(ctx context.Context, id string, fn func(*orchestration.State) error, msgs []chat.Message, window int, opts ...session.UpdateOption) (session.Session, []chat.Message, error) {
	o := session.Options(opts...)
	var ap *appendArgs
	if len(msgs) > 0 || window != 0 || o.DropAnswer || o.DropTurn {
		var err error
		if ap, err = newAppend(id, msgs, window, o); err != nil {
			return session.Session{}, nil, err
		}
	}
	s, raw, err := r.mutate(ctx, id, fn, o, ap)
	if err != nil {
		return session.Session{}, nil, err
	}
	hist, err := decodeMessages(id, raw)
	if err != nil {
		return session.Session{}, nil, err
	}
	return s, hist, nil
}

// appendArgs is the append half of UpdateAppend.
type appendArgs struct {
	window int
	// drop is the drop-answer argument of luaUpdateAppend: "0" nothing,
	// "1" the last answer (DropLastAnswer), "2" the last turn (DropLastTurn).
	drop string
	msgs []any // chat.Message JSON ([]byte)
}

func newAppend(id string, msgs []chat.Message, window int, o session.WriteOptions) (*appendArgs, error) {
	drop := "0"
	switch {
	case o.DropTurn:
		drop = "2"
	case o.DropAnswer:
		drop = "1"
	}
	if window < 0 && o.SinceSummary {
		window = -2 // luaSinceSummary
	}
	ap := &appendArgs{window: window, drop: drop, msgs: make([]any, len(msgs))}
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("redis session store: session %s: message %d: %w", id, i, err)
		}
		ap.msgs[i] = b
	}
	return ap, nil
}

func decodeMessages(id string, raw []string) ([]chat.Message, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	msgs := make([]chat.Message, len(raw))
	for i, s := range raw {
		if err := json.Unmarshal([]byte(s), &msgs[i]); err != nil {
			return nil, fmt.Errorf("redis session store: session %s: message %d of the history: %w: %w", id, i, session.ErrCorrupt, err)
		}
	}
	return msgs, nil
}

// mutate is the compare-and-set loop behind UpdateAppend: of the state
// alone when ap is nil, of the state and the history otherwise (it then
// returns the history window).
func (r *Store) mutate(ctx context.Context, id string, fn func(*orchestration.State) error, o session.WriteOptions, ap *appendArgs) (session.Session, []string, error) {
	kl, err := r.locks.lock(ctx, id)
	if err != nil {
		return session.Session{}, nil, err
	}
	defer r.locks.unlock(id, kl)

	var data string
	exists := true
	// A goroutine of this process that just wrote the session left what it
	// wrote, and a lease remembers the session as its turn last read or
	// wrote it: start from that instead of reading it back. If another
	// replica wrote since, the compare-and-set says so and hands over its
	// value.
	rl, _ := o.Lease.(*redisLease)
	if rl != nil && (rl.r != r || rl.id != id) {
		rl = nil
	}
	var keys []string
	if rl != nil {
		keys = rl.keys
	} else {
		keys = r.keys(id)
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
			return session.Session{}, nil, r.fail(id, "read", err)
		}
	}
	lease := ""
	if o.Lease != nil {
		lease = o.Lease.Token()
	}
	for attempt := 0; ; attempt++ {
		var cur session.Session
		if cached != nil {
			cur, cached = *cached, nil
		} else if exists {
			if cur, err = r.decode(id, data); err != nil {
				return session.Session{}, nil, err
			}
		}
		next := cur
		if !exists {
			next = r.newSession(id, o, r.cfg.Now())
		}
		next, err := r.apply(next, fn, o)
		if err != nil {
			if exists {
				kl.last = &cur // unchanged, still current as far as we know
			}
			return session.Session{}, nil, err
		}
		expected := ""
		if exists {
			expected = strconv.FormatInt(cur.Version, 10)
		}
		release := o.Release && lease != ""
		nonce, encoded := session.NewID(), encode(next)
		script := scriptUpdate
		var args []any
		if ap != nil {
			script = scriptUpdateAppend
			args = r.updateAppendArgs(nil, expected, next.Version, encoded, nonce, lease, ap, release)
		} else {
			args = []any{expected, strconv.FormatInt(next.Version, 10), encoded, nonce, r.ttlMillis(), lease, flag(release)}
		}
		// A turn's last write (it clears the turn marker) is acknowledged
		// by the replicas before the turn says it finished.
		var (
			cmd   *redis.Cmd
			maybe bool
			acked int64
			want  int
		)
		last := o.Turn != nil && *o.Turn == ""
		if release && rl != nil {
			rl.releasing.Add(1)
		}
		if last {
			cmd, maybe, acked, want = r.waited(ctx, script, keys, args...)
		} else {
			cmd, maybe = r.runWrite(ctx, script, keys, args...)
		}
		reply, err := cmd.Slice()
		var status string
		if err == nil {
			status, _ = reply[0].(string)
		}
		if release && rl != nil {
			if status == "ok" {
				rl.released.Store(true)
			}
			rl.releasing.Add(-1)
		}
		if err != nil {
			return session.Session{}, nil, r.failWrite(id, "write", err, maybe)
		}
		switch status {
		case "ok":
			if !exists {
				if err := r.admit(ctx, next.Owner, id); err != nil {
					return session.Session{}, nil, err
				}
			}
			var appended int64
			if ap != nil {
				appended = messageBytes(ap.msgs)
			}
			r.record(next.Owner, id, len(encoded), appended)
			kl.last = &next
			r.recent.remember(id, &next, nonce, len(encoded))
			if rl != nil {
				rl.seen = &next
				if release {
					rl.released.Store(true)
				}
			}
			var hist []string
			if ap != nil && len(reply) > 1 {
				hist = stringList(reply[1])
			}
			listCreated(ctx, o.Lease)
			if last && acked < int64(want) {
				return next, hist, fmt.Errorf("redis session store: session %s: %d of %d replica(s) acknowledged the write within %v: %w", id, max(acked, 0), want, r.waitTimeout, session.ErrNotReplicated)
			}
			return next, hist, nil
		case "fenced":
			return session.Session{}, nil, fmt.Errorf("redis session store: session %s: %w", id, session.ErrFenced)
		case "conflict":
		default:
			return session.Session{}, nil, fmt.Errorf("redis session store: session %s: write: unexpected reply %v: %w", id, reply, session.ErrUnavailable)
		}
		if attempt >= maxConflicts {
			return session.Session{}, nil, fmt.Errorf("redis session store: session %s: gave up after %d conflicting writes from other replicas: %w", id, attempt+1, session.ErrBusy)
		}
		data, exists = "", false
		if len(reply) > 1 && reply[1] != nil {
			data, exists = reply[1].(string), true
		}
		if attempt > 2 {
			// Replicas racing on one session: spread them out.
			select {
			case <-ctx.Done():
				return session.Session{}, nil, fmt.Errorf("redis session store: session %s: write: %w", id, ctx.Err())
			case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt-2, 5)))):
			}
		}
	}
}

// apply returns the session a write makes of cur: fn applied to a copy of
// its state (its history is immutable, so a failing fn cannot leave a
// half-written state behind), then o's approvals and turn, and the next
// version.
func (r *Store) apply(cur session.Session, fn func(*orchestration.State) error, o session.WriteOptions) (session.Session, error) {
	next := cur
	st := next.State
	if err := fn(&st); err != nil {
		return session.Session{}, err
	}
	if err := o.ApplyApprovals(&next); err != nil {
		return session.Session{}, err
	}
	next.State, next.LastAccessed = st, r.cfg.Now()
	next.Version = cur.Version + 1
	if err := o.ApplyTurn(&next); err != nil {
		return session.Session{}, err
	}
	return next, nil
}

// updateAppendArgs appends to args the arguments of updateAppend
// (luaUpdateAppend) writing data as version over the version expected.
func (r *Store) updateAppendArgs(args []any, expected string, version int64, data []byte, nonce, lease string, ap *appendArgs, release bool) []any {
	args = slices.Grow(args, 10+len(ap.msgs))
	args = append(args, expected, strconv.FormatInt(version, 10), data, nonce, r.ttlMillis(), lease,
		ap.window, r.cfg.MaxMessages, ap.drop, flag(release))
	return append(args, ap.msgs...)
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// stringList is a script's list of strings.
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, e := range list {
		out[i], _ = e.(string)
	}
	return out
}

// Delete implements session.Store.
func (r *Store) Delete(ctx context.Context, id string) error {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	r.recent.forget(id)
	r.forget(ctx, id)
	n, err := scriptDelete.Run(rctx, r.client, r.keys(id)).Int64()
	if err != nil {
		return r.fail(id, "delete", err)
	}
	if n == 0 {
		return session.ErrNotFound
	}
	r.unindex(ctx, id)
	return nil
}

var (
	_ session.Pinger   = (*Store)(nil)
	_ session.Appender = (*Store)(nil)
)

// AppendMessages implements session.Appender: one script that appends
// without reading the state.
func (r *Store) AppendMessages(ctx context.Context, id string, msgs []chat.Message, opts ...session.UpdateOption) error {
	o := session.Options(opts...)
	lease := ""
	if o.Lease != nil {
		lease = o.Lease.Token()
	}
	args := make([]any, 0, 5+len(msgs))
	fresh := encode(r.newSession(id, o, r.cfg.Now()))
	args = append(args, r.ttlMillis(), r.cfg.MaxMessages, lease, session.NewID(), fresh)
	var appended int64
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("redis session store: session %s: message %d: %w", id, i, err)
		}
		args = append(args, string(b))
		appended += int64(len(b))
	}
	cmd, maybe := r.runWrite(ctx, scriptAppend, r.keys(id), args...)
	status, err := cmd.Text()
	if err != nil {
		return r.failWrite(id, "append messages", err, maybe)
	}
	switch status {
	case "fenced":
		return fmt.Errorf("redis session store: session %s: %w", id, session.ErrFenced)
	case "created":
		if err := r.admit(ctx, o.Owner, id); err != nil {
			return err
		}
		r.record(o.Owner, id, len(fresh), appended)
	default:
		// The session's owner is known to the lease that saw it.
		if rl, ok := o.Lease.(*redisLease); ok && rl.r == r && rl.id == id && rl.seen != nil {
			r.record(rl.seen.Owner, id, -1, appended)
		}
	}
	listCreated(ctx, o.Lease)
	return nil
}

// Messages implements session.Store.
func (r *Store) Messages(ctx context.Context, id string, limit int) ([]chat.Message, error) {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	raw, err := scriptMessages.Run(rctx, r.client, r.keys(id)[:2], r.ttlMillis(), max(limit, 0)).StringSlice()
	if errors.Is(err, redis.Nil) {
		return nil, session.ErrNotFound
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

// lockPoll is how often Claim retries a busy session while it waits.
const lockPoll = 20 * time.Millisecond

// Claim implements session.Store: the session got or created and its lease
// taken in one script.
func (r *Store) Claim(ctx context.Context, id string, opts ...session.UpdateOption) (session.Session, session.Lease, error) {
	o := session.Options(opts...)
	s, l, _, err := r.claim(ctx, id, o, r.newSession(id, o, r.cfg.Now()), nil)
	return s, l, err
}

// ClaimStart implements session.Starter: scriptClaimStart claims the
// session and makes plan's write in one script when this process knows
// the session (recent) or the claim creates it. Otherwise, or when the
// session changed since, it is Claim's one script and the caller's write
// another.
//
// plan runs once, before claim's attempts: a retried script sends the
// write planned for the first.
func (r *Store) ClaimStart(ctx context.Context, id string, plan func(session.Session) (session.Write, bool), opts ...session.UpdateOption) (session.Session, session.Lease, *session.Started, error) {
	o := session.Options(opts...)
	fresh := r.newSession(id, o, r.cfg.Now())
	return r.claim(ctx, id, o, fresh, r.prepare(id, fresh, o, plan))
}

// start is the write a ClaimStart makes with its claim.
type start struct {
	guess    session.Session // the session expected
	expected string          // the nonce of its last write; "" for the claim's own
	next     session.Session
	data     []byte // next encoded
	nonce    string
	ap       *appendArgs
}

// prepare calls plan with the session this process expects id to be (the
// last it wrote, or the session the claim would create), and prepares its
// write; nil when there is nothing to expect or plan declines.
func (r *Store) prepare(id string, fresh session.Session, o session.WriteOptions, plan func(session.Session) (session.Write, bool)) *start {
	guess, expected, ok := r.recent.get(id)
	if !ok {
		guess = fresh
	}
	if o.Foreign(guess) {
		return nil
	}
	w, ok := plan(guess)
	if !ok {
		return nil
	}
	wo := session.Options(w.Options...)
	next, err := r.apply(guess, w.Update, wo)
	if err != nil {
		// The same error comes from the caller's own write.
		return nil
	}
	ap, err := newAppend(id, w.Messages, w.Window, wo)
	if err != nil {
		return nil
	}
	return &start{guess: guess, expected: expected, next: next, data: encode(next), nonce: session.NewID(), ap: ap}
}

// claim is Claim, and ClaimStart when sw is not nil: fresh is the session
// the claim creates when id has none.
func (r *Store) claim(ctx context.Context, id string, o session.WriteOptions, fresh session.Session, sw *start) (session.Session, session.Lease, *session.Started, error) {
	if o.Charged {
		if err := r.admitTurn(ctx, o.Owner, o.Brings); err != nil {
			return session.Session{}, nil, nil, err
		}
	}
	deadline := time.Now().Add(r.cfg.LockWait)
	now := fresh.CreatedAt
	freshData := encode(fresh)
	// One nonce and token for every attempt: a retried script recognises
	// the session it created and the lease it took.
	nonce, token := session.NewID(), session.NewID()
	keys := r.keys(id)
	for {
		sent := time.Now()
		var args []any
		if sw != nil {
			args = make([]any, 0, 8+10+len(sw.ap.msgs))
		}
		args = append(args, r.ttlMillis(), freshData, nonce, o.Owner, o.Agent, token, r.lockMillis())
		script := scriptClaim
		if sw != nil {
			expected := sw.expected
			if expected == "" {
				expected = nonce
			}
			args = r.updateAppendArgs(append(args, expected), strconv.FormatInt(sw.guess.Version, 10), sw.next.Version, sw.data, sw.nonce, token, sw.ap, false)
			script = scriptClaimStart
		}
		// The claim (and the turn's first write with it) is acknowledged by
		// the replicas, so that a failover keeps the session's lease and
		// its user message; a claim the replicas are late for goes on, and
		// the turn's last write tells.
		cmd, maybe, _, _ := r.waited(ctx, script, keys, args...)
		reply, err := cmd.Slice()
		if err != nil {
			if sw != nil {
				return session.Session{}, nil, nil, r.failWrite(id, "claim", err, maybe)
			}
			return session.Session{}, nil, nil, r.fail(id, "claim", err)
		}
		if len(reply) < 3 {
			return session.Session{}, nil, nil, fmt.Errorf("redis session store: session %s: claim: unexpected reply %v: %w", id, reply, session.ErrUnavailable)
		}
		status, _ := reply[0].(string)
		lease := func() *redisLease {
			l := &redisLease{r: r, id: id, keys: keys, token: token}
			l.expiry.Store(sent.Add(r.cfg.LockTTL).UnixNano())
			return l
		}
		created, _ := reply[2].(int64)
		if status == "ok" && created == 1 {
			if err := r.admit(ctx, o.Owner, id); err != nil {
				return session.Session{}, nil, nil, err
			}
		}
		if status == "ok" && len(reply) == 5 && reply[3] == "ok" {
			// The write went in with the claim.
			r.record(sw.next.Owner, id, len(sw.data), messageBytes(sw.ap.msgs))
			l := lease()
			next := sw.next
			l.seen = &next
			r.recent.remember(id, &next, sw.nonce, len(sw.data))
			hist, err := decodeMessages(id, stringList(reply[4]))
			if err != nil {
				return session.Session{}, nil, nil, err
			}
			s := sw.guess
			if s.CreatedAt.Equal(now) {
				l.created.Store(now.UnixMilli())
			}
			s.LastAccessed = now
			return s, l, &session.Started{Session: next, History: hist}, nil
		}
		data, _ := reply[1].(string)
		s, err := r.decode(id, data)
		if err != nil {
			if status == "ok" {
				// Not reached (the script decodes it first), but never
				// keep a lease on a session we cannot use.
				_ = lease().Release(ctx)
			}
			return session.Session{}, nil, nil, err
		}
		s.LastAccessed = now
		switch status {
		case "ok":
			// Claimed; the session was not the one expected, if any:
			// the caller writes.
			if created == 1 {
				r.record(s.Owner, id, len(data), 0)
			}
			l := lease()
			if s.CreatedAt.Equal(now) {
				l.created.Store(now.UnixMilli())
			}
			seen := s
			l.seen = &seen
			return s, l, nil, nil
		case "foreign":
			return s, nil, nil, fmt.Errorf("redis session store: session %s: %w", id, session.ErrForeign)
		case "busy":
		default:
			return session.Session{}, nil, nil, fmt.Errorf("redis session store: session %s: claim: unexpected reply %v: %w", id, reply, session.ErrUnavailable)
		}
		// Busy: wait for the lease with Claim's script alone; the
		// session may be another one when the lease comes free.
		sw = nil
		wait := time.Until(deadline)
		if wait <= 0 {
			return session.Session{}, nil, nil, fmt.Errorf("redis session store: session %s: %w", id, session.ErrBusy)
		}
		select {
		case <-ctx.Done():
			return session.Session{}, nil, nil, fmt.Errorf("redis session store: session %s: waiting for the lease: %w", id, ctx.Err())
		case <-time.After(min(lockPoll, wait)):
		}
	}
}

// Ping implements session.Pinger.
func (r *Store) Ping(ctx context.Context) error {
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	if err := r.client.Ping(rctx).Err(); err != nil {
		return r.fail("", "ping", err)
	}
	return nil
}

// Close implements session.Store, after adding the bytes written to the
// owners' index.
func (r *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), r.budget)
	r.flush(ctx)
	cancel()
	r.watch.close()
	return r.client.Close()
}

type redisLease struct {
	r  *Store
	id string
	// keys are the session's keys (Store.keys): the lease's is keys[2], and
	// the turn's writes under the lease need not make them again.
	keys  []string
	token string
	// expiry is Expiry in Unix nanoseconds: Extend runs on the turn's
	// lease renewal goroutine while the turn reads it.
	expiry atomic.Int64
	// seen is the session as this lease's turn last read (Claim) or wrote
	// it, so that its next write needs no read; only mutate touches it,
	// under the session's keyLock.
	seen *session.Session
	// released: a write released the lease (session.WithRelease);
	// releasing counts such writes under way, which may have released it
	// already (the write waits for the replicas after its script ran).
	released  atomic.Bool
	releasing atomic.Int32
	// created is when the claim created the session (Unix ms), until the
	// session is added to its owner's list (listCreated); 0 otherwise.
	created atomic.Int64
}

func (l *redisLease) SessionID() string { return l.id }
func (l *redisLease) Token() string     { return l.token }

// Expiry is measured from when the request that took or extended the lease
// was sent: Redis set the key's TTL after that, never before.
func (l *redisLease) Expiry() time.Time { return time.Unix(0, l.expiry.Load()) }

func (l *redisLease) Extend(ctx context.Context) error {
	if l.released.Load() {
		return nil
	}
	sent := time.Now()
	rctx, cancel := l.r.roundTrip(ctx)
	defer cancel()
	n, err := scriptExtend.Run(rctx, l.r.client, l.keys[2:], l.token, l.r.lockMillis()).Int64()
	if err != nil {
		return l.r.fail(l.id, "extend lease", err)
	}
	if n == 0 && l.releasing.Load() > 0 {
		// The write under way released it, or was fenced: it says which.
		return nil
	}
	if n == 0 {
		return fmt.Errorf("redis session store: session %s: extend lease: %w", l.id, session.ErrFenced)
	}
	l.expiry.Store(sent.Add(l.r.cfg.LockTTL).UnixNano())
	return nil
}

func (l *redisLease) Release(ctx context.Context) error {
	listCreated(ctx, l)
	if l.released.Load() {
		return nil
	}
	rctx, cancel := l.r.roundTrip(ctx)
	defer cancel()
	if err := scriptRelease.Run(rctx, l.r.client, l.keys[2:], l.token).Err(); err != nil {
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
	last *session.Session
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
