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

// replicas starts two `agentdock serve` processes on one redis-server, as
// a deployment behind a load balancer runs them. The heartbeat is short so
// that a dead replica is noticed within a second, and the session lock TTL
// too, so that its session takes the next message within seconds.
func replicas(t *testing.T, m *mockllm.Server) (a, b *serverProc) {
	t.Helper()
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms", "SESSION_LOCK_TTL=2s")
	return startServer(t, env...), startServer(t, env...)
}

// paced is a model answer of n words, one every gap.
func paced(n int, gap time.Duration) mockllm.Script {
	s := mockllm.Script{InterTokenDelay: gap}
	for i := range n {
		s.Text = append(s.Text, fmt.Sprintf("w%d ", i))
	}
	return s
}

// checkSeq checks that frames carry the IDs <turn>:<from>, <turn>:<from+1>,
// ... without a gap or a duplicate.
func checkSeq(t *testing.T, what, turnID string, frames []frame, from int) {
	t.Helper()
	for i, f := range frames {
		if want := turnID + ":" + strconv.Itoa(from+i); f.ID != want {
			t.Fatalf("%s: frame %d has id %q, want %q (no gap, no duplicate); frames: %s", what, i, f.ID, want, dataOf(frames))
		}
	}
}

// TestReplicaResume is issue 8's acceptance test: two server processes on
// loopback with one redis-server; a stream started on replica A and cut by
// the client after n frames resumes on replica B from Last-Event-ID with no
// duplicate and no gap, B's part ends with finish and [DONE], and A's and
// B's parts together are exactly the turn (B replays it whole afterwards).
func TestReplicaResume(t *testing.T) {
	m := newModel(t)
	a, b := replicas(t, m)
	for _, n := range []int{1, 5, 20} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			sid := session.NewID()
			m.Enqueue(paced(40, 15*time.Millisecond))
			s := chat(t, a.URL(), agentID, sid, "resume me elsewhere")
			turnID := s.Header.Get("X-Turn-Id")
			var first []frame
			for len(first) < n {
				f, err := s.Next(10 * time.Second)
				if err != nil {
					t.Fatalf("frame %d from A: %v", len(first)+1, err)
				}
				first = append(first, f)
			}
			s.Close()

			r := resume(t, b.URL(), sid, first[n-1].ID)
			if r.Status != http.StatusOK || r.Header.Get("X-Turn-Id") != turnID {
				t.Fatalf("resume on B: %d %s, turn %q, want 200 and %q", r.Status, r.Body, r.Header.Get("X-Turn-Id"), turnID)
			}
			rest := r.All(10 * time.Second)
			all := append(first, rest...)
			requireEnd(t, all)
			checkSeq(t, "A's part then B's", turnID, all, 1)
			if got, want := textOf(all), strings.Join(paced(40, 0).Text, ""); got != want {
				t.Fatalf("the answer through A then B is %q, want %q", got, want)
			}

			// B replays the finished turn whole, from either side.
			for _, p := range []*serverProc{a, b} {
				whole := resume(t, p.URL(), sid, turnID+":0").All(10 * time.Second)
				if len(whole) != len(all) {
					t.Fatalf("replay on %s: %d frames, want %d", p.URL(), len(whole), len(all))
				}
				for i := range whole {
					if whole[i].ID != all[i].ID || whole[i].Data != all[i].Data {
						t.Fatalf("replay on %s: frame %d is %s %s, the live one was %s %s", p.URL(), i, whole[i].ID, whole[i].Data, all[i].ID, all[i].Data)
					}
				}
			}
		})
	}
}

