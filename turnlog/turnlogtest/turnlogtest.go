// Package turnlogtest is the conformance suite of turnlog.Log: every
// implementation (memory, Redis, any later one) must pass Run, so that the
// server resumes streams the same way whichever log it was given.
package turnlogtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turnlog"
)

// Open returns a log over fresh, empty storage and a peer: another instance
// over the same storage, as another replica would have (a single-process
// implementation returns the log itself). The opener closes both when the
// test ends; closing twice must be harmless.
type Open func(t *testing.T, cfg turnlog.Config) (log, peer turnlog.Log)

// Run runs the suite; its subtests run in parallel, each on its own
// storage.
func Run(t *testing.T, open Open) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"AppendRead", appendRead},
		{"ResumeAfterN", resumeAfterN},
		{"GapPastMaxFrames", gapPastMaxFrames},
		{"Finish", finish},
		{"FinishWithFrames", finishWithFrames},
		{"GapInsideABatch", gapInsideABatch},
		{"SignOfLife", signOfLife},
		{"WaitWakes", waitWakes},
		{"WaitHonoursContext", waitContext},
		{"LatestPerSession", latestPerSession},
		{"Retention", retention},
		{"ConcurrentReaders", concurrentReaders},
		{"SlowReaderDoesNotBlockAppend", slowReader},
		{"NotFoundAndBadInput", badInput},
		{"Forget", forget},
		{"Closed", closed},
		{"Stop", stop},
		{"Open", opened},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// timeout bounds every call of the suite, so that a hang fails instead of
// stalling the run.
const timeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func data(seq int64) []byte {
	return []byte(`{"type":"text-delta","seq":` + strconv.FormatInt(seq, 10) + `}`)
}

func start(t *testing.T, l turnlog.Log, sessionID string) turnlog.Ref {
	t.Helper()
	ref := turnlog.Ref{Session: sessionID, Turn: session.NewID()}
	if err := l.Start(ctxT(t), turnlog.Meta{Ref: ref, Owner: "owner-1", AgentID: "agent-1"}); err != nil {
		t.Fatalf("Start %s: %v", ref, err)
	}
	return ref
}

// appendN appends frames next+1..next+n in one call and checks the last seq.
func appendN(t *testing.T, l turnlog.Log, ref turnlog.Ref, next, n int64) int64 {
	t.Helper()
	batch := make([][]byte, n)
	for i := range batch {
		batch[i] = data(next + int64(i) + 1)
	}
	last, err := l.Append(ctxT(t), ref, batch...)
	if err != nil {
		t.Fatalf("Append %d frames after %d: %v", n, next, err)
	}
	if last != next+n {
		t.Fatalf("Append %d frames after %d: last = %d, want %d", n, next, last, next+n)
	}
	return last
}

// checkFrames fails unless frames are exactly from..to with their data.
func checkFrames(t *testing.T, what string, frames []turnlog.Frame, from, to int64) {
	t.Helper()
	if int64(len(frames)) != to-from+1 {
		t.Fatalf("%s: got %d frames, want %d (seq %d..%d)", what, len(frames), to-from+1, from, to)
	}
	for i, f := range frames {
		want := from + int64(i)
		if f.Seq != want || string(f.Data) != string(data(want)) {
			t.Fatalf("%s: frame %d is seq %d %q, want seq %d %q", what, i, f.Seq, f.Data, want, data(want))
		}
	}
}

// readAll reads a finished turn after `after` to its end with Read.
func readAll(t *testing.T, l turnlog.Log, ref turnlog.Ref, after int64) []turnlog.Frame {
	t.Helper()
	var all []turnlog.Frame
	for {
		b, err := l.Read(ctxT(t), ref, after)
		if err != nil {
			t.Fatalf("Read after %d: %v", after, err)
		}
		if b.Gap {
			t.Fatalf("Read after %d: unexpected gap", after)
		}
		all = append(all, b.Frames...)
		if b.Done {
			return all
		}
		if len(b.Frames) == 0 {
			t.Fatalf("Read after %d of a finished turn: no frame and not done", after)
		}
		after = b.Frames[len(b.Frames)-1].Seq
	}
}

