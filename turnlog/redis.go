package turnlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
)

// DefaultPrefix starts the Redis keys unless RedisConfig.Prefix says
// otherwise.
const DefaultPrefix = "agentdock-turns"

// Defaults of RedisConfig.
const (
	DefaultRunningTTL = 15 * time.Minute
	DefaultPoll       = 100 * time.Millisecond
	DefaultTimeout    = 3 * time.Second
	DefaultReadBatch  = 512
)

// RedisConfig configures a Redis log.
type RedisConfig struct {
	Config

	// Client is the connection to Redis, typically the session store's
	// (session.Redis.Client()); the log does not close it.
	Client redis.UniversalClient
	// Prefix starts every key (default "agentdock-turns").
	Prefix string
	// RunningTTL is how long a running turn's keys outlive its last Append
	// before they expire (plus Retention), so that the turn of a replica
	// that died without Finish goes away (default 15 minutes).
	RunningTTL time.Duration
	// Poll is the BLOCK of one XREAD when waiting for frames written by
	// another replica (default 100 ms). go-redis cannot interrupt a blocked
	// XREAD, so a Wait whose ctx ends returns at once but the shared XREAD
	// runs on for up to Poll; it also bounds the delay before a waiter
	// that arrived during a block is included in the next one.
	Poll time.Duration
	// Timeout bounds each round trip, go-redis's retries included (default
	// 3 s); an earlier deadline of the caller's ctx wins.
	Timeout time.Duration
	// ReadBatch bounds the frames one Read returns (default 512).
	ReadBatch int
}

// Redis is the Log of replicas: each turn is one Redis Stream, so that any
// replica can serve a resume.
//
// Keys, all of a session in one Cluster slot through the {session} hash
// tag:
//
//	<prefix>:{<session>}:turn:<turn>:frames  stream: "<seq>-0" d=<data>; end marker "<last>-1"
//	<prefix>:{<session>}:turn:<turn>:meta    hash: o=owner a=agent t=started w=written (unix ms)
//	<prefix>:{<session>}:latest              string: the session's latest turn ID
//	<prefix>:{<session>}:turns               sorted set: the session's turns (for Forget)
//
// Writes are Lua scripts (EVALSHA): Append of any number of frames is one
// command and one round trip. The stream is trimmed exactly (XADD MAXLEN
// n, not ~): the kept window is then the same as Memory's, so that a
// resume's gap answer does not depend on the implementation and memory per
// turn is bounded by MaxFrames; exact trimming removes one entry per
// appended frame once the turn is over MaxFrames, which is as cheap as
// appending it.
//
// Readers on this replica are woken by this replica's Appends directly;
// readers of turns written elsewhere share one XREAD BLOCK loop per
// replica (per session on Cluster, where XREAD cannot span slots), so that
// waiting streams do not each hold a pooled connection.
type Redis struct {
	cfg    RedisConfig
	client redis.UniversalClient
	// cluster: XREAD keys are grouped by session.
	cluster bool

	writers sync.Map // stream key -> *writer
	hub     hub

	// stops are the WatchStops functions; the first starts the
	// subscription to the stop channel (listen).
	stops     watchers
	listening sync.Once
	listener  sync.WaitGroup

	closeOnce sync.Once
	closed    chan struct{}
}

// writer is the state of a turn this replica writes: its last seq, so that
// a retried Append is recognised, and when the keys' TTLs were last set.
type writer struct {
	// ref names the turn when this replica started it (Start); a stop
	// request that the subscription may have missed is looked up for it.
	ref       Ref
	mu        sync.Mutex
	last      int64
	refreshed time.Time
}

