package redislog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// DefaultPrefix starts the Redis keys unless Config.Prefix says
// otherwise.
const DefaultPrefix = "agentdock-turns"

// Defaults of Config.
const (
	DefaultRunningTTL = 15 * time.Minute
	DefaultPoll       = 100 * time.Millisecond
	DefaultTimeout    = 3 * time.Second
	DefaultReadBatch  = 512
)

// Config configures a Redis log.
type Config struct {
	turnlog.Config

	// Client is the connection to Log, typically the session store's
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

// Log is the turnlog.Log of replicas: each turn is one Redis Stream, so that any
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
type Log struct {
	cfg    Config
	client redis.UniversalClient
	// cluster: XREAD keys are grouped by session.
	cluster bool

	writers sync.Map // stream key -> *writer
	hub     hub
	// pipe batches the writes of concurrent turns (Start, Append, Finish).
	pipe pipe

	// stops and handOvers are the WatchStops and WatchHandOvers
	// functions; the first of either starts the subscription to the stop
	// and hand-over channels (listen). sweeping: a sweep of the turns
	// handed over runs.
	stops     turnlog.Watchers
	handOvers turnlog.Watchers
	listening sync.Once
	listener  sync.WaitGroup
	sweeping  atomic.Bool

	closeOnce sync.Once
	closed    chan struct{}
}

// writer is the state of a turn this replica writes: its last seq, so that
// a retried Append is recognised, and when the keys' TTLs were last set.
type writer struct {
	// ref names the turn when this replica started it (Start or Open); a
	// stop request that the subscription may have missed is looked up for
	// it.
	ref turnlog.Ref
	mu  sync.Mutex
	// opened is the meta data of a turn opened (Open) and not yet
	// registered: the next write registers it.
	opened *turnlog.Meta
	// unsure: a write failed without telling whether it went in.
	unsure bool
	// known: last is the seq of the turn's last frame as this writer
	// left it (a write it saw succeed, or a TakeOver); every write then
	// says which seq its first frame has, so that one resent after its
	// outcome was unknown, or that arrives after a later one, adds only
	// the frames the stream lacks (appendScript).
	known     bool
	last      int64
	refreshed time.Time
	// token names this process as the turn's writer (meta field l): a
	// write whose token is not the turn's is refused (TakeOver), and
	// fenced then makes this process's later writes fail at once.
	token  string
	fenced atomic.Bool
	// keys are the turn's keys for its writes (writeKeys), made once: a
	// streaming turn writes about ten times a second.
	keys []string
}

// New validates cfg, checks that Redis answers and loads the scripts.
// It returns an error wrapping session.ErrUnavailable when Redis cannot be
// reached, and a plain error for an invalid configuration.
func New(ctx context.Context, cfg Config) (*Log, error) {
	var err error
	if cfg.Config, err = cfg.Config.WithDefaults(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		return nil, errors.New("turn log: Config.Client is nil")
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
	r := &Log{cfg: cfg, client: cfg.Client, closed: make(chan struct{})}
	_, r.cluster = cfg.Client.(*redis.ClusterClient)
	r.hub.r = r
	r.hub.groups = make(map[string]*group)
	r.pipe = pipe{client: cfg.Client, timeout: cfg.Timeout}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	if err := r.client.Ping(rctx).Err(); err != nil {
		return nil, r.fail(turnlog.Ref{}, "connect", err)
	}
	for _, s := range allScripts {
		if err := s.Load(rctx, r.client).Err(); err != nil {
			return nil, r.fail(turnlog.Ref{}, "load scripts", err)
		}
	}
	return r, nil
}

func (r *Log) base(session string) string { return r.cfg.Prefix + ":{" + session + "}:" }
func (r *Log) streamKey(ref turnlog.Ref) string {
	return r.base(ref.Session) + "turn:" + ref.Turn + ":frames"
}
func (r *Log) metaKey(ref turnlog.Ref) string {
	return r.base(ref.Session) + "turn:" + ref.Turn + ":meta"
}
func (r *Log) latestKey(s string) string { return r.base(s) + "latest" }
func (r *Log) turnsKey(s string) string  { return r.base(s) + "turns" }

func (r *Log) writeKeys(ref turnlog.Ref) []string {
	return []string{r.streamKey(ref), r.metaKey(ref), r.latestKey(ref.Session), r.turnsKey(ref.Session)}
}

func (r *Log) runningTTL() time.Duration { return r.cfg.RunningTTL + r.cfg.Retention }

func (r *Log) roundTrip(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.Timeout)
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// fail classifies an error of go-redis or of a script.
func (r *Log) fail(ref turnlog.Ref, op string, err error) error {
	where := "redis turn log: " + op
	if ref.Turn != "" {
		where = "redis turn log: " + ref.String() + ": " + op
	}
	// Redis 7.0 puts "ERR " before a script's error reply; later versions
	// do not.
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	switch {
	case strings.HasPrefix(msg, "TURNLOG_NOTFOUND"):
		return fmt.Errorf("%s: %w", where, turnlog.ErrNotFound)
	case strings.HasPrefix(msg, "TURNLOG_EXISTS"):
		return fmt.Errorf("%s: %w", where, turnlog.ErrExists)
	case strings.HasPrefix(msg, "TURNLOG_FINISHED"):
		return fmt.Errorf("%s: %w", where, turnlog.ErrFinished)
	case strings.HasPrefix(msg, "TURNLOG_FENCED"):
		return fmt.Errorf("%s: %w", where, turnlog.ErrFenced)
	case strings.HasPrefix(msg, "TURNLOG_SEQ"):
		return fmt.Errorf("%s: the stream's last frame is %s, not the one this writer appended last: another process appends to this turn: %w", where, strings.TrimPrefix(msg, "TURNLOG_SEQ "), session.ErrCorrupt)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return fmt.Errorf("%s: %w: %w", where, session.ErrCorrupt, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %w: %w", where, session.ErrUnavailable, err)
}

func (r *Log) isClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

// prepare checks m for Start and Open and sets its start time.
func (r *Log) prepare(m *turnlog.Meta) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if r.isClosed() {
		return turnlog.ErrClosed
	}
	if m.Started.IsZero() {
		m.Started = time.Now()
	}
	return nil
}

// Start implements turnlog.Log.
func (r *Log) Start(ctx context.Context, m turnlog.Meta) error {
	if err := r.prepare(&m); err != nil {
		return err
	}
	started := m.Started.UnixMilli()
	now := time.Now()
	ttl := r.runningTTL()
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	token := session.NewID()
	err := r.pipe.run(rctx, startScript,
		[]string{r.metaKey(m.Ref), r.latestKey(m.Session), r.turnsKey(m.Session)},
		m.Turn, m.Owner, m.AgentID, started, ms(ttl), now.Add(-ttl).UnixMilli(), token).Err()
	if err != nil {
		return r.fail(m.Ref, "start", err)
	}
	r.writers.Store(r.streamKey(m.Ref), &writer{ref: m.Ref, refreshed: now, known: true, token: token})
	return nil
}

// Open implements turnlog.Log: the turn is registered by its first
// write's script, so a turn costs Redis no round trip of its own to start.
func (r *Log) Open(m turnlog.Meta) error {
	if err := r.prepare(&m); err != nil {
		return err
	}
	if _, loaded := r.writers.LoadOrStore(r.streamKey(m.Ref), &writer{ref: m.Ref, opened: &m, known: true, token: session.NewID()}); loaded {
		return fmt.Errorf("redis turn log: %s: open: %w", m.Ref, turnlog.ErrExists)
	}
	return nil
}

// TakeOver implements turnlog.Taker: one script makes this process the
// turn's writer (its frames go on after the stream's last, and the
// previous writer's writes fail with turnlog.ErrFenced), then the turn's
// status is read.
func (r *Log) TakeOver(ctx context.Context, m turnlog.Meta) (turnlog.Status, error) {
	if err := r.prepare(&m); err != nil {
		return turnlog.Status{}, err
	}
	now := time.Now()
	ttl := r.runningTTL()
	token := session.NewID()
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	reply, err := takeOverScript.Run(rctx, r.client, r.writeKeys(m.Ref),
		token, m.Turn, m.Owner, m.AgentID, m.Started.UnixMilli(), ms(ttl), now.UnixMilli(), now.Add(-ttl).UnixMilli()).Int64Slice()
	if err != nil {
		return turnlog.Status{}, r.fail(m.Ref, "take over", err)
	}
	if len(reply) != 2 {
		return turnlog.Status{}, fmt.Errorf("redis turn log: %s: take over: unexpected reply %v: %w", m.Ref, reply, session.ErrCorrupt)
	}
	// From now on this process writes the turn, from its last frame on;
	// the first write sets the keys' TTLs again.
	r.writers.Store(r.streamKey(m.Ref), &writer{ref: m.Ref, known: true, last: reply[0], token: token})
	// No longer waiting to be taken over, if it was (a sweep would drop
	// it otherwise).
	_ = r.client.ZRem(rctx, r.handedOverKey(), handOverMember(m.Ref)).Err()
	st, err := r.lookup(rctx, m.Ref)
	if err != nil {
		return turnlog.Status{}, err
	}
	st.Last, st.Stop = reply[0], reply[1] == 1
	return st, nil
}

// Append implements turnlog.Log: one script, one stream entry for all the
// frames.
func (r *Log) Append(ctx context.Context, ref turnlog.Ref, data ...[]byte) (int64, error) {
	return r.write(ctx, ref, false, data)
}

// Finish implements turnlog.Log: the frames, if any, and the end marker in
// one script.
func (r *Log) Finish(ctx context.Context, ref turnlog.Ref, data ...[]byte) error {
	_, err := r.write(ctx, ref, true, data)
	return err
}

func (r *Log) write(ctx context.Context, ref turnlog.Ref, finish bool, data [][]byte) (int64, error) {
	op := "append"
	if finish {
		op = "finish"
	}
	if err := ref.Validate(); err != nil {
		return 0, err
	}
	if err := turnlog.CheckFrames(ref, data); err != nil {
		return 0, err
	}
	if r.isClosed() {
		return 0, turnlog.ErrClosed
	}
	key := r.streamKey(ref)
	v, ok := r.writers.Load(key)
	if !ok {
		v, _ = r.writers.LoadOrStore(key, &writer{})
	}
	w := v.(*writer)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fenced.Load() {
		return 0, fmt.Errorf("redis turn log: %s: %s: %w", ref, op, turnlog.ErrFenced)
	}
	if w.keys == nil {
		w.keys = r.writeKeys(ref)
	}
	now := time.Now()
	ttl := "0"
	// Before this replica's first write (of a turn started elsewhere) or
	// once a quarter of RunningTTL passed: refresh the keys' TTLs.
	if w.refreshed.IsZero() || now.Sub(w.refreshed) >= r.cfg.RunningTTL/4 {
		ttl = ms(r.runningTTL())
	}
	// The seq of the batch's first frame, when this writer knows it (0:
	// whatever comes next, for a process that never wrote the turn).
	first := int64(0)
	if w.known {
		first = w.last + 1
	}
	// An opened turn is registered by this write; its frames are its
	// first.
	open, owner, agent, started, prune := "0", "", "", int64(0), int64(0)
	if m := w.opened; m != nil {
		open, owner, agent, started, prune = "1", m.Owner, m.AgentID, m.Started.UnixMilli(), now.Add(-r.runningTTL()).UnixMilli()
		ttl = ms(r.runningTTL())
	}
	size := len(data)
	for _, d := range data {
		size += len(d)
	}
	joined := make([]byte, 0, size)
	for i, d := range data {
		if i > 0 {
			joined = append(joined, '\n')
		}
		joined = append(joined, d...)
	}
	fin := "0"
	if finish {
		fin = "1"
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	last, err := r.pipe.run(rctx, appendScript, w.keys,
		first, r.cfg.MaxFrames, ttl, now.UnixMilli(), ref.Turn, fin, ms(r.cfg.Retention), len(data), joined,
		open, owner, agent, started, prune, w.token).Int64()
	if err != nil {
		err = r.fail(ref, op, err)
		switch {
		case errors.Is(err, turnlog.ErrFenced):
			// Another process writes the turn now: this one no longer
			// does, nor hears its stops.
			w.fenced.Store(true)
		case errors.Is(err, turnlog.ErrFinished), errors.Is(err, turnlog.ErrNotFound), errors.Is(err, turnlog.ErrExists):
			r.writers.Delete(key)
			r.hub.wake(key)
		default:
			// Whether the frames went in is unknown: the next write says
			// again where its frames start (w.last is unchanged), and
			// the stream keeps each frame once whichever of the two
			// arrives first, or both. Its keys' TTLs are set again.
			w.refreshed, w.unsure = time.Time{}, true
		}
		return 0, err
	}
	w.opened, w.unsure = nil, false
	if finish {
		r.writers.Delete(key)
	} else {
		w.last, w.known = last, true
		if ttl != "0" {
			w.refreshed = now
		}
	}
	r.hub.wake(key)
	return last, nil
}

// parseID splits a stream entry ID "<seq>-<n>": n 0 is an entry of frames
// (seq its last), 1 the end marker.
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

// entry is one stream entry: an Append's frames (first..last, data joined
// by "\n") or the end marker (of a turn whose last frame is last).
type entry struct {
	last, first int64
	marker      bool
	data        string
}

// entryOf checks an entry's fields.
func entryOf(id string, field func(name string) (string, bool)) (entry, error) {
	var e entry
	var err error
	if e.last, e.marker, err = parseID(id); err != nil || e.marker {
		return e, err
	}
	f, ok := field("f")
	e.data, _ = field("d")
	if !ok {
		// Written before entries held batches: one frame each.
		f = strconv.FormatInt(e.last, 10)
	}
	e.first, err = strconv.ParseInt(f, 10, 64)
	if err != nil || e.first < 1 || e.first > e.last || e.data == "" || int64(strings.Count(e.data, "\n")) != e.last-e.first {
		return entry{}, fmt.Errorf("stream entry %s does not hold frames %s..%d: %w", id, f, e.last, session.ErrCorrupt)
	}
	return e, nil
}

// parseEntry reads an entry of a script's reply: {id, {field, value, ...}}.
func parseEntry(v any) (entry, error) {
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return entry{}, fmt.Errorf("a stream entry is not {id, fields}: %w", session.ErrCorrupt)
	}
	id, _ := pair[0].(string)
	fields, _ := pair[1].([]any)
	return entryOf(id, func(name string) (string, bool) {
		for i := 0; i+1 < len(fields); i += 2 {
			if n, _ := fields[i].(string); n == name {
				v, ok := fields[i+1].(string)
				return v, ok
			}
		}
		return "", false
	})
}

// xEntry checks an entry of go-redis's XRANGE reply.
func xEntry(m redis.XMessage) (entry, error) {
	return entryOf(m.ID, func(name string) (string, bool) {
		v, ok := m.Values[name].(string)
		return v, ok
	})
}

// decode turns the entries after `after` into a batch; kept is the oldest
// frame kept (0: none was dropped).
func decode(ref turnlog.Ref, after, kept int64, entries []any) (turnlog.Batch, error) {
	var b turnlog.Batch
	for i, v := range entries {
		e, err := parseEntry(v)
		if err != nil {
			return turnlog.Batch{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
		if i == 0 {
			first := e.first
			if e.marker {
				first = e.last + 1
			}
			if after+1 < max(first, kept) {
				return turnlog.Batch{Gap: true}, nil
			}
		}
		if e.marker {
			b.Done = true
			break
		}
		rest := e.data
		for seq := e.first; seq <= e.last; seq++ {
			d, tail, _ := strings.Cut(rest, "\n")
			rest = tail
			if seq > after {
				b.Frames = append(b.Frames, turnlog.Frame{Seq: seq, Data: []byte(d)})
			}
		}
	}
	return b, nil
}

// Read implements turnlog.Log: one script, one round trip.
func (r *Log) Read(ctx context.Context, ref turnlog.Ref, after int64) (turnlog.Batch, error) {
	if err := ref.Validate(); err != nil {
		return turnlog.Batch{}, err
	}
	if after < 0 {
		return turnlog.Batch{}, fmt.Errorf("redis turn log: %s: read after %d: %w", ref, after, turnlog.ErrAhead)
	}
	if r.isClosed() {
		return turnlog.Batch{}, turnlog.ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	reply, err := readScript.Run(rctx, r.client, []string{r.streamKey(ref), r.metaKey(ref)}, after, r.cfg.ReadBatch).Slice()
	if err != nil {
		return turnlog.Batch{}, r.fail(ref, "read", err)
	}
	corrupt := fmt.Errorf("redis turn log: %s: the read script's reply has an unexpected shape: %w", ref, session.ErrCorrupt)
	if len(reply) < 2 {
		return turnlog.Batch{}, corrupt
	}
	kept, _ := reply[0].(int64)
	entries, ok := reply[1].([]any)
	if !ok {
		return turnlog.Batch{}, corrupt
	}
	if len(entries) > 0 {
		return decode(ref, after, kept, entries)
	}
	if len(reply) != 4 {
		return turnlog.Batch{}, corrupt
	}
	if exists, _ := reply[3].(int64); exists == 0 {
		return turnlog.Batch{}, fmt.Errorf("redis turn log: %s: %w", ref, turnlog.ErrNotFound)
	}
	var last int64
	if top, _ := reply[2].([]any); len(top) > 0 {
		e, err := parseEntry(top[0])
		if err != nil {
			return turnlog.Batch{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
		last = e.last
	}
	if after > last {
		return turnlog.Batch{}, fmt.Errorf("redis turn log: %s: read after %d, but the last frame is %d: %w", ref, after, last, turnlog.ErrAhead)
	}
	return turnlog.Batch{}, nil
}

// Wait implements turnlog.Log. A turn dropped while waiting (Forget on another
// replica, or expiry of a turn whose writer died) is noticed when Wait is
// called again: bound each call, as the server does with its heartbeat.
func (r *Log) Wait(ctx context.Context, ref turnlog.Ref, after int64) (turnlog.Batch, error) {
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
			return turnlog.Batch{}, ctx.Err()
		case <-r.closed:
			r.hub.unregister(w)
			return turnlog.Batch{}, turnlog.ErrClosed
		}
	}
}

// Lookup implements Log: one round trip of three commands.
func (r *Log) Lookup(ctx context.Context, ref turnlog.Ref) (turnlog.Status, error) {
	if err := ref.Validate(); err != nil {
		return turnlog.Status{}, err
	}
	if r.isClosed() {
		return turnlog.Status{}, turnlog.ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	return r.lookup(rctx, ref)
}

func (r *Log) lookup(ctx context.Context, ref turnlog.Ref) (turnlog.Status, error) {
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
		return turnlog.Status{}, r.fail(ref, "lookup", err)
	}
	fields := meta.Val()
	if len(fields) == 0 {
		return turnlog.Status{}, fmt.Errorf("redis turn log: %s: %w", ref, turnlog.ErrNotFound)
	}
	started, err := strconv.ParseInt(fields["t"], 10, 64)
	if err != nil {
		return turnlog.Status{}, fmt.Errorf("redis turn log: %s: meta field t %q is not a time: %w", ref, fields["t"], session.ErrCorrupt)
	}
	_, stop := fields["x"]
	_, handed := fields["h"]
	s := turnlog.Status{Meta: turnlog.Meta{Ref: ref, Owner: fields["o"], AgentID: fields["a"], Started: time.UnixMilli(started)}, Written: time.UnixMilli(started), Stop: stop, HandedOver: handed}
	if w, ok := fields["w"]; ok {
		written, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return turnlog.Status{}, fmt.Errorf("redis turn log: %s: meta field w %q is not a time: %w", ref, w, session.ErrCorrupt)
		}
		s.Written = time.UnixMilli(written)
	}
	if r := fields["r"]; r != "" {
		for v := range strings.SplitSeq(r, ",") {
			seq, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return turnlog.Status{}, fmt.Errorf("redis turn log: %s: meta field r %q is not a list of seqs: %w", ref, r, session.ErrCorrupt)
			}
			s.Restarts = append(s.Restarts, seq)
		}
	}
	if t := top.Val(); len(t) > 0 {
		if s.Last, s.Done, err = parseID(t[0].ID); err != nil {
			return turnlog.Status{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
	}
	s.First = s.Last + 1
	if b := bottom.Val(); len(b) > 0 {
		e, err := xEntry(b[0])
		if err != nil {
			return turnlog.Status{}, fmt.Errorf("redis turn log: %s: %w", ref, err)
		}
		if !e.marker {
			s.First = e.first
			if k, err := strconv.ParseInt(fields["k"], 10, 64); err == nil && k > s.First {
				s.First = k
			}
		}
	}
	return s, nil
}

// Latest implements Log: two round trips.
func (r *Log) Latest(ctx context.Context, sessionID string) (turnlog.Status, error) {
	if err := turnlog.ValidSession(sessionID); err != nil {
		return turnlog.Status{}, err
	}
	if r.isClosed() {
		return turnlog.Status{}, turnlog.ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	id, err := r.client.Get(rctx, r.latestKey(sessionID)).Result()
	if errors.Is(err, redis.Nil) {
		return turnlog.Status{}, fmt.Errorf("redis turn log: session %s: latest turn: %w", sessionID, turnlog.ErrNotFound)
	}
	if err != nil {
		return turnlog.Status{}, r.fail(turnlog.Ref{}, "session "+sessionID+": latest turn", err)
	}
	ref := turnlog.Ref{Session: sessionID, Turn: id}
	if err := ref.Validate(); err != nil {
		return turnlog.Status{}, fmt.Errorf("redis turn log: session %s: latest turn: %w: %w", sessionID, session.ErrCorrupt, err)
	}
	return r.lookup(rctx, ref)
}

// Forget implements Log: two round trips.
func (r *Log) Forget(ctx context.Context, sessionID string) error {
	if err := turnlog.ValidSession(sessionID); err != nil {
		return err
	}
	if r.isClosed() {
		return turnlog.ErrClosed
	}
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	ids, err := r.client.ZRange(rctx, r.turnsKey(sessionID), 0, -1).Result()
	if err != nil {
		return r.fail(turnlog.Ref{}, "session "+sessionID+": forget", err)
	}
	keys := []string{r.latestKey(sessionID), r.turnsKey(sessionID)}
	for _, id := range ids {
		ref := turnlog.Ref{Session: sessionID, Turn: id}
		keys = append(keys, r.streamKey(ref), r.metaKey(ref))
	}
	// One DEL: all keys share the session's slot.
	if err := r.client.Del(rctx, keys...).Err(); err != nil {
		return r.fail(turnlog.Ref{}, "session "+sessionID+": forget", err)
	}
	for _, id := range ids {
		key := r.streamKey(turnlog.Ref{Session: sessionID, Turn: id})
		r.writers.Delete(key)
		r.hub.wake(key)
	}
	return nil
}

// Close implements Log: waiting calls return turnlog.ErrClosed and the XREAD loops
// stop (within Poll). The client stays open.
func (r *Log) Close() error {
	r.closeOnce.Do(func() {
		close(r.closed)
		r.hub.wg.Wait()
		r.listener.Wait()
	})
	return nil
}

func (r *Log) stopChannel() string { return r.cfg.Prefix + ":stops" }

// handOverChannel is where hand-overs are published; handedOverKey, the
// sorted set of the turns handed over and not yet taken over (by the
// time of the hand-over, in ms), which a replica sweeps when its
// subscription (re)connects and every handOverSweep.
func (r *Log) handOverChannel() string { return r.cfg.Prefix + ":handovers" }
func (r *Log) handedOverKey() string   { return r.cfg.Prefix + ":handed-over" }

// handOverMember names a turn in the hand-over channel and set, as the
// stop channel does: "<session> <turn>".
func handOverMember(ref turnlog.Ref) string { return ref.Session + " " + ref.Turn }

// handOverSweep is how often a replica that watches hand-overs looks for
// the turns still waiting to be taken over (one round trip when none
// waits): a message of the channel lost, or a takeover that failed.
const handOverSweep = 10 * time.Second

// HandOver implements turnlog.Taker: the last frames go in as an Append
// (which registers a turn opened and not yet written), then one script
// marks the turn handed over and publishes it, and the turn is listed
// among those waiting to be taken over. This process no longer writes
// the turn.
func (r *Log) HandOver(ctx context.Context, ref turnlog.Ref, data ...[]byte) error {
	if _, err := r.write(ctx, ref, false, data); err != nil {
		return err
	}
	key := r.streamKey(ref)
	v, ok := r.writers.Load(key)
	if !ok {
		return fmt.Errorf("redis turn log: %s: hand over: %w", ref, turnlog.ErrFenced)
	}
	w := v.(*writer)
	now := time.Now().UnixMilli()
	rctx, cancel := r.roundTrip(ctx)
	defer cancel()
	err := handOverScript.Run(rctx, r.client, []string{key, r.metaKey(ref)}, w.token, now, r.handOverChannel(), handOverMember(ref)).Err()
	if err != nil {
		err = r.fail(ref, "hand over", err)
		if errors.Is(err, turnlog.ErrFenced) {
			w.fenced.Store(true)
		}
		return err
	}
	// Its writes are refused from now on; the writer is dropped a while
	// later.
	w.fenced.Store(true)
	time.AfterFunc(time.Minute, func() { r.writers.CompareAndDelete(key, w) })
	// Listed after the mark: a sweep that finds a listed turn without it
	// (taken over meanwhile) drops it.
	if err := r.client.ZAdd(rctx, r.handedOverKey(), redis.Z{Score: float64(now), Member: handOverMember(ref)}).Err(); err != nil {
		// The publication reached the replicas that listen now.
		return r.fail(ref, "hand over: listing the turn", err)
	}
	return nil
}

// WatchHandOvers implements turnlog.Taker (see listen).
func (r *Log) WatchHandOvers(fn func(turnlog.Ref)) (cancel func()) {
	cancel = r.handOvers.Add(fn)
	r.startListening()
	return cancel
}

// sweepHandOvers reports the turns handed over that still wait, and
// drops from the list those taken over or gone (and, after RunningTTL,
// any). One round trip when none waits, two otherwise.
func (r *Log) sweepHandOvers() {
	if !r.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer r.sweeping.Store(false)
	ctx, cancel := r.roundTrip(context.Background())
	defer cancel()
	listed, err := r.client.ZRangeWithScores(ctx, r.handedOverKey(), 0, -1).Result()
	if err != nil || len(listed) == 0 {
		return
	}
	refs := make([]turnlog.Ref, 0, len(listed))
	var stale []any
	oldest := float64(time.Now().Add(-r.runningTTL()).UnixMilli())
	for _, z := range listed {
		m, _ := z.Member.(string)
		s, t, ok := strings.Cut(m, " ")
		ref := turnlog.Ref{Session: s, Turn: t}
		if !ok || ref.Validate() != nil || z.Score < oldest {
			stale = append(stale, m)
			continue
		}
		refs = append(refs, ref)
	}
	marks := make([]*redis.BoolCmd, len(refs))
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ref := range refs {
			marks[i] = p.HExists(ctx, r.metaKey(ref), "h")
		}
		return nil
	})
	if err != nil {
		return
	}
	for i, ref := range refs {
		if marks[i].Val() {
			r.handOvers.Call(ref)
		} else {
			stale = append(stale, handOverMember(ref))
		}
	}
	if len(stale) > 0 {
		_ = r.client.ZRem(ctx, r.handedOverKey(), stale...).Err()
	}
}

// Stop implements Log: one script records the request on the turn and
// publishes it (PUBLISH reaches every node's subscribers on a Cluster).
func (r *Log) Stop(ctx context.Context, ref turnlog.Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if r.isClosed() {
		return turnlog.ErrClosed
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
func (r *Log) WatchStops(fn func(turnlog.Ref)) (cancel func()) {
	cancel = r.stops.Add(fn)
	r.startListening()
	return cancel
}

func (r *Log) startListening() {
	r.listening.Do(func() {
		if r.isClosed() {
			return
		}
		r.listener.Add(1)
		go r.listen()
	})
}

// listen follows the stop and hand-over channels: a stop of a turn this
// process writes goes to the WatchStops functions, a hand-over to the
// WatchHandOvers functions; each (re)subscription rechecks what the
// connection may have missed, and the turns handed over and still
// waiting are swept every handOverSweep.
func (r *Log) listen() {
	defer r.listener.Done()
	ps := r.client.Subscribe(context.Background(), r.stopChannel(), r.handOverChannel())
	defer ps.Close()
	ch := ps.ChannelWithSubscriptions()
	sweep := time.NewTicker(handOverSweep)
	defer sweep.Stop()
	for {
		select {
		case <-r.closed:
			return
		case <-sweep.C:
			if r.handOvers.Count() > 0 {
				go r.sweepHandOvers()
			}
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch v := m.(type) {
			case *redis.Subscription:
				switch {
				case v.Kind != "subscribe":
				case v.Channel == r.stopChannel():
					r.recheckStops()
				case r.handOvers.Count() > 0:
					go r.sweepHandOvers()
				}
			case *redis.Message:
				sess, turn, ok := strings.Cut(v.Payload, " ")
				ref := turnlog.Ref{Session: sess, Turn: turn}
				switch {
				case !ok:
				case v.Channel == r.handOverChannel():
					if v, mine := r.writers.Load(r.streamKey(ref)); !mine || v.(*writer).fenced.Load() {
						r.handOvers.Call(ref)
					}
				default:
					if v, mine := r.writers.Load(r.streamKey(ref)); mine && !v.(*writer).fenced.Load() {
						r.stops.Call(ref)
					}
				}
			}
		}
	}
}

// recheckStops reports the stop requests recorded on this replica's
// running turns.
func (r *Log) recheckStops() {
	r.writers.Range(func(_, v any) bool {
		w := v.(*writer)
		if w.ref.Turn == "" || w.fenced.Load() {
			return true
		}
		ctx, cancel := r.roundTrip(context.Background())
		n, err := r.client.HExists(ctx, r.metaKey(w.ref), "x").Result()
		cancel()
		if err == nil && n {
			r.stops.Call(w.ref)
		}
		return true
	})
}