// follow reads with Wait from after until the turn is done.
func follow(ctx context.Context, l turnlog.Log, ref turnlog.Ref, after int64) ([]turnlog.Frame, error) {
	var all []turnlog.Frame
	for {
		b, err := l.Wait(ctx, ref, after)
		if err != nil {
			return all, fmt.Errorf("Wait after %d: %w", after, err)
		}
		if b.Gap {
			return all, fmt.Errorf("Wait after %d: unexpected gap", after)
		}
		all = append(all, b.Frames...)
		if b.Done {
			return all, nil
		}
		if len(b.Frames) == 0 {
			return all, fmt.Errorf("Wait after %d returned nothing, not done, no gap", after)
		}
		after = b.Frames[len(b.Frames)-1].Seq
	}
}

func mustStatus(t *testing.T, what string, s turnlog.Status, err error, ref turnlog.Ref, last, first int64, done bool) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if s.Ref != ref || s.Owner != "owner-1" || s.AgentID != "agent-1" || s.Started.IsZero() {
		t.Fatalf("%s: meta %+v, want %s owner-1 agent-1 with a start time", what, s.Meta, ref)
	}
	if s.Last != last || s.First != first || s.Done != done {
		t.Fatalf("%s: last %d first %d done %v, want %d %d %v", what, s.Last, s.First, s.Done, last, first, done)
	}
}

func appendRead(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	if b, err := l.Read(ctx, ref, 0); err != nil || len(b.Frames) != 0 || b.Done || b.Gap {
		t.Fatalf("Read of a new turn = %+v, %v; want empty", b, err)
	}
	appendN(t, l, ref, 0, 1)
	appendN(t, l, ref, 1, 3)
	for _, r := range []turnlog.Log{l, peer} {
		b, err := r.Read(ctx, ref, 0)
		if err != nil || b.Done || b.Gap {
			t.Fatalf("Read after 0 = %+v, %v", b, err)
		}
		checkFrames(t, "Read after 0", b.Frames, 1, 4)
		b, err = r.Read(ctx, ref, 2)
		if err != nil {
			t.Fatalf("Read after 2: %v", err)
		}
		checkFrames(t, "Read after 2", b.Frames, 3, 4)
		if b, err := r.Read(ctx, ref, 4); err != nil || len(b.Frames) != 0 || b.Done || b.Gap {
			t.Fatalf("Read after the last frame = %+v, %v; want empty and running", b, err)
		}
		s, err := r.Lookup(ctx, ref)
		mustStatus(t, "Lookup", s, err, ref, 4, 1, false)
	}
	for _, r := range []turnlog.Log{l, peer} {
		if last, err := r.Append(ctx, ref); err != nil || last != 4 {
			t.Fatalf("Append of no frame = %d, %v; want 4, nil", last, err)
		}
	}
}

// signOfLife: Written is set by Start and advanced by every Append, an
// Append of no frames included, as every replica sees it; a finished turn
// refuses the sign of life like any Append.
func signOfLife(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	written := func(what string) time.Time {
		t.Helper()
		var w time.Time
		for i, r := range []turnlog.Log{l, peer} {
			s, err := r.Lookup(ctx, ref)
			if err != nil {
				t.Fatalf("%s: Lookup: %v", what, err)
			}
			if s.Written.IsZero() || time.Since(s.Written) > time.Minute || s.Written.Before(s.Started) {
				t.Fatalf("%s: Written %v (started %v); want a recent time from the start on", what, s.Written, s.Started)
			}
			if i == 1 && !s.Written.Equal(w) {
				t.Fatalf("%s: Written %v on the writer, %v on the peer", what, w, s.Written)
			}
			w = s.Written
		}
		return w
	}
	w0 := written("after Start")
	time.Sleep(5 * time.Millisecond)
	appendN(t, l, ref, 0, 2)
	w1 := written("after Append")
	if !w1.After(w0) {
		t.Fatalf("Append did not advance Written: %v then %v", w0, w1)
	}
	time.Sleep(5 * time.Millisecond)
	if last, err := l.Append(ctx, ref); err != nil || last != 2 {
		t.Fatalf("Append of no frame = %d, %v; want 2, nil", last, err)
	}
	w2 := written("after an Append of no frames")
	if !w2.After(w1) {
		t.Fatalf("an Append of no frames did not advance Written: %v then %v", w1, w2)
	}
	if b, err := peer.Read(ctx, ref, 0); err != nil || len(b.Frames) != 2 {
		t.Fatalf("an Append of no frames changed the frames: %+v, %v", b, err)
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, ref); !errors.Is(err, turnlog.ErrFinished) {
		t.Fatalf("Append of no frames to a finished turn: %v, want ErrFinished", err)
	}
}

