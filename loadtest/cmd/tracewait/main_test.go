package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
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
