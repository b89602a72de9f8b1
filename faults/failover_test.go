package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestSentinelFailoverWaits: two replicas on a Sentinel-managed primary
// with one Redis replica and REDIS_WAIT_REPLICAS=1 run turns while the
// primary is SIGKILLed and Sentinel promotes its replica. No turn that
// ended finish stop loses text: each one's session, read after the
// failover, holds its user message and exactly the answer its client
// saw. The old primary then comes back as a replica of the new one. The
// turns that ended otherwise (cut by the failover, or store_not_replicated
// while the promoted primary had no replica) are counted by how they
// ended, and the test prints the counts.
func TestSentinelFailoverWaits(t *testing.T) {
	failover(t, sentinelPair(t), load{turns: 40, parallel: 6, after: 1500 * time.Millisecond}, waitOne...)
}

// TestSentinelFailoverWaitsUnderLoad is the slow variant: more turns, more
// of them at once.
func TestSentinelFailoverWaitsUnderLoad(t *testing.T) {
	slow(t)
	failover(t, sentinelPair(t), load{turns: 400, parallel: 24, after: 8 * time.Second}, waitOne...)
}

// TestClusterFailoverWaits is TestSentinelFailoverWaits on a Redis Cluster
// of three primaries with a replica each: one primary is SIGKILLed, the
// Cluster's other primaries promote its replica, and the turns of the
// sessions in its slots go on there. The turns of the other shards run
// on throughout.
func TestClusterFailoverWaits(t *testing.T) {
	failover(t, clusterShards(t), load{turns: 60, parallel: 6, after: 1500 * time.Millisecond}, waitOne...)
}

// TestClusterFailoverWaitsUnderLoad is the slow variant.
func TestClusterFailoverWaitsUnderLoad(t *testing.T) {
	slow(t)
	failover(t, clusterShards(t), load{turns: 400, parallel: 24, after: 8 * time.Second}, waitOne...)
}

// waitOne is the setting of the tests that fail a primary with one
// replica: each write waits for it, for at most 500 ms.
var waitOne = []string{"REDIS_WAIT_REPLICAS=1", "REDIS_WAIT_TIMEOUT=500ms"}

// TestSentinelManualFailover: a primary with two replicas managed by a
// Sentinel, the default REDIS_WAIT_REPLICAS (auto) and REDIS_WAIT_TIMEOUT,
// and a manual SENTINEL FAILOVER while turns run: Sentinel promotes one
// replica, and the old primary and the other replica follow it. No turn
// that ended finish stop loses text (auto waits for both replicas, so
// whichever Sentinel promotes has every write a turn finished on).
func TestSentinelManualFailover(t *testing.T) {
	failover(t, sentinelTrio(t), load{turns: 60, parallel: 8, after: 1500 * time.Millisecond})
}

// TestSentinelManualFailoverUnderLoad is the slow variant: 1,000 turns, 24
// at a time, a manual failover every 4 s (five of them).
func TestSentinelManualFailoverUnderLoad(t *testing.T) {
	slow(t)
	failover(t, sentinelTrio(t), load{turns: 1000, parallel: 24, after: 4 * time.Second, failures: 5, every: 4 * time.Second})
}

// TestClusterManualFailover: a Redis Cluster of three primaries with a
// replica each, the default REDIS_WAIT_REPLICAS (auto, the shard's
// replicas) and a manual CLUSTER FAILOVER of the first shard (its replica
// takes over, the old primary follows it) while turns run: no turn that
// ended stop loses text.
func TestClusterManualFailover(t *testing.T) {
	failover(t, clusterManual(t), load{turns: 60, parallel: 8, after: 1500 * time.Millisecond})
}

// TestClusterManualFailoverUnderLoad is the slow variant: 1,000 turns, 24
// at a time, a manual failover every 4 s (five of them, back and forth).
func TestClusterManualFailoverUnderLoad(t *testing.T) {
	slow(t)
	failover(t, clusterManual(t), load{turns: 1000, parallel: 24, after: 4 * time.Second, failures: 5, every: 4 * time.Second})
}

// TestClusterFailoverDefaults is TestClusterFailoverWaitsUnderLoad with the
// default REDIS_WAIT_REPLICAS and REDIS_WAIT_TIMEOUT.
func TestClusterFailoverDefaults(t *testing.T) {
	slow(t)
	failover(t, clusterShards(t), load{turns: 400, parallel: 24, after: 8 * time.Second})
}

// load is the turns a failover test runs, parallel at a time, and when
// the store fails: after the first turns, at the earliest after after,
// failures times (1 when 0), every apart.
type load struct {
	turns, parallel int
	after, every    time.Duration
	failures        int
}

