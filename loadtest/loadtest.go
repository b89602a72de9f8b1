// Package loadtest is the load harness of the runtime: it starts a mock
// model, a redis-server when asked, and `agentdock serve` as a separate
// process pointed at the mock, then drives concurrent AI SDK chat streams
// through the server and, paired, the same model requests straight to the
// mock, and reports what the runtime adds.
//
// # What is measured, and how
//
// The mock model runs inside the harness, so the client and the mock share
// one monotonic clock: for every turn the harness knows when the client
// finished writing its request (httptrace), when the mock received the
// model request of that turn (matched through a marker in the user message,
// which the runtime forwards to the model), when the mock wrote its first
// content chunk, and when the client read the first text delta. From these:
//
//   - server work before the model call = mock receive - client send,
//     minus the median of the same interval for direct requests (one
//     loopback hop and the mock's request parsing, which the runtime path
//     also contains once);
//   - added time to first token = (TTFT - the mock's own wait) through the
//     runtime minus the same for direct requests, per percentile: the mock's
//     scripted 100 ms (and its timer's lateness on a busy machine) cancel
//     out, what remains is the hops, the server's work before the model
//     call and its relaying of the first chunk.
//
// The server's CPU comes from /proc/<pid>/stat (utime+stime) at the start
// and end of the measurement window, its memory from /proc/<pid>/status
// (VmRSS), Redis's command counts from INFO commandstats. The server is a
// separate process, so the harness's own client and mock work is not in its
// CPU figures (it does share the machine's cores with it).
//
// # The floor
//
// With Store set to StoreRelay the environment runs cmd/relay instead of
// agentdock serve: a plain net/http SSE relay that takes the same POST,
// sends the same model request (without history) to the same mock, parses
// its chunks and writes each as a flushed SSE frame of the same protocol,
// and stores nothing. It is measured with the same streams and figures, so
// that Report.Summary can state the runtime's cost as ratios to it, measured
// in the same run and on the same machine (see cmd/relay for what it does
// and skips). StoreRelayRedis runs the same relay keeping its sessions in
// Redis, the plain way: the floor for the Redis store.
//
// A soak (Env.Soak) runs one paced load for minutes and samples the
// server's RSS and goroutines: RSS growth is measured from a baseline taken
// after what the server keeps by design (finished turns for
// STREAM_RETENTION, sessions for their TTL) has filled, and the goroutines
// after the load against an idle reading before it.
//
// Everything listens on loopback; every phase is bounded by its duration
// and its stream count.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// StoreRelay is the Store that runs the plain relay (cmd/relay) instead of
// agentdock serve.
const StoreRelay = "relay"

// StoreRelayRedis is the Store that runs the plain relay with its sessions
// in Redis (RELAY_REDIS_URL: one round trip before the model request, one
// after the answer): the floor of a server that keeps its sessions in
// Redis, which shows what a round trip on the first token's way costs on
// the machine the run is on.
const StoreRelayRedis = "relay-redis"

// IsRelay reports whether store runs the relay (StoreRelay or
// StoreRelayRedis) rather than agentdock serve.
func IsRelay(store string) bool { return store == StoreRelay || store == StoreRelayRedis }

// EnvConfig configures Start.
type EnvConfig struct {
	// Bin is the agentdock binary (required unless Store is StoreRelay).
	Bin string
	// Store is "memory" or "redis" for agentdock serve with that session
	// store, or StoreRelay or StoreRelayRedis.
	Store string
	// RelayBin is cmd/relay's binary (required for the relay stores).
	RelayBin string
	// RelayRequest is the fixed part of the relay's model request
	// (RELAY_REQUEST; see RelayRequestFrom); nil: the relay's default.
	RelayRequest []byte
	// ProfileDir, when set, receives the server's CPU profile over each
	// measured window of Run and an execution trace of its first
	// seconds (read with loadtest/cmd/tracewait), its heap and goroutine
	// profiles at the window's end, and the same two with Idle's streams
	// open.
	ProfileDir string
	// RedisBin is redis-server's path (default: from PATH).
	RedisBin string
	// Dir holds the logs, the template and Redis's files (required).
	Dir string
	// Timing is the mock's pace for KindStream and KindTool; KindInstant
	// uses its chunk count.
	Timing Timing
	// LogLevel is the server's LOG_LEVEL (default info, as deployed).
	LogLevel string
	// ServerEnv is more of the server's environment, KEY=VALUE (e.g.
	// STREAM_RETENTION=30s, GOGC=200).
	ServerEnv []string
}

