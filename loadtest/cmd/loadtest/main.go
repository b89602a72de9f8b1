// Command loadtest runs the load harness (package loadtest) against the
// agentdock binary and, as the floor, the plain relay of loadtest/cmd/relay
// (built here unless -relay-bin names it), prints the figures as markdown
// tables, and with -json writes them as JSON with the runtime's ratios to
// the relay:
//
//	go run ./loadtest/cmd/loadtest -streams 200,500 -duration 20s -idle 2000 -json load.json
//
// The servers of every store run side by side and their phases alternate
// (direct, relay, memory, redis for each stream count), so that the ratios
// compare figures taken at the same time on the same machine.
//
// With -soak it runs a soak instead: one stream count for a long time per
// store, the server's RSS and goroutines sampled, and a non-zero exit when
// the RSS grew more than 10 %, the goroutines did not come back or a turn
// failed:
//
//	go run ./loadtest/cmd/loadtest -soak 10m -streams 100 -stores memory
//
// Everything runs on loopback: the mock model inside this process, the
// server and redis-server as child processes, all stopped at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentdock-go/agentdock/loadtest"
)

// Bounds that keep a mistyped flag from running for hours or exhausting
// the machine's file descriptors.
const (
	maxStreams  = 5000
	maxDuration = 10 * time.Minute
	maxSoak     = 2 * time.Hour
)

// soakEnv is the retention a soak runs the server with unless -server-env
// says otherwise: what the server keeps by design stops growing after a
// minute, so that a 2-minute warm-up reaches its steady size.
var soakEnv = []string{"STREAM_RETENTION=60s", "SESSION_TTL_SECONDS=60"}

type options struct {
	bin, dir, out, logLevel, perfDir  string
	relayBin, jsonOut, profileDir     string
	harnessProfile                    string
	stores                            []string
	streams, idle                     []int
	duration, ramp, settle, readPause time.Duration
	timing                            loadtest.Timing
	instantStreams, commandTurns      int
	direct, settled                   bool
	serverEnv                         envList
	soak                              loadtest.SoakLoad
	soakCSV                           string
}