// replicated is a Redis with replicas that a failover test runs turns on.
type replicated struct {
	name  string
	store string // SESSION_STORE
	// fail SIGKILLs a primary, waits until its replica is promoted and
	// restarts it, to come back as a replica of the new one.
	fail func()
	// settled waits until the store's topology names a primary for every
	// key again.
	settled func()
	// onFailing reports whether the primary that fails holds session
	// sid's keys (before fail).
	onFailing func(sid string) bool
}

// sentinelTrio is a primary with two replicas, managed by a Sentinel;
// it fails by a manual SENTINEL FAILOVER, after which the old primary and
// the other replica follow the promoted one.
func sentinelTrio(t *testing.T) replicated {
	primary := redistest.Start(t)
	for range 2 {
		redistest.Start(t, redistest.ReplicaOf(primary))
	}
	waitReplication(t, fixedAddr(primary.Addr()), "connected_slaves:2", 15*time.Second, "the replicas are not connected")
	sentinel := redistest.Start(t, redistest.Sentinel(primary, "sessions"))
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr()})
	t.Cleanup(func() { sc.Close() })
	ctx := context.Background()
	master := func() (string, error) {
		addr, err := sc.GetMasterAddrByName(ctx, "sessions").Result()
		if err != nil || len(addr) != 2 {
			return "", fmt.Errorf("sentinel names no master: %v %w", addr, err)
		}
		return net.JoinHostPort(addr[0], addr[1]), nil
	}
	// Sentinel knows both replicas, and the master has them online: a
	// failover can pick either.
	ready := func() {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			known, _ := sc.Replicas(ctx, "sessions").Result()
			good := 0
			for _, r := range known {
				if !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") {
					good++
				}
			}
			if good == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Sentinel knows %d good replicas, want 2: %v", good, known)
			}
		}
		waitReplication(t, master, "connected_slaves:2", 30*time.Second, "the master has not got both replicas back")
	}
	ready()
	return replicated{
		name:  "Sentinel (primary and two replicas, manual failover)",
		store: "redis+sentinel://" + sentinel.Addr() + "/sessions/0",
		fail: func() {
			ready()
			before, _ := master()
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				err := sc.Failover(ctx, "sessions").Err()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("SENTINEL FAILOVER: %v", err)
				}
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if now, err := master(); err == nil && now != before {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("Sentinel promoted no replica")
				}
			}
			waitReplication(t, master, "role:master", 30*time.Second, "the promoted replica is not a master")
		},
		settled:   func() { ready() },
		onFailing: func(string) bool { return true },
	}
}

// sentinelPair is a primary with one replica, managed by a Sentinel.
func sentinelPair(t *testing.T) replicated {
	primary := redistest.Start(t)
	replica := redistest.Start(t, redistest.ReplicaOf(primary))
	waitReplicaOnline(t, primary)
	sentinel := redistest.Start(t, redistest.Sentinel(primary, "sessions"))
	return replicated{
		name:  "Sentinel",
		store: "redis+sentinel://" + sentinel.Addr() + "/sessions/0",
		fail: func() {
			killRedis(t, primary)
			waitPromoted(t, replica)
			primary.Restart()
		},
		// Sentinel may have failed over again since (the old primary,
		// back as a replica, promoted when the loaded machine stalled the
		// new one past down-after-milliseconds): the servers follow
		// whichever it names.
		settled:   func() { waitSentinelMaster(t, sentinel) },
		onFailing: func(string) bool { return true },
	}
}

// clusterShards is a Redis Cluster of three primaries with one replica
// each; the first primary is the one that fails.
func clusterShards(t *testing.T) replicated {
	c := redistest.StartCluster(t, 3)
	return replicated{
		name:  "Cluster",
		store: c.URL(),
		fail: func() {
			killRedis(t, c.Primaries[0])
			waitPromoted(t, c.Replicas[0])
			c.Primaries[0].Restart()
		},
		settled: func() {
			for _, s := range append(slices.Clone(c.Primaries), c.Replicas...) {
				waitClusterOK(t, s)
			}
		},
		onFailing: func(sid string) bool { return holdsKeys(t, c.Primaries[0], sid) },
	}
}