func (c *EnvConfig) validate() error {
	var errs []error
	switch c.Store {
	case "memory", "redis":
		if c.Bin == "" {
			errs = append(errs, errors.New("Bin: the agentdock binary is required"))
		} else if _, err := os.Stat(c.Bin); err != nil {
			errs = append(errs, fmt.Errorf("Bin: %w (run make build)", err))
		}
	case StoreRelay, StoreRelayRedis:
		if c.RelayBin == "" {
			errs = append(errs, errors.New("RelayBin: the relay binary is required (go build ./cmd/relay in the loadtest module)"))
		} else if _, err := os.Stat(c.RelayBin); err != nil {
			errs = append(errs, fmt.Errorf("RelayBin: %w", err))
		}
	default:
		errs = append(errs, fmt.Errorf("Store %q: want memory, redis, %s or %s", c.Store, StoreRelay, StoreRelayRedis))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	if err := c.Timing.validate(); err != nil {
		errs = append(errs, err)
	}
	for _, kv := range c.ServerEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("ServerEnv %q: want KEY=VALUE", kv))
		}
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	return errors.Join(errs...)
}

// Env is a running mock, server and (for the Redis store) redis-server.
type Env struct {
	cfg    EnvConfig
	mock   *mockFront
	server *proc
	base   string
	// pprof is the server's net/http/pprof base URL: profiles are read
	// from it with ProfileDir, and Settled runs collections through it.
	pprof  string
	redis  *proc
	rc     *redis.Client
	runSeq atomic.Int64
}

// Start starts the environment. Close stops it.
func Start(ctx context.Context, cfg EnvConfig) (*Env, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	e := &Env{cfg: cfg}
	var err error
	if e.mock, err = startMock(cfg.Timing); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			e.Close()
			return nil, fmt.Errorf("loadtest: %w", err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	e.pprof = "http://" + addr
	extra := []string{"PPROF_ADDR=" + addr}
	if cfg.Store == "redis" || cfg.Store == StoreRelayRedis {
		if e.redis, e.rc, err = startRedis(ctx, cfg.RedisBin, cfg.Dir); err != nil {
			e.Close()
			return nil, fmt.Errorf("loadtest: %w", err)
		}
	}
	if IsRelay(cfg.Store) {
		extra = append(extra, "LLM_BASE_URL="+e.mock.URL()+"/v1", "OPENAI_API_KEY=loadtest")
		if e.rc != nil {
			extra = append(extra, "RELAY_REDIS_URL=redis://"+e.rc.Options().Addr+"/0")
		}
		if cfg.RelayRequest != nil {
			path := filepath.Join(cfg.Dir, "relay-request.json")
			if err := os.WriteFile(path, cfg.RelayRequest, 0o644); err != nil {
				e.Close()
				return nil, fmt.Errorf("loadtest: %w", err)
			}
			extra = append(extra, "RELAY_REQUEST="+path)
		}
		e.server, e.base, err = startServer(ctx, "relay", cfg.RelayBin, nil, cfg.Dir, append(append(extra, "HOME="+cfg.Dir), cfg.ServerEnv...))
	} else {
		store := "memory://"
		if e.rc != nil {
			store = "redis://" + e.rc.Options().Addr + "/0"
		}
		var env []string
		if env, err = agentdockEnv(cfg.Dir, store, e.mock.URL(), cfg.LogLevel); err == nil {
			e.server, e.base, err = startServer(ctx, "agentdock serve", cfg.Bin, []string{"serve"}, cfg.Dir, append(append(env, extra...), cfg.ServerEnv...))
		}
	}
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	return e, nil
}

// Store is the environment's store (StoreRelay for the relay).
func (e *Env) Store() string { return e.cfg.Store }

// ServerPID is the server process's ID (for profiling it).
func (e *Env) ServerPID() int { return e.server.pid() }

// ModelRequest is a model request the server sent for kind (nil before the
// first): Warm makes one.
func (e *Env) ModelRequest(kind Kind) []byte { return e.mock.sample(kind) }

// Close stops the server, Redis and the mock.
func (e *Env) Close() {
	if e.mock != nil {
		e.mock.ReleaseIdle()
	}
	if e.server != nil {
		e.server.stop(15 * time.Second)
	}
	if e.rc != nil {
		e.rc.Close()
	}
	if e.redis != nil {
		e.redis.stop(10 * time.Second)
	}
	if e.mock != nil {
		e.mock.Close()
	}
}

// Load is one measured phase.
type Load struct {
	Kind Kind
	// Streams is the number of concurrent streams, each a closed loop of
	// turns.
	Streams int
	// Ramp staggers the streams' starts; turns sent during it are not
	// measured. Duration is the measurement window after it.
	Ramp, Duration time.Duration
	// Direct sends the runtime's model request for Kind straight to the
	// mock instead of running turns through the server.
	Direct bool
	// SessionTurns is how many turns a stream runs on one session before
	// it starts a new one (default 10).
	SessionTurns int
	// ReadPause, when set, makes a client read a turn's stream after its
	// first text every ReadPause instead of frame by frame: what came in
	// the meantime is read at once. The harness shares the machine with
	// the server it measures, and a read per frame was over a quarter of
	// its own CPU. The server is unaffected (its writes go to the
	// socket's buffer, which holds a whole answer), and the time to first
	// token is still read as it comes. A turn's end is then read up to
	// ReadPause late. At 200 streams, 50 ms takes the harness from about
	// 0.6 to 0.5 cores and leaves the ratios to the relay within their
	// spread.
	ReadPause time.Duration
}

func (l *Load) validate() error {
	var errs []error
	if l.Streams < 1 {
		errs = append(errs, fmt.Errorf("streams %d: want at least 1", l.Streams))
	}
	if l.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %v: want > 0", l.Duration))
	}
	if l.Ramp < 0 {
		errs = append(errs, fmt.Errorf("ramp %v: want >= 0", l.Ramp))
	}
	if l.Kind != KindStream && l.Kind != KindInstant && l.Kind != KindTool {
		errs = append(errs, fmt.Errorf("kind %q: want stream, instant or tool", l.Kind))
	}
	if l.SessionTurns == 0 {
		l.SessionTurns = 10
	}
	if l.ReadPause < 0 {
		errs = append(errs, fmt.Errorf("read pause %v: want >= 0", l.ReadPause))
	}
	return errors.Join(errs...)
}

