package faults

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/session"
)

// BenchmarkStopAcrossReplicas measures how long a stop takes to reach a
// turn: from sending POST /api/sessions/:id/stop until the client
// streaming the turn reads its abort frame. The turn streams from replica
// A (two `agentdock serve` processes on one redis-server); the stop goes
// to B ("other": through the shared turn log's pub/sub) or to A ("same").
// It reports the p50, p99 and max in milliseconds; BENCHMARKS.md records
// them (the bound is 1 s). Run:
//
//	go test -run '^$' -bench StopAcrossReplicas -benchtime=200x ./faults/
func BenchmarkStopAcrossReplicas(b *testing.B) {
	m := newModel(b)
	a, other := controlReplicas(b, m, nil)
	for _, tc := range []struct {
		name string
		stop *serverProc
	}{{"other", other}, {"same", a}} {
		b.Run(tc.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				sid := session.NewID()
				m.Enqueue(paced(2000, 10*time.Millisecond))
				s := chat(b, a.URL(), controlAgent, sid, "stop me")
				s.Until("text-delta", 10*time.Second)
				sent := time.Now()
				if status, body := stopTurn(b, tc.stop.URL(), sid); status != http.StatusAccepted {
					b.Fatalf("stop: %d %s", status, body)
				}
				f := s.Until("abort", 10*time.Second)
				took = append(took, f[len(f)-1].At.Sub(sent))
				s.All(10 * time.Second)
				s.Close()
			}
			slices.Sort(took)
			q := func(p float64) float64 {
				return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
