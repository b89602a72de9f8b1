package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// SoakLoad is a long steady load that looks for leaks: N closed-loop
// streams of paced turns for Duration, with the server's RSS and goroutines
// sampled every Interval.
//
// What the server keeps by design must have reached its steady size before
// the RSS baseline is taken: finished turns' frames are kept for
// STREAM_RETENTION and sessions for SESSION_TTL_SECONDS, so Warmup should be
// at least the longer of the two (the command runs the soak with both at
// 60 s and a 2-minute warm-up). Growth is then the mean RSS of the last
// Window of the load against the mean of the Window after Warmup.
type SoakLoad struct {
	Streams  int
	Duration time.Duration
	// Ramp staggers the streams' starts (default 2 s, within Duration).
	Ramp time.Duration
	// Interval is the time between samples (default 5 s).
	Interval time.Duration
	// Warmup is the time into the load where the baseline window starts.
	Warmup time.Duration
	// Window is how long the baseline and the end are averaged over
	// (default 1 min); Warmup + 2 Window must fit in Duration.
	Window time.Duration
	// Drain bounds the wait for the goroutines to come back after the
	// load (default 30 s).
	Drain time.Duration
	// SessionTurns is how many turns a stream runs on one session before
	// it starts a new one (default 10).
	SessionTurns int
	// MaxRSSGrowth is the goal for the RSS growth (default 0.10).
	MaxRSSGrowth float64
	// GoroutineSlack is how many goroutines above the idle baseline still
	// count as returned (default 2: the memory store's and the turn
	// registry's retention timers run their callbacks on goroutines of
	// their own for a moment, and a scrape may meet one).
	GoroutineSlack int
}

func (l *SoakLoad) validate() error {
	if l.Ramp == 0 {
		l.Ramp = 2 * time.Second
	}
	if l.Interval == 0 {
		l.Interval = 5 * time.Second
	}
	if l.Window == 0 {
		l.Window = time.Minute
	}
	if l.Drain == 0 {
		l.Drain = 30 * time.Second
	}
	if l.SessionTurns == 0 {
		l.SessionTurns = 10
	}
	if l.MaxRSSGrowth == 0 {
		l.MaxRSSGrowth = 0.10
	}
	if l.GoroutineSlack == 0 {
		l.GoroutineSlack = 2
	}
	var errs []error
	if l.Streams < 1 {
		errs = append(errs, fmt.Errorf("streams %d: want at least 1", l.Streams))
	}
	if l.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %v: want > 0", l.Duration))
	}
	if l.Ramp < 0 || l.Interval < 0 || l.Warmup < 0 || l.Window < 0 || l.Drain < 0 || l.GoroutineSlack < 0 || l.SessionTurns < 0 {
		errs = append(errs, errors.New("ramp, interval, warmup, window, drain, session turns and goroutine slack: want >= 0"))
	}
	if l.MaxRSSGrowth < 0 {
		errs = append(errs, fmt.Errorf("max RSS growth %v: want > 0", l.MaxRSSGrowth))
	}
	if l.Duration > 0 && l.Warmup+2*l.Window > l.Duration {
		errs = append(errs, fmt.Errorf("warmup %v + 2 x window %v: longer than the duration %v (the baseline and end windows must not overlap)", l.Warmup, l.Window, l.Duration))
	}
	if l.Interval > l.Window {
		errs = append(errs, fmt.Errorf("interval %v: longer than the window %v, which then holds no sample", l.Interval, l.Window))
	}
	return errors.Join(errs...)
}

// SoakSample is one reading of the server during the soak.
type SoakSample struct {
	// At is the time since the load started; Turns the turns completed
	// by then.
	At         time.Duration
	Turns      int64
	RSS        int64
	Goroutines float64
	// HeapInuse and HeapObjects tell a Go heap that grows from memory
	// the runtime keeps but does not use.
	HeapInuse, HeapObjects float64
}