// Result is one phase's measurements. Durations are sorted.
type Result struct {
	Load Load
	// Turns completed inside the window; Errors among turns sent in it;
	// Busy the session_busy refusals retried (see busyRetries).
	Turns, Errors, Busy int
	ErrorSamples        []string
	// TTFT is the client's time to first token (send to first delta).
	TTFT []time.Duration
	// Pre is client send to mock receive; Lat is TTFT minus the mock's
	// own wait (receive to first chunk).
	Pre, Lat []time.Duration
	// Window is the measured time; CPU the server's CPU in it; RSS the
	// server's resident memory at its end.
	Window time.Duration
	CPU    time.Duration
	RSS    int64
	// HarnessCPU is this process's CPU in the window (client and mock):
	// the two share the machine with the server.
	HarnessCPU time.Duration
	// RedisCPU is redis-server's CPU in the window (Redis store).
	RedisCPU time.Duration
	// Commands is the Redis command calls in the window (Redis store).
	Commands map[string]int64
	// RedisReads is Redis's read events in the window (readEvents): the
	// round trips it served, the harness's own two INFO calls included.
	RedisReads int64
}

// TurnsPerSecond is the completed turns per second of the window.
func (r *Result) TurnsPerSecond() float64 { return float64(r.Turns) / r.Window.Seconds() }

// CPUPerTurn is the server's CPU time per completed turn.
func (r *Result) CPUPerTurn() time.Duration {
	if r.Turns == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Turns)
}

type sample struct {
	sent, end      time.Time
	ttft, pre, lat time.Duration
	failed         bool
	busy           int
	err            string
}