func resumeAfterN(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ref := start(t, l, session.NewID())
	var last int64
	for size := int64(1); last < 100; size = size%7 + 1 {
		last = appendN(t, l, ref, last, min(size, 100-last))
	}
	if err := l.Finish(ctxT(t), ref); err != nil {
		t.Fatal(err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		for _, n := range []int64{0, 1, 37, 99, 100} {
			checkFrames(t, fmt.Sprintf("resume after %d", n), readAll(t, r, ref, n), n+1, 100)
		}
	}
}

func gapPastMaxFrames(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{MaxFrames: 16})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	var last int64
	for last < 40 {
		last = appendN(t, l, ref, last, min(3, 40-last))
	}
	for _, r := range []turnlog.Log{l, peer} {
		s, err := r.Lookup(ctx, ref)
		mustStatus(t, "Lookup", s, err, ref, 40, 25, false)
		for _, after := range []int64{0, 10, 23} {
			b, err := r.Read(ctx, ref, after)
			if err != nil || !b.Gap || len(b.Frames) != 0 || b.Done {
				t.Fatalf("Read after %d with frames 25..40 kept = %+v, %v; want a gap", after, b, err)
			}
			b, err = r.Wait(ctx, ref, after)
			if err != nil || !b.Gap {
				t.Fatalf("Wait after %d with frames 25..40 kept = %+v, %v; want a gap", after, b, err)
			}
		}
		b, err := r.Read(ctx, ref, 24)
		if err != nil || b.Gap {
			t.Fatalf("Read after 24 = %+v, %v", b, err)
		}
		checkFrames(t, "Read after 24", b.Frames, 25, 40)
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		if b, err := r.Read(ctx, ref, 23); err != nil || !b.Gap || b.Done {
			t.Fatalf("Read after 23 of the finished turn = %+v, %v; want a gap, not done", b, err)
		}
		checkFrames(t, "resume after 30", readAll(t, r, ref, 30), 31, 40)
		s, err := r.Lookup(ctx, ref)
		mustStatus(t, "Lookup after Finish", s, err, ref, 40, 25, true)
	}
}

func finish(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	empty := start(t, l, session.NewID())
	if err := l.Finish(ctx, empty); err != nil {
		t.Fatalf("Finish of a turn without frames: %v", err)
	}
	ref := start(t, l, session.NewID())
	appendN(t, l, ref, 0, 5)
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatalf("second Finish: %v; want nil", err)
	}
	if _, err := l.Append(ctx, ref, data(6)); !errors.Is(err, turnlog.ErrFinished) {
		t.Fatalf("Append after Finish: %v; want ErrFinished", err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		if b, err := r.Read(ctx, empty, 0); err != nil || !b.Done || len(b.Frames) != 0 || b.Gap {
			t.Fatalf("Read of a finished turn without frames = %+v, %v; want done", b, err)
		}
		s, err := r.Lookup(ctx, empty)
		mustStatus(t, "Lookup of a finished turn without frames", s, err, empty, 0, 1, true)
		b, err := r.Read(ctx, ref, 3)
		if err != nil || !b.Done {
			t.Fatalf("Read after 3 = %+v, %v; want done", b, err)
		}
		checkFrames(t, "Read after 3", b.Frames, 4, 5)
		if b, err := r.Read(ctx, ref, 5); err != nil || !b.Done || len(b.Frames) != 0 {
			t.Fatalf("Read after the last frame = %+v, %v; want done", b, err)
		}
		// Wait does not wait on a finished turn.
		if b, err := r.Wait(ctx, ref, 5); err != nil || !b.Done {
			t.Fatalf("Wait after the last frame = %+v, %v; want done", b, err)
		}
		s, err = r.Lookup(ctx, ref)
		mustStatus(t, "Lookup", s, err, ref, 5, 1, true)
	}
}

