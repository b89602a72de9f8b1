package server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// processCPU is the CPU time the process has used (user and system), in
// nanoseconds: the server's and the client's, which share the process.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStreamTurn streams turns of benchDeltas text deltas to a client
// over real loopback HTTP (one kept-alive connection): POST /api/chat, the
// agent's turn on a model that says what it is fed (fedModel), the turn's
// log and the SSE connection that maps each event to its frames. One op is
// one turn, from its request to the client's read of [DONE].
//
//   - paced: the model says a delta once the client has read the one
//     before, as a model's tokens come: each event's way to the client,
//     goroutine hand-overs included (ns/frame).
//   - burst: the model says every delta at once, as a model that answers
//     at once does: the frames leave in as few writes as the connection
//     manages (writes/op).
//
// cpu-ns/op is the process's CPU per turn, client included: on a shared
// machine a steadier figure than the wall time of ns/op.
func BenchmarkStreamTurn(b *testing.B) {
	for _, paced := range []bool{true, false} {
		name := "burst"
		if paced {
			name = "paced"
		}
		b.Run(name, func(b *testing.B) { benchStreamTurn(b, paced) })
	}
}

const benchDeltas = 64

func benchStreamTurn(b *testing.B, paced bool) {
	m := newFedModel()
	e := newEnv(b, envOptions{model: m})
	l := &countingListener{Listener: newLocalListener(b)}
	e.http.Close()
	hs := &http.Server{Handler: e.srv.Handler()}
	go hs.Serve(l)
	defer hs.Close()
	base := "http://" + l.Addr().String()
	client := &http.Client{}
	done := []byte("data: [DONE]")
	n, frames := 0, 0
	cpu0 := processCPU()
	b.ReportAllocs()
	for b.Loop() {
		n++
		session := "bench-session-" + strconv.Itoa(n)
		feed := m.feed(session)
		go func() { feed <- "word " }()
		res, err := client.Post(base+"/api/chat/plain", "application/json", strings.NewReader(`{"message":"`+session+`","sessionId":"`+session+`"}`))
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(res.Body)
		next := func() []byte {
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					b.Fatalf("the stream ended early: %v", err)
				}
				if bytes.HasPrefix(line, []byte("data:")) {
					frames++
					return line
				}
			}
		}
		delta := func() {
			for !bytes.Contains(next(), []byte(`"text-delta"`)) {
			}
		}
		delta()
		for range benchDeltas - 1 {
			feed <- "word "
			if paced {
				delta()
			}
		}
		close(feed)
		for !bytes.HasPrefix(next(), done) {
		}
		_, _ = io.Copy(io.Discard, r)
		res.Body.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
	b.ReportMetric(float64(l.writes.Load())/float64(n), "writes/op")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/op")
}