// envList is a repeatable KEY=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }
func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.StringVar(&o.bin, "bin", "bin/agentdock", "agentdock binary (make build)")
	fs.StringVar(&o.dir, "dir", "", "working directory for logs, template and Redis files (default: a temporary one, removed)")
	fs.StringVar(&o.out, "o", "", "also write the markdown report to this file")
	fs.StringVar(&o.logLevel, "log-level", "info", "the server's LOG_LEVEL")
	fs.StringVar(&o.perfDir, "perf", "", "record a perf profile of the server during each paced runtime phase into this directory")
	fs.StringVar(&o.relayBin, "relay-bin", "", "the relay's binary (default: built from the loadtest module's cmd/relay into -dir; make bench-quick passes bin/relay)")
	fs.StringVar(&o.jsonOut, "json", "", "write the figures and the runtime's ratios to the relay as JSON to this file")
	fs.StringVar(&o.harnessProfile, "harness-profile", "", "write a CPU profile of the harness itself (the clients and the mock model) over the whole run to this file")
	fs.StringVar(&o.profileDir, "profile", "", "save CPU, heap and goroutine profiles of every server (paced and idle phases), and execution traces of the paced ones (see loadtest/cmd/tracewait), into this directory")
	stores := fs.String("stores", "relay,relay-redis,memory,redis", "what to measure: relay (the plain relay, the floor), relay-redis (the relay with its sessions in Redis, the floor for the Redis store), memory, redis (agentdock serve with that session store); a soak's default is memory,redis")
	streams := fs.String("streams", "200,500", "concurrent streams of the paced phases (comma-separated)")
	idle := fs.String("idle", "2000", "idle open streams to measure memory with (comma-separated; empty: none)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measurement window of each phase")
	fs.DurationVar(&o.ramp, "ramp", 2*time.Second, "stagger of the streams' starts before each window")
	fs.DurationVar(&o.readPause, "read-pause", 0, "paced phases: after a turn's first text, each client reads what came every this long instead of frame by frame (0: frame by frame), so that the harness takes less of the machine it measures on")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "wait before reading RSS in the idle phase")
	fs.DurationVar(&o.timing.TTFT, "ttft", 100*time.Millisecond, "mock: time to first token")
	fs.DurationVar(&o.timing.InterToken, "inter-token", 10*time.Millisecond, "mock: delay between chunks")
	fs.IntVar(&o.timing.Chunks, "chunks", 64, "mock: text chunks per answer")
	fs.IntVar(&o.instantStreams, "instant-streams", 50, "streams of the instant-mock throughput phase (0: skip)")
	fs.IntVar(&o.commandTurns, "command-turns", 100, "turns per kind for counting Redis commands (0: skip)")
	fs.Var(&o.serverEnv, "server-env", "more of the server's environment, KEY=VALUE (repeatable), e.g. STREAM_RETENTION=30s")
	fs.BoolVar(&o.direct, "direct", true, "run the direct-to-mock baseline of each paced phase")
	fs.BoolVar(&o.settled, "settled", false, "after each idle count, open as many streams on another fresh server and read its heap and stacks in use after a collection before them and one with them open: what the streams hold once collected, beside the RSS that also counts garbage not yet collected")
	fs.DurationVar(&o.soak.Duration, "soak", 0, "run a soak of this length per store instead of the phases (one -streams count, default 100; the server gets "+strings.Join(soakEnv, " ")+" unless -server-env sets them)")
	fs.DurationVar(&o.soak.Warmup, "soak-warmup", 2*time.Minute, "soak: time into the load where the RSS baseline window starts (at least the retention)")
	fs.DurationVar(&o.soak.Window, "soak-window", time.Minute, "soak: the baseline and end RSS are the means over windows this long")
	fs.DurationVar(&o.soak.Interval, "soak-interval", 5*time.Second, "soak: time between samples of the server's RSS and goroutines")
	fs.DurationVar(&o.soak.Drain, "soak-drain", 30*time.Second, "soak: the longest wait for the goroutines to come back after the load")
	fs.StringVar(&o.soakCSV, "soak-csv", "", "soak: write every sample to DIR/soak-<store>.csv")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	streamsSet, storesSet := false, false
	fs.Visit(func(f *flag.Flag) {
		streamsSet = streamsSet || f.Name == "streams"
		storesSet = storesSet || f.Name == "stores"
	})
	if o.soak.Duration != 0 && !storesSet {
		*stores = "memory,redis"
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	var err error
	for s := range strings.SplitSeq(*stores, ",") {
		switch s = strings.TrimSpace(s); s {
		case "memory", "redis", loadtest.StoreRelay, loadtest.StoreRelayRedis:
			if slices.Contains(o.stores, s) {
				errs = append(errs, fmt.Errorf("-stores: %q twice", s))
			} else {
				o.stores = append(o.stores, s)
			}
		case "":
		default:
			errs = append(errs, fmt.Errorf("-stores: %q is not relay, relay-redis, memory or redis", s))
		}
	}
	if o.streams, err = intList("-streams", *streams); err != nil {
		errs = append(errs, err)
	}
	if o.idle, err = intList("-idle", *idle); err != nil {
		errs = append(errs, err)
	}
	if o.instantStreams < 0 || o.instantStreams > maxStreams {
		errs = append(errs, fmt.Errorf("-instant-streams %d: want 0 to %d", o.instantStreams, maxStreams))
	}
	if o.commandTurns < 0 || o.commandTurns > 10000 {
		errs = append(errs, fmt.Errorf("-command-turns %d: want 0 to 10000", o.commandTurns))
	}
	if o.duration <= 0 || o.duration > maxDuration {
		errs = append(errs, fmt.Errorf("-duration %v: want > 0 and <= %v", o.duration, maxDuration))
	}
	if o.ramp < 0 || o.ramp > time.Minute {
		errs = append(errs, fmt.Errorf("-ramp %v: want 0 to 1m", o.ramp))
	}
	if o.timing.TTFT > time.Minute || o.timing.InterToken > 10*time.Second || o.timing.Chunks > 100000 {
		errs = append(errs, errors.New("mock timing too slow: -ttft <= 1m, -inter-token <= 10s, -chunks <= 100000"))
	}
	if o.soak.Duration != 0 {
		if !streamsSet {
			o.streams = []int{100}
		}
		if len(o.streams) != 1 {
			errs = append(errs, fmt.Errorf("-soak: want one -streams count, got %d", len(o.streams)))
		} else {
			o.soak.Streams = o.streams[0]
		}
		if o.soak.Duration < 0 || o.soak.Duration > maxSoak {
			errs = append(errs, fmt.Errorf("-soak %v: want > 0 and <= %v", o.soak.Duration, maxSoak))
		} else if o.soak.Warmup < 0 || o.soak.Window <= 0 || o.soak.Interval <= 0 || o.soak.Drain <= 0 {
			errs = append(errs, errors.New("-soak-warmup: want >= 0; -soak-window, -soak-interval, -soak-drain: want > 0"))
		} else if o.soak.Warmup+2*o.soak.Window > o.soak.Duration {
			errs = append(errs, fmt.Errorf("-soak %v: shorter than -soak-warmup %v + 2 x -soak-window %v", o.soak.Duration, o.soak.Warmup, o.soak.Window))
		}
		for _, kv := range soakEnv {
			k, _, _ := strings.Cut(kv, "=")
			if !slices.ContainsFunc(o.serverEnv, func(s string) bool { return strings.HasPrefix(s, k+"=") }) {
				o.serverEnv = append(o.serverEnv, kv)
			}
		}
	}
	return o, errors.Join(errs...)
}

