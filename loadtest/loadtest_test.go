package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		wantErr    string
	}{
		{"plain", "1234 (agentdock) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 100 0 0", 3250 * time.Millisecond, ""},
		{"name with spaces and parens", "99 (a (b) c) R 1 1 1 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, ""},
		{"no name", "99 agentdock S 1", 0, "no command name"},
		{"short", "99 (x) S 1 2 3", 0, "want at least 13"},
		{"not a number", "99 (x) S 1 1 1 0 -1 0 0 0 0 0 x 3 0 0", 0, "utime/stime"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.line))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCPUAndRSSOfThisProcess(t *testing.T) {
	// Burn CPU until the reading leaves zero ticks: on a loaded machine
	// a fixed stretch of wall time may get no tick of CPU.
	var (
		cpu time.Duration
		err error
	)
	for deadline := time.Now().Add(10 * time.Second); cpu == 0 && err == nil && time.Now().Before(deadline); {
		for x := range 1 << 20 {
			_ = x * x
		}
		cpu, err = cpuTime(os.Getpid())
	}
	if err != nil || cpu <= 0 {
		t.Fatalf("cpuTime = %v, %v; want > 0", cpu, err)
	}
	r, err := rss(os.Getpid())
	if err != nil || r < 1<<20 {
		t.Fatalf("rss = %d, %v; want at least 1 MiB", r, err)
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS([]byte("Name:\tx\nVmPeak:\t  900 kB\nVmRSS:\t  2048 kB\nThreads: 4\n"))
	if err != nil || got != 2048<<10 {
		t.Fatalf("got %d, %v; want %d", got, err, 2048<<10)
	}
	for _, bad := range []string{"Name: x\n", "VmRSS: 12 MB\n", "VmRSS: x kB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("parseVmRSS(%q) succeeded", bad)
		}
	}
}

func TestCommandStats(t *testing.T) {
	before, err := parseCommandStats("# Commandstats\r\ncmdstat_info:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=0\r\ncmdstat_get:calls=5,usec=5,usec_per_call=1.00\r\n")
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseCommandStats("# Commandstats\r\ncmdstat_info:calls=9,usec=10\r\ncmdstat_get:calls=8,usec=5\r\ncmdstat_evalsha:calls=2,usec=5\r\ncmdstat_set:calls=1,usec=1\r\n")
	if err != nil {
		t.Fatal(err)
	}
	d := commandDelta(before, after)
	want := map[string]int64{"get": 3, "evalsha": 2, "set": 1}
	if len(d) != len(want) {
		t.Fatalf("delta %v, want %v (INFO excluded)", d, want)
	}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("delta[%s] = %d, want %d", k, d[k], v)
		}
	}
	if _, err := parseCommandStats("cmdstat_get:usec=5\r\n"); err == nil {
		t.Error("a line without calls= parsed")
	}
}

func TestParseMarker(t *testing.T) {
	tests := []struct {
		body     string
		kind     Kind
		id       string
		wantOK   bool
		describe string
	}{
		{`{"content":"hi [lt:stream:r1.2.3]"}`, KindStream, "r1.2.3", true, "one marker"},
		{`[lt:stream:old] ... [lt:tool:new]`, KindTool, "new", true, "the last marker wins (history first)"},
		{`no marker`, "", "", false, "none"},
		{`[lt:stream]`, "", "", false, "no id"},
		{`[lt::x]`, "", "", false, "no kind"},
		{`[lt:stream:x`, "", "", false, "unterminated"},
	}
	for _, tc := range tests {
		kind, id, ok := parseMarker([]byte(tc.body))
		if ok != tc.wantOK || kind != tc.kind || id != tc.id {
			t.Errorf("%s: parseMarker(%q) = %q, %q, %v; want %q, %q, %v", tc.describe, tc.body, kind, id, ok, tc.kind, tc.id, tc.wantOK)
		}
	}
	got, err := remark([]byte(`{"m":"x [lt:stream:w1.0]"}`), KindStream, "r9.1.2")
	if err != nil || string(got) != `{"m":"x [lt:stream:r9.1.2]"}` {
		t.Fatalf("remark = %s, %v", got, err)
	}
	if _, err := remark([]byte(`{}`), KindStream, "x"); err == nil {
		t.Fatal("remark of a body without marker succeeded")
	}
}