// SoakResult is what a soak measured.
type SoakResult struct {
	Load SoakLoad
	// Samples are taken every Load.Interval from the load's start to its
	// end.
	Samples []SoakSample
	// IdleGoroutines is the server's goroutines before the load (after
	// warm-up turns, with their connections closed); AfterGoroutines the
	// last reading after the load, taken once they were back within the
	// slack or when Drain ran out, DrainTime after the client closed its
	// connections (the wait includes a second for the last model
	// responses to go idle before the mock closes them).
	IdleGoroutines, AfterGoroutines float64
	DrainTime                       time.Duration
	// ModelConns is the server's idle pooled connections to the model
	// after the load, which the mock closed before the goroutines were
	// compared.
	ModelConns int
	// Turns completed, Errors failed (turns sent in the whole load), Busy
	// session_busy refusals retried.
	Turns, Errors, Busy int
	ErrorSamples        []string
	// Elapsed is the load's length (until the last stream stopped); CPU
	// the server's CPU time in it.
	Elapsed, CPU time.Duration
	// LoadAverage is /proc/loadavg's 1-minute figure at the load's end
	// (the machine's other load shows in it).
	LoadAverage string
}

// SoakVerdict is a soak's figures against its goals.
type SoakVerdict struct {
	// BaselineRSS is the mean RSS of the samples in [Warmup,
	// Warmup+Window); EndRSS that of the last Window of the load.
	BaselineRSS, EndRSS, MaxRSS int64
	// Growth is (EndRSS - BaselineRSS) / BaselineRSS.
	Growth float64
	// BaselineTPS and EndTPS are the turns per second in the two windows:
	// the finished turns kept for STREAM_RETENTION are proportional to
	// them, so a machine busier in one window than the other moves the
	// RSS without any leak.
	BaselineTPS, EndTPS float64
	// ExtraGoroutines is AfterGoroutines - IdleGoroutines.
	ExtraGoroutines               float64
	RSSOK, GoroutinesOK, ErrorsOK bool
	// Problems say what failed, in words.
	Problems []string
}

// OK reports whether every goal was met.
func (v SoakVerdict) OK() bool { return v.RSSOK && v.GoroutinesOK && v.ErrorsOK }

// TurnsPerSecond is the completed turns per second of the load.
func (r *SoakResult) TurnsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Turns) / r.Elapsed.Seconds()
}

