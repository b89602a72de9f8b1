package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// stallConfig sizes one stall measurement.
type stallConfig struct {
	// healthy streams run at once in each phase, each with frames text
	// deltas InterTokenDelay apart.
	healthy, frames int
	// stalled clients, each with a large turn of bigDeltas deltas of
	// bigDelta bytes.
	stalled, bigDeltas, bigDelta int
	rounds                       int
	// control adds a phase with the same large turns read by their
	// clients, which tells the stall's own cost from the large turns'.
	control bool
}

// tokenGap is the model's pause between the healthy streams' deltas.
const tokenGap = 10 * time.Millisecond

// stallBudget is issue 8's requirement: a stalled client delays other
// streams by at most this.
const stallBudget = 10 * time.Millisecond

// TestStalledClientDoesNotDelayOthers: one SSE client that connects, starts
// a large turn and never reads (its TCP window fills: the server's socket
// holds unsent bytes, checked in /proc/net/tcp) does not delay the frames
// of other streams: the median and 90th percentile of the gaps between the
// healthy streams' text deltas, with the stalled client's turn running,
// are within 10 ms of the same streams' gaps without it. It compares two
// runs on the same machine rather than timing anything absolutely.
//
// The gaps are also moved by whatever else the machine runs (make test runs
// other packages' tests beside this one), so a measurement over the budget
// is taken again, up to three times, before the test fails: a real stall
// (a slow client holding up a shared writer) costs every attempt far more
// than 10 ms, while noise does not repeat.
func TestStalledClientDoesNotDelayOthers(t *testing.T) {
	cfg := stallConfig{healthy: 4, frames: 100, stalled: 1, bigDeltas: 600, bigDelta: 16 << 10, rounds: 1}
	for attempt := 1; ; attempt++ {
		over := stallTest(t, cfg)
		if over == "" {
			return
		}
		if attempt == 3 {
			t.Fatalf("three measurements over the budget; the last: %s", over)
		}
		t.Logf("attempt %d over the budget (%s); measuring again", attempt, over)
	}
}

// TestStalledClientsManyStreams is the slow variant: more healthy streams,
// longer streams, two stalled clients and two rounds of each phase.
func TestStalledClientsManyStreams(t *testing.T) {
	slow(t)
	if over := stallTest(t, stallConfig{healthy: 16, frames: 300, stalled: 2, bigDeltas: 1400, bigDelta: 16 << 10, rounds: 2, control: true}); over != "" {
		t.Error(over)
	}
}

