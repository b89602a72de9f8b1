// Package shallow runs deep, short work on a goroutine of its own, so that
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
// to a goroutine that ends with it, for about a microsecond.
package shallow

import "errors"

// ErrGoexit is Call's error when f called runtime.Goexit (t.FailNow in a
// test, say) instead of returning.
var ErrGoexit = errors.New("shallow: the call ended its goroutine (runtime.Goexit)")

// Call runs f on a new goroutine and returns its results once it has
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
	go func() {
		var r result
		defer func() { done <- r }()
		defer func() {
			if v := recover(); v != nil {
				r.panicked, r.value = true, v
			}
		}()
		r.v, r.err = f()
		r.returned = true
	}()
	r := <-done
	switch {
	case r.panicked:
		panic(r.value)
	case !r.returned:
		return r.v, ErrGoexit
	}
	return r.v, r.err
}
