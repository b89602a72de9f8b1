// Package shallow runs deep, short work on another goroutine, so that
// a long-lived goroutine keeps the small stack its waiting needs.
//
// A goroutine's stack grows to the deepest call it has made and shrinks
// only at a garbage collection, and only while less than a quarter of it
// is in use. A turn's goroutine spends most of its life waiting for the
// model's next bytes under about 7 KiB of frames, which fits the 8 KiB
// stack it would have; one deep call before that wait (the session's
// first write, the HTTP request to the provider) doubles it to 16 KiB for
// the rest of the turn, since 7 KiB is more than a quarter of 16. With
// thousands of streams open, that is 8 KiB each. Call moves such a call
// to another goroutine and waits for it, for about a microsecond.
//
// The other goroutines are kept (a few, for a while): a goroutine started
// per call would grow a stack through 2, 4, 8 and 16 KiB every time and
// free each, and the freed stacks share the runtime's stack spans with the
// long-lived goroutines' stacks, which then hold the spans.
package shallow

import (
	"errors"
	"sync"
	"time"
)

// maxIdle is how many workers wait for calls between them; more than that
// end after their call. Deep calls are short and mostly CPU-bound, so a
// few serve a busy server; a burst starts more.
const maxIdle = 8

// idleFor is how long a waiting worker stays: while calls keep coming
// (a busy server makes a few per turn) the workers stay; a quiet server
// keeps none for long, so that they do not look like a leak.
const idleFor = time.Second

// A task runs a call and returns what hands its result to the caller: the
// worker is back among the waiting ones before the caller wakes, so that
// the caller's next call finds it.
type task func() (deliver func())

var (
	mu sync.Mutex
	// waiting is the workers that wait for a call, each on its channel
	// (buffered: a send never blocks), the latest last.
	waiting []chan task
)

// run runs t on a waiting worker, or on a new one when none waits.
func run(t task) {
	mu.Lock()
	if n := len(waiting); n > 0 {
		ch := waiting[n-1]
		waiting = waiting[:n-1]
		mu.Unlock()
		ch <- t
		return
	}
	mu.Unlock()
	go worker(t)
}

func worker(t task) {
	ch := make(chan task, 1)
	timer := time.NewTimer(idleFor)
	defer timer.Stop()
	for {
		deliver := t()
		mu.Lock()
		stay := len(waiting) < maxIdle
		if stay {
			waiting = append(waiting, ch)
		}
		mu.Unlock()
		deliver()
		if !stay {
			return
		}
		timer.Reset(idleFor)
		select {
		case t = <-ch:
			continue
		case <-timer.C:
		}
		mu.Lock()
		for i, c := range waiting {
			if c == ch {
				waiting = append(waiting[:i], waiting[i+1:]...)
				mu.Unlock()
				return
			}
		}
		mu.Unlock()
		// A call took this worker as its timer fired: run it.
		t = <-ch
	}
}

// ErrGoexit is Call's error when f called runtime.Goexit (t.FailNow in a
// test, say) instead of returning; the goroutine that ran it has ended.
var ErrGoexit = errors.New("shallow: the call ended its goroutine (runtime.Goexit)")

// Call runs f on another goroutine and returns its results once it has
// returned. A panic in f is raised again on the caller's goroutine, with
// its value, so that the caller's recovery sees it as before (the panic's
// stack trace is then f's goroutine's no longer).
func Call[T any](f func() (T, error)) (T, error) {
	type result struct {
		v        T
		err      error
		returned bool
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	run(func() func() {
		var r result
		defer func() {
			// f neither returned nor panicked: its runtime.Goexit is
			// ending the worker, and this is the caller's only word.
			if !r.returned && !r.panicked {
				done <- r
			}
		}()
		func() {
			defer func() {
				if v := recover(); v != nil {
					r.panicked, r.value = true, v
				}
			}()
			r.v, r.err = f()
			r.returned = true
		}()
		return func() { done <- r }
	})
	r := <-done
	switch {
	case r.panicked:
		panic(r.value)
	case !r.returned:
		return r.v, ErrGoexit
	}
	return r.v, r.err
}
