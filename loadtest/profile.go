package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profileClient has no timeout of its own: a CPU profile takes as long as
// it was asked to; the context bounds it.
var profileClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// profile requests the server's /debug/pprof/<name>?<query> and returns
// the body of its answer, once the server has answered 200.
func (e *Env) profile(ctx context.Context, name, query string) (io.ReadCloser, error) {
	url := e.pprof + "/debug/pprof/" + name
	if query != "" {
		url += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("loadtest: profile: %w", err)
	}
	resp, err := profileClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %s profile of the %s server: %w", name, e.cfg.Store, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("loadtest: %s profile of the %s server: %s: %s", name, e.cfg.Store, resp.Status, b)
	}
	return resp.Body, nil
}

// fetchProfile saves the server's /debug/pprof/<name>?<query> as
// ProfileDir/<store>-<label>.<name>.pprof.
func (e *Env) fetchProfile(ctx context.Context, label, name, query string) error {
	body, err := e.profile(ctx, name, query)
	if err != nil {
		return err
	}
	defer body.Close()
	path := filepath.Join(e.cfg.ProfileDir, fmt.Sprintf("%s-%s.%s.pprof", e.cfg.Store, label, name))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadtest: %w", err)
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("loadtest: writing %s: %w", path, err)
	}
	return nil
}

// cpuProfile starts a CPU profile of the server over d and reports its
// end on the channel.
func (e *Env) cpuProfile(ctx context.Context, label string, d time.Duration) <-chan error {
	return e.profileOver(ctx, label, "profile", d)
}

// traceSpan is how long the execution trace of a profiled window runs:
// long enough for a few hundred turns' first tokens at 200 streams, short
// enough that the tracer's own cost stays out of most of the window.
const traceSpan = 2 * time.Second

// execTrace saves an execution trace of the server over traceSpan from
// now, for the scheduling delays a CPU profile cannot show (go tool trace,
// or go tool trace -pprof=sched); it reports its end on the channel.
func (e *Env) execTrace(ctx context.Context, label string) <-chan error {
	return e.profileOver(ctx, label, "trace", traceSpan)
}

// profileOver starts fetching the server's profile name taken over d
// (whole seconds, rounded up: the profile API's unit) and reports its end
// on the channel.
func (e *Env) profileOver(ctx context.Context, label, name string, d time.Duration) <-chan error {
	done := make(chan error, 1)
	secs := max(1, int((d+time.Second-1)/time.Second))
	go func() { done <- e.fetchProfile(ctx, label, name, fmt.Sprintf("seconds=%d", secs)) }()
	return done
}

// snapshotProfiles saves the server's heap and goroutine profiles; gc runs
// a collection first, so that the heap profile shows what is live.
func (e *Env) snapshotProfiles(ctx context.Context, label string, gc bool) error {
	q := ""
	if gc {
		q = "gc=1"
	}
	return errors.Join(e.fetchProfile(ctx, label, "heap", q), e.fetchProfile(ctx, label, "goroutine", ""))
}

// collected runs two collections in the server and reads its runtime
// gauges: heap and stacks in use from the MemStats that net/http/pprof's
// heap profile prints in its text form (gc=1&debug=1) right after the
// second collection, the rest from /metrics. Two, because a sync.Pool
// keeps what it holds through one. The gzip-compressed form would
// allocate about a megabyte before a scrape could read the gauges, and
// whether a collection took it back by then varied the heap reading by
// 1.5 MB (a 20-stream round read less with its streams than without).
func (e *Env) collected(ctx context.Context) (map[string]float64, error) {
	var text []byte
	for range 2 {
		body, err := e.profile(ctx, "heap", "gc=1&debug=1")
		if err != nil {
			return nil, err
		}
		text, err = io.ReadAll(body)
		body.Close()
		if err != nil {
			return nil, fmt.Errorf("loadtest: collection in the %s server: %w", e.cfg.Store, err)
		}
	}
	heap, stack, err := memStatsInUse(string(text))
	if err != nil {
		return nil, fmt.Errorf("loadtest: collection in the %s server: %w", e.cfg.Store, err)
	}
	m, err := runtimeMetrics(ctx, e.base)
	if err != nil {
		return nil, err
	}
	m["go_memstats_heap_inuse_bytes"], m["go_memstats_stack_inuse_bytes"] = heap, stack
	return m, nil
}

// memStatsInUse reads HeapInuse and StackInuse from the MemStats lines at
// the end of a heap profile's text form ("# HeapInuse = N", "# Stack =
// inuse / sys").
func memStatsInUse(text string) (heap, stack float64, err error) {
	var haveHeap, haveStack bool
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# HeapInuse = "); ok {
			heap, err = strconv.ParseFloat(v, 64)
			haveHeap = err == nil
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# Stack = "); ok {
			inuse, _, _ := strings.Cut(v, " / ")
			stack, err = strconv.ParseFloat(inuse, 64)
			haveStack = err == nil
		}
	}
	if !haveHeap || !haveStack {
		return 0, 0, errors.New("the heap profile's text has no HeapInuse and Stack lines")
	}
	return heap, stack, nil
}

// RelayRequestFrom makes the relay's fixed model request (its RELAY_REQUEST)
// from a model request the runtime sent: the same fields and system
// messages, without the conversation (the relay adds the client's message)
// and without "stream" (the relay sets it).
func RelayRequestFrom(body []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("loadtest: the runtime's model request: %w", err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(req["messages"], &msgs); err != nil {
		return nil, fmt.Errorf("loadtest: the runtime's model request: messages: %w", err)
	}
	system := []json.RawMessage{}
	for _, m := range msgs {
		var role struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(m, &role); err != nil {
			return nil, fmt.Errorf("loadtest: the runtime's model request: a message: %w", err)
		}
		if role.Role == "system" {
			system = append(system, m)
		}
	}
	b, err := json.Marshal(system)
	if err != nil {
		return nil, err
	}
	req["messages"] = b
	delete(req, "stream")
	return json.MarshalIndent(req, "", "  ")
}
