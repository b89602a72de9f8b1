package loadtest

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// paced is a paced phase's result: turns over a 10 s window, the server's
// CPU, redis-server's, and every turn's TTFT and latency net of the mock's
// wait.
func paced(streams, turns int, cpu, redisCPU time.Duration, ttft, lat time.Duration) *Result {
	r := &Result{Load: Load{Kind: KindStream, Streams: streams}, Turns: turns, Window: 10 * time.Second, CPU: cpu, RedisCPU: redisCPU}
	for range turns {
		r.TTFT = append(r.TTFT, ttft)
		r.Lat = append(r.Lat, lat)
	}
	return r
}

func idle(store string, streams int, perStream int64, goroutines float64) StoreIdle {
	return StoreIdle{Store: store, IdleResult: IdleResult{Streams: streams, Baseline: 10 << 20, Loaded: 10<<20 + perStream*int64(streams),
		Before: map[string]float64{"go_goroutines": 10, "go_memstats_heap_inuse_bytes": 0, "go_memstats_stack_inuse_bytes": 0},
		After: map[string]float64{"go_goroutines": 10 + goroutines*float64(streams), "go_memstats_heap_inuse_bytes": float64(streams) * 40 * 1024,
			"go_memstats_stack_inuse_bytes": float64(streams) * 32 * 1024}}}
}

// settled is a settled measurement of streams, each holding heapKiB of heap
// and stackKiB of stacks once collected.
func settled(store string, streams int, heapKiB, stackKiB float64) StoreSettled {
	n := float64(streams)
	return StoreSettled{Store: store, SettledResult: SettledResult{Streams: streams,
		Before: map[string]float64{"go_goroutines": 10, "go_memstats_heap_inuse_bytes": 1 << 20, "go_memstats_stack_inuse_bytes": 1 << 18},
		After: map[string]float64{"go_goroutines": 10 + 4*n, "go_memstats_heap_inuse_bytes": 1<<20 + n*heapKiB*1024,
			"go_memstats_stack_inuse_bytes": 1<<18 + n*stackKiB*1024}}}
}

func f(x float64) *float64 { return &x }