// finishWithFrames: Finish appends its frames and ends the turn in one
// call; a second Finish without frames does nothing, with frames it fails.
func finishWithFrames(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	appendN(t, l, ref, 0, 2)
	if err := l.Finish(ctx, ref, data(3), data(4), data(5)); err != nil {
		t.Fatalf("Finish with frames: %v", err)
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatalf("Finish without frames of a finished turn: %v; want nil", err)
	}
	if err := l.Finish(ctx, ref, data(6)); !errors.Is(err, turnlog.ErrFinished) {
		t.Fatalf("Finish with frames of a finished turn: %v; want ErrFinished", err)
	}
	only := start(t, l, session.NewID())
	if err := l.Finish(ctx, only, data(1)); err != nil {
		t.Fatalf("Finish with the turn's only frame: %v", err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		checkFrames(t, "resume after 1", readAll(t, r, ref, 1), 2, 5)
		s, err := r.Lookup(ctx, ref)
		mustStatus(t, "Lookup", s, err, ref, 5, 1, true)
		checkFrames(t, "the only frame", readAll(t, r, only, 0), 1, 1)
		s, err = r.Lookup(ctx, only)
		mustStatus(t, "Lookup of the one-frame turn", s, err, only, 1, 1, true)
	}
}

// gapInsideABatch: the kept window is exactly MaxFrames frames even when
// its oldest frame came in the middle of an Append's batch.
func gapInsideABatch(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{MaxFrames: 16})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	var last int64
	for last < 40 {
		last = appendN(t, l, ref, last, min(7, 40-last))
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		s, err := r.Lookup(ctx, ref)
		mustStatus(t, "Lookup", s, err, ref, 40, 25, true)
		for _, after := range []int64{20, 22, 23} {
			if b, err := r.Read(ctx, ref, after); err != nil || !b.Gap || len(b.Frames) != 0 || b.Done {
				t.Fatalf("Read after %d with frames 25..40 kept = %+v, %v; want a gap", after, b, err)
			}
		}
		checkFrames(t, "resume after 24", readAll(t, r, ref, 24), 25, 40)
		checkFrames(t, "resume after 27", readAll(t, r, ref, 27), 28, 40)
	}
}

// waitWakes checks that a blocked Wait returns on an Append and on a Finish
// of the same instance and of the peer.
func waitWakes(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	for _, tc := range []struct {
		name           string
		writer, reader turnlog.Log
	}{{"same", l, l}, {"peer", l, peer}} {
		ref := start(t, tc.writer, session.NewID())
		// An empty running turn makes Wait wait until its ctx ends.
		short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		b, err := tc.reader.Wait(short, ref, 0)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || len(b.Frames) != 0 {
			t.Fatalf("%s: Wait on an idle turn = %+v, %v; want DeadlineExceeded", tc.name, b, err)
		}
		type result struct {
			b   turnlog.Batch
			err error
		}
		got := make(chan result, 1)
		go func() {
			b, err := tc.reader.Wait(ctxT(t), ref, 0)
			got <- result{b, err}
		}()
		// Give the reader time to block; the result is right either way.
		time.Sleep(20 * time.Millisecond)
		appendN(t, tc.writer, ref, 0, 2)
		r := <-got
		if r.err != nil || r.b.Gap {
			t.Fatalf("%s: Wait woken by Append = %+v, %v", tc.name, r.b, r.err)
		}
		if len(r.b.Frames) == 0 || r.b.Frames[0].Seq != 1 {
			t.Fatalf("%s: Wait woken by Append returned %+v; want frames from 1", tc.name, r.b.Frames)
		}
		go func() {
			b, err := tc.reader.Wait(ctxT(t), ref, 2)
			got <- result{b, err}
		}()
		time.Sleep(20 * time.Millisecond)
		if err := tc.writer.Finish(ctxT(t), ref); err != nil {
			t.Fatal(err)
		}
		if r := <-got; r.err != nil || !r.b.Done || len(r.b.Frames) != 0 {
			t.Fatalf("%s: Wait woken by Finish = %+v, %v; want done", tc.name, r.b, r.err)
		}
	}
}

