package loadtest

import (
	"encoding/json"
	"io"
	"math"
	"time"
)

// Summary is a run's figures in JSON (the harness's -json file, BENCH_JSON
// of make bench-quick and bench-load): the relay's, the runtime's per
// session store, and the runtime's as ratios to the relay's, all measured in
// the same run. A figure that was not measured is null.
type Summary struct {
	Relay   *Figures            `json:"relay"`
	Runtime map[string]*Figures `json:"runtime"`
	// Ratios are per session store, as in Runtime.
	Ratios map[string]Ratios `json:"ratios"`

	// RelayRedis is the relay with its sessions in Redis (StoreRelayRedis),
	// when it was measured. RelayRedisRatios compares it with the relay
	// ("relay-redis": what its Redis round trips cost) and the runtime
	// with the Redis store with it ("redis").
	RelayRedis       *Figures          `json:"relay_redis,omitempty"`
	RelayRedisRatios map[string]Ratios `json:"relay_redis_ratios,omitempty"`
}

// Ratios compare the runtime with one store to the relay. The paced figures
// are those of the run's first stream count (Figures.Streams), the memory
// those of its first idle count (Figures.IdleStreams).
type Ratios struct {
	// CPUPerTurn is the runtime's CPU per paced turn, redis-server's
	// included, over the relay's.
	CPUPerTurn *float64 `json:"cpu_per_turn"`
	// MemoryPerStream is the runtime's RSS per open stream over the
	// relay's.
	MemoryPerStream *float64 `json:"memory_per_stream"`
	// SettledPerStream is the runtime's heap and stacks per open stream
	// once collected over the relay's (Figures.SettledPerStreamKiB).
	SettledPerStream *float64 `json:"settled_per_stream,omitempty"`
	// AddedTTFTP50MS is the runtime's time to first token minus the relay's,
	// at the median, in milliseconds. Both are taken net of the mock's own
	// wait before its first chunk (Figures.LatencyP50MS): the scripted wait
	// is the same for both, and removing it per turn also removes its
	// timer's lateness, which is noise.
	AddedTTFTP50MS *float64 `json:"added_ttft_p50_ms"`
}

// Figures are one server's measurements in a run.
type Figures struct {
	// Streams is the paced phase the figures below come from (the run's
	// first stream count); Paced lists every count.
	Streams        int     `json:"streams"`
	Turns          int     `json:"turns"`
	Errors         int     `json:"errors"`
	TurnsPerSecond float64 `json:"turns_per_second"`
	// CPUPerTurnMS is the server's CPU per completed turn plus, with Redis,
	// redis-server's (ServerCPUPerTurnMS + RedisCPUPerTurnMS).
	CPUPerTurnMS       float64 `json:"cpu_per_turn_ms"`
	ServerCPUPerTurnMS float64 `json:"server_cpu_per_turn_ms"`
	RedisCPUPerTurnMS  float64 `json:"redis_cpu_per_turn_ms"`
	// TTFT is the client's time to first token (request sent to first text
	// delta read).
	TTFTP50MS float64 `json:"ttft_p50_ms"`
	TTFTP99MS float64 `json:"ttft_p99_ms"`
	// Latency is TTFT minus the mock's own wait (its receive of the model
	// request to its first chunk): the hops and the server's work.
	LatencyP50MS float64 `json:"ttft_minus_model_wait_p50_ms"`
	LatencyP99MS float64 `json:"ttft_minus_model_wait_p99_ms"`

	// IdleStreams is the open-stream count the memory figures come from.
	IdleStreams         int      `json:"idle_streams"`
	MemoryPerStreamKiB  *float64 `json:"memory_per_stream_kib"`
	GoroutinesPerStream *float64 `json:"goroutines_per_stream"`
	HeapPerStreamKiB    *float64 `json:"heap_per_stream_kib"`
	StackPerStreamKiB   *float64 `json:"stack_per_stream_kib"`
	// SettledPerStreamKiB is the heap and stacks in use per open stream
	// after a collection (Env.Settled, run with -settled), for as many
	// streams as IdleStreams.
	SettledPerStreamKiB *float64 `json:"settled_per_stream_kib,omitempty"`

	// Instant is the throughput phase (the mock answers at once).
	InstantStreams        int      `json:"instant_streams"`
	InstantTurnsPerSecond *float64 `json:"instant_turns_per_second"`
	InstantCPUPerTurnMS   *float64 `json:"instant_cpu_per_turn_ms"`

	Paced []PacedFigures `json:"paced"`

	// RedisPerTurn is, with Redis, what each kind of turn costs it,
	// counted over exact turns (Env.CountCommands), by turn kind
	// ("instant": a text turn; "tool": one tool call, then a paced
	// answer).
	RedisPerTurn map[string]RedisTurn `json:"redis_per_turn"`
}