func intList(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxStreams {
			return nil, fmt.Errorf("%s: %q is not a count from 1 to %d", name, f, maxStreams)
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "loadtest:", err)
		return 2
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "agentdock-loadtest-")
		if err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		defer os.RemoveAll(d)
		o.dir = d
	}
	if o.harnessProfile != "" {
		// The harness shares the machine with what it measures: its own
		// cost is part of every figure's queueing, so it is worth seeing.
		f, err := os.Create(o.harnessProfile)
		if err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "loadtest: harness profile:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep := &loadtest.Report{Timing: o.timing}
	do := measure
	if o.soak.Duration > 0 {
		do = soak
	}
	if err := do(ctx, o, rep, stderr); err != nil {
		// The package's errors already say "loadtest:".
		fmt.Fprintln(stderr, err)
		return 1
	}
	var sb strings.Builder
	rep.Markdown(&sb)
	fmt.Fprint(stdout, sb.String())
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(sb.String()), 0o644); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
	}
	if o.jsonOut != "" {
		if err := writeJSON(o.jsonOut, rep.Summary()); err != nil {
			fmt.Fprintln(stderr, "loadtest:", err)
			return 1
		}
	}
	// A load run with failed turns must fail make bench, not only print.
	if n := rep.Errors(); n > 0 {
		fmt.Fprintf(stderr, "loadtest: %d turns failed (see the error lines of the report)\n", n)
		return 1
	}
	if ps := rep.SoakProblems(); len(ps) > 0 {
		fmt.Fprintf(stderr, "loadtest: soak goals missed: %s\n", strings.Join(ps, "; "))
		return 1
	}
	return 0
}

// soak runs the soak on a fresh server per store. When the goroutines did
// not come back it ends the server with SIGQUIT and keeps its goroutine
// dump beside the report (or in the working directory).
func soak(ctx context.Context, o *options, rep *loadtest.Report, log io.Writer) error {
	if slices.ContainsFunc(o.stores, loadtest.IsRelay) && o.relayBin == "" {
		var err error
		if o.relayBin, err = buildRelay(ctx, o.dir); err != nil {
			return err
		}
	}
	for _, store := range o.stores {
		cfg := loadtest.EnvConfig{Bin: o.bin, RelayBin: o.relayBin, Store: store, Dir: filepath.Join(o.dir, store+"-soak"), Timing: o.timing, LogLevel: o.logLevel, ServerEnv: o.serverEnv}
		env, err := loadtest.Start(ctx, cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "%s  %s: soak, %d streams for %v, server pid %d\n", time.Now().Format("15:04:05"), store, o.soak.Streams, o.soak.Duration, env.ServerPID())
		res, err := env.Soak(ctx, o.soak)
		if err == nil && !res.Verdict().GoroutinesOK {
			path := filepath.Join(filepath.Dir(o.out), "soak-"+store+"-goroutines.txt")
			if o.out == "" {
				path = "soak-" + store + "-goroutines.txt"
			}
			if derr := dumpStacks(env, path); derr != nil {
				fmt.Fprintln(log, derr)
			} else {
				fmt.Fprintf(log, "goroutines did not come back: the server's stacks are in %s\n", path)
			}
		}
		env.Close()
		if err != nil {
			return err
		}
		rep.Soak = append(rep.Soak, loadtest.StoreSoak{Store: store, ServerEnv: o.serverEnv, Result: res})
		if o.soakCSV != "" {
			if err := writeCSV(filepath.Join(o.soakCSV, "soak-"+store+".csv"), res); err != nil {
				return err
			}
		}
		v := res.Verdict()
		fmt.Fprintf(log, "%s    RSS %+.1f%% (max %.0f MiB), goroutines %+.0f, %d turns, %d errors\n", time.Now().Format("15:04:05"),
			100*v.Growth, float64(v.MaxRSS)/(1<<20), v.ExtraGoroutines, res.Turns, res.Errors)
	}
	return nil
}