// clusterManual is a Redis Cluster of three primaries with one replica
// each; it fails by a manual CLUSTER FAILOVER of the first shard, sent to
// whichever of its two nodes is the replica (so that failures go back and
// forth).
func clusterManual(t *testing.T) replicated {
	c := redistest.StartCluster(t, 3)
	shard := []*redistest.Server{c.Primaries[0], c.Replicas[0]}
	role := func(s *redistest.Server) string {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer rc.Close()
		info, _ := rc.Info(context.Background(), "replication").Result()
		if strings.Contains(info, "role:master") {
			return "master"
		}
		return "replica"
	}
	return replicated{
		name:  "Cluster (three shards of a primary and a replica, manual failover)",
		store: c.URL(),
		fail: func() {
			var replica, primary *redistest.Server
			for deadline := time.Now().Add(30 * time.Second); replica == nil; time.Sleep(50 * time.Millisecond) {
				if role(shard[0]) == "master" && role(shard[1]) == "replica" {
					primary, replica = shard[0], shard[1]
				} else if role(shard[1]) == "master" && role(shard[0]) == "replica" {
					primary, replica = shard[1], shard[0]
				}
				if time.Now().After(deadline) {
					t.Fatal("the first shard has no primary with a replica")
				}
			}
			waitReplication(t, fixedAddr(primary.Addr()), "state=online", 30*time.Second, "the shard's replica is not online")
			rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
			defer rc.Close()
			if err := rc.ClusterFailover(context.Background()).Err(); err != nil {
				t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
			}
			waitPromoted(t, replica)
		},
		settled: func() {
			for _, s := range append(slices.Clone(c.Primaries), c.Replicas...) {
				waitClusterOK(t, s)
			}
		},
		// Before the first failure, the first primary holds the shard.
		onFailing: func(sid string) bool { return holdsKeys(t, shard[0], sid) },
	}
}

// failover runs the turns of l on two replicas of agentdock with their
// sessions in topo and env (settings beyond the defaults), fails topo
// as l says, and checks every turn that ended stop against its session as
// read once topo settled.
func failover(t *testing.T, topo replicated, l load, env ...string) {
	turns, parallel, killAfter := l.turns, l.parallel, l.after
	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf(" w%d", i)
	}
	m := newModel(t, mockllm.WithDefault(mockllm.Script{Text: words, InterTokenDelay: 25 * time.Millisecond}))
	settings := env
	env = append(append(modelEnv(m), "SESSION_STORE="+topo.store, "HEARTBEAT=250ms", "SESSION_LOCK_TTL=6s", "STORE_WRITE_RETRY=5s"), settings...)
	servers := []*serverProc{startServer(t, env...), startServer(t, env...)}

	type outcome struct {
		sid, end, shown string
		errs            []string
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		refused  int // 503s retried
		failed   int // failovers made
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sid := session.NewID()
				p := servers[i%len(servers)]
				// A client retries a turn the store refused to start (503:
				// nothing was saved) while Redis fails over.
				s := tryChat(t, p.URL(), agentID, sid, fmt.Sprintf("question %d", i))
				for start := time.Now(); s.Status == http.StatusServiceUnavailable && time.Since(start) < 30*time.Second; {
					mu.Lock()
					refused++
					mu.Unlock()
					time.Sleep(250 * time.Millisecond)
					s = tryChat(t, p.URL(), agentID, sid, fmt.Sprintf("question %d", i))
				}
				o := outcome{sid: sid}
				if s.Status != http.StatusOK {
					o.end = fmt.Sprintf("status %d", s.Status)
				} else {
					frames := readFor(s, 60*time.Second)
					o.end, o.shown, o.errs = requireEndOrEmpty(frames), answerOf(frames), errorTexts(frames)
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		}()
	}
	killed := make(chan struct{})
	// held are the turns that ended stop on the primary that fails before
	// it failed: their text is only where it was acknowledged.
	held := map[string]bool{}
	go func() {
		defer close(killed)
		// Some turns have finished, at least minHeld of them on the
		// primary that fails, and others run.
		const minHeld = 3
		start, checked := time.Now(), 0
		for time.Since(start) < killAfter || len(held) < minHeld {
			if time.Since(start) > killAfter+time.Minute {
				t.Errorf("%d turns ended stop on the primary to fail within %v; want %d", len(held), killAfter+time.Minute, minHeld)
				break
			}
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			ended := outcomes[checked:]
			checked = len(outcomes)
			mu.Unlock()
			for _, o := range ended {
				if o.end == "stop" && topo.onFailing(o.sid) {
					held[o.sid] = true
				}
			}
		}
		for i := range max(l.failures, 1) {
			if i > 0 {
				time.Sleep(l.every)
			}
			time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
			// The old primary comes back as a replica of the new one, and
			// turns are acknowledged again.
			topo.fail()
			mu.Lock()
			failed++
			mu.Unlock()
		}
	}()
	for i := range turns {
		next <- i
	}
	close(next)
	wg.Wait()
	<-killed
	topo.settled()
	// The replicas' clients follow the topology to the new primary.
	promoted := time.Now()
	for {
		_, status, raw := getSession(t, servers[0].URL(), outcomes[0].sid)
		if status != http.StatusServiceUnavailable {
			break
		}
		if time.Since(promoted) > 30*time.Second {
			t.Fatalf("the store is still unavailable 30 s after the promotion: %s", raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the replicas reached the new primary %v after its promotion", time.Since(promoted).Round(time.Millisecond))

	ends := map[string]int{}
	lost := 0
	for _, o := range outcomes {
		key := o.end
		if len(o.errs) > 0 {
			code, _, _ := strings.Cut(o.errs[0], ":")
			key += " " + code
		}
		ends[key]++
		if o.end != "stop" {
			continue
		}
		view, status, raw := getSession(t, servers[0].URL(), o.sid)
		saved := ""
		for _, msg := range view.Messages {
			if msg.Role == "assistant" {
				saved += msg.Content
			}
		}
		if status != http.StatusOK || len(view.Messages) < 2 || saved != o.shown {
			lost++
			t.Errorf("a turn that finished stop lost text: session %s (%d): saved %q, shown %q; %s", o.sid, status, saved, o.shown, raw)
		}
	}
	what := "the defaults"
	if len(settings) > 0 {
		what = strings.Join(settings, " ")
	}
	t.Logf("%s, %d failover(s), with %s: %d turns, %d at a time (%d refusals retried); ends %v; turns that finished stop and lost text: %d (%d turns had ended stop on the failing primary before the first failover)", topo.name, failed, what, len(outcomes), parallel, refused, ends, lost, len(held))
	if ends["stop"] == 0 {
		t.Fatalf("no turn finished stop: %v", ends)
	}

}

// waitSentinelMaster waits until the master sentinel names for "sessions"
// answers as a master.
func waitSentinelMaster(t *testing.T, sentinel *redistest.Server) {
	t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr()})
	defer sc.Close()
	named := func() (string, error) {
		addr, err := sc.GetMasterAddrByName(context.Background(), "sessions").Result()
		if err != nil || len(addr) != 2 {
			return "", fmt.Errorf("sentinel names no master: %v %w", addr, err)
		}
		return net.JoinHostPort(addr[0], addr[1]), nil
	}
	waitReplication(t, named, "role:master", 30*time.Second, "the master Sentinel names is not a master")
}