// NewRedis validates cfg, checks that Redis answers and loads the scripts.
// It returns an error wrapping session.ErrUnavailable when Redis cannot be
// reached, and a plain error for an invalid configuration.
func NewRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	var err error
	if cfg.Config, err = cfg.Config.withDefaults(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		return nil, errors.New("turn log: RedisConfig.Client is nil")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"RunningTTL", &cfg.RunningTTL, DefaultRunningTTL}, {"Poll", &cfg.Poll, DefaultPoll}, {"Timeout", &cfg.Timeout, DefaultTimeout}} {
		switch {
		case *d.v < 0:
			return nil, fmt.Errorf("turn log: %s is negative (%v)", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		case *d.v < time.Millisecond:
			return nil, fmt.Errorf("turn log: %s %v is below Redis's 1 ms resolution", d.name, *d.v)
		}
	}
	if cfg.ReadBatch < 0 {
		return nil, fmt.Errorf("turn log: ReadBatch is negative (%d)", cfg.ReadBatch)
	}
	if cfg.ReadBatch == 0 {
		cfg.ReadBatch = DefaultReadBatch
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, fmt.Errorf("turn log: Prefix %q contains a brace, which would change the Cluster hash tag", cfg.Prefix)
	}
	r := &Redis{cfg: cfg, client: cfg.Client, closed: make(chan struct{})}
	_, r.cluster = cfg.Client.(*redis.ClusterClient)
	r.hub.r = r
	r.hub.groups = make(map[string]*group)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	if err := r.client.Ping(rctx).Err(); err != nil {
		return nil, r.fail(Ref{}, "connect", err)
	}
	for _, s := range allScripts {
		if err := s.Load(rctx, r.client).Err(); err != nil {
			return nil, r.fail(Ref{}, "load scripts", err)
		}
	}
	return r, nil
}

func (r *Redis) base(session string) string { return r.cfg.Prefix + ":{" + session + "}:" }
func (r *Redis) streamKey(ref Ref) string {
	return r.base(ref.Session) + "turn:" + ref.Turn + ":frames"
}
func (r *Redis) metaKey(ref Ref) string    { return r.base(ref.Session) + "turn:" + ref.Turn + ":meta" }
func (r *Redis) latestKey(s string) string { return r.base(s) + "latest" }
func (r *Redis) turnsKey(s string) string  { return r.base(s) + "turns" }

func (r *Redis) writeKeys(ref Ref) []string {
	return []string{r.streamKey(ref), r.metaKey(ref), r.latestKey(ref.Session), r.turnsKey(ref.Session)}
}

func (r *Redis) runningTTL() time.Duration { return r.cfg.RunningTTL + r.cfg.Retention }

func (r *Redis) roundTrip(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.Timeout)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// fail classifies an error of go-redis or of a script.
func (r *Redis) fail(ref Ref, op string, err error) error {
	where := "redis turn log: " + op
	if ref.Turn != "" {
		where = "redis turn log: " + ref.String() + ": " + op
	}
	// Redis 7.0 puts "ERR " before a script's error reply; later versions
	// do not.
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "TURNLOG_NOTFOUND"):
		return fmt.Errorf("%s: %w", where, ErrNotFound)
	case strings.HasPrefix(msg, "TURNLOG_EXISTS"):
		return fmt.Errorf("%s: %w", where, ErrExists)
	case strings.HasPrefix(msg, "TURNLOG_FINISHED"):
		return fmt.Errorf("%s: %w", where, ErrFinished)
	case strings.HasPrefix(msg, "TURNLOG_SEQ"):
		return fmt.Errorf("%s: the stream's last frame is %s, not the one this writer appended last: another process appends to this turn: %w", where, strings.TrimPrefix(msg, "TURNLOG_SEQ "), session.ErrCorrupt)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return fmt.Errorf("%s: %w: %w", where, session.ErrCorrupt, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %w: %w", where, session.ErrUnavailable, err)
}

func (r *Redis) isClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

// Start implements Log.
func (r *Redis) Start(ctx context.Context, m Meta) error {
	if err := m.validate(); err != nil {
		return err
	}
	if r.isClosed() {
		return ErrClosed
	}
	if m.Started.IsZero() {
		m.Started = time.Now()
	}
	started := m.Started.UnixMilli()
	now := time.Now()
	ttl := r.runningTTL()
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	err := startScript.Run(rctx, r.client,
		[]string{r.metaKey(m.Ref), r.latestKey(m.Session), r.turnsKey(m.Session)},
		m.Turn, m.Owner, m.AgentID, started, ms(ttl), now.Add(-ttl).UnixMilli()).Err()
	if err != nil {
		return r.fail(m.Ref, "start", err)
	}
	r.writers.Store(r.streamKey(m.Ref), &writer{ref: m.Ref, refreshed: now})
	return nil
}