func waitContext(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ref := start(t, l, session.NewID())
	for _, r := range []turnlog.Log{l, peer} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := r.Wait(ctx, ref, 0)
			done <- err
		}()
		time.Sleep(10 * time.Millisecond)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after its ctx was cancelled: %v; want context.Canceled", err)
		}
	}
	// The log works on after abandoned waits.
	appendN(t, l, ref, 0, 1)
	if b, err := peer.Wait(ctxT(t), ref, 0); err != nil || len(b.Frames) != 1 {
		t.Fatalf("Wait after abandoned waits = %+v, %v", b, err)
	}
}

func latestPerSession(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	s1, s2 := session.NewID(), session.NewID()
	t1 := start(t, l, s1)
	appendN(t, l, t1, 0, 2)
	if err := l.Finish(ctx, t1); err != nil {
		t.Fatal(err)
	}
	t3 := start(t, l, s2)
	for _, r := range []turnlog.Log{l, peer} {
		s, err := r.Latest(ctx, s1)
		mustStatus(t, "Latest of s1 after its first turn", s, err, t1, 2, 1, true)
	}
	t2 := start(t, peer, s1)
	appendN(t, peer, t2, 0, 1)
	for _, r := range []turnlog.Log{l, peer} {
		s, err := r.Latest(ctx, s1)
		mustStatus(t, "Latest of s1", s, err, t2, 1, 1, false)
		s, err = r.Latest(ctx, s2)
		mustStatus(t, "Latest of s2", s, err, t3, 0, 1, false)
		if _, err := r.Latest(ctx, session.NewID()); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Latest of a session without turns: %v; want ErrNotFound", err)
		}
		// The earlier turn stays kept for resuming.
		s, err = r.Lookup(ctx, t1)
		mustStatus(t, "Lookup of s1's earlier turn", s, err, t1, 2, 1, true)
	}
	if err := peer.Finish(ctx, t2); err != nil {
		t.Fatal(err)
	}
	s, err := l.Latest(ctx, s1)
	mustStatus(t, "Latest of s1 after Finish", s, err, t2, 1, 1, true)
}

func retention(t *testing.T, open Open) {
	const keep = 300 * time.Millisecond
	l, peer := open(t, turnlog.Config{Retention: keep})
	ctx := ctxT(t)
	s1 := session.NewID()
	done := start(t, l, s1)
	appendN(t, l, done, 0, 3)
	if err := l.Finish(ctx, done); err != nil {
		t.Fatal(err)
	}
	running := start(t, l, session.NewID())
	appendN(t, l, running, 0, 1)
	finished := time.Now()
	if _, err := peer.Lookup(ctx, done); err != nil && time.Since(finished) < keep {
		t.Fatalf("Lookup right after Finish: %v", err)
	}
	// Gone after the retention; polled because expiry is not instant.
	for {
		_, err := peer.Lookup(ctx, done)
		if errors.Is(err, turnlog.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("Lookup while waiting for expiry: %v", err)
		}
		if time.Since(finished) > keep+5*time.Second {
			t.Fatalf("finished turn still kept %v after Finish with Retention %v", time.Since(finished), keep)
		}
		time.Sleep(keep / 10)
	}
	if gone := time.Since(finished); gone < keep-50*time.Millisecond {
		t.Fatalf("finished turn dropped after %v, before its Retention %v", gone, keep)
	}
	for _, r := range []turnlog.Log{l, peer} {
		if _, err := r.Read(ctx, done, 0); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Read of an expired turn: %v; want ErrNotFound", err)
		}
		if _, err := r.Latest(ctx, s1); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Latest of a session whose only turn expired: %v; want ErrNotFound", err)
		}
		// A running turn is not subject to the retention.
		s, err := r.Lookup(ctx, running)
		mustStatus(t, "Lookup of the running turn", s, err, running, 1, 1, false)
	}
}

func concurrentReaders(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	const total = 300
	type result struct {
		name   string
		from   int64
		frames []turnlog.Frame
		err    error
	}
	results := make(chan result, 8)
	var wg sync.WaitGroup
	reader := func(name string, r turnlog.Log, after int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frames, err := follow(ctx, r, ref, after)
			results <- result{name, after + 1, frames, err}
		}()
	}
	for i, r := range []turnlog.Log{l, peer, l, peer, l, peer} {
		reader(fmt.Sprintf("reader %d", i), r, 0)
	}
	var last int64
	for size := int64(1); last < total; size = size%5 + 1 {
		last = appendN(t, l, ref, last, min(size, total-last))
		if last >= 150 && last < 150+size {
			// Readers that resume in the middle of the live turn.
			reader("resumer on the log", l, 150)
			reader("resumer on the peer", peer, 150)
		}
	}
	if err := l.Finish(ctx, ref); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		n++
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		checkFrames(t, r.name, r.frames, r.from, total)
	}
	if n != 8 {
		t.Fatalf("%d readers finished, want 8", n)
	}
}

