package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
)

// TestShutdownHandsTurnsOver: replica A shuts down while its turn
// streams. The client following it on A gets the frames A logged, then
// the end of the response without finish or [DONE]; it resumes on B with
// its Last-Event-ID and gets the rest of the turn, which B took over at
// once: the answer it shows (honouring the restart) is the one the
// session saved, and the turn ends stop. A turn nobody reads is taken
// over all the same, and finishes.
func TestShutdownHandsTurnsOver(t *testing.T) {
	for _, read := range []bool{true, false} {
		t.Run(map[bool]string{true: "a client resumes", false: "nobody reads"}[read], func(t *testing.T) {
			srv := redistest.Start(t)
			prefix := "handover-" + session.NewID()
			opts := envOptions{delay: 10 * time.Millisecond, journal: true}
			a, b := replica(t, srv, prefix, opts), replica(t, srv, prefix, opts)
			sid := session.NewID()
			body := jsonBody(map[string]string{"sessionId": sid, "message": "[offline:echo] " + strings.Repeat("word ", 60)})
			res := a.do(http.MethodPost, "/api/chat/plain", body)
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("chat on A: %d", res.StatusCode)
			}
			turnID := res.Header.Get("X-Turn-Id")
			r := newSSEReader(res.Body)
			var seen []sseEvent
			for deltas := 0; deltas < 5; {
				ev, ok := r.next()
				if !ok {
					t.Fatal("A's stream ended before its fifth text delta")
				}
				seen = append(seen, ev)
				if chunkType(t, ev.Data) == "text-delta" {
					deltas++
				}
			}
			if !read {
				res.Body.Close()
			}
			shut := make(chan struct{})
			go func() {
				defer close(shut)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				a.srv.Shutdown(ctx)
			}()
			if read {
				rest := r.all()
				for _, ev := range rest {
					if typ := chunkType(t, ev.Data); typ == "finish" || typ == "[DONE]" || typ == "error" {
						t.Fatalf("A's stream ended with %s: %v", typ, rest)
					}
				}
				seen = append(seen, rest...)
				// A's stream ends only once the shared log has the
				// hand-over: a client resuming elsewhere then finds the
				// turn handed over (or taken over already), never a
				// writer that merely went quiet.
				st, err := b.log.Lookup(t.Context(), turnlog.Ref{Session: session.Key("", sid), Turn: turnID})
				if err != nil || !st.HandedOver && len(st.Restarts) == 0 && !st.Done {
					t.Fatalf("when A's stream ended, the shared log had %+v (%v); want the turn handed over", st, err)
				}
			}
			<-shut
			var shown []shownFrame
			last := ""
			for _, ev := range seen {
				if !ev.HasID {
					t.Fatalf("A sent a frame without ID: %+v", ev)
				}
				_, seq, _, err := wire.ParseEventID(ev.ID)
				if err != nil {
					t.Fatal(err)
				}
				shown, last = append(shown, shownFrame{seq: seq, data: []byte(ev.Data)}), ev.ID
			}
			if !read {
				b.waitIdle(sid)
				last = wire.EventID(turnID, 0)
				shown = nil
			}
			resB := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", last)
			defer resB.Body.Close()
			if resB.StatusCode != http.StatusOK || resB.Header.Get("X-Turn-Id") != turnID {
				t.Fatalf("resume on B after %s: %d turn %q", last, resB.StatusCode, resB.Header.Get("X-Turn-Id"))
			}
			rest := newSSEReader(resB.Body).all()
			n := len(rest)
			if n < 2 || chunkType(t, rest[n-1].Data) != "[DONE]" || !strings.Contains(rest[n-2].Data, `"finishReason":"stop"`) {
				t.Fatalf("B's stream ends %v", rest[max(0, n-3):])
			}
			restarts := 0
			for _, ev := range rest {
				if chunkType(t, ev.Data) == "data-restart" {
					restarts++
				}
			}
			if restarts != 1 {
				t.Errorf("B's stream has %d restarts, want 1", restarts)
			}
			b.waitIdle(sid)
			sess, err := b.store.Get(t.Context(), sid)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := b.store.Messages(t.Context(), sid, 0)
			if err != nil {
				t.Fatal(err)
			}
			saved := ""
			for _, m := range msgs {
				if m.Role == chat.RoleAssistant {
					saved += m.Content
				}
			}
			if sess.Turn != "" || !strings.Contains(saved, strings.TrimSpace(strings.Repeat("word ", 60))) {
				t.Fatalf("the session: marker %q, answer %q", sess.Turn, saved)
			}
			checkShown(t, shown, rest, saved)
		})
	}
}

// TestWholeReplayAfterHandOver: a client that replays a turn from its
// start with no Last-Event-ID (the AI SDK's resumeStream) does not honour
// data-restart: the replay of a turn handed over leaves out the frames
// the takeover voided, and the restart, so that the message it builds is
// the saved answer, once. A replay that began before the takeover's
// restart ends without finish when the restart voids what it sent, and
// the client replays again (as the AI SDK recipe of docs/api.md does).
func TestWholeReplayAfterHandOver(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replay-" + session.NewID()
	opts := envOptions{delay: 10 * time.Millisecond, journal: true}
	a, b := replica(t, srv, prefix, opts), replica(t, srv, prefix, opts)
	sid := session.NewID()
	body := jsonBody(map[string]string{"sessionId": sid, "message": "[offline:echo] " + strings.Repeat("word ", 80)})
	res := a.do(http.MethodPost, "/api/chat/plain", body)
	defer res.Body.Close()
	r := newSSEReader(res.Body)
	for deltas := 0; deltas < 5; {
		ev, ok := r.next()
		if !ok {
			t.Fatal("A's stream ended before its fifth text delta")
		}
		if chunkType(t, ev.Data) == "text-delta" {
			deltas++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.srv.Shutdown(ctx)
	var (
		frames  []sseEvent
		replays int
	)
	for ; replays < 5; replays++ {
		resB := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "")
		frames = newSSEReader(resB.Body).all()
		resB.Body.Close()
		if n := len(frames); n > 0 && chunkType(t, frames[n-1].Data) == "[DONE]" {
			break
		}
	}
	text := ""
	if len(frames) == 0 || chunkType(t, frames[0].Data) != "start" {
		t.Errorf("the whole replay does not begin with start: %v", frames[:min(3, len(frames))])
	}
	for _, ev := range frames {
		switch chunkType(t, ev.Data) {
		case "data-restart":
			t.Errorf("the whole replay has a restart: %s", ev.Data)
		case "text-delta":
			var d struct{ Delta string }
			_ = json.Unmarshal([]byte(ev.Data), &d)
			text += d.Delta
		}
	}
	n := len(frames)
	if n < 2 || !strings.Contains(frames[n-2].Data, `"finishReason":"stop"`) {
		t.Fatalf("after %d replays the last ends %v", replays+1, frames[max(0, n-3):])
	}
	b.waitIdle(sid)
	msgs, err := b.store.Messages(t.Context(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	saved := ""
	for _, m := range msgs {
		if m.Role == chat.RoleAssistant {
			saved += m.Content
		}
	}
	if text != saved {
		t.Errorf("the whole replay shows %q, the session saved %q", text, saved)
	}
	t.Logf("%d replay(s) ended early", replays)
}