// meanRSS is the mean RSS of the samples with from <= At < to.
func meanRSS(ss []SoakSample, from, to time.Duration) (int64, int) {
	var sum float64
	n := 0
	for _, s := range ss {
		if s.At >= from && s.At < to {
			sum += float64(s.RSS)
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return int64(math.Round(sum / float64(n))), n
}

// windowTPS is the turns per second between the first and the last sample
// with from <= At < to.
func windowTPS(ss []SoakSample, from, to time.Duration) float64 {
	first, last := -1, -1
	for i, s := range ss {
		if s.At >= from && s.At < to {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || ss[last].At <= ss[first].At {
		return 0
	}
	return float64(ss[last].Turns-ss[first].Turns) / (ss[last].At - ss[first].At).Seconds()
}

// Verdict compares the result with the load's goals.
func (r *SoakResult) Verdict() SoakVerdict {
	l := r.Load
	var v SoakVerdict
	for _, s := range r.Samples {
		v.MaxRSS = max(v.MaxRSS, s.RSS)
	}
	var nb, ne int
	v.BaselineRSS, nb = meanRSS(r.Samples, l.Warmup, l.Warmup+l.Window)
	// The end window includes the last sample, taken as the streams
	// stopped (their last turns end after Duration).
	v.EndRSS, ne = meanRSS(r.Samples, l.Duration-l.Window, math.MaxInt64)
	v.BaselineTPS = windowTPS(r.Samples, l.Warmup, l.Warmup+l.Window)
	v.EndTPS = windowTPS(r.Samples, l.Duration-l.Window, math.MaxInt64)
	switch {
	case nb == 0 || ne == 0 || v.BaselineRSS <= 0:
		v.Problems = append(v.Problems, fmt.Sprintf("RSS: %d samples in the baseline window and %d in the end window; want at least one each", nb, ne))
	default:
		v.Growth = float64(v.EndRSS-v.BaselineRSS) / float64(v.BaselineRSS)
		v.RSSOK = v.Growth <= l.MaxRSSGrowth
		if !v.RSSOK {
			v.Problems = append(v.Problems, fmt.Sprintf("RSS grew %.1f%% (%s -> %s MiB), goal <= %.0f%%",
				100*v.Growth, mib(v.BaselineRSS), mib(v.EndRSS), 100*l.MaxRSSGrowth))
		}
	}
	v.ExtraGoroutines = r.AfterGoroutines - r.IdleGoroutines
	v.GoroutinesOK = r.IdleGoroutines > 0 && v.ExtraGoroutines <= float64(l.GoroutineSlack)
	if !v.GoroutinesOK {
		v.Problems = append(v.Problems, fmt.Sprintf("goroutines %.0f after the load (%v after the streams closed), %.0f before: %+.0f, slack %d",
			r.AfterGoroutines, r.DrainTime.Round(time.Millisecond), r.IdleGoroutines, v.ExtraGoroutines, l.GoroutineSlack))
	}
	v.ErrorsOK = r.Errors == 0 && r.Turns > 0
	if !v.ErrorsOK {
		v.Problems = append(v.Problems, fmt.Sprintf("%d turns failed, %d completed", r.Errors, r.Turns))
	}
	return v
}

// soakMetricsSettle is the wait between the warm-up and the idle
// goroutine reading: the server's connection goroutines end after the
// client closed them.
const soakMetricsSettle = time.Second

// Soak runs a soak on this environment: warm-up turns, the idle goroutine
// baseline, the load with its samples, then the wait for the goroutines to
// come back. Run it on a fresh Env.
func (e *Env) Soak(ctx context.Context, l SoakLoad) (*SoakResult, error) {
	if err := l.validate(); err != nil {
		return nil, fmt.Errorf("loadtest: soak: %w", err)
	}
	if !e.server.alive() {
		return nil, fmt.Errorf("loadtest: the server exited: %s", e.server.logTail())
	}
	res := &SoakResult{Load: l}
	if err := e.Warm(ctx, KindStream, 3); err != nil {
		return nil, err
	}
	// The warm-up's model connection would count in the baseline but not
	// after the load, when the mock closes the pooled connections.
	e.mock.CloseIdleConns()
	time.Sleep(soakMetricsSettle)
	m, err := runtimeMetrics(ctx, e.base)
	if err != nil {
		return nil, fmt.Errorf("loadtest: soak: %w", err)
	}
	res.IdleGoroutines = m["go_goroutines"]

	pid := e.server.pid()
	cpu0, err := cpuTime(pid)
	if err != nil {
		return nil, fmt.Errorf("loadtest: soak: %w", err)
	}
	run := e.runSeq.Add(1)
	hc := newClient(l.Streams)
	start := time.Now()
	end := start.Add(l.Duration)
	load := Load{Kind: KindStream, Streams: l.Streams, Duration: l.Duration, SessionTurns: l.SessionTurns}

	var turns, errs, busy atomic.Int64
	// The sampler reads until the streams are done; a failed reading ends
	// the soak (the server is gone, or /metrics broke).
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampleErr error
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sampleErr = e.sampleSoak(sampleCtx, start, l.Interval, &turns, res)
	}()

	var errMu sync.Mutex
	var wg sync.WaitGroup
	for w := range l.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !waitStart(ctx, l.Ramp, w, l.Streams) {
				return
			}
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				id := fmt.Sprintf("s%d.%d.%d", run, w, i)
				sid := fmt.Sprintf("lt-soak-%d-%d-s%d", run, w, i/l.SessionTurns)
				s := e.turn(ctx, hc, load, nil, id, sid, start, end)
				busy.Add(int64(s.busy))
				if s.failed {
					errs.Add(1)
					errMu.Lock()
					if len(res.ErrorSamples) < 5 {
						res.ErrorSamples = append(res.ErrorSamples, s.err)
					}
					errMu.Unlock()
					continue
				}
				turns.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	cpu1, cpuErr := cpuTime(pid)
	res.CPU = cpu1 - cpu0
	res.LoadAverage = loadAverage()
	stopSampling()
	<-sampled
	// The end sample: the streams have just stopped, their connections
	// are still open.
	if s, err := e.sampleOnce(ctx, start, &turns); err != nil {
		sampleErr = errors.Join(sampleErr, err)
	} else {
		res.Samples = append(res.Samples, s)
	}
	hc.CloseIdleConnections()
	closed := time.Now()
	// Wait for the turns' last model responses to go idle, then close the
	// server's pooled model connections (each holds two goroutines in its
	// transport for IdleConnTimeout, 90 s): bounded by the pool, not a leak,
	// but counted apart so the comparison sees what the turns left.
	time.Sleep(soakMetricsSettle)
	res.ModelConns = e.mock.CloseIdleConns()
	res.Turns, res.Errors, res.Busy = int(turns.Load()), int(errs.Load()), int(busy.Load())
	if err := errors.Join(sampleErr, cpuErr); err != nil {
		return res, fmt.Errorf("loadtest: soak: %w", err)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("loadtest: soak: %w", ctx.Err())
	}

	// The goroutines: each closed connection's and finished turn's end
	// soon; wait for them up to Drain.
	for {
		m, err := runtimeMetrics(ctx, e.base)
		if err != nil {
			return res, fmt.Errorf("loadtest: soak: after the load: %w", err)
		}
		res.AfterGoroutines, res.DrainTime = m["go_goroutines"], time.Since(closed)
		if res.AfterGoroutines <= res.IdleGoroutines+float64(l.GoroutineSlack) || res.DrainTime >= l.Drain {
			return res, nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return res, fmt.Errorf("loadtest: soak: %w", ctx.Err())
		}
	}
}

// sampleSoak appends a sample to res.Samples every interval until ctx is
// done; nothing else touches them meanwhile.
func (e *Env) sampleSoak(ctx context.Context, start time.Time, interval time.Duration, turns *atomic.Int64, res *SoakResult) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s, err := e.sampleOnce(ctx, start, turns)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		res.Samples = append(res.Samples, s)
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		}
	}
}

