package loadtest

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// percentile is the nearest-rank percentile of sorted durations (0 when
// there are none).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// Pair is a runtime phase with its direct baseline (same kind, streams and
// window).
type Pair struct {
	Store           string
	Direct, Runtime *Result
}

// AddedTTFT is the runtime's added time to first token at percentile p.
func (p Pair) AddedTTFT(q float64) time.Duration {
	return percentile(p.Runtime.Lat, q) - percentile(p.Direct.Lat, q)
}

// ServerWork is the server's work before the model call at percentile q:
// the runtime's send-to-mock interval minus the direct path's median one.
func (p Pair) ServerWork(q float64) time.Duration {
	return percentile(p.Runtime.Pre, q) - percentile(p.Direct.Pre, 50)
}

// Report is what a harness run measured.
type Report struct {
	Timing   Timing
	Pairs    []Pair
	Instant  []StoreResult
	Idle     []StoreIdle
	Settled  []StoreSettled
	Commands []CommandCount
	Soak     []StoreSoak
}

// StoreSoak is a soak with its store's name and the server environment it
// ran with (the retention settings decide its baseline).
type StoreSoak struct {
	Store     string
	ServerEnv []string
	Result    *SoakResult
}

// StoreResult is a phase with its store's name.
type StoreResult struct {
	Store  string
	Result *Result
}

// StoreIdle is an idle measurement with its store's name.
type StoreIdle struct {
	Store string
	IdleResult
}

// StoreSettled is a settled measurement (Env.Settled) with its store's name.
type StoreSettled struct {
	Store string
	SettledResult
}

// Errors is the failed turns of every phase.
func (r *Report) Errors() int {
	n := 0
	for _, p := range r.Pairs {
		n += p.Runtime.Errors + p.Direct.Errors
	}
	for _, sr := range r.Instant {
		n += sr.Result.Errors
	}
	for _, ss := range r.Soak {
		n += ss.Result.Errors
	}
	return n
}

