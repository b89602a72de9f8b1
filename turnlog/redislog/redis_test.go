package redislog_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
	"github.com/agentdock-go/agentdock/turnlog/turnlogtest"
)

// newClient connects to srv as the session store would (its options), so
// that each Log instance is a replica with its own connection pool.
func newClient(t testing.TB, srv *redistest.Server, cluster bool) redis.UniversalClient {
	t.Helper()
	rc := redisstore.Config{URL: srv.URL()}
	if cluster {
		rc = redisstore.Config{ClusterAddrs: []string{srv.Addr()}}
	}
	store, err := redisstore.New(rc)
	if err != nil {
		t.Fatalf("connect to redis-server: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return store.Client()
}

func openRedis(t testing.TB, client redis.UniversalClient, cfg redislog.Config) *redislog.Log {
	t.Helper()
	cfg.Client = client
	l, err := redislog.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// redisOpener gives each test its own key prefix on one server and two
// replicas with their own clients.
func redisOpener(srv *redistest.Server, cluster bool) turnlogtest.Open {
	return func(t *testing.T, cfg turnlog.Config) (turnlog.Log, turnlog.Log) {
		rc := redislog.Config{Config: cfg, Prefix: "test-" + session.NewID(), Poll: 50 * time.Millisecond}
		return openRedis(t, newClient(t, srv, cluster), rc), openRedis(t, newClient(t, srv, cluster), rc)
	}
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	turnlogtest.Run(t, redisOpener(srv, false))
}

// On a Cluster every script and every XREAD must keep to one slot.
func TestRedisClusterConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Cluster())
	turnlogtest.Run(t, redisOpener(srv, true))
}

// TestRedisTwoReplicas: frames appended on replica A are followed live on
// replica B, and a client that drops off B resumes on a third replica C
// from its last seq, with no duplicate and no gap.
func TestRedisTwoReplicas(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redislog.Config{Prefix: "replicas", Poll: 50 * time.Millisecond}
	a := openRedis(t, newClient(t, srv, false), cfg)
	b := openRedis(t, newClient(t, srv, false), cfg)
	c := openRedis(t, newClient(t, srv, false), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	if err := a.Start(ctx, turnlog.Meta{Ref: ref, Owner: "o", AgentID: "agent"}); err != nil {
		t.Fatal(err)
	}
	const total = 400
	written := make(chan error, 1)
	go func() {
		var last int64
		for n := int64(1); last < total; n = n%4 + 1 {
			batch := make([][]byte, 0, n)
			for i := range min(n, total-last) {
				batch = append(batch, frameData(last+i+1))
			}
			var err error
			if last, err = a.Append(ctx, ref, batch...); err != nil {
				written <- err
				return
			}
			if last%20 == 0 {
				time.Sleep(time.Millisecond) // a model's pace, roughly
			}
		}
		written <- a.Finish(ctx, ref)
	}()

	type result struct {
		frames []turnlog.Frame
		err    error
	}
	live := make(chan result, 1)
	go func() {
		f, err := followAll(ctx, b, ref, 0, 0)
		live <- result{f, err}
	}()
	// The client on B drops off after frame 100 or later...
	first, err := followAll(ctx, b, ref, 0, 100)
	if err != nil {
		t.Fatalf("first connection on B: %v", err)
	}
	lastSeen := first[len(first)-1].Seq
	// ...and resumes on C after the last frame it got.
	rest, err := followAll(ctx, c, ref, lastSeen, 0)
	if err != nil {
		t.Fatalf("resume on C after %d: %v", lastSeen, err)
	}
	if err := <-written; err != nil {
		t.Fatalf("writer on A: %v", err)
	}
	checkSeqs(t, "first connection + resume", append(first, rest...), 1, total)
	r := <-live
	if r.err != nil {
		t.Fatalf("live follower on B: %v", r.err)
	}
	checkSeqs(t, "live follower on B", r.frames, 1, total)
}

func frameData(seq int64) []byte {
	return []byte(`{"type":"text-delta","delta":"` + strconv.FormatInt(seq, 10) + `"}`)
}

// followAll reads with Wait after `after` until the turn is done, or until
// it got a frame with seq >= stop when stop > 0.
func followAll(ctx context.Context, l turnlog.Log, ref turnlog.Ref, after, stop int64) ([]turnlog.Frame, error) {
	var all []turnlog.Frame
	for {
		b, err := l.Wait(ctx, ref, after)
		switch {
		case err != nil:
			return all, err
		case b.Gap:
			return all, fmt.Errorf("gap after %d", after)
		case len(b.Frames) == 0 && !b.Done:
			return all, fmt.Errorf("Wait after %d returned nothing", after)
		}
		all = append(all, b.Frames...)
		if len(b.Frames) > 0 {
			after = b.Frames[len(b.Frames)-1].Seq
		}
		if b.Done || stop > 0 && after >= stop {
			return all, nil
		}
	}
}

func checkSeqs(t *testing.T, what string, frames []turnlog.Frame, from, to int64) {
	t.Helper()
	if int64(len(frames)) != to-from+1 {
		t.Fatalf("%s: %d frames, want %d", what, len(frames), to-from+1)
	}
	for i, f := range frames {
		if want := from + int64(i); f.Seq != want || string(f.Data) != string(frameData(want)) {
			t.Fatalf("%s: frame %d is %d %q, want %d %q", what, i, f.Seq, f.Data, want, frameData(want))
		}
	}
}

// TestRedisUnavailable: with redis-server down every call fails with an
// error wrapping session.ErrUnavailable (never an empty answer), a waiting
// reader is released with it, and after a restart the same Log works on.
func TestRedisUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redislog.Config{Prefix: "down", Poll: 50 * time.Millisecond, Timeout: time.Second}
	a := openRedis(t, newClient(t, srv, false), cfg)
	b := openRedis(t, newClient(t, srv, false), cfg)
	ctx := context.Background()
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	if err := a.Start(ctx, turnlog.Meta{Ref: ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, ref, frameData(1), frameData(2)); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := b.Wait(ctx, ref, 2)
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the reader block in XREAD
	srv.Stop()
	if err := <-waited; !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Wait while Redis went down: %v; want ErrUnavailable", err)
	}
	for name, call := range map[string]func() error{
		"Start": func() error {
			return a.Start(ctx, turnlog.Meta{Ref: turnlog.Ref{Session: ref.Session, Turn: session.NewID()}})
		},
		"Append": func() error { _, err := a.Append(ctx, ref, frameData(3)); return err },
		"Read":   func() error { _, err := b.Read(ctx, ref, 0); return err },
		"Wait":   func() error { _, err := b.Wait(ctx, ref, 2); return err },
		"Lookup": func() error { _, err := b.Lookup(ctx, ref); return err },
		"Latest": func() error { _, err := b.Latest(ctx, ref.Session); return err },
		"Forget": func() error { return b.Forget(ctx, session.NewID()) },
		"Finish": func() error { return a.Finish(ctx, ref) },
	} {
		if err := call(); !errors.Is(err, session.ErrUnavailable) {
			t.Errorf("%s with Redis down: %v; want ErrUnavailable", name, err)
		}
	}
	srv.Restart()
	// The append-only file kept the turn; the writer continues after the
	// frames that are in the stream, whatever happened to its failed call.
	last, err := a.Append(ctx, ref, frameData(3))
	if err != nil {
		t.Fatalf("Append after the restart: %v", err)
	}
	if err := a.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	// b's pool failed every dial while Redis was down; go-redis then
	// answers with the last dial error until its background dial (once a
	// second) succeeds.
	var frames []turnlog.Frame
	for deadline := time.Now().Add(5 * time.Second); ; {
		if frames, err = followAll(ctx, b, ref, 0, 0); err == nil {
			break
		}
		if !errors.Is(err, session.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("read after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if int64(len(frames)) != last || frames[len(frames)-1].Seq != last {
		t.Fatalf("after the restart: %d frames ending at %d, want 1..%d", len(frames), frames[len(frames)-1].Seq, last)
	}
	for i, f := range frames {
		if f.Seq != int64(i+1) {
			t.Fatalf("after the restart: frame %d has seq %d", i, f.Seq)
		}
	}
}

// TestRedisKeys checks the layout the package documents: the keys of one
// session in one hash slot, the exact trim, the end marker and the TTLs.
func TestRedisKeys(t *testing.T) {
	srv := redistest.Start(t)
	raw := newClient(t, srv, false)
	cfg := redislog.Config{Config: turnlog.Config{MaxFrames: 16, Retention: time.Minute}, RunningTTL: time.Hour}
	l := openRedis(t, raw, cfg)
	ctx := context.Background()
	ref := turnlog.Ref{Session: "session-1", Turn: "turn-0001"}
	if err := l.Start(ctx, turnlog.Meta{Ref: ref, Owner: "o", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 40; i++ {
		if _, err := l.Append(ctx, ref, frameData(i)); err != nil {
			t.Fatal(err)
		}
	}
	base := "agentdock-turns:{session-1}:"
	stream, meta := base+"turn:turn-0001:frames", base+"turn:turn-0001:meta"
	keys, err := raw.Keys(ctx, "agentdock-turns:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{stream: true, meta: true, base + "latest": true, base + "turns": true}
	if len(keys) != len(want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	for _, k := range keys {
		if !want[k] {
			t.Fatalf("unexpected key %q (want %v)", k, want)
		}
		ttl, err := raw.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > time.Hour+time.Minute {
			t.Fatalf("running turn: PTTL %s = %v, %v; want (0, RunningTTL+Retention]", k, ttl, err)
		}
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	msgs, err := raw.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 17 || msgs[0].ID != "25-0" || msgs[15].ID != "40-0" || msgs[16].ID != "40-1" {
		t.Fatalf("stream after 40 frames with MaxFrames 16 and Finish: %d entries, %v ... %v", len(msgs), msgs[0].ID, msgs[len(msgs)-1].ID)
	}
	if msgs[15].Values["d"] != string(frameData(40)) {
		t.Fatalf("entry 40-0 = %v", msgs[15].Values)
	}
	for _, k := range []string{stream, meta, base + "latest"} {
		ttl, err := raw.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > time.Minute {
			t.Fatalf("finished turn: PTTL %s = %v, %v; want (0, Retention]", k, ttl, err)
		}
	}
}

// TestRedisRunningTTL: a running turn lives on while its writer appends,
// and goes away RunningTTL+Retention after the writer stopped (its replica
// died) without finishing it.
func TestRedisRunningTTL(t *testing.T) {
	srv := redistest.Start(t)
	// The appends run for longer than RunningTTL+Retention, so the turn
	// outlives its first TTL only if appends refresh it. RunningTTL is wide
	// enough that a loaded machine's pause between two appends (the race
	// detector, other tests) does not reach it.
	cfg := redislog.Config{Config: turnlog.Config{Retention: 100 * time.Millisecond}, RunningTTL: time.Second}
	l := openRedis(t, newClient(t, srv, false), cfg)
	ctx := context.Background()
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	if err := l.Start(ctx, turnlog.Meta{Ref: ref}); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	for time.Since(started) < 1600*time.Millisecond {
		if _, err := l.Append(ctx, ref, frameData(1)); err != nil {
			t.Fatalf("Append %v after Start: %v", time.Since(started), err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	stopped := time.Now()
	for {
		_, err := l.Lookup(ctx, ref)
		if errors.Is(err, turnlog.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(stopped) > 10*time.Second {
			t.Fatal("a turn without appends did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := l.Latest(ctx, ref.Session); !errors.Is(err, turnlog.ErrNotFound) {
		t.Fatalf("Latest after the running turn expired: %v; want ErrNotFound", err)
	}
}

// commandCounter counts the commands a client sends, pipelines included,
// and its round trips (trips: a command sent alone or a pipeline).
type commandCounter struct {
	n, trips atomic.Int64
	resend   atomic.Bool // send the next EVALSHA twice, as go-redis does when it retries
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			c.n.Add(1)
			c.trips.Add(1)
		}
		if cmd.Name() == "evalsha" && c.resend.CompareAndSwap(true, false) {
			if err := next(ctx, cmd); err != nil {
				return err
			}
		}
		return next(ctx, cmd)
	}
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		// A new connection's handshake (CLIENT SETINFO) is not a call's.
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			c.n.Add(int64(len(cmds)))
			c.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestRedisCommands pins the commands per call that the benchmarks and the
// issue's "<= 2 Redis commands per tool event" rely on, and checks that a
// resent Append (a go-redis retry after the reply was lost) adds nothing.
func TestRedisCommands(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv, false)
	count := &commandCounter{}
	client.AddHook(count)
	l := openRedis(t, client, redislog.Config{})
	ctx := context.Background()
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	commands := func(what string, want int64, call func() error) {
		t.Helper()
		before := count.n.Load()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := count.n.Load() - before; got != want {
			t.Fatalf("%s: %d commands, want %d", what, got, want)
		}
	}
	commands("Start", 1, func() error { return l.Start(ctx, turnlog.Meta{Ref: ref}) })
	commands("Append of 1 frame", 1, func() error { _, err := l.Append(ctx, ref, frameData(1)); return err })
	batch := make([][]byte, 8)
	for i := range batch {
		batch[i] = frameData(int64(i + 2))
	}
	commands("Append of 8 frames", 1, func() error { _, err := l.Append(ctx, ref, batch...); return err })
	commands("Read with frames", 1, func() error { _, err := l.Read(ctx, ref, 0); return err })
	commands("Wait with frames", 1, func() error { _, err := l.Wait(ctx, ref, 3); return err })
	commands("Read at the end", 1, func() error { _, err := l.Read(ctx, ref, 9); return err })
	commands("Lookup", 3, func() error { _, err := l.Lookup(ctx, ref); return err })

	count.resend.Store(true)
	last, err := l.Append(ctx, ref, frameData(10), frameData(11))
	if err != nil || last != 11 {
		t.Fatalf("resent Append = %d, %v; want 11", last, err)
	}
	if count.resend.Load() {
		t.Fatal("the Append was not resent")
	}
	count.resend.Store(true)
	if err := l.Finish(ctx, ref, frameData(12)); err != nil || count.resend.Load() {
		t.Fatalf("resent Finish with a frame: %v (resent: %v)", err, !count.resend.Load())
	}
	b, err := l.Read(ctx, ref, 0)
	if err != nil || !b.Done || len(b.Frames) != 12 || b.Frames[11].Seq != 12 {
		t.Fatalf("after a resent Append and a resent Finish: %d frames, done %v, %v; want 1..12", len(b.Frames), b.Done, err)
	}
	commands("Finish of a finished turn", 1, func() error { return l.Finish(ctx, ref) })
	other := turnlog.Ref{Session: ref.Session, Turn: session.NewID()}
	commands("Start", 1, func() error { return l.Start(ctx, turnlog.Meta{Ref: other}) })
	commands("Finish with all of a turn's frames", 1, func() error { return l.Finish(ctx, other, batch...) })
}

func TestNewRedisConfig(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv, false)
	for _, tc := range []struct {
		name string
		cfg  redislog.Config
	}{
		{"nil client", redislog.Config{}},
		{"negative Poll", redislog.Config{Client: client, Poll: -1}},
		{"RunningTTL below a millisecond", redislog.Config{Client: client, RunningTTL: 5}},
		{"negative Timeout", redislog.Config{Client: client, Timeout: -time.Second}},
		{"negative ReadBatch", redislog.Config{Client: client, ReadBatch: -1}},
		{"brace in Prefix", redislog.Config{Client: client, Prefix: "a{b}"}},
		{"negative MaxFrames", redislog.Config{Client: client, Config: turnlog.Config{MaxFrames: -3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if l, err := redislog.New(context.Background(), tc.cfg); err == nil {
				l.Close()
				t.Fatalf("New(%s): no error", tc.name)
			}
		})
	}
	// Nothing listens on a closed server's port.
	srv.Stop()
	_, err := redislog.New(context.Background(), redislog.Config{Client: client})
	if !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("New with Redis down: %v; want ErrUnavailable", err)
	}
}

// TestRedisStopBeforeWatching: a stop request published while the writer
// was not subscribed (its connection was down, or it subscribes later) is
// found on its turn when the subscription comes up.
func TestRedisStopBeforeWatching(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redislog.Config{Prefix: "stops"}
	a := openRedis(t, newClient(t, srv, false), cfg)
	b := openRedis(t, newClient(t, srv, false), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	if err := a.Start(ctx, turnlog.Meta{Ref: ref}); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	heard := make(chan turnlog.Ref, 1)
	defer a.WatchStops(func(r turnlog.Ref) { heard <- r })()
	select {
	case r := <-heard:
		if r != ref {
			t.Fatalf("heard %v", r)
		}
	case <-ctx.Done():
		t.Fatal("the stop recorded before the subscription was never reported")
	}
}

// TestRedisBatchesConcurrentWrites: the writes of many turns made at once
// (the server's mirrors write on a shared grid) reach Redis in a few
// pipelines, each turn's frames numbered as if written alone; after Redis
// lost its scripts (SCRIPT FLUSH) the batched writes load them again.
func TestRedisBatchesConcurrentWrites(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			var opts []redistest.Option
			if cluster {
				opts = append(opts, redistest.Cluster())
			}
			client := newClient(t, redistest.Start(t, opts...), cluster)
			count := &commandCounter{}
			client.AddHook(count)
			l := openRedis(t, client, redislog.Config{Prefix: "batch-" + session.NewID()})
			ctx := context.Background()
			const turns = 64
			refs := make([]turnlog.Ref, turns)
			for i := range refs {
				refs[i] = turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
				if err := l.Start(ctx, turnlog.Meta{Ref: refs[i]}); err != nil {
					t.Fatal(err)
				}
			}
			appendAll := func(round int64) int64 {
				t.Helper()
				before := count.trips.Load()
				start := make(chan struct{})
				errs := make(chan error, turns)
				for _, ref := range refs {
					go func() {
						<-start
						last, err := l.Append(ctx, ref, frameData(2*round-1), frameData(2*round))
						if err == nil && last != 2*round {
							err = fmt.Errorf("%s: last seq %d, want %d", ref, last, 2*round)
						}
						errs <- err
					}()
				}
				close(start)
				for range refs {
					if err := <-errs; err != nil {
						t.Fatalf("round %d: %v", round, err)
					}
				}
				return count.trips.Load() - before
			}
			var trips int64
			for round := int64(1); round <= 5; round++ {
				trips += appendAll(round)
			}
			if trips >= 5*turns {
				t.Fatalf("%d writes took %d round trips; want them batched", 5*turns, trips)
			}
			t.Logf("%d concurrent writes: %d round trips", 5*turns, trips)

			if err := client.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			appendAll(6)
			for _, ref := range refs {
				if err := l.Finish(ctx, ref); err != nil {
					t.Fatal(err)
				}
				b, err := l.Read(ctx, ref, 0)
				if err != nil || !b.Done {
					t.Fatalf("%s: %+v, %v", ref, b, err)
				}
				checkSeqs(t, ref.String(), b.Frames, 1, 12)
			}
		})
	}
}
