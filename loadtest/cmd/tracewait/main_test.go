package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// pinger answers each ping on in with a pong on out until in is closed.
func pinger(in <-chan int, out chan<- int) {
	for v := range in {
		out <- v
	}
	close(out)
}

// TestRead traces a goroutine woken 200 times by a channel and reads the
// trace back: the goroutine's kind is the function it was started with,
// its wake-ups are all there, and the report prints them.
func TestRead(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing is not available: %v", err)
	}
	in, out := make(chan int), make(chan int)
	go pinger(in, out)
	for i := range 200 {
		in <- i
		<-out
	}
	close(in)
	<-out
	trace.Stop()
	path := filepath.Join(t.TempDir(), "t.trace.pprof")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	const kind = "github.com/agentdock-go/agentdock/loadtest/cmd/tracewait.pinger"
	if r.created[kind] != 1 {
		t.Fatalf("created %v, want one %s", r.created, kind)
	}
	if n := len(r.waits[kind]); n < 200 {
		t.Fatalf("%d wake-ups of the pinger, want at least 200 (one per ping)", n)
	}
	var out2 bytes.Buffer
	r.print(&out2, 1)
	if !strings.Contains(out2.String(), "tracewait.pinger") || !strings.Contains(out2.String(), "goroutines created") {
		t.Fatalf("report:\n%s", out2.String())
	}
	if _, err := read(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing file read without an error")
	}
}

// TestPaths traces a small relay over real HTTP: a handler that sends a
// model request and writes the model's chunks to its client, the model's
// first chunk after a silence. The -paths report finds the model requests
// (the handler woke the model connection's write loop) and the writes that
// carry each turn's first token, each walked back to the handler woken by
// the network.
func TestPaths(t *testing.T) {
	const turns = 4
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(80 * time.Millisecond) // the model's wait for its first token
		for i := range 5 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	defer model.Close()
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Post(model.URL, "text/plain", strings.NewReader("request"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			fmt.Fprintf(w, "data: %s\n\n", sc.Text())
			w.(http.Flusher).Flush()
		}
	}))
	defer relay.Close()

	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing is not available: %v", err)
	}
	for range turns {
		resp, err := http.Get(relay.URL)
		if err != nil {
			trace.Stop()
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	trace.Stop()
	path := filepath.Join(t.TempDir(), "relay.trace.pprof")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	p, err := readPaths(path, 60*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Each turn's request leaves through a write loop woken by the
	// relay's handler (the path's first hop: the handler, woken by the
	// network); the model server's handlers make no requests.
	// The first turn's request went out on a new connection, its write
	// loop woken by the dial; the others reuse it.
	fromHandler := 0
	for _, pa := range p.model {
		if strings.HasPrefix(pa.kinds(), "http.(*conn).serve -> ") && strings.HasSuffix(pa.kinds(), "writeLoop") {
			fromHandler++
		}
	}
	if fromHandler < turns-1 {
		var ks []string
		for _, pa := range p.model {
			ks = append(ks, pa.kinds())
		}
		t.Fatalf("%d model requests woken from a handler, want %d; paths:\n%s", fromHandler, turns-1, strings.Join(ks, "\n"))
	}
	// The first chunk's write follows the model's 80 ms: one per turn
	// from the relay (its first write of the response headers came right
	// before), and the model's own writes after its sleep count too.
	if len(p.first) < turns || len(p.other) < turns*4 {
		t.Fatalf("%d first-token writes and %d others, want at least %d and %d", len(p.first), len(p.other), turns, turns*4)
	}
	var out bytes.Buffer
	p.print(&out, 2)
	for _, want := range []string{"-- model requests", "-- writes carrying a turn's first token", "writeLoop", "wait p50"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