func (e *Env) sampleOnce(ctx context.Context, start time.Time, turns *atomic.Int64) (SoakSample, error) {
	at, done := time.Since(start), turns.Load()
	r, err := rss(e.server.pid())
	if err != nil {
		return SoakSample{}, err
	}
	m, err := runtimeMetrics(ctx, e.base)
	if err != nil {
		return SoakSample{}, err
	}
	return SoakSample{At: at, Turns: done, RSS: r, Goroutines: m["go_goroutines"],
		HeapInuse: m["go_memstats_heap_inuse_bytes"], HeapObjects: m["go_memstats_heap_objects"]}, nil
}

// WriteCSV writes the samples as CSV (seconds since the load's start,
// turns completed, RSS bytes, heap in use bytes, heap objects, goroutines), for plotting
// or fitting a trend.
func (r *SoakResult) WriteCSV(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("at_s,turns,rss_bytes,heap_inuse_bytes,heap_objects,goroutines\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "%.3f,%d,%d,%.0f,%.0f,%.0f\n", s.At.Seconds(), s.Turns, s.RSS, s.HeapInuse, s.HeapObjects, s.Goroutines)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// loadAverage is the first field of /proc/loadavg ("" when unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return ""
	}
	return string(f[0])
}

// QuitWithStacks ends the server with SIGQUIT, on which the Go runtime
// writes every goroutine's stack to its stderr (the server's log), and
// copies that dump to w. It is for a soak whose goroutines did not come
// back; the Env is of no further use but Close.
func (e *Env) QuitWithStacks(w io.Writer) error {
	if !e.server.alive() {
		return errors.New("loadtest: the server has already exited")
	}
	if err := e.server.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Errorf("loadtest: SIGQUIT: %w", err)
	}
	select {
	case <-e.server.exited:
	case <-time.After(30 * time.Second):
		return errors.New("loadtest: the server did not exit within 30s of SIGQUIT")
	}
	b, err := os.ReadFile(e.server.log)
	if err != nil {
		return fmt.Errorf("loadtest: reading the server's log: %w", err)
	}
	i := bytes.Index(b, []byte("SIGQUIT: quit"))
	if i < 0 {
		return errors.New("loadtest: no goroutine dump in the server's log")
	}
	_, err = w.Write(b[i:])
	return err
}