// holdsKeys reports whether node has a key of session sid (the store's
// keys name it in their hash tag).
func holdsKeys(t *testing.T, node *redistest.Server, sid string) bool {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: node.Addr()})
	defer rc.Close()
	keys, _, err := rc.Scan(context.Background(), 0, "*"+sid+"}*", 1000).Result()
	if err != nil {
		t.Fatalf("SCAN %s: %v", node.Addr(), err)
	}
	return len(keys) > 0
}

// waitClusterOK waits until node says the Cluster is ok (every slot
// served).
func waitClusterOK(t *testing.T, node *redistest.Server) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: node.Addr()})
	defer rc.Close()
	var info string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(info, "cluster_state:ok"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Cluster is not ok on %s: %s", node.Addr(), info)
		}
		info, _ = rc.ClusterInfo(context.Background()).Result()
	}
}

// waitReplicaOnline waits until primary has an online replica.
func waitReplicaOnline(t *testing.T, primary *redistest.Server) {
	t.Helper()
	waitReplication(t, fixedAddr(primary.Addr()), "state=online", 15*time.Second, "the replica is not online")
}

// waitPromoted waits until Sentinel promoted the replica (role master).
func waitPromoted(t *testing.T, replica *redistest.Server) {
	t.Helper()
	waitReplication(t, fixedAddr(replica.Addr()), "role:master", 30*time.Second, "Sentinel did not promote the replica")
}

func fixedAddr(addr string) func() (string, error) {
	return func() (string, error) { return addr, nil }
}

// waitReplication polls the replication section of INFO on the server at
// addr() until it contains want, and fails with failure and the last
// section read when within has passed.
func waitReplication(t *testing.T, addr func() (string, error), want string, within time.Duration, failure string) {
	t.Helper()
	var info string
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if a, err := addr(); err == nil {
			rc := redis.NewClient(&redis.Options{Addr: a})
			info, _ = rc.Info(context.Background(), "replication").Result()
			_ = rc.Close()
			if strings.Contains(info, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", failure, info)
		}
	}
}
