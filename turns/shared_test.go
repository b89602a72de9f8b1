package turns

import (
	"log/slog"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
)

// TestBatchDue: a batch is due on the replica's shared grid of
// mirrorBatch/2, between mirrorBatch/2 and mirrorBatch after its oldest
// frame.
func TestBatchDue(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		after, want time.Duration
	}{
		{0, 50 * time.Millisecond},
		{time.Millisecond, 100 * time.Millisecond},
		{49 * time.Millisecond, 100 * time.Millisecond},
		{50 * time.Millisecond, 100 * time.Millisecond},
		{51 * time.Millisecond, 150 * time.Millisecond},
		{99*time.Millisecond + 999*time.Microsecond, 150 * time.Millisecond},
	} {
		oldest := base.Add(tc.after)
		got := batchDue(oldest)
		if got.Sub(base) != tc.want {
			t.Errorf("batchDue(+%v) = +%v, want +%v", tc.after, got.Sub(base), tc.want)
		}
		if wait := got.Sub(oldest); wait < mirrorBatch/2 || wait > mirrorBatch {
			t.Errorf("batchDue(+%v): the oldest frame waits %v", tc.after, wait)
		}
	}
}

// TestMirrorStep: stepped on the grid (a little late), the mirror writes a batch at the
// grid point after the one where it first saw the batch's frames (so a
// frame waits at most mirrorBatch), a sign of life after Liveness
// without frames, and the last frames with the end at the first grid
// point after the turn ended.
func TestMirrorStep(t *testing.T) {
	s := &Runtime{cfg: Config{Liveness: time.Second}, log: slog.New(slog.DiscardHandler), base: t.Context()}
	grid := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	// Each step runs a little after its grid point, as a timer fires.
	at := func(n int) time.Time { return grid.Add(time.Duration(n)*mirrorGrid + 3*time.Millisecond) }
	tr := newTurn("turn-1", "session-1", "agent", "", func(error) {}, 100, time.Minute)
	st := &mirrorState{t: tr, lastWrite: at(0)}
	step := func(n int) bool {
		w := s.mirrorStep(st, at(n))
		if w != nil {
			// What a successful write records.
			last, _ := tr.state()
			st.sent, st.lastWrite, st.pending = last, at(n), time.Time{}
		}
		return w != nil
	}
	if step(1) {
		t.Fatal("a write with no frames and no sign of life due")
	}
	tr.add(chat.Event{Kind: chat.KindStart, Start: &chat.Start{Turn: "turn-1"}}) // just after point 1
	if step(2) {
		t.Fatal("a batch written at the first point that saw it")
	}
	if !step(3) {
		t.Fatal("no batch at the point after the one that saw its frames")
	}
	if step(4) || step(5) {
		t.Fatal("a write with nothing new")
	}
	// A waiting turn is stepped 20 times a second: a step with nothing to
	// write allocates nothing.
	if n := testing.AllocsPerRun(100, func() { s.mirrorStep(st, at(5)) }); n != 0 {
		t.Fatalf("a step with nothing to write allocated %v times", n)
	}
	if !step(3 + int(time.Second/mirrorGrid)) {
		t.Fatal("no sign of life after Liveness without frames")
	}
	tr.add(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop})
	tr.finish()
	n := 4 + int(time.Second/mirrorGrid)
	if w := s.mirrorStep(st, at(n)); w == nil {
		t.Fatal("the end not written at the first point after it")
	}
}