func TestReadUIStream(t *testing.T) {
	frame := func(data string) string { return "id: t:1\ndata: " + data + "\n\n" }
	ok := frame(`{"type":"start","messageId":"t"}`) + ": heartbeat\n\n" +
		frame(`{"type":"tool-input-available","toolCallId":"c","toolName":"think","input":{}}`) +
		frame(`{"type":"text-start","id":"t-text-1"}`) +
		frame(`{"type":"text-delta","id":"t-text-1","delta":"tok0 "}`) +
		frame(`{"type":"text-delta","id":"t-text-1","delta":"\"type\":\"finish\""}`) +
		frame(`{"type":"finish","finishReason":"stop"}`) + frame(`[DONE]`)
	tests := []struct {
		name, stream   string
		deltas, tools  int
		wantErr        string
		wantFirstFrame bool
	}{
		{"complete", ok, 2, 1, "", true},
		{"error finish", frame(`{"type":"start"}`) + frame(`{"type":"error","errorText":"model_error: boom"}`) +
			frame(`{"type":"finish","finishReason":"error"}`) + frame(`[DONE]`), 0, 0, "model_error: boom", true},
		{"no done", frame(`{"type":"start"}`) + frame(`{"type":"text-delta","delta":"a"}`), 1, 0, "before [DONE]", true},
		{"cut mid-line", frame(`{"type":"start"}`) + "data: {\"type\":\"te", 0, 0, "unexpected EOF", true},
		{"empty", "", 0, 0, "after 0 frames", false},
		// Longer than the reader's 16 KiB buffer.
		{"long frame", frame(`{"type":"text-delta","id":"t-text-1","delta":"`+strings.Repeat("x", 20000)+`"}`) +
			frame(`{"type":"finish","finishReason":"stop"}`) + frame(`[DONE]`), 1, 0, "", true},
	}
	for _, tc := range tests {
		for _, pause := range []time.Duration{0, time.Millisecond} {
			t.Run(fmt.Sprintf("%s/pause %v", tc.name, pause), func(t *testing.T) {
				var tt turnTimes
				opened := false
				err := readUIStream(strings.NewReader(tc.stream), &tt, pause, func() { opened = true })
				if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if tt.deltas != tc.deltas || tt.tools != tc.tools || opened != tc.wantFirstFrame {
					t.Fatalf("deltas %d tools %d opened %v; want %d %d %v", tt.deltas, tt.tools, opened, tc.deltas, tc.tools, tc.wantFirstFrame)
				}
				if err == nil && (tt.first.IsZero() || tt.end.Before(tt.first)) {
					t.Fatalf("times first %v end %v", tt.first, tt.end)
				}
			})
		}
	}
}

// framesReader hands out one frame per Read, as a socket does when each
// frame comes on its own.
type framesReader []string

func (r *framesReader) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*r)[0])
	if n == len((*r)[0]) {
		*r = (*r)[1:]
	} else {
		(*r)[0] = (*r)[0][n:]
	}
	return n, nil
}

// TestLazyScanner checks that a lazy scanner pauses once before each read
// from the network and never while a whole line is left to scan: what
// came during a pause is then read and scanned without another.
func TestLazyScanner(t *testing.T) {
	frame := func(i int) string { return fmt.Sprintf("id: t:%d\ndata: {\"n\":%d}\n\n", i, i) }
	tests := []struct {
		name   string
		reads  []string
		lazy   bool
		pauses int
	}{
		{"a frame per read", []string{frame(1), frame(2), frame(3)}, true, 3},
		{"all in one read", []string{frame(1) + frame(2) + frame(3)}, true, 1},
		{"a frame split across reads", []string{frame(1)[:12], frame(1)[12:] + frame(2), frame(3)}, true, 3},
		{"eager", []string{frame(1), frame(2), frame(3)}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := framesReader(slices.Clone(tc.reads))
			pauses := 0
			s := sseScanner{r: bufio.NewReaderSize(&r, 16<<10), lazy: tc.lazy, pause: time.Second,
				sleep: func(d time.Duration) {
					if d != time.Second {
						t.Errorf("paused %v, want the scanner's pause", d)
					}
					pauses++
				}}
			for i := 1; i <= 3; i++ {
				d, err := s.next()
				if want := fmt.Sprintf(`{"n":%d}`, i); err != nil || string(d) != want {
					t.Fatalf("frame %d: %q, %v; want %s", i, d, err, want)
				}
			}
			if pauses != tc.pauses {
				t.Fatalf("%d pauses, want %d", pauses, tc.pauses)
			}
		})
	}
}

