package turns

import (
	"context"
	"errors"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func TestTurnLogWindow(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tr := newTurn("turnabcdef", "sess", "a", "", cancel, 16, 0)
	for i := 0; i < 40; i++ {
		tr.add(chat.Event{Kind: chat.KindStepStart})
		if stopped := ctx.Err() != nil; stopped != (i >= 16) {
			t.Fatalf("after %d events with a cap of 16 the turn is stopped: %v", i+1, stopped)
		}
	}
	var lim *chat.Limit
	if !errors.As(context.Cause(ctx), &lim) || lim.Name != chat.LimitEvents || lim.Value != "16" {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if events, _, gap, _ := tr.read(0); gap || len(events) != 40 {
		t.Fatalf("read(0) after 40 events with a cap of 16: %d events, gap %v: every event is kept", len(events), gap)
	}
	events, done, gap, changed := tr.read(30)
	if gap || done || len(events) != 10 || events[0].Seq != 31 || events[9].Seq != 40 {
		t.Fatalf("read(30): %d events from %d, gap %v done %v", len(events), events[0].Seq, gap, done)
	}
	// Past the slack (a turn that ignores its cancellation), the oldest go.
	for range EventSlack {
		tr.add(chat.Event{Kind: chat.KindStepStart})
	}
	if _, _, gap, _ := tr.read(0); !gap {
		t.Fatal("reading from 0 past the slack must be a gap")
	}
	tr.finish()
	select {
	case <-changed:
	default:
		t.Fatal("finish did not wake readers")
	}
	tr.add(chat.Event{Kind: chat.KindStepStart})
	if last, done := tr.state(); last != 40+EventSlack || !done {
		t.Fatalf("after finish: last %d done %v", last, done)
	}
}

func BenchmarkTurnLogAdd(b *testing.B) {
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tr := newTurn("turnabcdef", "sess", "a", "", cancel, DefaultMaxEvents, 0)
	it := chat.Event{Kind: chat.KindTextDelta, Text: "word "}
	b.ReportAllocs()
	for b.Loop() {
		tr.add(it)
	}
}