// slowReader: readers that stop reading, or wait without ever being
// served, do not hold up the writer; the stalled one gets a gap later.
func slowReader(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{MaxFrames: 16})
	ctx := ctxT(t)
	ref := start(t, l, session.NewID())
	appendN(t, l, ref, 0, 1)
	b, err := peer.Read(ctx, ref, 0) // the slow reader's first and only read for now
	if err != nil || len(b.Frames) != 1 {
		t.Fatalf("first read = %+v, %v", b, err)
	}
	// Waiters whose results nobody collects.
	waitCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := l
			if i%2 == 1 {
				r = peer
			}
			for after := int64(1); ; {
				b, err := r.Wait(waitCtx, ref, after)
				if err != nil || b.Gap || b.Done {
					return
				}
				after = b.Frames[len(b.Frames)-1].Seq
				time.Sleep(5 * time.Millisecond) // a slow consumer
			}
		}()
	}
	// Every Append completes (each within the suite's timeout) although no
	// reader keeps up.
	var last int64 = 1
	for last < 200 {
		last = appendN(t, l, ref, last, 1)
	}
	if b, err := peer.Read(ctx, ref, 1); err != nil || !b.Gap {
		t.Fatalf("the slow reader's next read = %+v, %v; want a gap", b, err)
	}
	cancel()
	wg.Wait()
}

func badInput(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	unknown := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	for _, r := range []turnlog.Log{l, peer} {
		if _, err := r.Read(ctx, unknown, 0); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Read of an unknown turn: %v; want ErrNotFound", err)
		}
		if _, err := r.Wait(ctx, unknown, 0); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Wait on an unknown turn: %v; want ErrNotFound", err)
		}
		if _, err := r.Lookup(ctx, unknown); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Lookup of an unknown turn: %v; want ErrNotFound", err)
		}
		if _, err := r.Append(ctx, unknown, data(1)); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Append to an unknown turn: %v; want ErrNotFound", err)
		}
		if err := r.Finish(ctx, unknown); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Finish of an unknown turn: %v; want ErrNotFound", err)
		}
	}
	ref := start(t, l, session.NewID())
	appendN(t, l, ref, 0, 2)
	if err := peer.Start(ctx, turnlog.Meta{Ref: ref, Owner: "someone-else"}); !errors.Is(err, turnlog.ErrExists) {
		t.Fatalf("Start of a kept turn: %v; want ErrExists", err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		if _, err := r.Read(ctx, ref, 3); !errors.Is(err, turnlog.ErrAhead) {
			t.Fatalf("Read after a seq past the last frame: %v; want ErrAhead", err)
		}
		if _, err := r.Read(ctx, ref, -1); err == nil {
			t.Fatal("Read after -1: no error")
		}
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Start with a bad session ID", func() error {
			return l.Start(ctx, turnlog.Meta{Ref: turnlog.Ref{Session: "a}b{c-with-braces", Turn: session.NewID()}})
		}},
		{"Start with a bad turn ID", func() error {
			return l.Start(ctx, turnlog.Meta{Ref: turnlog.Ref{Session: session.NewID(), Turn: "turn:1"}})
		}},
		{"Read with an empty session ID", func() error { _, err := l.Read(ctx, turnlog.Ref{Turn: ref.Turn}, 0); return err }},
		{"Latest with a bad session ID", func() error { _, err := l.Latest(ctx, "x"); return err }},
		{"Append of an empty frame", func() error { _, err := l.Append(ctx, ref, data(3), nil); return err }},
		{"Append of a frame with a newline", func() error { _, err := l.Append(ctx, ref, []byte("{\n}")); return err }},
	} {
		err := tc.call()
		if err == nil || errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("%s: %v; want an input error", tc.name, err)
		}
	}
	// Rejected input changed nothing.
	s, err := peer.Lookup(ctx, ref)
	mustStatus(t, "Lookup after rejected input", s, err, ref, 2, 1, false)
}