// TestReplicaOneTurnAtATime: while a turn runs on A, a message for the same
// session on B sent with busy reject is refused with 409 session_busy (the lease holds across
// processes), B reports the turn running, and B takes the next message once
// the turn ended.
func TestReplicaOneTurnAtATime(t *testing.T) {
	m := newModel(t)
	a, b := replicas(t, m)
	sid := session.NewID()
	m.Enqueue(paced(30, 20*time.Millisecond))
	s := chat(t, a.URL(), agentID, sid, "a long one")
	s.Until("text-delta", 10*time.Second)

	busy := tryChatBusy(t, b.URL(), agentID, sid, "meanwhile", "reject")
	if busy.Status != http.StatusConflict || !strings.Contains(busy.Body, "session_busy") {
		t.Fatalf("a second turn on B while A runs one: %d %s, want 409 session_busy", busy.Status, busy.Body)
	}
	view, status, raw := getSession(t, b.URL(), sid)
	if status != http.StatusOK || view.Turn == nil || view.Turn.ID != s.Header.Get("X-Turn-Id") || !view.Turn.Running {
		t.Fatalf("B's view of the session: %d %s, want A's turn running", status, raw)
	}
	s.All(10 * time.Second)

	m.Enqueue(mockllm.TextScript("Next", " one."))
	next := chat(t, b.URL(), agentID, sid, "now")
	if frames := next.All(10 * time.Second); requireEnd(t, frames) != "stop" || len(errorTexts(frames)) > 0 {
		t.Fatalf("the next turn on B: %s", dataOf(frames))
	}
}

// TestReplicaKilledMidStream: replica A is killed (SIGKILL) while it
// streams a turn's second step (after a tool call). The client reconnects
// to replica B with its Last-Event-ID and gets the frames A had copied that
// it had not seen, with no duplicate and no gap; then B takes the turn
// over once A's lease expired: a data-restart chunk (its ID counts one
// takeover) that names the text parts to drop, the model call that was in
// flight made again, and the turn's end, finish stop and [DONE]. The
// session holds exactly the answer the client shows, the tool call once,
// the user message once, and takes the next message on B.
func TestReplicaKilledMidStream(t *testing.T) {
	m := newModel(t)
	a, b := replicas(t, m)
	sid := session.NewID()
	m.Enqueue(thinkCall, paced(200, 20*time.Millisecond), mockllm.TextScript("Taken", " over", " here."))
	s := chat(t, a.URL(), agentID, sid, "die halfway")
	turnID := s.Header.Get("X-Turn-Id")
	seen := s.Until("text-delta", 10*time.Second)
	seen = append(seen, s.Until("text-delta", 10*time.Second)...)
	// Let A copy a few more frames than the client read.
	time.Sleep(300 * time.Millisecond)
	a.Kill()

	r := resume(t, b.URL(), sid, seen[len(seen)-1].ID)
	if r.Status != http.StatusOK {
		t.Fatalf("resume on B after A died: %d %s", r.Status, r.Body)
	}
	rest := r.All(15 * time.Second)
	k := slices.IndexFunc(rest, func(f frame) bool { return f.Type() == "data-restart" })
	if k < 0 {
		t.Fatalf("B's stream has no data-restart: %s", dataOf(rest))
	}
	copied := rest[:k]
	checkSeq(t, "frames before the kill, then those A copied", turnID, append(slices.Clone(seen), copied...), 1)
	if len(copied) == 0 {
		t.Errorf("B had none of the frames A streamed after the client's last one (A copies every 100 ms; it ran 300 ms more)")
	}
	if !strings.HasSuffix(rest[k].ID, ".1") {
		t.Errorf("the restart's ID %q does not count one takeover", rest[k].ID)
	}
	all := append(slices.Clone(seen), rest...)
	if requireEnd(t, all) != "stop" || len(errorTexts(all)) > 0 {
		t.Fatalf("the taken-over turn's end: %s", dataOf(rest[k:]))
	}
	shown := answerOf(all)
	if shown != "Taken over here." {
		t.Fatalf("the client shows %q after the restart, want the step made again", shown)
	}

	view := requireConsistent(t, b.URL(), sid)
	msgs := view.Messages
	if n := len(msgs); n != 4 || msgs[0].Content != "die halfway" || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 || msgs[2].Role != "tool" ||
		msgs[3].Role != "assistant" || msgs[3].Content != shown {
		raw, _ := json.Marshal(msgs)
		t.Fatalf("history after the takeover: %s\nwant user, the think call, its result and %q", raw, shown)
	}
	if view.Turn == nil || view.Turn.Running {
		t.Fatalf("B reports the turn as %+v, want ended", view.Turn)
	}

	m.Enqueue(mockllm.TextScript("After", " the crash."))
	next := chat(t, b.URL(), agentID, sid, "again")
	if frames := next.All(10 * time.Second); requireEnd(t, frames) != "stop" || len(errorTexts(frames)) > 0 {
		t.Fatalf("the next turn on B: %s", dataOf(frames))
	}
}

