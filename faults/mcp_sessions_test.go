package faults

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/internal/testenv"
)

// The MCP edge under a flood (issue 55): initialize requests from one
// client must not grow the runtime past a bound, the sessions past the cap
// are refused as JSON-RPC errors, and a sessionless tools/list costs about
// what GET /api/agents costs.

// mcpPost sends one JSON-RPC body to /mcp and returns the status, the
// session ID it got and the body.
func mcpPost(client *http.Client, base, key, version, body string) (int, string, string, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
		req.Header.Set("Mcp-Method", "tools/list")
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Mcp-Session-Id"), string(b), err
}

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

// cpuTime is the CPU time a process has used (user and system), read from
// /proc in clock ticks (100 a second on Linux).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		testenv.Missing(t, "a process's CPU time is read from /proc: "+err.Error())
	}
	// The fields after the command, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// TestMCPSessionFlood: initialize requests from one client, past
// MCP_MAX_SESSIONS. The runtime's resident memory grows by less than 200
// MB, exactly the cap's sessions are opened and every other initialize is
// a JSON-RPC error naming MCP_MAX_SESSIONS; a key of its own then meets
// MCP_SESSIONS_PER_OWNER. 2,000 requests against a cap of 1,000 in make
// test, 20,000 against the default cap (10,000) in make faults.
func TestMCPSessionFlood(t *testing.T) {
	requests, env := 2000, []string{"MCP_MAX_SESSIONS=1000"}
	maxSessions := 1000
	if os.Getenv("AGENTDOCK_SLOW_FAULTS") == "1" {
		requests, env, maxSessions = 20000, nil, 10000
	}
	// Without API keys the anonymous owner is counted by address, and
	// this client is one address: lift the per-owner bound so that the
	// total one is met.
	env = append(env, "MCP_SESSIONS_PER_OWNER=0", "RATE_LIMIT_RPS=0")
	srv := startServer(t, env...)
	pid := srv.cmd.Process.Pid
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
	if st, _, body, err := mcpPost(client, srv.URL(), "", "", mcpInitialize); err != nil || st != http.StatusOK {
		t.Fatalf("a first initialize: %d %v %s", st, err, body)
	}
	baseline, _ := memory(t, pid)
	var opened, refused, other atomic.Int64
	var firstOther atomic.Value
	next := atomic.Int64{}
	next.Store(1) // the first one above
	opened.Store(1)
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(requests) {
				st, sid, body, err := mcpPost(client, srv.URL(), "", "", mcpInitialize)
				switch {
				case err == nil && st == http.StatusOK && sid != "":
					opened.Add(1)
				case err == nil && st == http.StatusServiceUnavailable && strings.Contains(body, `"code":-32002`) && strings.Contains(body, "MCP_MAX_SESSIONS"):
					refused.Add(1)
				default:
					if other.Add(1) == 1 {
						firstOther.Store(fmt.Sprintf("%d %v %q", st, err, body))
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	rss, peak := memory(t, pid)
	t.Logf("%d initialize requests in %v (%.0f/s): %d sessions opened, %d refused (MCP_MAX_SESSIONS %d), %d other answers",
		requests, took.Round(time.Millisecond), float64(requests)/took.Seconds(), opened.Load(), refused.Load(), maxSessions, other.Load())
	t.Logf("resident memory: %d MiB before, %d MiB after (peak %d MiB): %+d MiB, %.1f KiB a session",
		baseline/mib, rss/mib, peak/mib, (rss-baseline)/mib, float64(rss-baseline)/1024/float64(opened.Load()))
	if other.Load() > 0 {
		t.Errorf("%d answers were neither a session nor the cap's refusal; the first: %v", other.Load(), firstOther.Load())
	}
	if opened.Load() != int64(maxSessions) || refused.Load() != int64(requests-maxSessions) {
		t.Errorf("%d sessions opened and %d refused; want %d and %d", opened.Load(), refused.Load(), maxSessions, requests-maxSessions)
	}
	if peak-baseline > 200*mib {
		t.Errorf("resident memory peaked %d MiB over the %d MiB before the flood; want under 200 MiB", (peak-baseline)/mib, baseline/mib)
	}
	if !srv.Alive() {
		t.Fatal("the server died")
	}
}

// TestMCPSessionsPerKey: with API keys, a key meets MCP_SESSIONS_PER_OWNER
// (429, a JSON-RPC error) while another key still opens sessions, and
// /mcp without a key is refused like every other door.
func TestMCPSessionsPerKey(t *testing.T) {
	srv := startServer(t, "API_KEYS=key-a,key-b", "MCP_SESSIONS_PER_OWNER=5")
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range 5 {
		if st, _, body, err := mcpPost(client, srv.URL(), "key-a", "", mcpInitialize); err != nil || st != http.StatusOK {
			t.Fatalf("key A's session %d: %d %v %s", i+1, st, err, body)
		}
	}
	st, _, body, err := mcpPost(client, srv.URL(), "key-a", "", mcpInitialize)
	if err != nil || st != http.StatusTooManyRequests || !strings.Contains(body, `"code":-32002`) || !strings.Contains(body, "MCP_SESSIONS_PER_OWNER") {
		t.Fatalf("key A's 6th session: %d %v %s", st, err, body)
	}
	if st, _, body, err := mcpPost(client, srv.URL(), "key-b", "", mcpInitialize); err != nil || st != http.StatusOK {
		t.Fatalf("key B's first session: %d %v %s", st, err, body)
	}
	if st, _, body, err := mcpPost(client, srv.URL(), "", "", mcpInitialize); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("no key: %d %v %s", st, err, body)
	}
}

// TestMCPToolsListCost: the server's CPU time for sessionless tools/list
// requests (2026-07-28) beside as many GET /api/agents, in one run. The
// ratio is printed, not asserted (CPU time on a shared machine is a
// measure, not a test); issue 55 wants it within 5x.
func TestMCPToolsListCost(t *testing.T) {
	n := 1000
	if os.Getenv("AGENTDOCK_SLOW_FAULTS") == "1" {
		n = 10000
	}
	srv := startServer(t)
	pid := srv.cmd.Process.Pid
	client := &http.Client{Timeout: 30 * time.Second}
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	agents := func() error {
		res, err := client.Get(srv.URL() + "/api/agents")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/agents: %d %s", res.StatusCode, b)
		}
		return nil
	}
	tools := func() error {
		st, _, body, err := mcpPost(client, srv.URL(), "", "2026-07-28", list)
		if err == nil && (st != http.StatusOK || !strings.Contains(body, `"name":"faults"`)) {
			err = fmt.Errorf("tools/list: %d %s", st, body)
		}
		return err
	}
	measure := func(call func() error) time.Duration {
		for range 50 { // warm up
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}
		before := cpuTime(t, pid)
		for range n {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}
		return (cpuTime(t, pid) - before) / time.Duration(n)
	}
	// Alternated, twice each, so that a neighbour's load falls on both.
	var a, m time.Duration
	for range 2 {
		a += measure(agents) / 2
		m += measure(tools) / 2
	}
	t.Logf("server CPU per request over %d requests each: GET /api/agents %v, sessionless tools/list %v: %.1fx", 2*n, a, m, float64(m)/float64(max(a, time.Microsecond)))
}
