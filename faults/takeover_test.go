package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// answerOf is the answer text a client shows after frames, as a client
// that honours data-restart builds it: each text part's deltas, minus, at
// a data-restart, every part that began after the restart's since (a frame
// seq, the part of an event ID after the colon) and the parts it names:
// a replica that took the turn over shows their step again. A part the
// dead replica began after the shared log's last frame is known only to
// the client, which drops it by its seq.
func answerOf(frames []frame) string {
	type part struct {
		start int64
		text  strings.Builder
	}
	var (
		order []string
		parts = map[string]*part{}
	)
	for _, f := range frames {
		switch f.Type() {
		case "text-delta":
			id := f.Field("id")
			p := parts[id]
			if p == nil {
				p = &part{start: seqOf(f.ID)}
				parts[id] = p
				order = append(order, id)
			}
			p.text.WriteString(f.Field("delta"))
		case "data-restart":
			var c struct {
				Data struct {
					Since   int64    `json:"since"`
					TextIDs []string `json:"textIds"`
				} `json:"data"`
			}
			if json.Unmarshal([]byte(f.Data), &c) == nil {
				for id, p := range parts {
					if p.start > c.Data.Since || slices.Contains(c.Data.TextIDs, id) {
						delete(parts, id)
					}
				}
				order = slices.DeleteFunc(order, func(id string) bool { return parts[id] == nil })
			}
		}
	}
	var out strings.Builder
	for _, id := range order {
		out.WriteString(parts[id].text.String())
	}
	return out.String()
}

// seqOf is the seq of an event ID "<turn>:<seq>[.<restarts>]".
func seqOf(id string) int64 {
	_, n, _ := strings.Cut(id, ":")
	n, _, _ = strings.Cut(n, ".")
	seq, _ := strconv.ParseInt(n, 10, 64)
	return seq
}

// TestRedisPausedPastLease: Redis stops answering (SIGSTOP) mid-answer for
// longer than the turn's lease (34/30 of SESSION_LOCK_TTL), then answers
// again: the write the turn sent before the pause lands late, the lease is
// gone, and whatever happens next (the turn fenced out, taken over by the
// other replica that the client resumes on, or recovered), the answer the
// session saves is a prefix of the answer the client was shown, never
// more, with nothing repeated; a turn that finished stop saved all of it.
func TestRedisPausedPastLease(t *testing.T) {
	redisPaused(t, 2*time.Second, "SESSION_LOCK_TTL=2s")
}

// TestRedisPausedPastLeaseDefaults is the slow variant with the default
// lease (30 s): Redis paused 34 s.
func TestRedisPausedPastLeaseDefaults(t *testing.T) {
	slow(t)
	redisPaused(t, session.DefaultLockTTL)
}

func redisPaused(t *testing.T, lease time.Duration, env ...string) {
	m := newModel(t)
	rs := redistest.Start(t)
	env = append(append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms"), env...)
	a, b := startServer(t, env...), startServer(t, env...)
	sid := session.NewID()
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf(" w%d", i)
	}
	m.Enqueue(thinkCall, mockllm.Script{Text: words, InterTokenDelay: 20 * time.Millisecond},
		mockllm.Script{Text: []string{"Again", " from", " the", " restart."}})
	s := chat(t, a.URL(), agentID, sid, "pause the store")
	var got []frame
	for range 20 {
		got = append(got, s.Until("text-delta", 10*time.Second)...)
	}
	pause := lease * 34 / 30 // 34 s with the default lease
	rs.Pause()
	paused := time.Now()
	// The client keeps reading A while Redis is frozen, and after.
	got = append(got, readFor(s, pause)...)
	time.Sleep(time.Until(paused.Add(pause)))
	rs.Resume()
	got = append(got, readFor(s, 60*time.Second)...)
	t.Logf("Redis paused %v; A's stream ended %s", pause, lastTypes(got, 3))
	// A client whose stream did not finish resumes on the other replica.
	for end := requireEndOrEmpty(got); end == "" || end == "error"; end = requireEndOrEmpty(got) {
		if time.Since(paused) > pause+60*time.Second {
			t.Fatalf("the turn has not ended 60 s after the pause: %s", lastTypes(got, 5))
		}
		last := ""
		for _, f := range got {
			if f.ID != "" {
				last = f.ID
			}
		}
		if end == "error" {
			break // told; the session says what it kept
		}
		r := resume(t, b.URL(), sid, last)
		if r.Status == http.StatusNoContent {
			break
		}
		got = append(got, r.All(60*time.Second)...)
	}
	shown := answerOf(got)
	var view sessionView
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		view = requireConsistent(t, b.URL(), sid)
		if view.Turn == nil || !view.Turn.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn still runs 60 s after the pause: %+v", view.Turn)
		}
	}
	saved := ""
	for _, msg := range view.Messages {
		if msg.Role == "assistant" {
			saved += msg.Content
		}
	}
	t.Logf("shown %d bytes, saved %d bytes, finish %q, errors %q", len(shown), len(saved), requireEndOrEmpty(got), errorTexts(got))
	if !strings.HasPrefix(shown, saved) {
		t.Fatalf("the saved answer is not a prefix of the shown one:\nsaved %q\nshown %q", saved, shown)
	}
	if requireEndOrEmpty(got) == "stop" && saved != shown {
		t.Fatalf("the turn finished stop but saved %q of %q", saved, shown)
	}
	if users := countRole(view.Messages, adchat.RoleUser); users != 1 {
		t.Fatalf("the user message is saved %d times", users)
	}
}

// requireEndOrEmpty is the finish reason of frames, "" when they have no
// finish frame.
func requireEndOrEmpty(frames []frame) string {
	for i := len(frames) - 1; i >= 0; i-- {
		if frames[i].Type() == "finish" {
			if r := frames[i].Field("finishReason"); r != "" {
				return r
			}
			return "stop"
		}
	}
	return ""
}

func lastTypes(frames []frame, n int) string {
	var out []string
	for _, f := range frames[max(0, len(frames)-n):] {
		out = append(out, f.Data)
	}
	return strings.Join(out, " | ")
}

func countRole(msgs []adchat.Message, role adchat.Role) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

// readFor reads s's frames for up to d, until its end; it never fails the
// test (a stream may stay silent while its store does not answer).
func readFor(s *stream, d time.Duration) []frame {
	var out []frame
	for deadline := time.Now().Add(d); ; {
		left := time.Until(deadline)
		if left <= 0 {
			return out
		}
		f, err := s.Next(left)
		if err != nil {
			return out
		}
		out = append(out, f)
	}
}