func TestSummary(t *testing.T) {
	ms := time.Millisecond
	direct := paced(50, 100, 0, 0, 100*ms, ms/10)
	relay := func(n int) Pair {
		return Pair{Store: StoreRelay, Direct: direct, Runtime: paced(n, 100, 100*ms, 0, 100*ms+ms/2, ms/2)}
	}
	memory := func(n int) Pair {
		return Pair{Store: "memory", Direct: direct, Runtime: paced(n, 100, 300*ms, 0, 102*ms, 2*ms)}
	}
	redis := func(n int) Pair {
		return Pair{Store: "redis", Direct: direct, Runtime: paced(n, 50, 200*ms, 50*ms, 103*ms, 3*ms)}
	}
	tests := []struct {
		name string
		rep  Report
		want map[string]Ratios
		// relayNil: no relay figures; check runs on the summary.
		relayNil bool
		check    func(t *testing.T, s Summary)
	}{{
		name: "relay, memory and redis",
		rep: Report{Pairs: []Pair{relay(50), memory(50), redis(50)},
			Idle:    []StoreIdle{idle(StoreRelay, 200, 40<<10, 4), idle("memory", 200, 120<<10, 8), idle("redis", 200, 130<<10, 9)},
			Instant: []StoreResult{{Store: "memory", Result: paced(20, 1000, 800*ms, 0, 0, 0)}}},
		want: map[string]Ratios{
			// memory: 3 ms / 1 ms; redis: (4 + 1) ms / 1 ms, redis-server counted.
			"memory": {CPUPerTurn: f(3), MemoryPerStream: f(3), AddedTTFTP50MS: f(1.5)},
			"redis":  {CPUPerTurn: f(5), MemoryPerStream: f(3.25), AddedTTFTP50MS: f(2.5)},
		},
		check: func(t *testing.T, s Summary) {
			r := s.Runtime["redis"]
			if r.CPUPerTurnMS != 5 || r.ServerCPUPerTurnMS != 4 || r.RedisCPUPerTurnMS != 1 || r.TurnsPerSecond != 5 {
				t.Errorf("redis figures %+v: want CPU 5 = 4 + 1 ms per turn, 5 turns/s", r)
			}
			if m := s.Runtime["memory"]; m.InstantCPUPerTurnMS == nil || *m.InstantCPUPerTurnMS != 0.8 || *m.InstantTurnsPerSecond != 100 {
				t.Errorf("memory instant figures %v %v: want 0.8 ms, 100 turns/s", m.InstantCPUPerTurnMS, m.InstantTurnsPerSecond)
			}
			if g := s.Relay.GoroutinesPerStream; g == nil || *g != 4 || *s.Relay.HeapPerStreamKiB != 40 || *s.Relay.StackPerStreamKiB != 32 {
				t.Errorf("relay per-stream gauges %+v", s.Relay)
			}
			if s.Relay.TTFTP50MS != 100.5 || s.Relay.LatencyP50MS != 0.5 {
				t.Errorf("relay TTFT %v, net of the mock's wait %v; want 100.5 and 0.5", s.Relay.TTFTP50MS, s.Relay.LatencyP50MS)
			}
			var md bytes.Buffer
			(&Report{Pairs: []Pair{relay(50), redis(50)}}).Markdown(&md)
			if row := "| redis | 5.000 / 1.000 | 5.00x | - / - | - | 3.00 / 0.50 | 2.50 |"; !bytes.Contains(md.Bytes(), []byte(row)) {
				t.Errorf("the markdown report lacks the ratio row %q:\n%s", row, md.String())
			}
		},
	}, {
		name: "the first stream count gives the ratios, every count is listed",
		rep:  Report{Pairs: []Pair{relay(200), memory(200), relay(500), {Store: "memory", Direct: direct, Runtime: paced(500, 100, 900*ms, 0, 150*ms, 50*ms)}}},
		want: map[string]Ratios{"memory": {CPUPerTurn: f(3), AddedTTFTP50MS: f(1.5)}},
		check: func(t *testing.T, s Summary) {
			m := s.Runtime["memory"]
			if m.Streams != 200 || len(m.Paced) != 2 || m.Paced[1].Streams != 500 || m.Paced[1].CPUPerTurnMS != 9 {
				t.Errorf("memory figures %+v, paced %+v", m, m.Paced)
			}
		},
	}, {
		name:     "no relay: figures without ratios",
		rep:      Report{Pairs: []Pair{memory(50)}, Idle: []StoreIdle{idle("memory", 200, 120<<10, 8)}},
		want:     map[string]Ratios{"memory": {}},
		relayNil: true,
	}, {
		name: "no idle phase: no memory ratio",
		rep:  Report{Pairs: []Pair{relay(50), memory(50)}},
		want: map[string]Ratios{"memory": {CPUPerTurn: f(3), AddedTTFTP50MS: f(1.5)}},
	}, {
		name: "a relay that completed no turn gives no paced ratios",
		rep: Report{Pairs: []Pair{{Store: StoreRelay, Direct: direct, Runtime: paced(50, 0, 100*ms, 0, 0, 0)}, memory(50)},
			Idle: []StoreIdle{idle(StoreRelay, 200, 40<<10, 4), idle("memory", 200, 120<<10, 8)}},
		want: map[string]Ratios{"memory": {MemoryPerStream: f(3)}},
	}, {
		name: "what streams hold once collected, against the floor's, for the first idle count",
		rep: Report{Idle: []StoreIdle{idle(StoreRelay, 200, 40<<10, 4), idle("memory", 200, 120<<10, 8)},
			Settled: []StoreSettled{settled(StoreRelay, 200, 40, 24), settled("memory", 200, 60, 36), settled("memory", 100, 1, 1)}},
		want: map[string]Ratios{"memory": {MemoryPerStream: f(3), SettledPerStream: f(1.5)}},
		check: func(t *testing.T, s Summary) {
			if m := s.Runtime["memory"].SettledPerStreamKiB; m == nil || *m != 96 {
				t.Errorf("memory: %v KiB per stream once collected, want 96 (60 of heap, 36 of stacks)", deref(m))
			}
		},
	}, {
		name: "the memory ratio compares the run's first idle count",
		rep:  Report{Idle: []StoreIdle{idle(StoreRelay, 200, 40<<10, 4), idle("memory", 100, 120<<10, 8), idle("memory", 200, 120<<10, 8)}},
		want: map[string]Ratios{"memory": {MemoryPerStream: f(3)}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.rep.Summary()
			if (s.Relay == nil) != tc.relayNil {
				t.Fatalf("relay figures %+v, want nil: %v", s.Relay, tc.relayNil)
			}
			if got, want := slices.Sorted(maps.Keys(s.Ratios)), slices.Sorted(maps.Keys(tc.want)); !slices.Equal(got, want) {
				t.Fatalf("ratios for %v, want %v", got, want)
			}
			for store, want := range tc.want {
				got := s.Ratios[store]
				for _, c := range []struct {
					name      string
					got, want *float64
				}{{"cpu_per_turn", got.CPUPerTurn, want.CPUPerTurn}, {"memory_per_stream", got.MemoryPerStream, want.MemoryPerStream},
					{"added_ttft_p50_ms", got.AddedTTFTP50MS, want.AddedTTFTP50MS}, {"settled_per_stream", got.SettledPerStream, want.SettledPerStream}} {
					if (c.got == nil) != (c.want == nil) || c.got != nil && *c.got != *c.want {
						t.Errorf("%s %s = %v, want %v", store, c.name, deref(c.got), deref(c.want))
					}
				}
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestSummaryJSONKeys checks the JSON's shape: the keys issue 19 names, a
// null for every figure that was not measured.
func TestSummaryJSONKeys(t *testing.T) {
	ms := time.Millisecond
	direct := paced(50, 10, 0, 0, 100*ms, 0)
	rep := Report{Pairs: []Pair{
		{Store: StoreRelay, Direct: direct, Runtime: paced(50, 10, 10*ms, 0, 101*ms, ms)},
		{Store: "memory", Direct: direct, Runtime: paced(50, 10, 20*ms, 0, 102*ms, 2*ms)},
		{Store: "redis", Direct: direct, Runtime: paced(50, 10, 30*ms, 5*ms, 103*ms, 3*ms)},
	}, Commands: []CommandCount{{Kind: KindTool, Turns: 20, Tools: 20, Streams: 10,
		Commands: map[string]int64{"evalsha": 250}, ReadEvents: 120}}}
	var buf bytes.Buffer
	if err := rep.Summary().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, buf.String())
	}
	if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"ratios", "relay", "runtime"}) {
		t.Fatalf("top-level keys %v", keys)
	}
	if keys := slices.Sorted(maps.Keys(got["runtime"])); !slices.Equal(keys, []string{"memory", "redis"}) {
		t.Fatalf("runtime keys %v", keys)
	}
	for _, store := range []string{"memory", "redis"} {
		r, _ := got["ratios"][store].(map[string]any)
		if keys := slices.Sorted(maps.Keys(r)); !slices.Equal(keys, []string{"added_ttft_p50_ms", "cpu_per_turn", "memory_per_stream"}) {
			t.Fatalf("ratios.%s keys %v", store, keys)
		}
		if r["memory_per_stream"] != nil || r["cpu_per_turn"] == nil {
			t.Fatalf("ratios.%s = %v: want a CPU ratio and a null memory ratio (no idle phase)", store, r)
		}
	}
	for store, want := range map[string]bool{"memory": false, "redis": true} {
		rt, _ := got["runtime"][store].(map[string]any)
		if per, ok := rt["redis_per_turn"]; !ok || (per != nil) != want {
			t.Fatalf("runtime.%s.redis_per_turn = %v (present %v), want counts only with Redis", store, per, ok)
		}
	}
	tool := got["runtime"]["redis"].(map[string]any)["redis_per_turn"].(map[string]any)["tool"].(map[string]any)
	if tool["commands"] != 12.5 || tool["round_trips"] != 6.0 || tool["concurrent"] != 10.0 {
		t.Fatalf("redis_per_turn.tool = %v, want 12.5 commands and 6 round trips, 10 at once", tool)
	}
	if v := got["relay"]["cpu_per_turn_ms"]; v != 1.0 {
		t.Fatalf("relay cpu_per_turn_ms = %v, want 1", v)
	}
}

// TestSummaryRelayRedis checks the relay with Redis sessions: its figures
// are apart from the runtime's, compared with the relay, and the Redis
// store's are compared with them.
func TestSummaryRelayRedis(t *testing.T) {
	ms := time.Millisecond
	direct := paced(50, 10, 0, 0, 100*ms, 0)
	rep := Report{Pairs: []Pair{
		{Store: StoreRelay, Direct: direct, Runtime: paced(50, 10, 10*ms, 0, 101*ms, ms)},
		{Store: StoreRelayRedis, Direct: direct, Runtime: paced(50, 10, 10*ms, 5*ms, 101*ms, 2*ms)},
		{Store: "redis", Direct: direct, Runtime: paced(50, 10, 30*ms, 5*ms, 103*ms, 3*ms)},
	}}
	s := rep.Summary()
	val := func(p *float64) float64 {
		t.Helper()
		if p == nil {
			t.Fatal("a ratio was not computed")
		}
		return *p
	}
	if s.RelayRedis == nil || s.Runtime[StoreRelayRedis] != nil || len(s.Ratios) != 1 {
		t.Fatalf("relay_redis %+v, runtime %v, ratios %v", s.RelayRedis, slices.Collect(maps.Keys(s.Runtime)), s.Ratios)
	}
	// redis-server's CPU counts with the relay's as with the runtime's.
	if got := val(s.RelayRedisRatios[StoreRelayRedis].CPUPerTurn); got != 1.5 {
		t.Fatalf("relay-redis CPU ratio %v, want 1.5", got)
	}
	if got := val(s.RelayRedisRatios["redis"].CPUPerTurn); math.Abs(got-2.3333) > 1e-3 {
		t.Fatalf("redis over relay-redis CPU ratio %v, want 2.33", got)
	}
	if got := val(s.RelayRedisRatios["redis"].AddedTTFTP50MS); got != val(s.Ratios["redis"].AddedTTFTP50MS)-val(s.RelayRedisRatios[StoreRelayRedis].AddedTTFTP50MS) {
		t.Fatalf("added TTFT over relay-redis %v; over the relay %v, relay-redis's own %v", got, val(s.Ratios["redis"].AddedTTFTP50MS), val(s.RelayRedisRatios[StoreRelayRedis].AddedTTFTP50MS))
	}
	var buf bytes.Buffer
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"relay_redis": {`, `"relay_redis_ratios": {`} {
		if !strings.Contains(buf.String(), key) {
			t.Fatalf("no %s in:\n%s", key, buf.String())
		}
	}
}
