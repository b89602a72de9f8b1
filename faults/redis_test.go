package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// killRedis ends the redis-server with SIGKILL, as a crash or an OOM kill
// would: no shutdown, no final AOF rewrite. redistest only stops servers
// cleanly, so the process ID comes from INFO server; Restart then starts
// it again on the same port and directory (the append-only file holds
// everything written before the kill: appendfsync everysec loses only what
// the kernel had not received, and a SIGKILL does not drop the page cache).
func killRedis(t *testing.T, rs *redistest.Server) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr(), MaxRetries: -1})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := rc.Info(ctx, "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	pid := 0
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, err = strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO process_id %q: %v", v, err)
			}
		}
	}
	if pid <= 0 {
		t.Fatalf("INFO server has no process_id:\n%s", info)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL redis-server (pid %d): %v", pid, err)
	}
	// Wait until the port is closed, so that the server's next command
	// surely meets a dead Redis.
	deadline := time.Now().Add(5 * time.Second)
	for rc.Ping(ctx).Err() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server (pid %d) still answers after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killPoint is where in a turn Redis dies.
type killPoint struct {
	name string
	// scripts answer the turn's model calls.
	scripts []mockllm.Script
	// after is the frame type, and n how many of it, read before the kill.
	after string
	n     int
}

// slowText is a text answer that streams for about a second, so that the
// kill lands while the model is still answering.
func slowText(words int) mockllm.Script {
	s := mockllm.Script{InterTokenDelay: 25 * time.Millisecond}
	for i := range words {
		s.Text = append(s.Text, fmt.Sprintf("w%d ", i))
	}
	return s
}

var thinkCall = mockllm.ToolScript(mockllm.ToolCall{ID: "call_think", Name: "think", Arguments: `{"topic":"kill","reasoning":"**Problem** redis dies"}`})

// fastKillPoints are the fast test's points: while the model streams a
// plain answer, and while it streams the answer that follows a tool call
// and its result (whose messages were saved before the kill).
var fastKillPoints = []killPoint{
	{name: "text answer", scripts: []mockllm.Script{slowText(40)}, after: "text-delta", n: 3},
	{name: "answer after a tool call", scripts: []mockllm.Script{thinkCall, slowText(40)}, after: "text-delta", n: 3},
}

// TestRedisKilledMidTurn: redis-server killed (SIGKILL) while a turn
// streams ends that turn with one store_unavailable error frame, finish
// and [DONE] (never a cut stream); while Redis is down the session answers
// 503; after Redis restarts, the same server process, not restarted, runs
// the session's next turn, and the session is consistent: the earlier
// turn's messages are intact, every tool call has its result, and the
// state parses and counts the user messages the history holds.
func TestRedisKilledMidTurn(t *testing.T) {
	for _, kp := range fastKillPoints {
		t.Run(kp.name, func(t *testing.T) { redisKill(t, kp) })
	}
}

// TestRedisKilledMidTurnEverywhere is the slow variant: Redis dies after
// each of the first frames of a turn that calls a tool and then answers,
// so that the kill lands before, during and after the tool's messages are
// saved.
func TestRedisKilledMidTurnEverywhere(t *testing.T) {
	slow(t)
	// Frames of this turn up to the second step's text: start,
	// data-orchestration, start-step, tool-input-start,
	// tool-input-available, tool-output-available, finish-step, ... .
	types := []string{"start", "start-step", "tool-input-start", "tool-input-available", "tool-output-available", "finish-step", "text-start", "text-delta"}
	for _, typ := range types {
		kp := killPoint{name: "after " + typ, scripts: []mockllm.Script{
			{ToolCalls: thinkCall.ToolCalls, InterTokenDelay: 30 * time.Millisecond, TimeToFirstToken: 100 * time.Millisecond},
			slowText(40),
		}, after: typ, n: 1}
		t.Run(kp.name, func(t *testing.T) { redisKill(t, kp) })
	}
}

