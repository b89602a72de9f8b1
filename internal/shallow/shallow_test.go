package shallow

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCall(t *testing.T) {
	errWant := errors.New("want")
	tests := []struct {
		name    string
		f       func() (int, error)
		want    int
		wantErr error
		panics  any
	}{
		{name: "returns", f: func() (int, error) { return 7, nil }, want: 7},
		{name: "returns an error", f: func() (int, error) { return 1, errWant }, want: 1, wantErr: errWant},
		{name: "panics", f: func() (int, error) { panic("boom") }, panics: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if v := recover(); v != tt.panics {
					t.Fatalf("panic %v, want %v", v, tt.panics)
				}
			}()
			got, err := Call(tt.f)
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Fatalf("Call = %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestCallGoexit: a runtime.Goexit in f (t.FailNow, say) ends the
// caller's goroutine, as it would without Call, and the coroutine is not
// reused.
func TestCallGoexit(t *testing.T) {
	after, deferred := false, false
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { deferred = true }()
		_, _ = Call(func() (int, error) { runtime.Goexit(); return 0, nil })
		after = true
	}()
	<-done
	if after || !deferred {
		t.Fatalf("after Goexit in f: the caller went on %v, its defers ran %v", after, deferred)
	}
	if v, err := Call(func() (int, error) { return 3, nil }); v != 3 || err != nil {
		t.Fatalf("Call after a Goexit = %d, %v", v, err)
	}
}

// deep recurses n frames of about 1 KiB each.
//
//go:noinline
func deep(n int) int {
	var pad [1024]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%len(pad)])
}

// stacksWhileWaiting is the stack bytes that n goroutines hold while they
// wait, each after calling call once.
func stacksWhileWaiting(n int, call func()) int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.StackInuse
	release := make(chan struct{})
	var called, exited sync.WaitGroup
	for range n {
		called.Add(1)
		exited.Add(1)
		go func() {
			defer exited.Done()
			call()
			called.Done()
			<-release
		}()
	}
	called.Wait()
	// No collection here: it would halve the direct calls' stacks.
	runtime.ReadMemStats(&ms)
	close(release)
	exited.Wait()
	return int64(ms.StackInuse) - int64(before)
}

// TestCallKeepsTheCallerSmall: waiting goroutines that made a 32 KiB deep
// call through Call hold small stacks; made directly, the call leaves each
// holding 64 KiB until collections halve it.
func TestCallKeepsTheCallerSmall(t *testing.T) {
	const n = 64
	// The workers that stay between calls are in both baselines.
	_ = stacksWhileWaiting(n, func() { _, _ = Call(func() (int, error) { return deep(32), nil }) })
	direct := stacksWhileWaiting(n, func() { waitDeep(func() { deep(32) }) })
	called := stacksWhileWaiting(n, func() {
		waitDeep(func() {
			if _, err := Call(func() (int, error) { return deep(32), nil }); err != nil {
				t.Error(err)
			}
		})
	})
	t.Logf("stacks of %d waiting goroutines: %d KiB after direct deep calls, %d KiB after calls through Call", n, direct>>10, called>>10)
	if called*3 > direct {
		t.Fatalf("through Call the waiting goroutines hold %d bytes of stack, direct %d: want at most a third", called, direct)
	}
}

// waitDeep runs f under 4 frames of about 1 KiB.
func waitDeep(f func()) { deepThen(4, f) }

//go:noinline
func deepThen(n int, f func()) byte {
	var pad [1024]byte
	if n == 0 {
		f()
		return pad[0]
	}
	pad[n] = byte(deepThen(n-1, f))
	return pad[n]
}

// goid is the calling goroutine's ID, from its stack's header.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	f := strings.Fields(string(b))
	return f[1]
}

// TestCallReusesItsGoroutines: calls one after another run on the same
// goroutine, whose stack has grown already, instead of growing a new one
// each.
func TestCallReusesItsGoroutines(t *testing.T) {
	ids := map[string]bool{}
	for range 100 {
		id, _ := Call(func() (string, error) { return goid(), nil })
		ids[id] = true
	}
	if len(ids) > 2 {
		t.Fatalf("100 calls one after another ran on %d goroutines", len(ids))
	}
	if caller := goid(); ids[caller] {
		t.Fatal("a call ran on the caller's goroutine")
	}
}

// TestCallBurst: calls at once do not wait for each other, and at most
// maxIdle of the coroutines that ran them stay, and none once idle for
// idleFor.
func TestCallBurst(t *testing.T) {
	const n = 32
	release := make(chan struct{})
	var started sync.WaitGroup
	var wg sync.WaitGroup
	started.Add(n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = Call(func() (int, error) {
				started.Done()
				<-release
				return 0, nil
			})
		}()
	}
	// Every call is running at once: none queued behind another.
	started.Wait()
	close(release)
	wg.Wait()
	mu.Lock()
	got := len(waiting)
	mu.Unlock()
	if got > maxIdle {
		t.Fatalf("%d idle coroutines after the burst, want at most %d", got, maxIdle)
	}
	deadline := time.Now().Add(10 * idleFor)
	for {
		mu.Lock()
		got = len(waiting)
		mu.Unlock()
		if got == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d coroutines still wait %v after the burst", got, 10*idleFor)
		}
		time.Sleep(idleFor / 10)
	}
}

// BenchmarkCall is a call's cost over calling f directly: the switch to a
// kept coroutine and back.
func BenchmarkCall(b *testing.B) {
	for b.Loop() {
		_, _ = Call(func() (int, error) { return 1, nil })
	}
}