func forget(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	s1, s2 := session.NewID(), session.NewID()
	a := start(t, l, s1)
	appendN(t, l, a, 0, 2)
	if err := l.Finish(ctx, a); err != nil {
		t.Fatal(err)
	}
	b := start(t, l, s1)
	appendN(t, l, b, 0, 1)
	if err := l.Finish(ctx, b); err != nil {
		t.Fatal(err)
	}
	other := start(t, l, s2)
	appendN(t, l, other, 0, 1)
	if err := peer.Forget(ctx, s1); err != nil {
		t.Fatal(err)
	}
	for _, r := range []turnlog.Log{l, peer} {
		for _, ref := range []turnlog.Ref{a, b} {
			if _, err := r.Lookup(ctx, ref); !errors.Is(err, turnlog.ErrNotFound) {
				t.Fatalf("Lookup of a forgotten turn: %v; want ErrNotFound", err)
			}
			if _, err := r.Read(ctx, ref, 0); !errors.Is(err, turnlog.ErrNotFound) {
				t.Fatalf("Read of a forgotten turn: %v; want ErrNotFound", err)
			}
		}
		if _, err := r.Latest(ctx, s1); !errors.Is(err, turnlog.ErrNotFound) {
			t.Fatalf("Latest of a forgotten session: %v; want ErrNotFound", err)
		}
		s, err := r.Latest(ctx, s2)
		mustStatus(t, "Latest of the other session", s, err, other, 1, 1, false)
	}
	// The session can have turns again.
	c := start(t, l, s1)
	appendN(t, l, c, 0, 1)
}