// TestReplicaKilledRecoveredLater: a replica SIGKILLed mid-answer with no
// client resuming its stream elsewhere. Once its lease expires, whoever
// touches the session first decides: a read of the session on another
// replica takes the turn over there (the turn goes on and finishes, its
// model call made again), the session's next turn there saves the partial
// answer from the shared log first. Nothing the client saw is lost
// unless a restart replaced it.
func TestReplicaKilledRecoveredLater(t *testing.T) {
	for _, by := range []string{"read", "next turn"} {
		t.Run(by, func(t *testing.T) {
			m := newModel(t)
			a, b := replicas(t, m)
			sid := session.NewID()
			m.Enqueue(paced(200, 20*time.Millisecond))
			s := chat(t, a.URL(), agentID, sid, "die quietly")
			var seen []frame
			for range 10 {
				seen = append(seen, s.Until("text-delta", 10*time.Second)...)
			}
			time.Sleep(300 * time.Millisecond) // A copies every 100 ms
			a.Kill()
			killed := time.Now()
			// A's lease (SESSION_LOCK_TTL 2s) must expire first.
			time.Sleep(2500 * time.Millisecond)
			var msgs []adchat.Message
			switch by {
			case "read":
				m.Enqueue(mockllm.TextScript("Gone", " on."))
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					view := requireConsistent(t, b.URL(), sid)
					if view.Turn == nil || !view.Turn.Running {
						msgs = view.Messages
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the turn taken over on B still runs 10 s after the read: %+v", view.Turn)
					}
				}
				if len(msgs) != 2 || msgs[1].Content != "Gone on." {
					raw, _ := json.Marshal(msgs)
					t.Fatalf("history after the read took the turn over: %s\nwant the user message and the answer made again", raw)
				}
				return
			case "next turn":
				m.Enqueue(mockllm.TextScript("Back", " again."))
				for {
					next := tryChat(t, b.URL(), agentID, sid, "again")
					if next.Status == http.StatusOK {
						if frames := next.All(10 * time.Second); requireEnd(t, frames) != "stop" {
							t.Fatalf("the next turn: %s", dataOf(frames))
						}
						break
					}
					if next.Status != http.StatusConflict || time.Since(killed) > 10*time.Second {
						t.Fatalf("the next turn on B: %d %s", next.Status, next.Body)
					}
					time.Sleep(200 * time.Millisecond)
				}
				msgs = requireConsistent(t, b.URL(), sid).Messages
			}
			if len(msgs) < 2 || msgs[0].Content != "die quietly" || msgs[1].Role != "assistant" ||
				!strings.HasPrefix(msgs[1].Content, textOf(seen)) || len(msgs[1].Content) <= len(textOf(seen)) {
				raw, _ := json.Marshal(msgs)
				t.Fatalf("history: %s\nwant the partial answer, at least %q and the 300 ms after it", raw, textOf(seen))
			}
			if by == "next turn" && (len(msgs) != 4 || msgs[2].Content != "again" || msgs[3].Content != "Back again.") {
				raw, _ := json.Marshal(msgs)
				t.Fatalf("history after the next turn: %s", raw)
			}
		})
	}
}