// RedisTurn is Redis's work per turn of one kind.
type RedisTurn struct {
	Turns int `json:"turns"`
	// Concurrent is how many of the turns ran at once.
	Concurrent int `json:"concurrent"`
	// Commands is the commands the server sent, an EVALSHA counting once.
	Commands float64 `json:"commands"`
	// RoundTrips is the round trips Redis served: a pipeline counts once,
	// and concurrent turns share the shared log's pipelines.
	RoundTrips float64 `json:"round_trips"`
}

// PacedFigures are one paced phase's main figures.
type PacedFigures struct {
	Streams        int     `json:"streams"`
	Errors         int     `json:"errors"`
	TurnsPerSecond float64 `json:"turns_per_second"`
	CPUPerTurnMS   float64 `json:"cpu_per_turn_ms"`
	TTFTP50MS      float64 `json:"ttft_p50_ms"`
	LatencyP50MS   float64 `json:"ttft_minus_model_wait_p50_ms"`
}

// round keeps 4 significant decimals: the figures' precision is far lower,
// and the JSON stays readable.
func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func msf(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

func ptr(x float64) *float64 { x = round(x); return &x }

// cpuPerTurn is the server's CPU per turn plus redis-server's.
func cpuPerTurn(r *Result) (total, server, redis time.Duration) {
	if r.Turns == 0 {
		return 0, 0, 0
	}
	server = r.CPU / time.Duration(r.Turns)
	redis = r.RedisCPU / time.Duration(r.Turns)
	return server + redis, server, redis
}

// Summary computes the run's Summary.
func (r *Report) Summary() Summary {
	s := Summary{Runtime: map[string]*Figures{}, Ratios: map[string]Ratios{}}
	figs := map[string]*Figures{}
	fig := func(store string) *Figures {
		f := figs[store]
		if f == nil {
			f = &Figures{Paced: []PacedFigures{}}
			figs[store] = f
		}
		return f
	}
	first := 0
	for _, pr := range r.Pairs {
		rt := pr.Runtime
		n := rt.Load.Streams
		if first == 0 {
			first = n
		}
		total, server, redis := cpuPerTurn(rt)
		f := fig(pr.Store)
		f.Paced = append(f.Paced, PacedFigures{Streams: n, Errors: rt.Errors, TurnsPerSecond: round(rt.TurnsPerSecond()),
			CPUPerTurnMS: msf(total), TTFTP50MS: msf(percentile(rt.TTFT, 50)), LatencyP50MS: msf(percentile(rt.Lat, 50))})
		if n != first || f.Streams != 0 {
			continue
		}
		f.Streams, f.Turns, f.Errors, f.TurnsPerSecond = n, rt.Turns, rt.Errors, round(rt.TurnsPerSecond())
		f.CPUPerTurnMS, f.ServerCPUPerTurnMS, f.RedisCPUPerTurnMS = msf(total), msf(server), msf(redis)
		f.TTFTP50MS, f.TTFTP99MS = msf(percentile(rt.TTFT, 50)), msf(percentile(rt.TTFT, 99))
		f.LatencyP50MS, f.LatencyP99MS = msf(percentile(rt.Lat, 50)), msf(percentile(rt.Lat, 99))
	}
	firstIdle := 0
	for _, id := range r.Idle {
		if firstIdle == 0 {
			firstIdle = id.Streams
		}
		f := fig(id.Store)
		if id.Streams != firstIdle || f.IdleStreams != 0 {
			continue
		}
		f.IdleStreams = id.Streams
		f.MemoryPerStreamKiB = ptr(float64(id.PerStream()) / 1024)
		f.GoroutinesPerStream = ptr(id.PerStreamMetric("go_goroutines"))
		f.HeapPerStreamKiB = ptr(id.PerStreamMetric("go_memstats_heap_inuse_bytes") / 1024)
		f.StackPerStreamKiB = ptr(id.PerStreamMetric("go_memstats_stack_inuse_bytes") / 1024)
	}
	for _, st := range r.Settled {
		f := fig(st.Store)
		if st.Streams != f.IdleStreams || f.SettledPerStreamKiB != nil {
			continue
		}
		f.SettledPerStreamKiB = ptr(st.PerStream() / 1024)
	}
	for _, sr := range r.Instant {
		f := fig(sr.Store)
		if f.InstantStreams != 0 {
			continue
		}
		total, _, _ := cpuPerTurn(sr.Result)
		f.InstantStreams = sr.Result.Load.Streams
		f.InstantTurnsPerSecond = ptr(sr.Result.TurnsPerSecond())
		f.InstantCPUPerTurnMS = ptr(msf(total))
	}
	if len(r.Commands) > 0 {
		f := fig("redis")
		f.RedisPerTurn = map[string]RedisTurn{}
		for _, c := range r.Commands {
			if c.Turns > 0 {
				f.RedisPerTurn[string(c.Kind)] = RedisTurn{Turns: c.Turns, Concurrent: c.Streams, Commands: round(c.PerTurn()), RoundTrips: round(c.RoundTripsPerTurn())}
			}
		}
	}
	for store, f := range figs {
		s.setFigures(store, f)
	}
	for store, f := range s.Runtime {
		s.Ratios[store] = ratios(s.Relay, f)
	}
	if s.RelayRedis != nil {
		s.RelayRedisRatios = map[string]Ratios{StoreRelayRedis: ratios(s.Relay, s.RelayRedis)}
		if f := s.Runtime["redis"]; f != nil {
			s.RelayRedisRatios["redis"] = ratios(s.RelayRedis, f)
		}
	}
	return s
}

// ratios compares rt with the relay; a ratio whose two figures were not
// both measured (or whose relay figure is zero) is nil.
func ratios(relay, rt *Figures) Ratios {
	var out Ratios
	if relay == nil {
		return out
	}
	if relay.Streams != 0 && relay.Streams == rt.Streams {
		if relay.CPUPerTurnMS > 0 && rt.Turns > 0 {
			out.CPUPerTurn = ptr(rt.CPUPerTurnMS / relay.CPUPerTurnMS)
		}
		if relay.Turns > 0 && rt.Turns > 0 {
			out.AddedTTFTP50MS = ptr(rt.LatencyP50MS - relay.LatencyP50MS)
		}
	}
	if relay.IdleStreams == rt.IdleStreams {
		out.MemoryPerStream = ratio(rt.MemoryPerStreamKiB, relay.MemoryPerStreamKiB)
		out.SettledPerStream = ratio(rt.SettledPerStreamKiB, relay.SettledPerStreamKiB)
	}
	return out
}

// ratio is x over floor, nil when either was not measured or floor is 0.
func ratio(x, floor *float64) *float64 {
	if x == nil || floor == nil || *floor <= 0 {
		return nil
	}
	return ptr(*x / *floor)
}

// WriteJSON writes s indented.
func (s Summary) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