// Run runs one phase.
func (e *Env) Run(ctx context.Context, l Load) (*Result, error) {
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("loadtest: load: %w", err)
	}
	if !e.server.alive() {
		return nil, fmt.Errorf("loadtest: the server exited: %s", e.server.logTail())
	}
	run := e.runSeq.Add(1)
	var body []byte
	if l.Direct {
		if e.mock.sample(l.Kind) == nil {
			if err := e.Warm(ctx, l.Kind, 1); err != nil {
				return nil, err
			}
		}
		body = e.mock.sample(l.Kind)
	}
	hc := newClient(l.Streams)
	defer hc.CloseIdleConnections()

	start := time.Now()
	winStart := start.Add(l.Ramp)
	winEnd := winStart.Add(l.Duration)
	res := &Result{Load: l, Window: l.Duration}
	var probeErr error
	probes := make(chan struct{})
	go func() {
		defer close(probes)
		probeErr = e.probeWindow(ctx, winStart, winEnd, res, profileName(l))
	}()

	per := make([][]sample, l.Streams)
	var wg sync.WaitGroup
	for w := range l.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !waitStart(ctx, l.Ramp, w, l.Streams) {
				return
			}
			for i := 0; time.Now().Before(winEnd) && ctx.Err() == nil; i++ {
				id := fmt.Sprintf("r%d.%d.%d", run, w, i)
				sid := fmt.Sprintf("lt-%d-%d-s%d", run, w, i/l.SessionTurns)
				per[w] = append(per[w], e.turn(ctx, hc, l, body, id, sid, winStart, winEnd))
			}
		}()
	}
	wg.Wait()
	<-probes
	if probeErr != nil {
		return nil, probeErr
	}
	for _, ss := range per {
		for _, s := range ss {
			if !s.sent.IsZero() && (s.sent.Before(winStart) || !s.sent.Before(winEnd)) {
				// Sent outside the window: only its completion counts.
				if !s.failed && !s.end.Before(winStart) && s.end.Before(winEnd) {
					res.Turns++
				}
				continue
			}
			res.Busy += s.busy
			if s.failed {
				res.Errors++
				if len(res.ErrorSamples) < 5 {
					res.ErrorSamples = append(res.ErrorSamples, s.err)
				}
				continue
			}
			if s.end.Before(winEnd) {
				res.Turns++
			}
			res.TTFT = append(res.TTFT, s.ttft)
			res.Pre = append(res.Pre, s.pre)
			res.Lat = append(res.Lat, s.lat)
		}
	}
	slices.Sort(res.TTFT)
	slices.Sort(res.Pre)
	slices.Sort(res.Lat)
	return res, nil
}

// profileName names the profiles of a phase ("" for none: direct phases
// do not go through the server).
func profileName(l Load) string {
	if l.Direct {
		return ""
	}
	return fmt.Sprintf("%s-%d", l.Kind, l.Streams)
}

