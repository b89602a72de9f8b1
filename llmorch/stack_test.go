//go:build !race

// The race detector's instrumentation changes the frames' sizes; the
// figures below are the compiler's without it.

package llmorch_test

import (
	"context"
	"iter"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/telemetry"
)

// depthModel records where on its caller's stack a model call runs: the
// depth at which a provider then waits for the model's bytes.
type depthModel struct{ at uintptr }

func (m *depthModel) Info() llmorch.Info { return llmorch.Info{Provider: "test", Model: "depth"} }

func (m *depthModel) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		var here byte
		m.at = uintptr(unsafe.Pointer(&here))
		yield(chat.Event{Kind: chat.KindTextDelta, Text: "ok"}, nil)
	}
}

//go:noinline
func growStack(n int) byte {
	var pad [64 << 10]byte
	pad[n%len(pad)] = byte(n)
	return pad[(n*7)%len(pad)]
}

// waitingFrames bounds the bytes of the service's frames under a model
// call, from the turn's iteration to the model's Stream (with telemetry,
// as the server runs it). They are on the stack of every turn for as
// long as it waits for the model, a stack that sits just under 8 KiB in
// all: a few hundred bytes more double it to 16 KiB for every open stream
// (BENCHMARKS.md, "Ninth round"). Measured at 8015183: 2,527 bytes; the
// prefetch experiment's first version, which returned a Request by value
// into modelStep, added 360.
const waitingFrames = 2800

// TestWaitingTurnStack keeps the service's frames under a model call
// small. If it fails, keep large values off those frames (a Request or a
// Snapshot by value, many locals live across the call): return pointers,
// or move the work into a function that returns before the call. Raise
// waitingFrames only after checking that a waiting stream's stacks did not
// grow (the load harness's idle phase: "stacks per stream").
func TestWaitingTurnStack(t *testing.T) {
	// No collection may shrink the stack between the two readings.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	tel, err := telemetry.New(telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := &depthModel{}
	f, _ := newService(t, orchestrated, llmorch.ServiceConfig{Model: model, Telemetry: tel})
	turn := f.start(t, "hello")
	var top uintptr
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Grown once, the stack does not move (and the addresses stay
		// comparable) while the turn runs.
		growStack(1)
		var here byte
		top = uintptr(unsafe.Pointer(&here))
		for range f.svc.StreamWithOrchestration(context.Background(), turn) {
		}
	}()
	<-done
	if model.at == 0 || model.at > top {
		t.Fatalf("the model's call was not seen below the turn's frame (top %#x, model %#x)", top, model.at)
	}
	depth := top - model.at
	t.Logf("the service's frames under a model call: %d bytes", depth)
	if depth > waitingFrames {
		t.Fatalf("the service's frames under a model call take %d bytes, over %d: they are on every waiting turn's stack (see waitingFrames)", depth, waitingFrames)
	}
}
