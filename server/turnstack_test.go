//go:build !race

// The race detector's instrumentation changes the frames' sizes; the
// stack this test checks is the compiler's without it.

package server

import (
	"net/http"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
)

// TestTextDeltasKeepTheTurnStack streams a turn from a model over HTTP
// (the OpenAI wire format, through the real provider) to a client reading
// it live, and checks that the turn's stack did not grow between its first
// text delta and its last: a text delta's way (the model's stream, the
// service, the agent, the UI mapping, the publish to the live connection)
// fits in the 8 KiB reserveTurnStack gives the turn. Should a frame on
// that way grow past it, every turn's stack would be copied to 16 KiB on
// its first token again (BENCHMARKS.md, fourteenth round). The control
// grows the stack on purpose, to show that the probe sees it.
func TestTextDeltasKeepTheTurnStack(t *testing.T) {
	// The check needs goroutines to start small, as serve's do.
	t.Logf("goroutines start with %d-byte stacks", startingStack(t))
	if s := startingStack(t); s > 8<<10 {
		t.Fatalf("goroutines start with %d-byte stacks here; the check needs at most 8 KiB", s)
	}
	mock := mockllm.New()
	defer mock.Close()
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{model: model})

	for _, tc := range []struct {
		name  string
		grow  bool
		moved bool
	}{
		{name: "control", grow: true, moved: true},
		{name: "text deltas", moved: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				addrs []uintptr
			)
			turnStackProbe = func(addr uintptr) {
				mu.Lock()
				first := len(addrs) == 0
				addrs = append(addrs, addr)
				mu.Unlock()
				if first && tc.grow {
					growStack(1)
				}
			}
			defer func() { turnStackProbe = nil }()
			text := []string{"One ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight."}
			mock.Enqueue(mockllm.Script{Text: text, TimeToFirstToken: 20 * time.Millisecond, InterTokenDelay: 2 * time.Millisecond})

			res := e.do(http.MethodPost, "/api/chat/plain", `{"message":"Count to eight","sessionId":"stack-`+strings.ReplaceAll(tc.name, " ", "-")+`"}`)
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			var got strings.Builder
			for _, ev := range newSSEReader(res.Body).all() {
				if chunkType(t, ev.Data) == "text-delta" {
					got.WriteString(ev.Data)
				}
			}
			if !strings.Contains(got.String(), "eight.") {
				t.Fatalf("the stream's text deltas lack the answer's end: %s", got.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(addrs) != len(text) {
				t.Fatalf("the probe saw %d text deltas, want %d", len(addrs), len(text))
			}
			moved := false
			for _, a := range addrs[1:] {
				moved = moved || a != addrs[0]
			}
			if moved != tc.moved {
				t.Fatalf("the turn's stack moved: %v, want %v (addresses %x)", moved, tc.moved, addrs)
			}
		})
	}
}

// startingStack is the stack size the runtime gives new goroutines.
func startingStack(t *testing.T) uint64 {
	s := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime/metrics has no %s", s[0].Name)
	}
	return s[0].Value.Uint64()
}

// growStack needs more stack than a turn is given.
//
//go:noinline
func growStack(n int) byte {
	var pad [16 << 10]byte
	pad[n%len(pad)] = byte(n)
	return pad[(n*7)%len(pad)]
}
