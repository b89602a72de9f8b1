// Package shallow runs deep, short work on another goroutine's stack, so
// that a long-lived goroutine keeps the small stack its waiting needs.
//
// A goroutine's stack grows to the deepest call it has made and shrinks
// only at a garbage collection, and only while less than a quarter of it
// is in use. A turn's goroutine spends most of its life waiting for the
// model's next bytes under about 7 KiB of frames, which fits the 8 KiB
// stack it would have; one deep call before that wait (the session's
// first write, the HTTP request to the provider) doubles it to 16 KiB for
// the rest of the turn, since 7 KiB is more than a quarter of 16. With
// thousands of streams open, that is 8 KiB each. Call moves such a call
// to another goroutine's stack.
//
// That goroutine is a coroutine (iter.Pull): the caller switches to it
// and back directly, without the scheduler, in about 0.2 µs. A hand-over
// through channels instead put both goroutines through the run queue, a
// wait behind every other runnable goroutine each way, twice per call on
// a turn's way to its first token.
//
// The coroutines are kept (a few, for a while): one started per call would
// grow a stack through 2, 4, 8 and 16 KiB every time and free each, and the
// freed stacks share the runtime's stack spans with the long-lived
// goroutines' stacks, which then hold the spans.
package shallow

import (
	"iter"
	"sync"
	"time"
)

// maxIdle is how many coroutines wait for calls between them; more than
// that end after their call. Deep calls are short, so a few serve a busy
// server; a burst starts more.
const maxIdle = 8

// idleFor is how long a waiting coroutine stays: while calls keep coming
// (a busy server makes a few per turn) they stay; a quiet server keeps
// none for long, so that they do not look like a leak.
const idleFor = time.Second

// A coro runs the calls handed to it, one at a time, on its own stack.
type coro struct {
	task func()
	next func() (struct{}, bool)
	stop func()
	// idle is when it last finished a call.
	idle time.Time
}

func newCoro() *coro {
	c := &coro{}
	c.next, c.stop = iter.Pull(func(yield func(struct{}) bool) {
		for {
			t := c.task
			c.task = nil
			t()
			if !yield(struct{}{}) {
				return
			}
		}
	})
	return c
}

var (
	mu sync.Mutex
	// waiting is the coroutines that wait for a call, the latest last.
	waiting []*coro
	// reaping: a timer will end the coroutines idle for idleFor.
	reaping bool
)

// get takes a waiting coroutine, or starts one.
func get() *coro {
	mu.Lock()
	if n := len(waiting); n > 0 {
		c := waiting[n-1]
		waiting[n-1] = nil
		waiting = waiting[:n-1]
		mu.Unlock()
		return c
	}
	mu.Unlock()
	return newCoro()
}

// put lets c wait for the next call, or ends it when enough wait.
func put(c *coro) {
	c.idle = time.Now()
	mu.Lock()
	if len(waiting) >= maxIdle {
		mu.Unlock()
		c.stop()
		return
	}
	waiting = append(waiting, c)
	arm := !reaping
	reaping = true
	mu.Unlock()
	if arm {
		time.AfterFunc(idleFor, reap)
	}
}

// reap ends the coroutines that have waited idleFor, oldest first, and
// comes back while any still wait.
func reap() {
	now := time.Now()
	mu.Lock()
	n := 0
	for n < len(waiting) && now.Sub(waiting[n].idle) >= idleFor {
		n++
	}
	old := make([]*coro, n)
	copy(old, waiting[:n])
	rest := copy(waiting, waiting[n:])
	clear(waiting[rest:])
	waiting = waiting[:rest]
	var next time.Duration
	if rest > 0 {
		next = idleFor - now.Sub(waiting[0].idle)
	}
	reaping = rest > 0
	mu.Unlock()
	for _, c := range old {
		c.stop()
	}
	if next > 0 {
		time.AfterFunc(next, reap)
	}
}

// Call runs f on another goroutine's stack and returns its results once it
// has returned; the caller waits meanwhile, so f may use what the caller
// uses. A panic in f, or its runtime.Goexit, continues on the caller's
// goroutine as if f had been called there (the panic's stack trace is then
// the coroutine's no longer).
func Call[T any](f func() (T, error)) (v T, err error) {
	c := get()
	done := false
	c.task = func() {
		v, err = f()
		done = true
	}
	// A panic or Goexit of f ended the coroutine, and next raises it
	// again here: the coroutine is not put back.
	c.next()
	if done {
		put(c)
	}
	return v, err
}
