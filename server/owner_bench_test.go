package server

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/session/redistest"
)

// BenchmarkNotYoursVsAbsent measures whether a session's existence shows
// through timing: over 1,000 pairs, taken alternately on one server (real
// HTTP on loopback, API keys), the time of a request for a session another
// key owns against one for a session no one has, for GET /api/sessions/:id
// and for the resume endpoint with a Last-Event-ID naming the other key's
// turn. It reports the median and p90 of each, in microseconds, and the
// differences. The figures go to BENCHMARKS.md; b.N is ignored: one
// measurement of 1,000 pairs per store.
func BenchmarkNotYoursVsAbsent(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		b.Run(store, func(b *testing.B) {
			var e *env
			var opts envOptions
			auth, err := NewKeyAuth([]string{"key-alice", "key-bob"}, []byte("bench-secret"))
			if err != nil {
				b.Fatal(err)
			}
			opts.cfg = func(c *Config) { c.Owner = auth.Owner }
			switch store {
			case "memory":
				e = newEnv(b, opts)
			case "redis":
				e = replica(b, redistest.Start(b), "bench", opts)
			}
			alice := []string{"X-Api-Key", "key-alice"}
			bob := []string{"X-Api-Key", "key-bob"}
			const pairs = 1000
			// Alice's sessions, each with a finished turn.
			turns := make([]string, 50)
			for i := range turns {
				res, _ := e.streamChat("plain", fmt.Sprintf(`{"message":"hi","sessionId":"alice-bench-%03d"}`, i), alice...)
				turns[i] = res.Header.Get("X-Turn-Id")
			}
			measure := func(path string, headers []string, want int) time.Duration {
				start := time.Now()
				res := e.do(http.MethodGet, path, "", headers...)
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				took := time.Since(start)
				if res.StatusCode != want {
					b.Fatalf("GET %s: %d, want %d", path, res.StatusCode, want)
				}
				return took
			}
			var getMine, getAbsent, resMine, resAbsent []time.Duration
			for i := range pairs {
				n := i % len(turns)
				mine := fmt.Sprintf("alice-bench-%03d", n)
				absent := fmt.Sprintf("nobody-bench-%04d", i)
				lei := []string{"Last-Event-ID", turns[n] + ":1"}
				// Alternate which goes first, so that neither gains from a
				// warmed cache or connection.
				a := func() { getMine = append(getMine, measure("/api/sessions/"+mine, bob, http.StatusNotFound)) }
				z := func() { getAbsent = append(getAbsent, measure("/api/sessions/"+absent, bob, http.StatusNotFound)) }
				ra := func() {
					resMine = append(resMine, measure("/api/sessions/"+mine+"/stream", append(slices.Clone(bob), lei...), http.StatusNoContent))
				}
				rz := func() {
					resAbsent = append(resAbsent, measure("/api/sessions/"+absent+"/stream", append(slices.Clone(bob), lei...), http.StatusNoContent))
				}
				if i%2 == 0 {
					a()
					z()
					ra()
					rz()
				} else {
					z()
					a()
					rz()
					ra()
				}
			}
			q := func(d []time.Duration, p float64) float64 {
				s := slices.Clone(d)
				slices.Sort(s)
				return float64(s[int(p*float64(len(s)-1))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(q(getMine, 0.5), "get-notyours-p50-us")
			b.ReportMetric(q(getAbsent, 0.5), "get-absent-p50-us")
			b.ReportMetric(q(getMine, 0.9), "get-notyours-p90-us")
			b.ReportMetric(q(getAbsent, 0.9), "get-absent-p90-us")
			b.ReportMetric(q(resMine, 0.5), "resume-notyours-p50-us")
			b.ReportMetric(q(resAbsent, 0.5), "resume-absent-p50-us")
			b.ReportMetric(q(resMine, 0.9), "resume-notyours-p90-us")
			b.ReportMetric(q(resAbsent, 0.9), "resume-absent-p90-us")
		})
	}
}
