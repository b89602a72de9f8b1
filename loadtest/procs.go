package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime returns the user plus system CPU time a process has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading CPU time: %w", err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may contain spaces, so fields are counted after its closing parenthesis.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", truncate(b))
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %q: %d fields after the name, want at least 13", truncate(b), len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat utime/stime: %w", err)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// rss returns a process's resident set size in bytes (VmRSS).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	return parseVmRSS(b)
}

func parseVmRSS(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "VmRSS" {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS %q: want \"<n> kB\"", val)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", val, err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line in /proc status")
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// proc is a child process the harness started and stops.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

func startProc(name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.exited) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and kills the process if it has not exited in time.
func (p *proc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// logTail is the end of the process's log, for error messages.
func (p *proc) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return strings.TrimSpace(string(b))
}

// handedOut are the addresses freeAddr returned. Each is free when it is
// handed out, and its listener closed, so the kernel may offer the same
// port again before its user binds it: a server's ADDR and PPROF_ADDR
// were once the same.
var handedOut sync.Map

// freeAddr returns a free loopback address that it has not returned
// before.
func freeAddr() (string, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("finding a free loopback port: %w", err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr, nil
		}
	}
	return "", errors.New("finding a free loopback port: the kernel offered only ports handed out before")
}

// startRedis starts redis-server on a free loopback port in dir, configured
// as in the session benchmarks (append-only file, fsync every second).
func startRedis(ctx context.Context, bin, dir string) (*proc, *redis.Client, error) {
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, nil, errors.New("redis-server not found on PATH: install the redis-server package or run with -stores memory")
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	p, err := startProc("redis-server", filepath.Join(dir, "redis.log"), []string{"PATH=" + os.Getenv("PATH")}, bin,
		"--port", port, "--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no", "--protected-mode", "no",
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--maxclients", "20000")
	if err != nil {
		return nil, nil, err
	}
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2})
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = rc.Ping(ctx).Err()
		if err == nil {
			return p, rc, nil
		}
		if !p.alive() || time.Now().After(deadline) || ctx.Err() != nil {
			rc.Close()
			p.stop(time.Second)
			return nil, nil, fmt.Errorf("redis-server on %s did not answer PING: %w; log: %s", addr, err, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commandStats returns the calls per command from INFO commandstats.
func commandStats(ctx context.Context, rc *redis.Client) (map[string]int64, error) {
	s, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	return parseCommandStats(s)
}

// parseCommandStats reads lines like
// "cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,...".
func parseCommandStats(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls string
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				calls = v
				break
			}
		}
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("commandstats line %q: calls: %w", line, err)
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out, nil
}

// readEvents returns Redis's read events so far (INFO stats
// total_reads_processed): each is one read of a client's connection, so a
// request, or a pipeline of them, that arrives at once counts one: the
// network round trips Redis served.
func readEvents(ctx context.Context, rc *redis.Client) (int64, error) {
	s, err := rc.Info(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO stats: %w", err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_reads_processed:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO stats: no total_reads_processed (Redis 6 or later has it)")
}

// commandDelta is after minus before, without the harness's own INFO calls.
func commandDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if k == "info" {
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// agentdockEnv is the environment of `agentdock serve` against the mock,
// with the load-test template written under dir.
func agentdockEnv(dir, store, mockURL, logLevel string) ([]string, error) {
	tdir := filepath.Join(dir, "templates")
	if err := writeTemplate(tdir); err != nil {
		return nil, err
	}
	return []string{
		"HOME=" + dir,
		"SESSION_STORE=" + store,
		"TEMPLATES_DIR=" + tdir,
		"LLM_PROVIDER=openai",
		"LLM_BASE_URL=" + mockURL + "/v1",
		"OPENAI_API_KEY=loadtest",
		"LOG_LEVEL=" + logLevel,
	}, nil
}

// startServer starts a server (agentdock serve or the relay) on a free
// loopback port given in ADDR, with PATH and env, and waits until its
// /readyz answers.
func startServer(ctx context.Context, name, bin string, args []string, dir string, env []string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	env = append([]string{"PATH=" + os.Getenv("PATH"), "ADDR=" + addr}, env...)
	p, err := startProc(name, filepath.Join(dir, "server.log"), env, bin, args...)
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, base, nil
			}
			err = fmt.Errorf("/readyz answered %s", resp.Status)
		}
		if !p.alive() || time.Now().After(deadline) || ctx.Err() != nil {
			p.stop(time.Second)
			return nil, "", fmt.Errorf("%s on %s not ready: %w; log: %s", name, addr, err, p.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentID is the load-test template's agent.
const agentID = "loadtest"

// loadTemplate is a plain agent with one tool and no orchestration steps:
// what is measured is the runtime's path, not a template's conditions. The
// history is bounded so that a session's later turns send the model the
// same size of request as its first ones.
const loadTemplate = `{
  "version": "1.0",
  "agentId": "loadtest",
  "name": "Load test",
  "description": "The load harness's agent: answers through the mock model, with the think tool.",
  "personality": ["You answer briefly."],
  "nodes": ["llm.openai", "think"],
  "nodeConfigurations": {"llm.openai": {"model": "mock-model", "temperature": 0.2, "maxTokens": 256}},
  "chatSettings": {"historyPolicy": "lastN", "historyLength": 4},
  "options": {"maxSteps": 4}
}
`

func writeTemplate(dir string) error {
	d := filepath.Join(dir, agentID)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("template dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(d, "template.json"), []byte(loadTemplate), 0o644); err != nil {
		return fmt.Errorf("writing the load-test template: %w", err)
	}
	return nil
}

// metricsClient closes its connection after each scrape, so that a kept
// connection's goroutine in the server does not count among the ones being
// measured (the soak compares goroutines before and after a load).
var metricsClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

// runtimeMetrics reads the server's Go runtime gauges (unlabelled lines of
// its Prometheus /metrics) that say where memory goes.
func runtimeMetrics(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	return parseMetrics(string(b), "go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_heap_objects")
}

// parseMetrics picks the named unlabelled samples from Prometheus text; a
// missing one is an error.
func parseMetrics(text string, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	for line := range strings.Lines(text) {
		name, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", name, err)
		}
		out[name] = v
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", n)
		}
	}
	return out, nil
}