func TestParseMonitorLine(t *testing.T) {
	tests := []struct {
		line, src, cmd, arg string
		ok                  bool
	}{
		{"+1700000000.123456 [0 127.0.0.1:5555] \"HGET\" \"k\" \"data\"\r\n", "127.0.0.1:5555", "hget", "k", true},
		{"+1700000000.123456 [0 lua] \"pexpire\" \"k\" \"100\"\r\n", "lua", "pexpire", "k", true},
		{"+1700000000.1 [0 127.0.0.1:1] \"PING\"\r\n", "127.0.0.1:1", "ping", "", true},
		{"+OK\r\n", "", "", "", false},
		{"+1.1 [0 127.0.0.1:1] \"SET\" \"a\\\"b\" \"v\"\r\n", "127.0.0.1:1", "set", "a\"b", true},
		{"+1.1 [0 lua] \"get\" \"a\\x41\\\\\"\r\n", "lua", "get", "aA\\", true},
	}
	for _, tc := range tests {
		ml, ok := parseMonitorLine(tc.line)
		if ml.src != tc.src || ml.cmd != tc.cmd || ml.arg() != tc.arg || ok != tc.ok {
			t.Errorf("parseMonitorLine(%q) = %q %q %q %v; want %q %q %q %v", tc.line, ml.src, ml.cmd, ml.arg(), ok, tc.src, tc.cmd, tc.arg, tc.ok)
		}
	}
}