// SoakProblems lists the soak goals missed, per store (none: all met).
func (r *Report) SoakProblems() []string {
	var out []string
	for _, ss := range r.Soak {
		for _, p := range ss.Result.Verdict().Problems {
			out = append(out, ss.Store+": "+p)
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// Markdown writes the report as markdown tables.
func (r *Report) Markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	if len(r.Pairs) > 0 {
		p("Paced turns (mock: first token after %v, then %d chunks %v apart); direct = the runtime's model request sent straight to the mock; relay = the plain Go relay of loadtest/cmd/relay (the floor), memory and redis = agentdock serve with that session store.\n\n",
			r.Timing.TTFT, r.Timing.Chunks, r.Timing.InterToken)
		if d := r.Pairs[0].Runtime.Load.ReadPause; d > 0 {
			p("The clients read each stream after its first text every %v, not frame by frame (-read-pause).\n\n", d)
		}
		p("| store | streams | turns/s | errors (busy retries) | TTFT p50 / p99 direct (ms) | TTFT p50 / p99 through the server (ms) | **added TTFT p50 / p99 (ms)** | **server work before model call p50 / p99 (ms)** | server CPU per turn (ms) | redis-server CPU per turn (ms) | CPU used: server / harness / redis (cores) | server RSS (MiB) |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, pr := range r.Pairs {
			d, rt := pr.Direct, pr.Runtime
			p("| %s | %d | %.0f | %d (%d) | %s / %s | %s / %s | %s / %s | %s / %s | %.3f | %s | %s | %s |\n",
				pr.Store, rt.Load.Streams, rt.TurnsPerSecond(), rt.Errors+d.Errors, rt.Busy,
				ms(percentile(d.TTFT, 50)), ms(percentile(d.TTFT, 99)),
				ms(percentile(rt.TTFT, 50)), ms(percentile(rt.TTFT, 99)),
				ms(pr.AddedTTFT(50)), ms(pr.AddedTTFT(99)),
				ms(pr.ServerWork(50)), ms(pr.ServerWork(99)),
				float64(rt.CPUPerTurn())/float64(time.Millisecond), redisPerTurn(rt), cores(rt), mib(rt.RSS))
		}
		p("\n")
		if slices.ContainsFunc(r.Pairs, func(pr Pair) bool { return pr.Runtime.Commands != nil }) {
			p("Redis per paced turn in the window (commands run, from INFO commandstats: EVALSHA and every command its scripts ran; read events from INFO stats total_reads_processed: the network round trips Redis served, a pipeline of commands counting once):\n\n")
			p("| store | streams | commands run per turn | read events (round trips) per turn | by command |\n|---|---|---|---|---|\n")
			for _, pr := range r.Pairs {
				if rt := pr.Runtime; rt.Commands != nil && rt.Turns > 0 {
					p("| %s | %d | %.2f | %.2f | %s |\n", pr.Store, rt.Load.Streams, float64(sum(rt.Commands))/float64(rt.Turns), float64(rt.RedisReads)/float64(rt.Turns), perTurn(rt.Commands, rt.Turns))
				}
			}
			p("\n")
		}
		p("| store | streams | send to mock p50 / p99, direct (ms) | send to mock p50 / p99, through the server (ms) | latency without the mock's wait p50 / p99, direct (ms) | same, through the server (ms) | samples direct / server |\n")
		p("|---|---|---|---|---|---|---|\n")
		for _, pr := range r.Pairs {
			d, rt := pr.Direct, pr.Runtime
			p("| %s | %d | %s / %s | %s / %s | %s / %s | %s / %s | %d / %d |\n", pr.Store, rt.Load.Streams,
				ms(percentile(d.Pre, 50)), ms(percentile(d.Pre, 99)), ms(percentile(rt.Pre, 50)), ms(percentile(rt.Pre, 99)),
				ms(percentile(d.Lat, 50)), ms(percentile(d.Lat, 99)), ms(percentile(rt.Lat, 50)), ms(percentile(rt.Lat, 99)),
				len(d.Lat), len(rt.Lat))
		}
		p("\n")
	}
	summary := r.Summary()
	if summary.Relay != nil && len(summary.Ratios) > 0 {
		p("Against the relay, measured in this run (paced phase of %d streams, %d idle streams; CPU with Redis includes redis-server's; added TTFT = TTFT net of the mock's own wait, runtime minus relay, at the median):\n\n",
			summary.Relay.Streams, summary.Relay.IdleStreams)
		p("| store | CPU per paced turn: runtime / relay (ms) | **ratio** | RSS per open stream: runtime / relay (KiB) | **ratio** | TTFT net of the model's wait p50: runtime / relay (ms) | **added TTFT p50 (ms)** |\n|---|---|---|---|---|---|---|\n")
		for _, store := range slices.Sorted(maps.Keys(summary.Ratios)) {
			rt, ra := summary.Runtime[store], summary.Ratios[store]
			p("| %s | %.3f / %.3f | %s | %s / %s | %s | %.2f / %.2f | %s |\n", store, rt.CPUPerTurnMS, summary.Relay.CPUPerTurnMS, opt(ra.CPUPerTurn, "%.2fx"),
				opt(rt.MemoryPerStreamKiB, "%.1f"), opt(summary.Relay.MemoryPerStreamKiB, "%.1f"), opt(ra.MemoryPerStream, "%.2fx"),
				rt.LatencyP50MS, summary.Relay.LatencyP50MS, opt(ra.AddedTTFTP50MS, "%.2f"))
		}
		p("\n")
	}
	if summary.RelayRedis != nil {
		p("The relay with its sessions in Redis (relay-redis: one round trip before the model request, one after the answer; redis-server's CPU counted), against the relay and the runtime with the Redis store against it, measured in this run:\n\n")
		p("| server / floor | CPU per paced turn (ms) | **ratio** | TTFT net of the model's wait p50 (ms) | **added TTFT p50 (ms)** |\n|---|---|---|---|---|\n")
		row := func(name string, hi, lo *Figures, ra Ratios) {
			if hi == nil || lo == nil {
				return
			}
			p("| %s | %.3f / %.3f | %s | %.2f / %.2f | %s |\n", name, hi.CPUPerTurnMS, lo.CPUPerTurnMS, opt(ra.CPUPerTurn, "%.2fx"),
				hi.LatencyP50MS, lo.LatencyP50MS, opt(ra.AddedTTFTP50MS, "%.2f"))
		}
		row("relay-redis / relay", summary.RelayRedis, summary.Relay, summary.RelayRedisRatios[StoreRelayRedis])
		row("redis / relay-redis", summary.Runtime["redis"], summary.RelayRedis, summary.RelayRedisRatios["redis"])
		p("\n")
	}
	if len(r.Instant) > 0 {
		p("Instant turns (mock answers %d chunks at once): the server's throughput and CPU when the model is not the bottleneck.\n\n", r.Timing.Chunks)
		p("| store | streams | turns/s | errors (busy retries) | server CPU per turn (ms) | redis-server CPU per turn (ms) | CPU used: server / harness / redis (cores) | server RSS (MiB) |\n|---|---|---|---|---|---|---|---|\n")
		for _, sr := range r.Instant {
			res := sr.Result
			p("| %s | %d | %.0f | %d (%d) | %.3f | %s | %s | %s |\n", sr.Store, res.Load.Streams, res.TurnsPerSecond(), res.Errors, res.Busy,
				float64(res.CPUPerTurn())/float64(time.Millisecond), redisPerTurn(res), cores(res), mib(res.RSS))
		}
		p("\n")
	}
	if len(r.Commands) > 0 {
		p("Redis commands per turn (MONITOR over exact turn counts, nothing else running): sent by the server (EVALSHA once; (TURN LOG) marks those on the shared turn log's keys, the rest are the session store's), the round trips Redis served (INFO stats total_reads_processed: a pipeline counts once, and turns running at once share the shared log's pipelines) and the commands run inside its Lua scripts.\n\n")
		p("| turn | turns (at once) | tool calls | busy retries | commands sent per turn | by command | **round trips per turn** | commands inside scripts per turn | by command |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range r.Commands {
			p("| %s | %d (%d) | %d | %d | %.2f | %s | %.2f | %.2f | %s |\n", c.Kind, c.Turns, c.Streams, c.Tools, c.Busy,
				c.PerTurn(), perTurn(c.Commands, c.Turns), c.RoundTripsPerTurn(), c.ScriptPerTurn(), perTurn(c.Script, c.Turns))
		}
		p("\n")
	}
	if len(r.Idle) > 0 {
		p("Idle open streams (each turn waits in its model call; RSS of the server process):\n\n")
		p("| store | open streams | RSS before (MiB) | RSS with the streams (MiB) | **RSS per stream (KiB)** | goroutines per stream | heap in use per stream (KiB) | stacks per stream (KiB) |\n|---|---|---|---|---|---|---|---|\n")
		for _, id := range r.Idle {
			p("| %s | %d | %s | %s | %.1f | %.1f | %.1f | %.1f |\n", id.Store, id.Streams, mib(id.Baseline), mib(id.Loaded), float64(id.PerStream())/1024,
				id.PerStreamMetric("go_goroutines"), id.PerStreamMetric("go_memstats_heap_inuse_bytes")/1024, id.PerStreamMetric("go_memstats_stack_inuse_bytes")/1024)
		}
		p("\n")
	}
	if len(r.Settled) > 0 {
		p("What idle open streams hold once collected (a fresh server of its own; the heap and stacks in use after a collection before the streams and after one with them open):\n\n")
		p("| store | open streams | **heap and stacks per stream (KiB)** | heap in use per stream (KiB) | stacks per stream (KiB) | goroutines per stream |\n|---|---|---|---|---|---|\n")
		for _, st := range r.Settled {
			p("| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", st.Store, st.Streams, st.PerStream()/1024,
				st.PerStreamMetric("go_memstats_heap_inuse_bytes")/1024, st.PerStreamMetric("go_memstats_stack_inuse_bytes")/1024, st.PerStreamMetric("go_goroutines"))
		}
		p("\n")
	}
	for _, ss := range r.Soak {
		writeSoak(w, r.Timing, ss)
	}
	for _, pr := range r.Pairs {
		for _, res := range []*Result{pr.Direct, pr.Runtime} {
			for _, e := range res.ErrorSamples {
				p("- error (%s, %d streams, direct=%v): %s\n", pr.Store, res.Load.Streams, res.Load.Direct, e)
			}
		}
	}
	for _, sr := range r.Instant {
		for _, e := range sr.Result.ErrorSamples {
			p("- error (%s instant, %d streams): %s\n", sr.Store, sr.Result.Load.Streams, e)
		}
	}
}

// opt formats a figure that may not have been measured.
func opt(x *float64, format string) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf(format, *x)
}

func perTurn(m map[string]int64, turns int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(k), float64(m[k])/float64(turns)))
	}
	return strings.Join(parts, ", ")
}