// stallTest measures once and returns "" within the budget, else what went
// over it.
func stallTest(t *testing.T, cfg stallConfig) string {
	m := newModel(t, mockllm.WithDefault(mockllm.Script{Chunks: cfg.frames, InterTokenDelay: tokenGap}))
	// The large turns must outlast the measurement: they are far over the
	// default output budget.
	srv := startServer(t, append(modelEnv(m), "MAX_OUTPUT_BYTES=1073741824")...)
	big := mockllm.Script{InterTokenDelay: 5 * time.Millisecond}
	chunk := strings.Repeat("x", cfg.bigDelta-1) + " "
	for range cfg.bigDeltas {
		big.Text = append(big.Text, chunk)
	}
	var base, reading, stalled []time.Duration
	for round := range cfg.rounds {
		base = append(base, healthyGaps(t, srv.URL(), cfg, fmt.Sprintf("r%d-base", round))...)

		// The same large turns followed by clients that read: what the
		// turns cost the machine, apart from any stall.
		var readers sync.WaitGroup
		for i := range cfg.stalled * btoi(cfg.control) {
			m.Enqueue(big)
			s := chat(t, srv.URL(), agentID, fmt.Sprintf("reading-r%d-%d", round, i), "a long answer please")
			readers.Go(func() {
				for {
					if _, err := s.Next(10 * time.Second); err != nil {
						return
					}
				}
			})
		}
		if cfg.control {
			waitFor(t, 5*time.Second, "the large turns to reach the model", func() bool { return m.Pending() == 0 })
			reading = append(reading, healthyGaps(t, srv.URL(), cfg, fmt.Sprintf("r%d-reading", round))...)
			readers.Wait()
		}

		var sids []string
		var conns []net.Conn
		for i := range cfg.stalled {
			m.Enqueue(big)
			sid := fmt.Sprintf("stalled-r%d-%d", round, i)
			sids = append(sids, sid)
			conns = append(conns, stallClient(t, srv.URL(), sid))
		}
		waitFor(t, 5*time.Second, "the stalled turns to reach the model", func() bool { return m.Pending() == 0 })
		waitFor(t, 5*time.Second, "the stalled clients' windows to fill", func() bool { return unsentBytes(t, srv.addr) >= 64<<10 })
		stalled = append(stalled, healthyGaps(t, srv.URL(), cfg, fmt.Sprintf("r%d-stalled", round))...)
		// The measurement counts only if the stalled turns were still
		// running and their clients still stalled when it ended.
		for _, sid := range sids {
			view, status, raw := getSession(t, srv.URL(), sid)
			if status != http.StatusOK || view.Turn == nil || !view.Turn.Running {
				t.Fatalf("the stalled client's turn %s ended before the measurement did (make it larger): %d %s", sid, status, raw)
			}
		}
		n := unsentBytes(t, srv.addr)
		if n < 64<<10 {
			t.Fatalf("only %d bytes wait in the server's sockets: the stalled clients are not stalled", n)
		}
		t.Logf("round %d: %d KiB unsent in the server's sockets to the stalled clients at the end of the measurement", round, n>>10)
		for _, c := range conns {
			c.Close()
		}
	}
	b50, b90 := percentile(base, 50), percentile(base, 90)
	s50, s90 := percentile(stalled, 50), percentile(stalled, 90)
	t.Logf("gaps between text deltas (model pause %v), %d healthy streams x %d deltas x %d rounds; %d stalled clients with turns of %d x %d KiB:",
		tokenGap, cfg.healthy, cfg.frames, cfg.rounds, cfg.stalled, cfg.bigDeltas, cfg.bigDelta>>10)
	t.Logf("  alone:                           p50 %v, p90 %v, max %v (%d gaps)", b50, b90, slices.Max(base), len(base))
	t.Logf("  beside stalled clients:          p50 %v, p90 %v, max %v (%d gaps)", s50, s90, slices.Max(stalled), len(stalled))
	control := ""
	if cfg.control {
		r50, r90 := percentile(reading, 50), percentile(reading, 90)
		t.Logf("  beside the same turns, read:     p50 %v, p90 %v, max %v (%d gaps)", r50, r90, slices.Max(reading), len(reading))
		control = fmt.Sprintf(" (beside the same turns with clients that read: p50 %+v, p90 %+v)", r50-b50, r90-b90)
	}
	t.Logf("  delay added by the stalled clients: p50 %v, p90 %v%s", s50-b50, s90-b90, control)
	if s50-b50 > stallBudget || s90-b90 > stallBudget {
		return fmt.Sprintf("stalled clients delay other streams by p50 %v, p90 %v; the budget is %v%s", s50-b50, s90-b90, stallBudget, control)
	}
	return ""
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// healthyGaps runs cfg.healthy streams at once, reads them all, checks
// they ended properly and returns the gaps between consecutive text deltas
// (the first delta's wait for the model is not a gap).
func healthyGaps(t *testing.T, base string, cfg stallConfig, tag string) []time.Duration {
	t.Helper()
	var mu sync.Mutex
	var gaps []time.Duration
	var wg sync.WaitGroup
	streams := make([]*stream, cfg.healthy)
	for i := range streams {
		streams[i] = chat(t, base, agentID, fmt.Sprintf("healthy-%s-%d", tag, i), "count")
	}
	for _, s := range streams {
		wg.Go(func() {
			var frames []frame
			for {
				f, err := s.Next(10 * time.Second)
				if err != nil {
					break
				}
				frames = append(frames, f)
			}
			var mine []time.Duration
			var last time.Time
			deltas := 0
			for _, f := range frames {
				if f.Type() != "text-delta" {
					continue
				}
				if deltas > 0 {
					mine = append(mine, f.At.Sub(last))
				}
				last = f.At
				deltas++
			}
			mu.Lock()
			defer mu.Unlock()
			if deltas != cfg.frames {
				t.Errorf("a healthy stream got %d text deltas, want %d: %s", deltas, cfg.frames, dataOf(frames[max(0, len(frames)-4):]))
			}
			gaps = append(gaps, mine...)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return gaps
}

// stallClient posts a turn on a raw connection with a 4 KiB receive buffer
// and never reads the answer, so the server's writes to it soon block.
// The caller closes the connection (at the latest, the test's end does).
func stallClient(t *testing.T, base, sid string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	addr := strings.TrimPrefix(base, "http://")
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	body, _ := json.Marshal(map[string]string{"message": "a long answer please", "sessionId": sid})
	req := fmt.Sprintf("POST /api/chat/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", agentID, addr, len(body), body)
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	return c
}

// unsentBytes sums the send queues of the server's TCP sockets on addr's
// port (/proc/net/tcp tx_queue): bytes written by the server that its
// clients have not taken.
func unsentBytes(t *testing.T, addr string) int {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Skipf("cannot read /proc/net/tcp to see that the client is stalled: %v", err)
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || !strings.HasSuffix(fs[1], want) {
			continue
		}
		tx, _, _ := strings.Cut(fs[4], ":")
		n, err := strconv.ParseInt(tx, 16, 64)
		if err == nil {
			total += int(n)
		}
	}
	return total
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// percentile returns the p-th percentile (nearest rank) of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