// probeWindow reads the server's CPU and Redis's counters at the window's
// start and end, and with ProfileDir profiles the server (named by prof)
// over the window.
func (e *Env) probeWindow(ctx context.Context, from, to time.Time, res *Result, prof string) error {
	sleepUntil := func(t time.Time) bool {
		select {
		case <-time.After(time.Until(t)):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !sleepUntil(from) {
		return ctx.Err()
	}
	pid := e.server.pid()
	cpu0, err := cpuTime(pid)
	if err != nil {
		return err
	}
	self0, err := cpuTime(os.Getpid())
	if err != nil {
		return err
	}
	var redis0 time.Duration
	if e.redis != nil {
		if redis0, err = cpuTime(e.redis.pid()); err != nil {
			return err
		}
	}
	var cmd0 map[string]int64
	var reads0 int64
	if e.rc != nil {
		if cmd0, err = commandStats(ctx, e.rc); err != nil {
			return err
		}
		if reads0, err = readEvents(ctx, e.rc); err != nil {
			return err
		}
	}
	var cpuProf, traced <-chan error
	if e.cfg.ProfileDir != "" && prof != "" {
		cpuProf = e.cpuProfile(ctx, prof, to.Sub(from))
		traced = e.execTrace(ctx, prof)
	}
	if !sleepUntil(to) {
		return ctx.Err()
	}
	cpu1, err := cpuTime(pid)
	if err != nil {
		return err
	}
	self1, err := cpuTime(os.Getpid())
	if err != nil {
		return err
	}
	res.CPU, res.HarnessCPU = cpu1-cpu0, self1-self0
	if e.redis != nil {
		redis1, err := cpuTime(e.redis.pid())
		if err != nil {
			return err
		}
		res.RedisCPU = redis1 - redis0
	}
	if res.RSS, err = rss(pid); err != nil {
		return err
	}
	if e.rc != nil {
		cmd1, err := commandStats(ctx, e.rc)
		if err != nil {
			return err
		}
		res.Commands = commandDelta(cmd0, cmd1)
		reads1, err := readEvents(ctx, e.rc)
		if err != nil {
			return err
		}
		res.RedisReads = reads1 - reads0
	}
	if cpuProf != nil {
		// The heap and goroutines while the turns are still in flight.
		if err := e.snapshotProfiles(ctx, prof, false); err != nil {
			return err
		}
		if err := <-cpuProf; err != nil {
			return err
		}
		if err := <-traced; err != nil {
			return err
		}
	}
	return nil
}

// turnTimeout bounds one turn, so that a stuck stream cannot hold a phase.
const turnTimeout = 60 * time.Second

func (e *Env) turn(ctx context.Context, hc *http.Client, l Load, body []byte, id, sid string, from, to time.Time) sample {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	var tt turnTimes
	var err error
	began := time.Now()
	if l.Direct {
		var b []byte
		if b, err = remark(body, l.Kind, id); err == nil {
			tt, err = directTurn(ctx, hc, e.mock.URL(), b, l.ReadPause)
		}
	} else {
		tt, err = runtimeTurn(ctx, hc, e.base, sid, "Answer the load test. "+marker(l.Kind, id), l.ReadPause, nil)
	}
	a, seen := e.mock.take(id)
	s := sample{sent: tt.sent, end: tt.end, busy: tt.busy}
	if s.sent.IsZero() {
		s.sent = began
	}
	if err == nil {
		switch {
		case !seen:
			err = errNoArrival
		case tt.deltas != e.cfg.Timing.Chunks:
			err = fmt.Errorf("got %d text deltas, want %d", tt.deltas, e.cfg.Timing.Chunks)
		case l.Kind == KindTool && !l.Direct && tt.tools != 1:
			err = fmt.Errorf("got %d tool calls, want 1", tt.tools)
		case a.first.IsZero():
			err = errors.New("the mock noted no first chunk")
		}
	}
	if err != nil {
		s.failed, s.err = true, err.Error()
		return s
	}
	s.ttft = tt.first.Sub(tt.sent)
	s.pre = a.recv.Sub(tt.sent)
	s.lat = s.ttft - a.first.Sub(a.recv)
	return s
}

// Warm runs n turns of kind one after another (untimed): the server's
// code paths and connections are set up, and the mock samples the model
// request that direct phases replay.
func (e *Env) Warm(ctx context.Context, kind Kind, n int) error {
	hc := newClient(1)
	defer hc.CloseIdleConnections()
	run := e.runSeq.Add(1)
	for i := range n {
		id := fmt.Sprintf("w%d.%d", run, i)
		ctx, cancel := context.WithTimeout(ctx, turnTimeout)
		_, err := runtimeTurn(ctx, hc, e.base, fmt.Sprintf("lt-warm-%d", run), "Answer the load test. "+marker(kind, id), 0, nil)
		cancel()
		e.mock.take(id)
		if err != nil {
			return fmt.Errorf("loadtest: warm-up turn: %w", err)
		}
	}
	return nil
}

// IdleResult is the server's memory with streams held open.
type IdleResult struct {
	Streams int
	// Baseline and Loaded are the server's RSS before the streams and
	// with all of them open.
	Baseline, Loaded int64
	// Before and After are the server's Go runtime gauges (goroutines,
	// heap and stack in use) at the same two moments.
	Before, After map[string]float64
}

// PerStreamMetric is the growth of a runtime gauge per open stream.
func (r IdleResult) PerStreamMetric(name string) float64 {
	return (r.After[name] - r.Before[name]) / float64(r.Streams)
}

// PerStream is the RSS added per open stream.
func (r IdleResult) PerStream() int64 { return (r.Loaded - r.Baseline) / int64(r.Streams) }

// Idle opens k streams whose turns wait for the model's first token, and
// measures the server's RSS with all of them open against the RSS before.
// Run it on a fresh Env: memory the heap kept from earlier phases would
// hide the streams' cost.
func (e *Env) Idle(ctx context.Context, k int, settle time.Duration) (IdleResult, error) {
	res := IdleResult{Streams: k}
	err := e.warmIdle(ctx, k, settle)
	if err != nil {
		return res, err
	}
	if res.Baseline, err = rss(e.server.pid()); err != nil {
		return res, err
	}
	if res.Before, err = runtimeMetrics(ctx, e.base); err != nil {
		return res, err
	}
	if e.cfg.ProfileDir != "" {
		// The profiles before the streams, to read the streams' own heap
		// with go tool pprof -base (after the RSS baseline: the profile's
		// collection would lower it).
		if err := e.snapshotProfiles(ctx, fmt.Sprintf("idle-%d-before", k), true); err != nil {
			return res, err
		}
	}
	err = e.holdIdle(ctx, k, func() error {
		time.Sleep(settle)
		var err error
		if res.Loaded, err = rss(e.server.pid()); err != nil {
			return err
		}
		if res.After, err = runtimeMetrics(ctx, e.base); err != nil {
			return err
		}
		if e.cfg.ProfileDir != "" {
			return e.snapshotProfiles(ctx, fmt.Sprintf("idle-%d", k), true)
		}
		return nil
	})
	return res, err
}

// SettledResult is what open streams hold once collected: the server's
// runtime gauges after a collection, before the streams and with them
// open.
type SettledResult struct {
	Streams       int
	Before, After map[string]float64
}

// PerStream is the heap and stacks in use added per open stream, in bytes.
func (r SettledResult) PerStream() float64 {
	return r.PerStreamMetric("go_memstats_heap_inuse_bytes") + r.PerStreamMetric("go_memstats_stack_inuse_bytes")
}

// PerStreamMetric is the growth of a runtime gauge per open stream.
func (r SettledResult) PerStreamMetric(name string) float64 {
	return (r.After[name] - r.Before[name]) / float64(r.Streams)
}

// Settled opens k streams as Idle does, and reads the server's heap and
// stacks in use after a collection before them and after one with them
// open: what the streams hold, without the garbage not yet collected and
// the stacks of goroutines already ended, which RSS counts. Run it on a
// fresh Env of its own: the collection before the streams lets them reuse
// the warm-up's freed memory, which would change Idle's RSS.
func (e *Env) Settled(ctx context.Context, k int, settle time.Duration) (SettledResult, error) {
	res := SettledResult{Streams: k}
	err := e.warmIdle(ctx, k, settle)
	if err != nil {
		return res, err
	}
	if res.Before, err = e.collected(ctx); err != nil {
		return res, err
	}
	err = e.holdIdle(ctx, k, func() error {
		time.Sleep(settle)
		var err error
		res.After, err = e.collected(ctx)
		return err
	})
	return res, err
}

// warmIdle runs warm-up turns before k idle streams open, and lets the
// server settle.
func (e *Env) warmIdle(ctx context.Context, k int, settle time.Duration) error {
	if k < 1 {
		return fmt.Errorf("loadtest: idle streams %d: want at least 1", k)
	}
	if err := e.Warm(ctx, KindInstant, 20); err != nil {
		return err
	}
	time.Sleep(settle)
	return nil
}

// holdIdle opens k streams whose turns wait for the model's first token,
// calls measure once all are open, and then lets them end.
func (e *Env) holdIdle(ctx context.Context, k int, measure func() error) error {
	e.mock.ResetIdle()
	hc := newClient(k)
	defer hc.CloseIdleConnections()
	run := e.runSeq.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var opened atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, k)
	// Opening thousands of connections at once overflows the listen
	// backlog; a few hundred at a time is what a load balancer would send.
	gate := make(chan struct{}, 200)
	ids := make([]string, k)
	for i := range k {
		ids[i] = "i" + strconv.FormatInt(run, 10) + "." + strconv.Itoa(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			gate <- struct{}{}
			released := false
			_, err := runtimeTurn(ctx, hc, e.base, fmt.Sprintf("lt-idle-%d-%d", run, i), "Wait. "+marker(KindIdle, ids[i]), 0, func() {
				opened.Add(1)
				<-gate
				released = true
			})
			if !released {
				<-gate
				errs <- err
			}
		}()
	}
	// The turns end with an error frame when the mock lets go: expected.
	// abort also ends the clients' reads, for streams that failed to open.
	release := func(abort bool) {
		e.mock.ReleaseIdle()
		if abort {
			cancel()
		}
		wg.Wait()
		for _, id := range ids {
			e.mock.take(id)
		}
	}
	// Open means the client has the stream's first frame and the turn is
	// waiting in the model call.
	deadline := time.Now().Add(2 * time.Minute)
	for opened.Load() < int64(k) || e.mock.pending() < k {
		select {
		case err := <-errs:
			release(true)
			return fmt.Errorf("loadtest: opening idle stream: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n, pending := opened.Load(), e.mock.pending()
			release(true)
			return fmt.Errorf("loadtest: %d of %d idle streams open after 2 minutes (%d at the mock)", n, k, pending)
		}
	}
	err := measure()
	release(false)
	return err
}

// CommandCount is Redis's commands over an exact number of turns.
type CommandCount struct {
	Kind         Kind
	Turns, Tools int
	Busy         int
	// Streams is how many turns ran at once.
	Streams int
	// Commands are the commands the server sent (EVALSHA counted once);
	// Script those its Lua scripts ran inside them.
	Commands, Script map[string]int64
	// ReadEvents is Redis's read events over the turns (readEvents): the
	// round trips it served, a pipeline counting once. Turns that run at
	// once share the shared log's pipelines, so this is at most the
	// command count.
	ReadEvents int64
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// PerTurn is the commands the server sent per turn.
func (c CommandCount) PerTurn() float64 { return float64(sum(c.Commands)) / float64(c.Turns) }

// ScriptPerTurn is the commands run inside scripts per turn.
func (c CommandCount) ScriptPerTurn() float64 { return float64(sum(c.Script)) / float64(c.Turns) }

// RoundTripsPerTurn is Redis's read events per turn.
func (c CommandCount) RoundTripsPerTurn() float64 { return float64(c.ReadEvents) / float64(c.Turns) }

// CountCommands runs streams x turns turns of kind (each stream on its own
// session, a new one per run) with nothing else running, and counts the
// commands Redis ran through MONITOR, and the round trips it served. A
// round of one turn per stream comes
// first, uncounted, so that the server's connections to Redis are open:
// dialing one (HELLO) is not a turn's work, and an earlier phase's
// cancelled turns close some.
func (e *Env) CountCommands(ctx context.Context, kind Kind, streams, turns int) (CommandCount, error) {
	out := CommandCount{Kind: kind, Streams: streams}
	if e.rc == nil {
		return out, errors.New("loadtest: counting Redis commands needs the redis store")
	}
	var warm sync.WaitGroup
	warmErrs := make(chan error, streams)
	for range streams {
		warm.Go(func() { warmErrs <- e.Warm(ctx, kind, 1) })
	}
	warm.Wait()
	close(warmErrs)
	for err := range warmErrs {
		if err != nil {
			return out, err
		}
	}
	mon, err := startMonitor(ctx, e.rc.Options().Addr)
	if err != nil {
		return out, fmt.Errorf("loadtest: %w", err)
	}
	defer mon.close()
	// Leases are released after the stream ends: let earlier turns finish.
	time.Sleep(300 * time.Millisecond)
	if err := mon.sync(ctx, e.rc, 1); err != nil {
		return out, fmt.Errorf("loadtest: %w", err)
	}
	mon.take()
	reads0, err := readEvents(ctx, e.rc)
	if err != nil {
		return out, fmt.Errorf("loadtest: %w", err)
	}
	hc := newClient(streams)
	defer hc.CloseIdleConnections()
	run := e.runSeq.Add(1)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for w := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range turns {
				id := fmt.Sprintf("c%d.%d.%d", run, w, i)
				tctx, cancel := context.WithTimeout(ctx, turnTimeout)
				tt, err := runtimeTurn(tctx, hc, e.base, fmt.Sprintf("lt-cmd-%d-%d", run, w), "Answer the load test. "+marker(kind, id), 0, nil)
				cancel()
				e.mock.take(id)
				// The previous turn's lease is released after its
				// [DONE]: a busy refusal would add commands of its own.
				time.Sleep(20 * time.Millisecond)
				mu.Lock()
				out.Busy += tt.busy
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out.Turns++
				out.Tools += tt.tools
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return out, fmt.Errorf("loadtest: counting commands: %w", firstErr)
	}
	time.Sleep(300 * time.Millisecond)
	reads1, err := readEvents(ctx, e.rc)
	if err != nil {
		return out, fmt.Errorf("loadtest: %w", err)
	}
	// The second INFO is the harness's own read.
	out.ReadEvents = reads1 - reads0 - 1
	if err := mon.sync(ctx, e.rc, 2); err != nil {
		return out, fmt.Errorf("loadtest: %w", err)
	}
	out.Commands, out.Script = mon.take()
	return out, nil
}

// waitStart waits for stream w of n to start: the streams' starts are
// spread evenly over ramp, so that they do not all open at once. It reports
// false when ctx ended first.
func waitStart(ctx context.Context, ramp time.Duration, w, n int) bool {
	t := time.NewTimer(time.Duration(int64(ramp) * int64(w) / int64(n)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