// Append implements Log.
func (r *Redis) Append(ctx context.Context, ref Ref, data ...[]byte) (int64, error) {
	if err := ref.validate(); err != nil {
		return 0, err
	}
	if err := checkData(ref, data); err != nil {
		return 0, err
	}
	if r.isClosed() {
		return 0, ErrClosed
	}
	key := r.streamKey(ref)
	v, _ := r.writers.LoadOrStore(key, &writer{})
	w := v.(*writer)
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	ttl := "0"
	// Before this replica's first Append (of a turn started elsewhere) or
	// once a quarter of RunningTTL passed: refresh the keys' TTLs.
	if w.refreshed.IsZero() || now.Sub(w.refreshed) >= r.cfg.RunningTTL/4 {
		ttl = ms(r.runningTTL())
	}
	first := int64(0)
	if !w.refreshed.IsZero() {
		first = w.last + 1
	}
	args := make([]any, 0, 5+len(data))
	args = append(args, first, r.cfg.MaxFrames, ttl, now.UnixMilli(), ref.Turn)
	for _, d := range data {
		args = append(args, d)
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	last, err := appendScript.Run(rctx, r.client, r.writeKeys(ref), args...).Int64()
	if err != nil {
		err = r.fail(ref, "append", err)
		switch {
		case errors.Is(err, ErrFinished), errors.Is(err, ErrNotFound):
			r.writers.Delete(key)
			r.hub.wake(key)
		default:
			// Whether the frames went in is unknown: the next Append
			// continues from the stream's last frame, whatever it is.
			w.refreshed = time.Time{}
		}
		return 0, err
	}
	w.last = last
	if ttl != "0" {
		w.refreshed = now
	}
	r.hub.wake(key)
	return last, nil
}

// Finish implements Log.
func (r *Redis) Finish(ctx context.Context, ref Ref) error {
	if err := ref.validate(); err != nil {
		return err
	}
	if r.isClosed() {
		return ErrClosed
	}
	key := r.streamKey(ref)
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	err := finishScript.Run(rctx, r.client, r.writeKeys(ref), ms(r.cfg.Retention), ref.Turn, time.Now().UnixMilli()).Err()
	if err != nil {
		return r.fail(ref, "finish", err)
	}
	r.writers.Delete(key)
	r.hub.wake(key)
	return nil
}

// parseID splits a stream entry ID "<seq>-<n>": n 0 is a frame, 1 the end
// marker.
func parseID(id string) (seq int64, marker bool, err error) {
	a, b, ok := strings.Cut(id, "-")
	if ok {
		seq, err = strconv.ParseInt(a, 10, 64)
	}
	if !ok || err != nil || (b != "0" && b != "1") {
		return 0, false, fmt.Errorf("stream entry ID %q was not written by the turn log: %w", id, session.ErrCorrupt)
	}
	return seq, b == "1", nil
}

// decode turns XRANGE/XREAD entries after `after` into a batch.
func decode(ref Ref, after int64, msgs []redis.XMessage) (Batch, error) {
	var b Batch
	if len(msgs) == 0 {
		return b, nil
	}
	b.Frames = make([]Frame, 0, len(msgs))
	for i, m := range msgs {
		seq, marker, err := parseID(m.ID)
		if err != nil {
			return Batch{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
		if i == 0 && (seq > after+1 || marker && seq > after) {
			return Batch{Gap: true}, nil
		}
		if marker {
			b.Done = true
			break
		}
		d, ok := m.Values["d"].(string)
		if !ok || d == "" {
			return Batch{}, fmt.Errorf("redis turn log: %s: entry %s has no data: %w", ref, m.ID, session.ErrCorrupt)
		}
		b.Frames = append(b.Frames, Frame{Seq: seq, Data: []byte(d)})
	}
	if len(b.Frames) == 0 {
		b.Frames = nil
	}
	return b, nil
}

// Read implements Log. It is one XRANGE when there are frames to return;
// an empty answer costs a second round trip that tells a running turn
// from a missing one.
func (r *Redis) Read(ctx context.Context, ref Ref, after int64) (Batch, error) {
	if err := ref.validate(); err != nil {
		return Batch{}, err
	}
	if after < 0 {
		return Batch{}, fmt.Errorf("redis turn log: %s: read after %d: %w", ref, after, ErrAhead)
	}
	if r.isClosed() {
		return Batch{}, ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	key := r.streamKey(ref)
	msgs, err := r.client.XRangeN(rctx, key, "("+strconv.FormatInt(after, 10)+"-0", "+", int64(r.cfg.ReadBatch)).Result()
	if err != nil {
		return Batch{}, r.fail(ref, "read", err)
	}
	if len(msgs) > 0 {
		return decode(ref, after, msgs)
	}
	var top *redis.XMessageSliceCmd
	var exists *redis.IntCmd
	_, err = r.client.Pipelined(rctx, func(p redis.Pipeliner) error {
		top = p.XRevRangeN(rctx, key, "+", "-", 1)
		exists = p.Exists(rctx, r.metaKey(ref))
		return nil
	})
	if err != nil {
		return Batch{}, r.fail(ref, "read", err)
	}
	if exists.Val() == 0 {
		return Batch{}, fmt.Errorf("redis turn log: %s: %w", ref, ErrNotFound)
	}
	var last int64
	if t := top.Val(); len(t) > 0 {
		if last, _, err = parseID(t[0].ID); err != nil {
			return Batch{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
	}
	if after > last {
		return Batch{}, fmt.Errorf("redis turn log: %s: read after %d, but the last frame is %d: %w", ref, after, last, ErrAhead)
	}
	return Batch{}, nil
}

// Wait implements Log. A turn dropped while waiting (Forget on another
// replica, or expiry of a turn whose writer died) is noticed when Wait is
// called again: bound each call, as the server does with its heartbeat.
func (r *Redis) Wait(ctx context.Context, ref Ref, after int64) (Batch, error) {
	key := r.streamKey(ref)
	for {
		gen := r.hub.generation(key)
		b, err := r.Read(ctx, ref, after)
		if err != nil || len(b.Frames) > 0 || b.Done || b.Gap {
			return b, err
		}
		w := r.hub.register(ref.Session, key, after, gen)
		select {
		case <-w.ch:
		case <-ctx.Done():
			r.hub.unregister(w)
			return Batch{}, ctx.Err()
		case <-r.closed:
			r.hub.unregister(w)
			return Batch{}, ErrClosed
		}
	}
}

// Lookup implements Log: one round trip of three commands.
func (r *Redis) Lookup(ctx context.Context, ref Ref) (Status, error) {
	if err := ref.validate(); err != nil {
		return Status{}, err
	}
	if r.isClosed() {
		return Status{}, ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	return r.lookup(rctx, ref)
}

func (r *Redis) lookup(ctx context.Context, ref Ref) (Status, error) {
	key := r.streamKey(ref)
	var meta *redis.MapStringStringCmd
	var top, bottom *redis.XMessageSliceCmd
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, r.metaKey(ref))
		top = p.XRevRangeN(ctx, key, "+", "-", 1)
		bottom = p.XRangeN(ctx, key, "-", "+", 1)
		return nil
	})
	if err != nil {
		return Status{}, r.fail(ref, "lookup", err)
	}
	fields := meta.Val()
	if len(fields) == 0 {
		return Status{}, fmt.Errorf("redis turn log: %s: %w", ref, ErrNotFound)
	}
	started, err := strconv.ParseInt(fields["t"], 10, 64)
	if err != nil {
		return Status{}, fmt.Errorf("redis turn log: %s: meta field t %q is not a time: %w", ref, fields["t"], session.ErrCorrupt)
	}
	s := Status{Meta: Meta{Ref: ref, Owner: fields["o"], AgentID: fields["a"], Started: time.UnixMilli(started)}, Written: time.UnixMilli(started)}
	if w, ok := fields["w"]; ok {
		written, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return Status{}, fmt.Errorf("redis turn log: %s: meta field w %q is not a time: %w", ref, w, session.ErrCorrupt)
		}
		s.Written = time.UnixMilli(written)
	}
	if t := top.Val(); len(t) > 0 {
		if s.Last, s.Done, err = parseID(t[0].ID); err != nil {
			return Status{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
	}
	s.First = s.Last + 1
	if b := bottom.Val(); len(b) > 0 {
		seq, marker, err := parseID(b[0].ID)
		if err != nil {
			return Status{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
		if !marker {
			s.First = seq
		}
	}
	return s, nil
}

// Latest implements Log: two round trips.
func (r *Redis) Latest(ctx context.Context, sessionID string) (Status, error) {
	if err := validSession(sessionID); err != nil {
		return Status{}, err
	}
	if r.isClosed() {
		return Status{}, ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	id, err := r.client.Get(rctx, r.latestKey(sessionID)).Result()
	if errors.Is(err, redis.Nil) {
		return Status{}, fmt.Errorf("redis turn log: session %s: latest turn: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return Status{}, r.fail(Ref{}, "session "+sessionID+": latest turn", err)
	}
	ref := Ref{Session: sessionID, Turn: id}
	if err := ref.validate(); err != nil {
		return Status{}, fmt.Errorf("redis turn log: session %s: latest turn: %w: %w", sessionID, session.ErrCorrupt, err)
	}
	return r.lookup(rctx, ref)
}

// Forget implements Log: two round trips.
func (r *Redis) Forget(ctx context.Context, sessionID string) error {
	if err := validSession(sessionID); err != nil {
		return err
	}
	if r.isClosed() {
		return ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	ids, err := r.client.ZRange(rctx, r.turnsKey(sessionID), 0, -1).Result()
	if err != nil {
		return r.fail(Ref{}, "session "+sessionID+": forget", err)
	}
	keys := []string{r.latestKey(sessionID), r.turnsKey(sessionID)}
	for _, id := range ids {
		ref := Ref{Session: sessionID, Turn: id}
		keys = append(keys, r.streamKey(ref), r.metaKey(ref))
	}
	// One DEL: all keys share the session's slot.
	if err := r.client.Del(rctx, keys...).Err(); err != nil {
		return r.fail(Ref{}, "session "+sessionID+": forget", err)
	}
	for _, id := range ids {
		key := r.streamKey(Ref{Session: sessionID, Turn: id})
		r.writers.Delete(key)
		r.hub.wake(key)
	}
	return nil
}

// Close implements Log: waiting calls return ErrClosed and the XREAD loops
// stop (within Poll). The client stays open.
func (r *Redis) Close() error {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.hub.wg.Wait()
		r.listener.Wait()
	})
	return nil
}

func (r *Redis) stopChannel() string { return r.cfg.Prefix + ":stops" }

// Stop implements Log: one script records the request on the turn and
// publishes it (PUBLISH reaches every node's subscribers on a Cluster).
func (r *Redis) Stop(ctx context.Context, ref Ref) error {
	if err := ref.validate(); err != nil {
		return err
	}
	if r.isClosed() {
		return ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	err := stopScript.Run(rctx, r.client, []string{r.streamKey(ref), r.metaKey(ref)},
		r.stopChannel(), ref.Session+" "+ref.Turn, time.Now().UnixMilli()).Err()
	if err != nil {
		return r.fail(ref, "stop", err)
	}
	return nil
}

// WatchStops implements Log. The first call subscribes to the stop
// channel, on a connection of its own that go-redis re-establishes after a
// failure; each (re)subscription looks up the stop requests of this
// replica's running turns, so that one published while the connection was
// down is not lost.
func (r *Redis) WatchStops(fn func(Ref)) (cancel func()) {
	cancel = r.stops.add(fn)
	r.listening.Do(func() {
		if r.isClosed() {
			return
		}
		r.listener.Add(1)
		go r.listen()
	})
	return cancel
}

func (r *Redis) listen() {
	defer r.listener.Done()
	ps := r.client.Subscribe(context.Background(), r.stopChannel())
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions()
	for {
		select {
		case <-r.closed:
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch v := m.(type) {
			case *redis.Subscription:
				if v.Kind == "subscribe" {
					r.recheckStops()
				}
			case *redis.Message:
				sess, turn, ok := strings.Cut(v.Payload, " ")
				ref := Ref{Session: sess, Turn: turn}
				if _, mine := r.writers.Load(r.streamKey(ref)); ok && mine {
					r.stops.call(ref)
				}
			}
		}
	}
}

// recheckStops reports the stop requests recorded on this replica's
// running turns.
func (r *Redis) recheckStops() {
	r.writers.Range(func(_, v any) bool {
		w := v.(*writer)
		if w.ref.Turn == "" {
			return true
		}
		ctx, cancel := r.roundTrip(context.Background())
		n, err := r.client.HExists(ctx, r.metaKey(w.ref), "x").Result()
		cancel()
		if err == nil && n {
			r.stops.call(w.ref)
		}
		return true
	})
}
