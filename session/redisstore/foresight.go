package redisstore

import (
	"math/bits"
	"slices"
	"sync"

	"github.com/agentdock-go/agentdock/session"
)

// forecast is what a ClaimStart told its caller before its round trip
// (session.WithForesight): the Started it expects, from the session and
// history tail this process remembers (recent).
type forecast struct {
	started session.Started
	raw     []string // the history window foreseen, as stored
}

// foresight keeps the store's forecasts honest. A forecast that fails
// costs its caller what it started on it (a model's request, sent ahead
// and cancelled), so forecasts are made only while this process's
// expectations of its sessions held: at most foresightMisses misses in
// the latest 64 claims that had one. A process whose sessions are also
// written by other replicas (a load balancer without affinity) then stops
// forecasting by itself, and starts again when its expectations hold.
// Every claim with an expectation counts, forecast or not, so that the
// count recovers.
type foresight struct {
	mu       sync.Mutex
	outcomes uint64 // the latest outcomes, newest in bit 0; 1 is a miss
}

const foresightMisses = 2

func (f *foresight) trusted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bits.OnesCount64(f.outcomes) <= foresightMisses
}

func (f *foresight) record(miss bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcomes <<= 1
	if miss {
		f.outcomes |= 1
	}
}

// confirm records how fc, if any, turned out: raw is the history window
// the claim returned with its write, nil when it made none.
func (f *foresight) confirm(fc *forecast, raw []string) {
	if fc == nil {
		return
	}
	f.record(raw == nil || !slices.Equal(raw, fc.raw))
}

// foresee returns the forecast of the claim sw prepares, or nil when its
// history window is not known here or forecasts do not hold lately.
func (r *Store) foresee(id string, sw *start) *forecast {
	if !r.foresight.trusted() {
		return nil
	}
	raw, ok := sw.tail.window(sw.ap.window, sw.ap.dropAnswer)
	if !ok {
		return nil
	}
	hist, err := decodeMessages(id, raw)
	if err != nil {
		return nil
	}
	if raw == nil {
		raw = []string{}
	}
	return &forecast{started: session.Started{Session: sw.next, History: hist}, raw: raw}
}

// afterStart is the history tail after the write sw made with its claim,
// whose script returned raw, the window before its messages.
func (r *Store) afterStart(sw *start, raw []string) tail {
	if w := sw.ap.window; w < 0 || w > 0 && len(raw) < w {
		// raw is the whole history, after the drop if any.
		return tail{msgs: raw, known: true, whole: true}.appended(sw.ap.msgs, false, r.cfg.MaxMessages)
	}
	return sw.tail.appended(sw.ap.msgs, sw.ap.dropAnswer, r.cfg.MaxMessages)
}
