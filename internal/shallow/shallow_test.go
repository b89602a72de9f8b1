package shallow

import (
	"errors"
	"runtime"
	"sync"
	"testing"
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
		{name: "goexits", f: func() (int, error) { runtime.Goexit(); return 0, nil }, wantErr: ErrGoexit},
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
	direct := stacksWhileWaiting(n, func() { waitDeep(func() { deep(32) }) })
	called := stacksWhileWaiting(n, func() {
		waitDeep(func() {
			if _, err := Call(func() (int, error) { return deep(32), nil }); err != nil {
				t.Error(err)
			}
		})
	})
	t.Logf("stacks of %d waiting goroutines: %d KiB after direct deep calls, %d KiB after calls through Call", n, direct>>10, called>>10)
	if called*4 > direct {
		t.Fatalf("through Call the waiting goroutines hold %d bytes of stack, direct %d: want at most a quarter", called, direct)
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