func cores(r *Result) string {
	w := r.Window.Seconds()
	return fmt.Sprintf("%.2f / %.2f / %.2f", r.CPU.Seconds()/w, r.HarnessCPU.Seconds()/w, r.RedisCPU.Seconds()/w)
}

func redisPerTurn(r *Result) string {
	if r.Load.Streams == 0 || r.Turns == 0 || r.Commands == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(r.RedisCPU)/float64(r.Turns)/float64(time.Millisecond))
}

func verdictWord(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

// writeSoak writes a soak's goals table and its RSS timeline.
func writeSoak(w io.Writer, t Timing, ss StoreSoak) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	r := ss.Result
	l := r.Load
	v := r.Verdict()
	env := "default retention"
	if len(ss.ServerEnv) > 0 {
		env = strings.Join(ss.ServerEnv, " ")
	}
	p("Soak, %s store: %d streams of paced turns (first token after %v, %d chunks %v apart) for %v; server with %s; "+
		"RSS baseline = mean of [%v, %v), end = mean of the last %v; samples every %v. Load average (1 min) at the end: %s.\n\n",
		ss.Store, l.Streams, t.TTFT, t.Chunks, t.InterToken, l.Duration, env,
		l.Warmup, l.Warmup+l.Window, l.Window, l.Interval, r.LoadAverage)
	p("| goal | measured | verdict |\n|---|---|---|\n")
	p("| RSS grows <= %.0f%% | %s -> %s MiB: %+.1f%% (max %s MiB); turns/s in the two windows %.0f -> %.0f | %s |\n", 100*l.MaxRSSGrowth,
		mib(v.BaselineRSS), mib(v.EndRSS), 100*v.Growth, mib(v.MaxRSS), v.BaselineTPS, v.EndTPS, verdictWord(v.RSSOK))
	p("| goroutines back to baseline (slack %d) | %.0f idle before, %.0f after (read %v after the client closed its connections; the mock closed the server's %d idle model connections 1 s after it); peak %.0f | %s |\n",
		l.GoroutineSlack, r.IdleGoroutines, r.AfterGoroutines, r.DrainTime.Round(time.Millisecond), r.ModelConns, peakGoroutines(r.Samples), verdictWord(v.GoroutinesOK))
	p("| 0 errors | %d errors, %d turns (%.0f turns/s), %d busy retries; server CPU %.2f cores, %.2f ms per turn | %s |\n\n",
		r.Errors, r.Turns, r.TurnsPerSecond(), r.Busy, r.CPU.Seconds()/max(r.Elapsed.Seconds(), 1e-9),
		float64(r.CPU)/float64(max(r.Turns, 1))/float64(time.Millisecond), verdictWord(v.ErrorsOK))
	p("| time | turns | RSS (MiB) | heap in use (MiB) | heap objects | goroutines |\n|---|---|---|---|---|---|\n")
	for _, s := range timeline(r.Samples, 10) {
		p("| %v | %d | %s | %.1f | %.0f | %.0f |\n", s.At.Round(time.Second), s.Turns, mib(s.RSS), s.HeapInuse/(1<<20), s.HeapObjects, s.Goroutines)
	}
	p("\n")
	for _, e := range r.ErrorSamples {
		p("- error (%s soak): %s\n", ss.Store, e)
	}
}

func peakGoroutines(ss []SoakSample) float64 {
	var m float64
	for _, s := range ss {
		m = max(m, s.Goroutines)
	}
	return m
}

// timeline picks about n+1 samples evenly spread over the soak, the first
// and the last included.
func timeline(ss []SoakSample, n int) []SoakSample {
	if len(ss) <= n+1 {
		return ss
	}
	out := make([]SoakSample, 0, n+1)
	for i := range n {
		out = append(out, ss[i*(len(ss)-1)/n])
	}
	return append(out, ss[len(ss)-1])
}
