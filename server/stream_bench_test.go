package server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"

	"github.com/gin-gonic/gin"
)

// processCPU is the CPU time the process has used (user and system), in
// nanoseconds: the server's and the client's, which share the process.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStreamTurn streams turns of benchFrames text deltas to a client
// over real loopback HTTP (one kept-alive connection), through the turn's
// log and the SSE connection: the path every frame of a chat stream takes
// from the turn's goroutine to the socket. One op is one turn, from its
// first frame to the client's read of [DONE].
//
//   - paced: the turn adds a frame once the client has read the one
//     before, as a model's tokens come: each frame's way to the client,
//     goroutine hand-overs included (ns/frame).
//   - burst: the turn adds every frame at once, as a model that answers
//     at once or a resume does: the frames leave in as few writes as the
//     connection manages (writes/op).
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

const benchFrames = 64

func benchStreamTurn(b *testing.B, paced bool) {
	e := newEnv(b, envOptions{})
	turns := make(chan *turn, 1)
	l := &countingListener{Listener: newLocalListener(b)}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := gin.CreateTestContext(w)
		c.Request = r
		e.srv.streamTurn(c, <-turns, 0)
	}))
	hs.Listener = l
	hs.Start()
	defer hs.Close()
	client := hs.Client()
	delta := []byte(`{"type":"text-delta","id":"bench-turn-text-1","delta":"word "}`)
	done := []byte("data: [DONE]")
	n := 0
	cpu0 := processCPU()
	b.ReportAllocs()
	for b.Loop() {
		n++
		tr := newTurn("bench-turn-"+strconv.Itoa(n), "bench-session", "plain", "", func(error) {}, DefaultMaxTurnEvents, 0)
		tr.add(frame{data: []byte(`{"type":"start","messageId":"bench"}`)})
		turns <- tr
		res, err := client.Get(hs.URL)
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
					return line
				}
			}
		}
		next() // start
		for range benchFrames {
			tr.add(frame{data: delta})
			if paced {
				next()
			}
		}
		tr.addLast(frame{data: []byte(`{"type":"finish","finishReason":"stop"}`)}, frame{data: doneData})
		for !bytes.HasPrefix(next(), done) {
		}
		_, _ = io.Copy(io.Discard, r)
		res.Body.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*(benchFrames+3)), "ns/frame")
	b.ReportMetric(float64(l.writes.Load())/float64(n), "writes/op")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(n), "cpu-ns/op")
}