func writeCSV(path string, res *loadtest.SoakResult) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	err = res.WriteCSV(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("loadtest: writing %s: %w", path, err)
	}
	return nil
}

func dumpStacks(env *loadtest.Env, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	err = env.QuitWithStacks(f)
	return errors.Join(err, f.Close())
}

func writeJSON(path string, s loadtest.Summary) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = s.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// buildRelay builds the loadtest module's cmd/relay into dir with the
// flags of make build, so that the relay and agentdock are compiled alike.
func buildRelay(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "bin", "relay")
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "github.com/agentdock-go/agentdock/loadtest/cmd/relay")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("loadtest: building the relay (run inside the loadtest module or a go.work that uses it, or pass -relay-bin): %v\n%s", err, b)
	}
	return out, nil
}

// measure starts a server per store, side by side, and alternates their
// phases: for each stream count the direct baseline, then every store's
// paced phase in -stores order; then every store's instant phase; Redis's
// command counts; and, on fresh servers, every store's idle streams per
// count.
func measure(ctx context.Context, o *options, rep *loadtest.Report, log io.Writer) error {
	step := func(format string, a ...any) {
		fmt.Fprintf(log, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	if slices.ContainsFunc(o.stores, loadtest.IsRelay) && o.relayBin == "" {
		step("building the relay")
		var err error
		if o.relayBin, err = buildRelay(ctx, o.dir); err != nil {
			return err
		}
	}
	cfgs := map[string]loadtest.EnvConfig{}
	for _, store := range o.stores {
		cfgs[store] = loadtest.EnvConfig{Bin: o.bin, RelayBin: o.relayBin, Store: store, Dir: filepath.Join(o.dir, store),
			Timing: o.timing, LogLevel: o.logLevel, ServerEnv: o.serverEnv, ProfileDir: o.profileDir}
	}
	envs := map[string]*loadtest.Env{}
	defer func() {
		for _, env := range envs {
			env.Close()
		}
	}()
	// The runtime first: the relay sends the model request the runtime
	// sent (its fixed part), taken from a warm-up turn.
	var direct *loadtest.Env
	for _, store := range o.stores {
		if loadtest.IsRelay(store) {
			continue
		}
		env, err := startWarm(ctx, cfgs[store], step)
		if err != nil {
			return err
		}
		envs[store] = env
		if direct == nil {
			direct = env
		}
	}
	var relayRequest []byte
	if direct != nil && slices.ContainsFunc(o.stores, loadtest.IsRelay) {
		var err error
		if relayRequest, err = loadtest.RelayRequestFrom(direct.ModelRequest(loadtest.KindStream)); err != nil {
			return err
		}
	}
	for _, store := range o.stores {
		if !loadtest.IsRelay(store) {
			continue
		}
		cfg := cfgs[store]
		cfg.RelayRequest = relayRequest
		cfgs[store] = cfg
		env, err := startWarm(ctx, cfg, step)
		if err != nil {
			return err
		}
		envs[store] = env
		if direct == nil {
			direct = env
		}
	}

	for _, n := range o.streams {
		load := loadtest.Load{Kind: loadtest.KindStream, Streams: n, Ramp: o.ramp, Duration: o.duration, ReadPause: o.readPause}
		base := &loadtest.Result{Load: load}
		if o.direct {
			step("%d streams straight to the mock", n)
			load.Direct = true
			res, err := direct.Run(ctx, load)
			if err != nil {
				return err
			}
			base = res
			load.Direct = false
		}
		for _, store := range o.stores {
			env := envs[store]
			step("%s: %d streams through the server", store, n)
			var perf *exec.Cmd
			if o.perfDir != "" {
				var err error
				if perf, err = startPerf(o.perfDir, store, n, env.ServerPID(), o.ramp+o.duration); err != nil {
					return err
				}
			}
			res, err := env.Run(ctx, load)
			if perf != nil {
				_ = perf.Wait()
			}
			if err != nil {
				return err
			}
			pr := loadtest.Pair{Store: store, Direct: base, Runtime: res}
			rep.Pairs = append(rep.Pairs, pr)
			step("  %.0f turns/s, %d errors, added TTFT p50 %v, server work p99 %v, CPU/turn %v",
				res.TurnsPerSecond(), res.Errors, pr.AddedTTFT(50), pr.ServerWork(99), res.CPUPerTurn())
		}
	}
	if o.instantStreams > 0 {
		for _, store := range o.stores {
			step("%s: %d streams, instant mock", store, o.instantStreams)
			res, err := envs[store].Run(ctx, loadtest.Load{Kind: loadtest.KindInstant, Streams: o.instantStreams, Ramp: o.ramp, Duration: o.duration})
			if err != nil {
				return err
			}
			rep.Instant = append(rep.Instant, loadtest.StoreResult{Store: store, Result: res})
			step("  %.0f turns/s, CPU/turn %v", res.TurnsPerSecond(), res.CPUPerTurn())
		}
	}
	if env := envs["redis"]; env != nil && o.commandTurns > 0 {
		for _, kind := range []loadtest.Kind{loadtest.KindInstant, loadtest.KindTool} {
			step("redis: counting commands over %d %s turns", o.commandTurns, kind)
			streams := min(10, o.commandTurns)
			c, err := env.CountCommands(ctx, kind, streams, o.commandTurns/streams)
			if err != nil {
				return err
			}
			rep.Commands = append(rep.Commands, c)
		}
	}
	for store, env := range envs {
		env.Close()
		delete(envs, store)
	}

	// Memory is measured on a fresh server per count: the heap kept from
	// earlier phases would hide what the streams cost.
	for i, k := range o.idle {
		for _, store := range o.stores {
			// fresh runs measure on a server of its own, in dir.
			fresh := func(dir string, measure func(*loadtest.Env) error) error {
				cfg := cfgs[store]
				cfg.Dir = filepath.Join(o.dir, fmt.Sprintf("%s-%s-%d", store, dir, i))
				env, err := loadtest.Start(ctx, cfg)
				if err != nil {
					return err
				}
				defer env.Close()
				return measure(env)
			}
			step("%s: %d idle streams", store, k)
			err := fresh("idle", func(env *loadtest.Env) error {
				res, err := env.Idle(ctx, k, o.settle)
				if err != nil {
					return err
				}
				rep.Idle = append(rep.Idle, loadtest.StoreIdle{Store: store, IdleResult: res})
				step("  RSS %d -> %d bytes: %d per stream", res.Baseline, res.Loaded, res.PerStream())
				return nil
			})
			if err != nil {
				return err
			}
			if !o.settled {
				continue
			}
			// A server of its own: the collection before the streams
			// would change the RSS measured above.
			step("%s: %d idle streams, once collected", store, k)
			err = fresh("settled", func(env *loadtest.Env) error {
				st, err := env.Settled(ctx, k, o.settle)
				if err != nil {
					return err
				}
				rep.Settled = append(rep.Settled, loadtest.StoreSettled{Store: store, SettledResult: st})
				step("  heap and stacks %.0f bytes per stream", st.PerStream())
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// startWarm starts a server and warms it up: its code paths and
// connections are set up, and the mock samples its model requests.
func startWarm(ctx context.Context, cfg loadtest.EnvConfig, step func(string, ...any)) (*loadtest.Env, error) {
	env, err := loadtest.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	step("%s: server pid %d, warming up", cfg.Store, env.ServerPID())
	if err := env.Warm(ctx, loadtest.KindStream, 3); err == nil {
		err = env.Warm(ctx, loadtest.KindInstant, 50)
	}
	if err != nil {
		env.Close()
		return nil, err
	}
	return env, nil
}

// startPerf records the server's CPU profile with call graphs for d.
func startPerf(dir, store string, streams, pid int, d time.Duration) (*exec.Cmd, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, fmt.Sprintf("perf-%s-%d.data", store, streams))
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", out,
		"--", "sleep", strconv.FormatFloat(d.Seconds(), 'f', 1, 64))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting perf (install linux-perf, or drop -perf): %w", err)
	}
	return cmd, nil
}
