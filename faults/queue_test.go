package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// Queued messages (busy policy enqueue) must cost the store nothing while
// they wait (issue 55): they used to ask Redis 20 times a second each, and
// 800 of them drove it to 140,000 ops/s, slowing every tenant.

// commandsProcessed is Redis's total_commands_processed (every command,
// those a script runs included).
func commandsProcessed(t *testing.T, rc *redis.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rc.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatalf("INFO stats: %v", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("total_commands_processed %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO stats has no total_commands_processed:\n%s", info)
	return 0
}

// opsPerSecond is Redis's command rate over d, as a diff of
// total_commands_processed (the INFO calls themselves taken out).
func opsPerSecond(t *testing.T, rc *redis.Client, d time.Duration) float64 {
	t.Helper()
	before, start := commandsProcessed(t, rc), time.Now()
	time.Sleep(d)
	after := commandsProcessed(t, rc)
	return float64(after-before-1) / time.Since(start).Seconds()
}

// TestQueuedMessagesOnRedis: sessions each with a turn running and
// MAX_QUEUE (8) messages waiting behind it: 100 sessions (800 messages) in
// make faults, 20 (160) in make test. While they wait, Redis runs under
// 5,000 commands a second above its idle rate; every message then gets
// its turn.
func TestQueuedMessagesOnRedis(t *testing.T) {
	sessions := 20
	if os.Getenv("AGENTDOCK_SLOW_FAULTS") == "1" {
		sessions = 100
	}
	const perSession = 8
	// The running turns answer once released; the queued ones at once.
	release := make(chan struct{})
	m := newModel(t, mockllm.WithMaxRecorded(100), mockllm.WithResponder(func(r mockllm.Request) mockllm.Script {
		if last := r.Messages[len(r.Messages)-1]; strings.HasPrefix(last.Text, "hold") {
			<-release
		}
		return mockllm.TextScript("done")
	}))
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	rs := redistest.Start(t)
	srv := startServer(t, append(modelEnv(m), "SESSION_STORE="+rs.URL(), "MAX_QUEUED_PER_OWNER=0")...)
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer rc.Close()
	idle := opsPerSecond(t, rc, 2*time.Second)

	holding := make([]*stream, sessions)
	begun := make([][]frame, sessions)
	for i := range sessions {
		holding[i] = tryChat(t, srv.URL(), agentID, fmt.Sprintf("queued-session-%03d", i), "hold on")
		if holding[i].Status != http.StatusOK {
			t.Fatalf("session %d: %d %s", i, holding[i].Status, holding[i].Body)
		}
		begun[i] = holding[i].Until("start-step", 30*time.Second)
	}
	var (
		wg               sync.WaitGroup
		finished, failed atomic.Int64
		firstFailure     atomic.Value
	)
	for i := range sessions {
		for j := range perSession {
			wg.Go(func() {
				s := tryChatBusy(t, srv.URL(), agentID, fmt.Sprintf("queued-session-%03d", i), fmt.Sprintf("queued %d", j), "enqueue")
				if s.Status != http.StatusOK {
					if failed.Add(1) == 1 {
						firstFailure.Store(fmt.Sprintf("%d %s", s.Status, s.Body))
					}
					return
				}
				for {
					f, err := s.Next(2 * time.Minute)
					if err != nil {
						failed.Add(1)
						return
					}
					if f.Data == "[DONE]" {
						finished.Add(1)
						return
					}
				}
			})
		}
	}
	// Wait until every message is queued in Redis.
	waiting := sessions * perSession
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		n := 0
		for i := range sessions {
			c, err := rc.ZCard(t.Context(), fmt.Sprintf("orchestration-state:{queued-session-%03d}:queue", i)).Result()
			if err != nil {
				t.Fatal(err)
			}
			n += int(c)
		}
		if n == waiting {
			break
		}
		if time.Now().After(deadline) || failed.Load() > 0 {
			t.Fatalf("%d of %d messages queued in Redis; %d refused (%v)", n, waiting, failed.Load(), firstFailure.Load())
		}
	}
	busy := opsPerSecond(t, rc, 6*time.Second)
	t.Logf("Redis: %.0f commands/s idle, %.0f/s with %d messages waiting on %d sessions: %.0f/s above idle (%.2f a message a second)",
		idle, busy, waiting, sessions, busy-idle, (busy-idle)/float64(waiting))
	if busy-idle >= 5000 {
		t.Errorf("%d waiting messages cost Redis %.0f commands/s above idle; want under 5,000", waiting, busy-idle)
	}
	start := time.Now()
	free()
	for i, h := range holding {
		requireEnd(t, append(begun[i], h.All(time.Minute)...))
	}
	wg.Wait()
	t.Logf("released: %d of %d queued messages had their turns in %v", finished.Load(), waiting, time.Since(start).Round(time.Millisecond))
	if finished.Load() != int64(waiting) || failed.Load() != 0 {
		t.Errorf("%d queued messages finished, %d failed (%v); want all %d", finished.Load(), failed.Load(), firstFailure.Load(), waiting)
	}
}

// TestQueuedPerOwner: an owner's waiting messages are capped
// (MAX_QUEUED_PER_OWNER); past it a message gets 429 too_many_queued at
// once, and another key's still waits.
func TestQueuedPerOwner(t *testing.T) {
	release := make(chan struct{})
	m := newModel(t, mockllm.WithResponder(func(r mockllm.Request) mockllm.Script {
		if last := r.Messages[len(r.Messages)-1]; strings.HasPrefix(last.Text, "hold") {
			<-release
		}
		return mockllm.TextScript("done")
	}))
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	srv := startServer(t, append(modelEnv(m), "API_KEYS=key-alice,key-bob", "MAX_QUEUED_PER_OWNER=2")...)
	post := func(key, sid, msg string) *stream {
		body := fmt.Sprintf(`{"message":%q,"sessionId":%q,"busy":"enqueue"}`, msg, sid)
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/api/chat/"+agentID, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", key)
		return open(t, req)
	}
	for _, key := range []string{"key-alice", "key-bob"} {
		s := post(key, key+"-session", "hold on")
		if s.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", key, s.Status, s.Body)
		}
		s.Until("start-step", 30*time.Second)
	}
	waiting := make(chan *stream, 3)
	for range 2 {
		go func() { waiting <- post("key-alice", "key-alice-session", "later") }()
	}
	// Both queued (GET /api/sessions/:id counts them); a third is then
	// refused at once.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/sessions/key-alice-session", "key-alice", "")
		if strings.Contains(body, `"queued":2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's two messages were not queued: %s", clip(body, 300))
		}
	}
	third := post("key-alice", "key-alice-session", "later still")
	t.Logf("alice's third waiting message: %d %s", third.Status, third.Body)
	if third.Status != http.StatusTooManyRequests || !strings.Contains(third.Body, "too_many_queued") {
		t.Errorf("alice's third waiting message: %d %s; want 429 too_many_queued", third.Status, third.Body)
	}
	go func() { waiting <- post("key-bob", "key-bob-session", "later") }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/sessions/key-bob-session", "key-bob", "")
		if strings.Contains(body, `"queued":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's message was not queued: %s", clip(body, 300))
		}
	}
	once.Do(func() { close(release) })
	for range 3 {
		if s := <-waiting; s.Status != http.StatusOK {
			t.Errorf("a waiting message: %d %s", s.Status, s.Body)
		} else {
			requireEnd(t, s.All(30*time.Second))
		}
	}
}