func closed(t *testing.T, open Open) {
	l, _ := open(t, turnlog.Config{})
	ref := start(t, l, session.NewID())
	errs := make(chan error, 1)
	go func() {
		_, err := l.Wait(ctxT(t), ref, 0)
		errs <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errs; !errors.Is(err, turnlog.ErrClosed) {
		t.Fatalf("Wait during Close: %v; want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := ctxT(t)
	for name, err := range map[string]error{
		"Start":  l.Start(ctx, turnlog.Meta{Ref: turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}}),
		"Append": func() error { _, err := l.Append(ctx, ref, data(1)); return err }(),
		"Read":   func() error { _, err := l.Read(ctx, ref, 0); return err }(),
		"Lookup": func() error { _, err := l.Lookup(ctx, ref); return err }(),
		"Latest": func() error { _, err := l.Latest(ctx, ref.Session); return err }(),
		"Finish": l.Finish(ctx, ref),
	} {
		if !errors.Is(err, turnlog.ErrClosed) {
			t.Fatalf("%s after Close: %v; want ErrClosed", name, err)
		}
	}
}

// stop: a stop request made through any instance reaches the watchers of
// the process writing the running turn; a finished or unknown turn cannot
// be stopped; a cancelled watcher hears nothing more.
func stop(t *testing.T, open Open) {
	log, peer := open(t, turnlog.Config{})
	heard := make(chan turnlog.Ref, 8)
	cancel := log.WatchStops(func(ref turnlog.Ref) { heard <- ref })
	var peerHeard chan turnlog.Ref
	if peer != log {
		peerHeard = make(chan turnlog.Ref, 8)
		defer peer.WatchStops(func(ref turnlog.Ref) { peerHeard <- ref })()
	}
	sid := session.NewID()
	ref := start(t, log, sid)
	appendN(t, log, ref, 0, 3)
	// Give a subscription time to be in place (pub/sub delivers only to
	// subscribers present at the publish).
	deadline := time.Now().Add(timeout)
	var got turnlog.Ref
	for got == (turnlog.Ref{}) {
		if err := peer.Stop(ctxT(t), ref); err != nil {
			t.Fatalf("Stop of a running turn: %v", err)
		}
		select {
		case got = <-heard:
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the writer's watcher never heard the stop request")
			}
		}
	}
	if got != ref {
		t.Fatalf("heard %v, want %v", got, ref)
	}
	// The request stands on the turn, for a process that takes it over.
	if st, err := peer.Lookup(ctxT(t), ref); err != nil || !st.Stop {
		t.Fatalf("Lookup after a stop request: %+v, %v; want Stop set", st, err)
	}
	if peerHeard != nil {
		select {
		case r := <-peerHeard:
			t.Fatalf("a process that does not write the turn heard its stop: %v", r)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := log.Finish(ctxT(t), ref); err != nil {
		t.Fatal(err)
	}
	if err := peer.Stop(ctxT(t), ref); !errors.Is(err, turnlog.ErrFinished) {
		t.Fatalf("Stop of a finished turn: %v, want ErrFinished", err)
	}
	if err := peer.Stop(ctxT(t), turnlog.Ref{Session: sid, Turn: session.NewID()}); !errors.Is(err, turnlog.ErrNotFound) {
		t.Fatalf("Stop of an unknown turn: %v, want ErrNotFound", err)
	}
	if err := peer.Stop(ctxT(t), turnlog.Ref{Session: "no", Turn: "x"}); err == nil {
		t.Fatal("Stop with an invalid ref succeeded")
	}
	// A cancelled watcher hears nothing more.
	for len(heard) > 0 {
		<-heard
	}
	cancel()
	other := start(t, log, sid)
	if err := peer.Stop(ctxT(t), other); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-heard:
		t.Fatalf("a cancelled watcher heard %v", r)
	case <-time.After(200 * time.Millisecond):
	}
}

// opened: a turn opened without a write of its own (Open) is kept, with
// its meta data, from its first write on, whether that write is an Append
// or a Finish with all its frames; its writer watches its stops; opening
// a kept turn fails, at Open or at the first write.
func opened(t *testing.T, open Open) {
	l, peer := open(t, turnlog.Config{})
	ctx := ctxT(t)
	meta := func(sessionID string) turnlog.Meta {
		return turnlog.Meta{Ref: turnlog.Ref{Session: sessionID, Turn: session.NewID()}, Owner: "owner-1", AgentID: "agent-1"}
	}

	whole := meta(session.NewID())
	if err := l.Open(whole); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := l.Finish(ctx, whole.Ref, data(1), data(2), data(3)); err != nil {
		t.Fatalf("Finish of an opened turn with all its frames: %v", err)
	}

	running := meta(session.NewID())
	if err := l.Open(running); err != nil {
		t.Fatalf("Open: %v", err)
	}
	stopped := make(chan turnlog.Ref, 4)
	defer l.WatchStops(func(ref turnlog.Ref) { stopped <- ref })()
	appendN(t, l, running.Ref, 0, 2)
	for _, r := range []turnlog.Log{l, peer} {
		s, err := r.Lookup(ctx, whole.Ref)
		mustStatus(t, "Lookup of a turn opened and finished in one write", s, err, whole.Ref, 3, 1, true)
		if s.Owner != "owner-1" || s.AgentID != "agent-1" || s.Started.IsZero() {
			t.Fatalf("the opened turn's meta data: %+v", s.Meta)
		}
		checkFrames(t, "the frames of the opened turn", readAll(t, r, whole.Ref, 0), 1, 3)
		s, err = r.Latest(ctx, running.Session)
		mustStatus(t, "Latest of an opened turn after an Append", s, err, running.Ref, 2, 1, false)
	}
	if err := peer.Stop(ctx, running.Ref); err != nil {
		t.Fatalf("Stop of an opened turn after its first write: %v", err)
	}
	select {
	case ref := <-stopped:
		if ref != running.Ref {
			t.Fatalf("the writer was told to stop %s, want %s", ref, running.Ref)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer of an opened turn did not hear of its stop")
	}
	appendN(t, l, running.Ref, 2, 1)
	if err := l.Finish(ctx, running.Ref); err != nil {
		t.Fatal(err)
	}
	s, err := peer.Lookup(ctx, running.Ref)
	mustStatus(t, "Lookup after Finish", s, err, running.Ref, 3, 1, true)

	again := whole
	again.Started = time.Now().Add(time.Minute)
	err = l.Open(again)
	if err == nil {
		_, err = l.Append(ctx, again.Ref, data(4))
	}
	if !errors.Is(err, turnlog.ErrExists) {
		t.Fatalf("opening a kept turn and writing to it: %v; want ErrExists", err)
	}
}
