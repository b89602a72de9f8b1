package faults

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// TestRetryAfterEarlyKill: replica A accepts a turn (its user message and
// the AI SDK message ID are stored with it) and is SIGKILLed 30 to 60 ms
// later, before or about when its first frames reach the shared log; the
// client posts the same body to replica B. The retry is given A's turn
// (the same X-Turn-Id, Idempotent-Replayed) and gets it run to its end
// (taken over: finish stop, the answer whole and saved as shown) or told
// turn_interrupted: never a finish stop without the answer. The session
// holds the user message once, and every model call holds it once. The
// same message ID with another text is refused (409
// idempotency_key_reused). The test prints how each retry ended.
func TestRetryAfterEarlyKill(t *testing.T) {
	earlyKills(t, []time.Duration{30 * time.Millisecond, 40 * time.Millisecond, 60 * time.Millisecond})
}

// TestRetryAfterEarlyKillLong is the slow variant: five kills at each of
// 30, 40, 50 and 60 ms.
func TestRetryAfterEarlyKillLong(t *testing.T) {
	slow(t)
	var after []time.Duration
	for range 5 {
		for _, ms := range []int{30, 40, 50, 60} {
			after = append(after, time.Duration(ms)*time.Millisecond)
		}
	}
	earlyKills(t, after)
}

func earlyKills(t *testing.T, after []time.Duration) {
	words := make([]string, 20)
	for i := range words {
		words[i] = fmt.Sprintf(" w%d", i)
	}
	answer := strings.Join(words, "")
	m := newModel(t, mockllm.WithDefault(mockllm.Script{Text: words, TimeToFirstToken: 150 * time.Millisecond, InterTokenDelay: 10 * time.Millisecond}), mockllm.WithMaxRecorded(-1))
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms", "SESSION_LOCK_TTL=2s")
	b := startServer(t, env...)
	ends := map[string]int{}
	for i, d := range after {
		a := startServer(t, env...)
		chatID := session.NewID()
		body := uiBody(chatID, "msg-1", fmt.Sprintf("question %d", i))
		first := postUI(t, a.URL(), body)
		if first.Status != http.StatusOK {
			t.Fatalf("first post: %d %s", first.Status, first.Body)
		}
		time.Sleep(d)
		a.Kill()
		first.Close()

		retry := postUI(t, b.URL(), body)
		if retry.Status != http.StatusOK || retry.Header.Get("X-Turn-Id") != first.Header.Get("X-Turn-Id") || retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("kill %v after the start: the retry on B: %d %s, turn %q want A's %q, replayed %q", d, retry.Status, retry.Body,
				retry.Header.Get("X-Turn-Id"), first.Header.Get("X-Turn-Id"), retry.Header.Get("Idempotent-Replayed"))
		}
		frames := retry.All(60 * time.Second)
		end, shown, errs := requireEnd(t, frames), answerOf(frames), errorTexts(frames)
		switch {
		case end == "stop" && len(errs) == 0:
			if shown != answer {
				t.Fatalf("kill %v after the start: the retry finished stop showing %q, want the answer %q; frames: %s", d, shown, answer, dataOf(frames))
			}
			ends["run"]++
		case len(errs) == 1 && strings.Contains(errs[0], "stopped before") && end == "error":
			ends["turn_interrupted"]++
		default:
			t.Fatalf("kill %v after the start: the retry ended %q with errors %q, want the turn run or turn_interrupted; frames: %s", d, end, errs, dataOf(frames))
		}
		var view sessionView
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			v, status, raw := getSession(t, b.URL(), chatID)
			if status == http.StatusOK && (v.Turn == nil || !v.Turn.Running) {
				view = v
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session: %d %s", status, raw)
			}
		}
		if n := userMessages(view.Messages); n != 1 {
			t.Fatalf("kill %v after the start: %d user messages stored, want 1", d, n)
		}
		saved := ""
		for _, msg := range view.Messages {
			if msg.Role == adchat.RoleAssistant {
				saved += msg.Content
			}
		}
		if end == "stop" && saved != shown {
			t.Fatalf("kill %v after the start: the retry showed %q, the session saved %q", d, shown, saved)
		}
		if i == 0 {
			// The message ID again, with another text.
			other := postUI(t, b.URL(), uiBody(chatID, "msg-1", "another question"))
			if other.Status != http.StatusConflict || !strings.Contains(other.Body, "idempotency_key_reused") {
				t.Fatalf("the message ID with another text: %d %s, want 409 idempotency_key_reused", other.Status, other.Body)
			}
		}
	}
	for i, r := range m.Requests() {
		users := 0
		for _, msg := range r.Messages {
			if msg.Role == "user" {
				users++
			}
		}
		if users != 1 {
			t.Fatalf("model request %d holds %d user messages, want 1 (a retry ran a second turn)", i+1, users)
		}
	}
	t.Logf("%d replicas killed 30-60 ms into a turn, each turn retried on another: %v (run: taken over and finished stop; turn_interrupted: told so)", len(after), ends)
}