func TestMonitorLineKey(t *testing.T) {
	tests := []struct {
		line, key string
		turnLog   bool
	}{
		{`+1.1 [0 127.0.0.1:1] "EVALSHA" "abc" "2" "agentdock:turns:{s1}:turn:t1:frames" "x"`, "agentdock:turns:{s1}:turn:t1:frames", true},
		{`+1.1 [0 127.0.0.1:1] "EVALSHA" "abc" "1" "agentdock:{s1}" "arg"`, "agentdock:{s1}", false},
		{`+1.1 [0 127.0.0.1:1] "EVALSHA" "abc" "0" "arg"`, "", false},
		{`+1.1 [0 lua] "XADD" "agentdock:turns:{s1}:turn:t1:frames" "1-0"`, "agentdock:turns:{s1}:turn:t1:frames", true},
		{`+1.1 [0 127.0.0.1:1] "PING"`, "", false},
	}
	for _, tc := range tests {
		ml, ok := parseMonitorLine(tc.line)
		if !ok {
			t.Fatalf("parseMonitorLine(%q) failed", tc.line)
		}
		if k := ml.key(); k != tc.key || turnLogKey(k) != tc.turnLog {
			t.Errorf("%q: key %q (turn log %v), want %q (%v)", tc.line, k, turnLogKey(k), tc.key, tc.turnLog)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 13\ngo_gc_duration_seconds{quantile=\"0\"} 2e-05\ngo_memstats_heap_inuse_bytes 5.832704e+06\n"
	m, err := parseMetrics(text, "go_goroutines", "go_memstats_heap_inuse_bytes")
	if err != nil || m["go_goroutines"] != 13 || m["go_memstats_heap_inuse_bytes"] != 5832704 {
		t.Fatalf("got %v, %v", m, err)
	}
	if _, err := parseMetrics(text, "go_memstats_stack_inuse_bytes"); err == nil {
		t.Fatal("a missing metric is not an error")
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {0, 1}, {1, 1}} {
		if got := percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

// TestMockFront checks that the mock times each marked request, answers it
// with its kind's script and refuses unmarked ones.
func TestMockFront(t *testing.T) {
	m, err := startMock(Timing{TTFT: 20 * time.Millisecond, InterToken: time.Millisecond, Chunks: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	hc := newClient(2)
	ctx := context.Background()
	body := func(extra string) []byte {
		return []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"[lt:tool:old]"},{"role":"tool","content":"r"},` +
			`{"role":"user","content":"go ` + extra + `"}` + "]}")
	}
	tt, err := directTurn(ctx, hc, m.URL(), body("[lt:stream:a1]"), 0)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := m.take("a1")
	if !ok || tt.deltas != 5 {
		t.Fatalf("arrival %v %v, deltas %d; want an arrival and 5 chunks", a, ok, tt.deltas)
	}
	if wait := a.first.Sub(a.recv); wait < 20*time.Millisecond {
		t.Fatalf("first chunk %v after the request; the script waits 20ms", wait)
	}
	if tt.sent.After(a.first) || a.first.After(tt.first) {
		t.Fatalf("times out of order: sent %v, mock first %v, client first %v", tt.sent, a.first, tt.first)
	}
	// A tool turn's first call: the earlier turn's tool result comes before
	// its marker, so the mock calls the tool (no text).
	tt, err = directTurn(ctx, hc, m.URL(), body("[lt:tool:b1]"), 0)
	if err != nil || tt.deltas != 0 {
		t.Fatalf("tool call: deltas %d, err %v; want a tool call and no text", tt.deltas, err)
	}
	req, _ := http.NewRequest(http.MethodPost, m.URL()+"/v1/chat/completions", bytes.NewReader([]byte(`{"model":"m","messages":[]}`)))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "marker") {
		t.Fatalf("unmarked request: %s %s", resp.Status, b)
	}
}

// agentdockBin builds the server binary once per test run (or takes
// AGENTDOCK_BIN, as make test-loadtest gives it). It is built inside the
// product's module, as make build builds it: this module requires the
// product for the packages the harness uses, not for the server's.
func agentdockBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("AGENTDOCK_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/agentdock-go/agentdock").Output()
	if err != nil {
		t.Fatalf("finding the product's module: %v", err)
	}
	out := filepath.Join(t.TempDir(), "agentdock")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/server")
	cmd.Dir = strings.TrimSpace(string(dir))
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building agentdock: %v\n%s", err, b)
	}
	return out
}

func redisOrSkip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not found on PATH (CI=true, so this fails instead of skipping)")
		}
		t.Skip("redis-server not found on PATH; install the redis-server package to run this test")
	}
}

// wantSettled runs Env.Settled with k streams on a server of cfg's of its
// own, as Settled wants (what an earlier round's streams leave is freed
// while Settled's are open, and would be counted against them), and wants
// each stream to hold a goroutine and 4 KiB at least: its handler and its
// buffers.
func wantSettled(t *testing.T, cfg EnvConfig, k int) {
	t.Helper()
	env, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	st, err := env.Settled(context.Background(), k, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	g, held := st.PerStreamMetric("go_goroutines"), st.PerStream()
	t.Logf("once collected: %.1f goroutines and %.1f KiB of heap and stacks per open stream", g, held/1024)
	if g < 1 || held < 4<<10 {
		t.Fatalf("once collected: %.1f goroutines and %.0f bytes of heap and stacks per open stream; each holds at least its handler and its buffers", g, held)
	}
}

// TestHarness runs every phase briefly against the real binary, with both
// stores: turns complete with all their chunks and no error, the paired
// figures are positive, idle streams show in the RSS, and a tool turn's
// Redis commands are counted.
func TestHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the server")
	}
	bin := agentdockBin(t)
	timing := Timing{TTFT: 30 * time.Millisecond, InterToken: time.Millisecond, Chunks: 8}
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			if store == "redis" {
				redisOrSkip(t)
			}
			ctx := context.Background()
			env, err := Start(ctx, EnvConfig{Bin: bin, Store: store, Dir: t.TempDir(), Timing: timing, LogLevel: "warn"})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			pr := Pair{Store: store}
			load := Load{Kind: KindStream, Streams: 4, Ramp: 100 * time.Millisecond, Duration: time.Second, Direct: true}
			if pr.Direct, err = env.Run(ctx, load); err != nil {
				t.Fatal(err)
			}
			load.Direct = false
			if pr.Runtime, err = env.Run(ctx, load); err != nil {
				t.Fatal(err)
			}
			for _, r := range []*Result{pr.Direct, pr.Runtime} {
				if r.Errors != 0 || r.Turns == 0 || len(r.Lat) == 0 {
					t.Fatalf("direct=%v: %d turns, %d errors %q, %d samples", r.Load.Direct, r.Turns, r.Errors, r.ErrorSamples, len(r.Lat))
				}
				if p := percentile(r.TTFT, 50); p < timing.TTFT {
					t.Fatalf("direct=%v: TTFT p50 %v below the mock's %v", r.Load.Direct, p, timing.TTFT)
				}
			}
			if pr.Runtime.CPU <= 0 || pr.Runtime.RSS <= 0 {
				t.Fatalf("server CPU %v, RSS %d: not read", pr.Runtime.CPU, pr.Runtime.RSS)
			}
			if pr.ServerWork(50) <= 0 {
				t.Fatalf("server work p50 %v: the runtime's path cannot be shorter than the direct one", pr.ServerWork(50))
			}
			idle, err := env.Idle(ctx, 20, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if idle.Loaded <= idle.Baseline {
				t.Fatalf("RSS with 20 open streams %d, before %d", idle.Loaded, idle.Baseline)
			}
			if g := idle.PerStreamMetric("go_goroutines"); g < 1 {
				t.Fatalf("%.1f goroutines per open stream; each holds at least its turn's", g)
			}
			wantSettled(t, EnvConfig{Bin: bin, Store: store, Dir: t.TempDir(), Timing: timing, LogLevel: "warn"}, 20)
			if store == "redis" {
				c, err := env.CountCommands(ctx, KindTool, 2, 2)
				if err != nil {
					t.Fatal(err)
				}
				if c.Turns != 4 || c.Tools != 4 || c.PerTurn() < 1 || c.Commands["evalsha"] == 0 || c.ScriptPerTurn() < 1 {
					t.Fatalf("command count %+v: want 4 turns with a tool call each, their commands and their scripts' counted", c)
				}
				// Each turn's session writes are round trips of their own.
				if rt := c.RoundTripsPerTurn(); rt < 3 || rt > c.PerTurn() {
					t.Fatalf("%.2f round trips per tool turn, %.2f commands: want at least the session's 3 writes and at most the commands", rt, c.PerTurn())
				}
				if c.Commands["pexpire"] > 0 && c.Script["pexpire"] == 0 {
					t.Logf("note: PEXPIRE sent by the client, not from scripts: %v", c.Commands)
				}
			}
			var sb strings.Builder
			(&Report{Timing: timing, Pairs: []Pair{pr}}).Markdown(&sb)
			if !strings.Contains(sb.String(), "| "+store+" | 4 |") {
				t.Fatalf("report lacks the %s row:\n%s", store, sb.String())
			}
		})
	}
}

// relayBin builds cmd/relay once per test run.
func relayBin(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "relay")
	cmd := exec.Command("go", "build", "-o", out, "github.com/agentdock-go/agentdock/loadtest/cmd/relay")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the relay: %v\n%s", err, b)
	}
	return out
}

// TestRelay runs the floor briefly, as the harness runs it: a few paced
// streams with their direct baseline, instant turns, and idle streams; every
// turn completes with all its chunks, the relay sends the fixed model
// request it was given, and its figures are read.
func TestRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the relay")
	}
	timing := Timing{TTFT: 30 * time.Millisecond, InterToken: time.Millisecond, Chunks: 8}
	// A model request as the runtime sends it, with history.
	runtimeReq := `{"model":"mock-model","messages":[{"role":"system","content":"You answer briefly."},{"role":"user","content":"earlier [lt:stream:w0]"},` +
		`{"role":"assistant","content":"tok0 "},{"role":"user","content":"now [lt:stream:w1]"}],"stream":true,` +
		`"tools":[{"type":"function","function":{"name":"think","parameters":{"type":"object"}}}],"stream_options":{"include_usage":true},"max_completion_tokens":256,"temperature":0.2}`
	fixed, err := RelayRequestFrom([]byte(runtimeReq))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env, err := Start(ctx, EnvConfig{Store: StoreRelay, RelayBin: relayBin(t), RelayRequest: fixed, Dir: t.TempDir(), Timing: timing, ProfileDir: filepath.Join(t.TempDir(), "prof")})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Warm(ctx, KindStream, 1); err != nil {
		t.Fatal(err)
	}
	// What the relay sent: the fixed part and the user's message only.
	var sent struct {
		Messages []struct{ Role, Content string }
		Stream   bool
		Tools    []json.RawMessage
	}
	if err := json.Unmarshal(env.ModelRequest(KindStream), &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Messages) != 2 || sent.Messages[0].Role != "system" || sent.Messages[1].Role != "user" || !sent.Stream || len(sent.Tools) != 1 {
		t.Fatalf("the relay sent %s", env.ModelRequest(KindStream))
	}
	pr := Pair{Store: StoreRelay}
	load := Load{Kind: KindStream, Streams: 3, Ramp: 100 * time.Millisecond, Duration: time.Second, Direct: true}
	if pr.Direct, err = env.Run(ctx, load); err != nil {
		t.Fatal(err)
	}
	load.Direct = false
	if pr.Runtime, err = env.Run(ctx, load); err != nil {
		t.Fatal(err)
	}
	inst, err := env.Run(ctx, Load{Kind: KindInstant, Streams: 2, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Result{pr.Direct, pr.Runtime, inst} {
		if r.Errors != 0 || r.Turns == 0 {
			t.Fatalf("%s direct=%v: %d turns, %d errors %q", r.Load.Kind, r.Load.Direct, r.Turns, r.Errors, r.ErrorSamples)
		}
	}
	if p := percentile(pr.Runtime.TTFT, 50); p < timing.TTFT {
		t.Fatalf("TTFT p50 %v below the mock's %v", p, timing.TTFT)
	}
	if pr.Runtime.CPU <= 0 || pr.Runtime.RSS <= 0 {
		t.Fatalf("relay CPU %v, RSS %d: not read", pr.Runtime.CPU, pr.Runtime.RSS)
	}
	id, err := env.Idle(ctx, 10, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if g := id.PerStreamMetric("go_goroutines"); g < 1 {
		t.Fatalf("%.1f goroutines per open stream; each holds at least its handler's", g)
	}
	wantSettled(t, EnvConfig{Store: StoreRelay, RelayBin: relayBin(t), RelayRequest: fixed, Dir: t.TempDir(), Timing: timing}, 10)
	for _, name := range []string{"relay-stream-3.profile.pprof", "relay-stream-3.heap.pprof", "relay-idle-10.goroutine.pprof"} {
		if st, err := os.Stat(filepath.Join(env.cfg.ProfileDir, name)); err != nil || st.Size() == 0 {
			t.Errorf("profile %s: %v", name, err)
		}
	}
	s := (&Report{Pairs: []Pair{pr}, Idle: []StoreIdle{{Store: StoreRelay, IdleResult: id}}}).Summary()
	if s.Relay == nil || s.Relay.Streams != 3 || s.Relay.CPUPerTurnMS <= 0 || s.Relay.MemoryPerStreamKiB == nil {
		t.Fatalf("summary %+v", s.Relay)
	}
}

// TestRelayRedis runs the relay with its sessions in a real redis-server:
// turns go through, each costs Redis two round trips, and redis-server's CPU
// is counted.
func TestRelayRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the relay and redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not found on PATH (CI=true, so this fails instead of skipping)")
		}
		t.Skip("redis-server not found on PATH; install the redis-server package to run this test")
	}
	ctx := context.Background()
	timing := Timing{TTFT: 20 * time.Millisecond, InterToken: time.Millisecond, Chunks: 8}
	env, err := Start(ctx, EnvConfig{Store: StoreRelayRedis, RelayBin: relayBin(t), Dir: t.TempDir(), Timing: timing})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Warm(ctx, KindStream, 1); err != nil {
		t.Fatal(err)
	}
	res, err := env.Run(ctx, Load{Kind: KindStream, Streams: 3, Ramp: 100 * time.Millisecond, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Turns == 0 {
		t.Fatalf("%d turns, %d errors %q", res.Turns, res.Errors, res.ErrorSamples)
	}
	if res.RedisCPU <= 0 {
		t.Fatal("redis-server's CPU was not read")
	}
	// Two scripts per turn, each one round trip; turns at the window's
	// edges and the harness's own INFO calls blur the count a little.
	if rt := float64(res.RedisReads) / float64(res.Turns); rt < 1.5 || rt > 3 {
		t.Fatalf("%.2f Redis round trips per turn, want about 2", rt)
	}
}

// soakSeries is samples every interval from 0 to d inclusive, RSS from f.
func soakSeries(d, interval time.Duration, f func(at time.Duration) int64) []SoakSample {
	var ss []SoakSample
	for at := time.Duration(0); at <= d; at += interval {
		// 100 turns/s throughout.
		ss = append(ss, SoakSample{At: at, Turns: int64(at / (10 * time.Millisecond)), RSS: f(at), Goroutines: 900})
	}
	return ss
}

func TestSoakVerdict(t *testing.T) {
	const mb = 1 << 20
	load := SoakLoad{Streams: 100, Duration: 10 * time.Minute, Warmup: 2 * time.Minute}
	if err := load.validate(); err != nil {
		t.Fatal(err)
	}
	flat := func(time.Duration) int64 { return 400 * mb }
	// Rises to 400 MiB during the warm-up (the retention filling), then
	// flat: what a server without a leak does.
	warm := func(at time.Duration) int64 { return int64(min(at, 2*time.Minute)) * 400 / int64(2*time.Minute) * mb }
	// Grows 1 MiB per minute after 400: the mean of the last minute's 13
	// samples (9:00 to 10:00) is 407.5 MiB, the baseline's (2:00 to 2:55)
	// 400.46 MiB: +1.76 %.
	slow := func(at time.Duration) int64 { return 400*mb + int64(at-2*time.Minute)*mb/int64(time.Minute) }
	// 20 % more in the last minute.
	leak := func(at time.Duration) int64 {
		if at >= 9*time.Minute {
			return 480 * mb
		}
		return 400 * mb
	}
	// Exactly 10 %: still within the goal.
	edge := func(at time.Duration) int64 {
		if at >= 9*time.Minute {
			return 440 * mb
		}
		return 400 * mb
	}
	spike := func(at time.Duration) int64 {
		if at == 5*time.Minute {
			return 900 * mb
		}
		return 400 * mb
	}
	interval := 5 * time.Second
	tests := []struct {
		name                      string
		samples                   []SoakSample
		idle, after               float64
		turns, errors             int
		load                      *SoakLoad
		rss, goroutines, errorsOK bool
		growth                    float64
		maxRSS                    int64
		problem                   string
	}{
		{name: "steady", samples: soakSeries(10*time.Minute, interval, flat), idle: 12, after: 12, turns: 80000,
			rss: true, goroutines: true, errorsOK: true, growth: 0, maxRSS: 400 * mb},
		{name: "retention fills during the warm-up", samples: soakSeries(10*time.Minute, interval, warm), idle: 12, after: 11, turns: 80000,
			rss: true, goroutines: true, errorsOK: true, growth: 0, maxRSS: 400 * mb},
		{name: "slow growth within the goal", samples: soakSeries(10*time.Minute, interval, slow), idle: 12, after: 14, turns: 80000,
			rss: true, goroutines: true, errorsOK: true, growth: 0.01758, maxRSS: 408 * mb},
		{name: "rss leak", samples: soakSeries(10*time.Minute, interval, leak), idle: 12, after: 12, turns: 80000,
			rss: false, goroutines: true, errorsOK: true, growth: 0.2, maxRSS: 480 * mb, problem: "RSS grew 20.0% (400.0 -> 480.0 MiB), goal <= 10%"},
		{name: "exactly the goal", samples: soakSeries(10*time.Minute, interval, edge), idle: 12, after: 14, turns: 80000,
			rss: true, goroutines: true, errorsOK: true, growth: 0.1, maxRSS: 440 * mb},
		{name: "a spike counts in max, not in growth", samples: soakSeries(10*time.Minute, interval, spike), idle: 12, after: 12, turns: 80000,
			rss: true, goroutines: true, errorsOK: true, growth: 0, maxRSS: 900 * mb},
		{name: "goroutine leak", samples: soakSeries(10*time.Minute, interval, flat), idle: 12, after: 15, turns: 80000,
			rss: true, goroutines: false, errorsOK: true, maxRSS: 400 * mb, problem: "goroutines 15 after the load"},
		{name: "idle goroutines not read", samples: soakSeries(10*time.Minute, interval, flat), idle: 0, after: 1, turns: 80000,
			rss: true, goroutines: false, errorsOK: true, maxRSS: 400 * mb, problem: "0 before"},
		{name: "failed turns", samples: soakSeries(10*time.Minute, interval, flat), idle: 12, after: 12, turns: 80000, errors: 3,
			rss: true, goroutines: true, errorsOK: false, maxRSS: 400 * mb, problem: "3 turns failed, 80000 completed"},
		{name: "no turns", samples: soakSeries(10*time.Minute, interval, flat), idle: 12, after: 12,
			rss: true, goroutines: true, errorsOK: false, maxRSS: 400 * mb, problem: "0 turns failed, 0 completed"},
		{name: "samples stop before the baseline window", samples: soakSeries(time.Minute, interval, flat), idle: 12, after: 12, turns: 10,
			rss: false, goroutines: true, errorsOK: true, maxRSS: 400 * mb, problem: "0 samples in the baseline window and 0 in the end window"},
		{name: "a stricter goal", samples: soakSeries(10*time.Minute, interval, slow), idle: 12, after: 12, turns: 80000,
			load: &SoakLoad{Streams: 100, Duration: 10 * time.Minute, Warmup: 2 * time.Minute, MaxRSSGrowth: 0.01, GoroutineSlack: 5},
			rss:  false, goroutines: true, errorsOK: true, growth: 0.01758, maxRSS: 408 * mb, problem: "goal <= 1%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := load
			if tc.load != nil {
				l = *tc.load
				if err := l.validate(); err != nil {
					t.Fatal(err)
				}
			}
			r := &SoakResult{Load: l, Samples: tc.samples, IdleGoroutines: tc.idle, AfterGoroutines: tc.after, Turns: tc.turns, Errors: tc.errors}
			v := r.Verdict()
			if v.RSSOK != tc.rss || v.GoroutinesOK != tc.goroutines || v.ErrorsOK != tc.errorsOK {
				t.Fatalf("rss %v goroutines %v errors %v; want %v %v %v (%q)", v.RSSOK, v.GoroutinesOK, v.ErrorsOK, tc.rss, tc.goroutines, tc.errorsOK, v.Problems)
			}
			if v.OK() != (tc.rss && tc.goroutines && tc.errorsOK) || v.OK() != (len(v.Problems) == 0) {
				t.Fatalf("OK %v with problems %q", v.OK(), v.Problems)
			}
			if d := v.Growth - tc.growth; d > 0.0001 || d < -0.0001 {
				t.Fatalf("growth %.5f, want %.5f (baseline %d, end %d)", v.Growth, tc.growth, v.BaselineRSS, v.EndRSS)
			}
			if ok := v.BaselineRSS == 0 || v.BaselineTPS > 99.9 && v.BaselineTPS < 100.1 && v.EndTPS > 99.9 && v.EndTPS < 100.1; !ok {
				t.Fatalf("turns/s in the windows %.2f and %.2f, want 100", v.BaselineTPS, v.EndTPS)
			}
			if v.MaxRSS != tc.maxRSS {
				t.Fatalf("max RSS %d, want %d", v.MaxRSS, tc.maxRSS)
			}
			if tc.problem != "" && !strings.Contains(strings.Join(v.Problems, "; "), tc.problem) {
				t.Fatalf("problems %q lack %q", v.Problems, tc.problem)
			}
		})
	}
}

func TestSoakLoadValidate(t *testing.T) {
	tests := []struct {
		load SoakLoad
		want string
	}{
		{SoakLoad{Streams: 1, Duration: time.Minute, Warmup: 30 * time.Second, Window: 20 * time.Second}, "longer than the duration"},
		{SoakLoad{Streams: 1, Duration: time.Minute, Window: 10 * time.Second, Interval: 20 * time.Second}, "holds no sample"},
		{SoakLoad{Streams: 0, Duration: time.Minute, Window: 10 * time.Second}, "streams 0"},
		{SoakLoad{Streams: 1, Duration: -time.Minute}, "duration -1m0s"},
		{SoakLoad{Streams: 1, Duration: time.Minute, Warmup: -time.Second, Window: 10 * time.Second}, "want >= 0"},
		{SoakLoad{Streams: 1, Duration: time.Minute, Window: 10 * time.Second, MaxRSSGrowth: -1}, "max RSS growth"},
	}
	for _, tc := range tests {
		err := tc.load.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.load, err, tc.want)
		}
	}
	l := SoakLoad{Streams: 100, Duration: 10 * time.Minute, Warmup: 2 * time.Minute}
	if err := l.validate(); err != nil || l.Interval != 5*time.Second || l.Window != time.Minute || l.MaxRSSGrowth != 0.10 || l.GoroutineSlack != 2 || l.SessionTurns != 10 {
		t.Fatalf("defaults %+v, %v", l, err)
	}
}

// TestSoak runs a short soak against the real binary with second-long
// retention: the turns complete, RSS and goroutines are sampled through
// the load, the goroutines come back once the streams and the model
// connections are closed, and the report has its goals table.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the server")
	}
	bin := agentdockBin(t)
	timing := Timing{TTFT: 30 * time.Millisecond, InterToken: time.Millisecond, Chunks: 8}
	ctx := context.Background()
	serverEnv := []string{"STREAM_RETENTION=1s", "SESSION_TTL_SECONDS=1"}
	env, err := Start(ctx, EnvConfig{Bin: bin, Store: "memory", Dir: t.TempDir(), Timing: timing, LogLevel: "warn", ServerEnv: serverEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	res, err := env.Soak(ctx, SoakLoad{Streams: 4, Duration: 6 * time.Second, Ramp: 100 * time.Millisecond,
		Warmup: 2 * time.Second, Window: 2 * time.Second, Interval: 250 * time.Millisecond, Drain: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v := res.Verdict()
	if res.Errors != 0 || res.Turns < 4 {
		t.Fatalf("%d turns, %d errors %q", res.Turns, res.Errors, res.ErrorSamples)
	}
	// 6 s every 250 ms, and the end sample; a loaded machine may miss some.
	if len(res.Samples) < 12 || v.BaselineRSS <= 0 || v.EndRSS <= 0 || v.MaxRSS < v.EndRSS {
		t.Fatalf("%d samples, baseline %d, end %d, max %d", len(res.Samples), v.BaselineRSS, v.EndRSS, v.MaxRSS)
	}
	if last := res.Samples[len(res.Samples)-1]; last.Turns != int64(res.Turns) || v.EndTPS <= 0 {
		t.Fatalf("last sample's turns %d, the soak's %d; end window %.1f turns/s", last.Turns, res.Turns, v.EndTPS)
	}
	if peak := peakGoroutines(res.Samples); peak < res.IdleGoroutines+4 {
		t.Fatalf("peak goroutines %.0f with 4 open streams, idle %.0f: the samples missed the load", peak, res.IdleGoroutines)
	}
	if !v.GoroutinesOK || res.ModelConns < 1 {
		t.Fatalf("goroutines %.0f before, %.0f after (%v); %d model connections closed", res.IdleGoroutines, res.AfterGoroutines, res.DrainTime, res.ModelConns)
	}
	var csv strings.Builder
	if err := res.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != len(res.Samples)+1 || !strings.HasPrefix(csv.String(), "at_s,turns,rss_bytes,") {
		t.Fatalf("CSV of %d samples has %d lines:\n%s", len(res.Samples), lines, csv.String())
	}
	var sb strings.Builder
	(&Report{Timing: timing, Soak: []StoreSoak{{Store: "memory", ServerEnv: serverEnv, Result: res}}}).Markdown(&sb)
	for _, want := range []string{"Soak, memory store: 4 streams", "STREAM_RETENTION=1s", "| RSS grows <= 10% |", "| goroutines back to baseline (slack 2) |", "| 0 errors | 0 errors,"} {
		if !strings.Contains(sb.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, sb.String())
		}
	}
}