func redisKill(t *testing.T, kp killPoint) {
	rs := redistest.Start(t)
	m := newModel(t)
	srv := startServer(t, append(modelEnv(m), "SESSION_STORE="+rs.URL(), "REDIS_DIAL_TIMEOUT=200ms", "REDIS_READ_TIMEOUT=500ms", "REDIS_WRITE_TIMEOUT=500ms", "STORE_WRITE_RETRY=1s")...)
	base := srv.URL()
	const sid = "redis-kill-session"

	// A complete turn first: its messages must survive what follows.
	m.Enqueue(mockllm.TextScript("First", " answer."))
	if r := runTurn(t, base, sid, "first"); r.reason != "stop" || len(r.errs) > 0 {
		t.Fatalf("the first turn: finish %q, errors %q", r.reason, r.errs)
	}

	m.Enqueue(kp.scripts...)
	s := chat(t, base, agentID, sid, "second")
	var frames []frame
	for range kp.n {
		frames = append(frames, s.Until(kp.after, 10*time.Second)...)
	}
	killRedis(t, rs)
	frames = append(frames, s.All(15*time.Second)...)
	reason := requireEnd(t, frames)
	errs := errorTexts(frames)
	if reason != "error" || len(errs) != 1 || !strings.HasPrefix(errs[0], "store_unavailable") {
		t.Fatalf("finish %q, errors %q; want error and one store_unavailable", reason, errs)
	}

	if _, status, raw := getSession(t, base, sid); status != http.StatusServiceUnavailable || !strings.Contains(raw, "store_unavailable") {
		t.Errorf("GET session while Redis is down: %d %s; want 503 store_unavailable", status, raw)
	}

	// A kill before the turn's last model call leaves its scripts queued:
	// the next turn gets them, else the mock's default answer.
	want := mockllm.DefaultScript.Text
	if rest := kp.scripts[len(kp.scripts)-m.Pending():]; len(rest) > 0 {
		want = nil
		for _, sc := range rest {
			want = append(want, sc.Text...)
		}
	}
	wantText := strings.Join(want, "")

	rs.Restart()
	restarted := time.Now()
	// The next turn, on the same server process. A lease the dead turn
	// could not release blocks the session (409 session_busy) until it is
	// released or expires; it must not take the lease's full TTL (30 s).
	var next *stream
	for {
		next = tryChat(t, base, agentID, sid, "third")
		if next.Status == http.StatusOK {
			break
		}
		if next.Status != http.StatusConflict && next.Status != http.StatusServiceUnavailable {
			t.Fatalf("the turn after the restart: %d %s", next.Status, next.Body)
		}
		if time.Since(restarted) > 5*time.Second {
			t.Fatalf("the session still refuses turns %v after Redis came back: %d %s", time.Since(restarted).Round(time.Millisecond), next.Status, next.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the next turn was accepted %v after Redis restarted", time.Since(restarted).Round(time.Millisecond))
	nf := next.All(15 * time.Second)
	if r := requireEnd(t, nf); r != "stop" || len(errorTexts(nf)) > 0 || textOf(nf) != wantText {
		t.Fatalf("the turn after the restart: finish %q, errors %q, text %q; want stop, none, %q", r, errorTexts(nf), textOf(nf), wantText)
	}

	view := requireConsistent(t, base, sid)
	raw, _ := json.Marshal(view.Messages)
	msgs := view.Messages
	if len(msgs) < 4 || msgs[0].Content != "first" || msgs[1].Role != "assistant" || msgs[1].Content != "First answer." {
		t.Errorf("the first turn's messages were not kept: %s", raw)
	}
	if last := msgs[len(msgs)-1]; last.Role != "assistant" || last.Content != wantText {
		t.Errorf("the last message is not the new turn's answer: %s", raw)
	}
	users := 0
	for _, msg := range msgs {
		if msg.Role == "user" {
			users++
		}
	}
	if users != view.State.UserMessages {
		t.Errorf("the state counts %d user messages, the history holds %d: %s", view.State.UserMessages, users, raw)
	}
	if !slices.ContainsFunc(msgs, func(m adchat.Message) bool { return m.Role == "user" && m.Content == "third" }) {
		t.Errorf("the new turn's user message is not in the history: %s", raw)
	}
}
