package faults

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestRenewalCost measures what a turn's renewals cost Redis while it
// waits (a model slow to answer: nothing streams), with the default
// SESSION_LOCK_TTL (10 s) and with 30 s (the default before issue 57): 20
// turns wait on replica A with their clients on A, then 20 more clients
// follow them from replica B. It prints, per waiting turn and per idle
// stream followed from another replica, the requests a second the
// replicas send Redis (MONITOR's lines from clients: a pipeline's
// commands count one each, a script's call one) and the commands Redis
// runs (a script's own included), above what Redis serves with nothing
// running. It asserts nothing but that the turns finish: the figures go
// in docs/deploying.md.
func TestRenewalCost(t *testing.T) {
	slow(t)
	for _, ttl := range []string{"", "30s"} {
		name := "defaults"
		if ttl != "" {
			name = "SESSION_LOCK_TTL=" + ttl
		}
		t.Run(name, func(t *testing.T) { renewalCost(t, ttl) })
	}
}

func renewalCost(t *testing.T, ttl string) {
	const (
		turns = 20
		wait  = 20 * time.Second // the model's time to its first token
	)
	m := newModel(t, mockllm.WithDefault(mockllm.Script{Text: []string{"done"}, TimeToFirstToken: wait}), mockllm.WithMaxRecorded(-1))
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "SHUTDOWN_TIMEOUT=25s")
	if ttl != "" {
		env = append(env, "SESSION_LOCK_TTL="+ttl)
	}
	a, b := startServer(t, env...), startServer(t, env...)
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rc.Close()
	// The replicas' requests, as MONITOR lists them: not a script's own
	// commands ("lua"), not this test's INFO.
	host, port, _ := net.SplitHostPort(rs.Addr())
	monitor := exec.Command("redis-cli", "-h", host, "-p", port, "monitor")
	out, err := monitor.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := monitor.Start(); err != nil {
		t.Fatalf("redis-cli monitor: %v", err)
	}
	defer func() { _ = monitor.Process.Kill(); _ = monitor.Wait() }()
	var requests atomic.Int64
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if !strings.Contains(l, " lua]") && !strings.Contains(strings.ToLower(l), `"info"`) && strings.Contains(l, `"`) {
				requests.Add(1)
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	window := func(d time.Duration) (reqs, cmds float64) {
		before, start := requests.Load(), time.Now()
		cmds = opsPerSecond(t, rc, d)
		return float64(requests.Load()-before) / time.Since(start).Seconds(), cmds
	}

	idleReqs, idle := window(3 * time.Second)
	sids := make([]string, turns)
	var wg sync.WaitGroup
	for i := range sids {
		sids[i] = session.NewID()
		s := chat(t, a.URL(), agentID, sids[i], fmt.Sprintf("question %d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if end := requireEnd(t, s.All(2*wait)); end != "stop" {
				t.Errorf("a turn ended %q", end)
			}
		}()
	}
	time.Sleep(2 * time.Second) // the starts are over
	runningReqs, running := window(6 * time.Second)
	var readers []*stream
	for _, sid := range sids {
		r := resume(t, b.URL(), sid, "")
		if r.Status != http.StatusOK {
			t.Fatalf("following a turn from B: %d %s", r.Status, r.Body)
		}
		readers = append(readers, r)
	}
	time.Sleep(time.Second)
	followedReqs, followed := window(6 * time.Second)
	wg.Wait()
	for _, r := range readers {
		if end := requireEnd(t, r.All(2*wait)); end != "stop" {
			t.Errorf("a turn followed from B ended %q", end)
		}
	}
	t.Logf("%s: Redis idle: %.1f requests/s, %.1f commands/s; each waiting turn adds %.2f requests/s, %.2f commands/s (its lease renewals and signs of life); each idle stream followed from another replica adds %.2f requests/s, %.2f commands/s",
		map[bool]string{true: "defaults (SESSION_LOCK_TTL 10s)", false: "SESSION_LOCK_TTL=" + ttl}[ttl == ""], idleReqs, idle,
		(runningReqs-idleReqs)/turns, (running-idle)/turns, (followedReqs-runningReqs)/turns, (followed-running)/turns)
}
