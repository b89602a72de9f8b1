package server

import "unsafe"

// A turn's goroutine starts with the runtime's smallest stack (2 KiB: serve
// runs with adaptivestackstart=0, see cmd/server/stacks_unix.go) and ends
// up at 8 KiB while it waits for the model's first chunk: the service's
// part of that wait is measured by llmorch.TestWaitingTurnStack, the
// rest is the provider's read under net/http. Grown as it went, the stack
// was copied twice on the way to the model request (2 to 4 KiB, 4 to 8
// KiB), each copy walking every frame then on it, and once more (8 to 16
// KiB) on the first token, whose frames (the UI mapping and the publish to
// live connections, on top of the model's stream under the service and the
// agent) did not fit: three copies per turn, about 2 % of the server's CPU
// at 200 streams (BENCHMARKS.md, fourteenth round).
//
// reserveTurnStack, called before anything else in the goroutine, grows it
// to 8 KiB at once, while the stack holds one frame: one copy of next to
// nothing, and no memory a waiting turn would not hold anyway. The frames
// under a turn's consumer are kept small enough for a text delta's way to
// fit in those 8 KiB (TestTextDeltasKeepTheTurnStack).

// turnStackReserve is what reserveTurnStack's frame adds: under 8 KiB
// less the runtime's guard (928 bytes) and runTurn's frame, so that the
// stack grows to 8 KiB and not beyond.
const turnStackReserve = 6 << 10

// reserveTurnStack grows the calling goroutine's stack to 8 KiB in one
// step, when called at the goroutine's start.
//
//go:noinline
func reserveTurnStack() {
	var pad [turnStackReserve]byte
	keep(pad[:])
}

// keep stops the compiler from dropping reserveTurnStack's frame.
//
//go:noinline
func keep([]byte) {}

// turnStackProbe, set by tests before the server starts, is given an
// address on a turn's stack as each text delta reaches the turn, before the
// turn handles it, taken at the same depth each time: a different address
// means the stack moved (grew) while the turn handled the deltas before.
var turnStackProbe func(addr uintptr)

// stackAddr is an address in its own frame.
//
//go:noinline
func stackAddr() uintptr {
	var b byte
	return uintptr(unsafe.Pointer(&b))
}
