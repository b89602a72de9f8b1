package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
	"github.com/redis/go-redis/v9"
)

// beforeWait is a shared turn log that calls fn before every Wait, with
// the seq the read is after: what another process does between a reader's
// lookups and its reads.
type beforeWait struct {
	turnlog.Taker
	fn func(after int64)
}

func (l *beforeWait) Wait(ctx context.Context, ref turnlog.Ref, after int64) (turnlog.Batch, error) {
	l.fn(after)
	return l.Taker.Wait(ctx, ref, after)
}

// TestResumeAheadMeetsATakeover: a client got frames 1-8 from replica A,
// whose mirror copied only 1-5 to the shared log before A died, and
// resumes on B with Last-Event-ID 8. Replica C takes the turn over (its
// restart is frame 6) and later writes its frames, past frame 8, up to the
// turn's end, at the worst moments for B's reader: between its lookup of
// the turn (no takeover yet) and its read; or after the reader found the
// takeover, while a heartbeat cut its read short. Either way the client
// gets C's restart first, so that the text it shows is C's answer only,
// not A's partial one followed by C's.
func TestResumeAheadMeetsATakeover(t *testing.T) {
	const mirrored, seen = 5, 8
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
		// hook runs before each of B's reads: claim makes C the turn's
		// writer, write appends C's frames.
		hook func(after int64, claim, write func())
	}{
		{"between a lookup and a read", time.Minute, func(after int64, claim, write func()) {
			if after == seen {
				claim()
				write()
			}
		}},
		{"across a heartbeat", 200 * time.Millisecond, func() func(after int64, claim, write func()) {
			readBefore := false
			return func(after int64, claim, write func()) {
				switch {
				case after == seen && !readBefore:
					claim()
				case after == mirrored && !readBefore:
					// The reader found the takeover: its read waits for
					// C's first frame until the heartbeat.
					readBefore = true
				case readBefore:
					write()
				}
			}
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			prefix := "replicas-" + session.NewID()
			process := func() *redislog.Log {
				l, err := redislog.New(t.Context(), redislog.Config{Client: redisClient(t, srv, prefix), Prefix: prefix + "-turns"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}
			deadA, takerC := process(), process()
			sid, turnID := session.NewID(), session.NewID()
			ref := turnlog.Ref{Session: sid, Turn: turnID}
			meta := turnlog.Meta{Ref: ref, AgentID: "plain"}

			// A's stream: the answer's text part, of which the log got
			// the first two deltas.
			streamed, data := streamedAnswer(turnID)
			if len(streamed) != seen {
				t.Fatalf("A streamed %d frames, want %d", len(streamed), seen)
			}
			if err := deadA.Start(t.Context(), meta); err != nil {
				t.Fatal(err)
			}
			if _, err := deadA.Append(t.Context(), ref, data[:mirrored]...); err != nil {
				t.Fatal(err)
			}

			// C goes on from frame 2 (the step start, the last frame whose
			// content stands): its restart, then the step's answer again,
			// to the end. Until it writes them it shows signs of life.
			const answer = "Answer: w0 w1 w2 w3 w4"
			ctx := context.WithoutCancel(t.Context())
			var claimed, wrote sync.Once
			alive := make(chan struct{})
			claim := func() {
				claimed.Do(func() {
					st, err := takerC.TakeOver(ctx, meta)
					if err != nil || st.Last != mirrored {
						t.Errorf("C's takeover: %+v %v, want it after frame %d", st, err, mirrored)
					}
					go func() {
						for {
							select {
							case <-alive:
								return
							case <-time.After(20 * time.Millisecond):
								takerC.Append(ctx, ref)
							}
						}
					}()
				})
			}
			write := func() {
				wrote.Do(func() {
					close(alive)
					var logged []frame
					for i := range mirrored {
						logged = append(logged, frame{seq: int64(i + 1), data: data[i]})
					}
					c := &uiMapper{turnID: turnID}
					c.continueAfter(logged, 2)
					evs := []chat.Event{{Kind: chat.KindRestart, Restart: &chat.Restart{Step: 1, Since: 2, Message: "taken over"}}, {Kind: chat.KindStepStart}}
					for _, w := range []string{"Answer:", " w0", " w1", " w2", " w3", " w4"} {
						evs = append(evs, chat.Event{Kind: chat.KindTextDelta, Text: w})
					}
					evs = append(evs, chat.Event{Kind: chat.KindStepFinish}, chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop})
					var out [][]byte
					for _, ev := range evs {
						for _, f := range c.mapEvent(ev) {
							out = append(out, f.data)
						}
					}
					if err := takerC.Finish(ctx, ref, out...); err != nil {
						t.Errorf("C's frames: %v", err)
					}
				})
			}

			b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) {
				c.Heartbeat = tc.heartbeat
				var mu sync.Mutex
				c.Turns = &beforeWait{Taker: c.Turns.(turnlog.Taker), fn: func(after int64) {
					mu.Lock()
					defer mu.Unlock()
					tc.hook(after, claim, write)
				}}
			}})
			res := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", wire.EventID(turnID, seen))
			rest := newSSEReader(res.Body).all()
			res.Body.Close()
			var got []sseEvent
			for _, ev := range rest {
				if ev.HasID {
					got = append(got, ev)
				}
			}
			if res.StatusCode != http.StatusOK || len(got) == 0 {
				t.Fatalf("resume on B after frame %d: status %d, %d frames", seen, res.StatusCode, len(got))
			}
			if id, want := got[0].ID, wire.RestartedEventID(turnID, mirrored+1, 1); chunkType(t, got[0].Data) != "data-restart" || id != want {
				t.Fatalf("the resumed stream starts with %s %s, want C's restart %s", id, got[0].Data, want)
			}
			checkShown(t, streamed, got, answer)
		})
	}
}

// TestResumeAheadOfAFinishedTurn: replica A saved a turn's whole answer
// (its last write) and died before its mirror copied the last frames: the
// shared log has frames 1-5, the client got 1-8 and resumes on B with
// Last-Event-ID 8. B finds the turn over and ends its stream from the
// session: the client gets a restart first, which drops the text part the
// log left open, then that part's text whole, so that it shows the saved
// answer once.
func TestResumeAheadOfAFinishedTurn(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	deadA, err := redislog.New(t.Context(), redislog.Config{Client: redisClient(t, srv, prefix), Prefix: prefix + "-turns"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deadA.Close() })
	b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) { c.Heartbeat = 50 * time.Millisecond }})
	sid, turnID := session.NewID(), session.NewID()
	ref := turnlog.Ref{Session: sid, Turn: turnID}
	const answer = "Answer: w0 w1 w2 w3 w4"
	if _, err := session.Update(t.Context(), b.store, sid, func(*orchestration.State) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := session.AppendMessages(t.Context(), b.store, sid, []chat.Message{{Role: chat.RoleUser, Content: "hi"}, {Role: chat.RoleAssistant, Content: answer}}); err != nil {
		t.Fatal(err)
	}
	streamed, data := streamedAnswer(turnID)
	const mirrored, seen = 5, 8
	if len(streamed) != seen {
		t.Fatalf("A streamed %d frames, want %d", len(streamed), seen)
	}
	if err := deadA.Start(t.Context(), turnlog.Meta{Ref: ref, AgentID: "plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := deadA.Append(t.Context(), ref, data[:mirrored]...); err != nil {
		t.Fatal(err)
	}

	res := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", wire.EventID(turnID, seen))
	rest := newSSEReader(res.Body).all()
	res.Body.Close()
	if res.StatusCode != http.StatusOK || len(rest) < 3 {
		t.Fatalf("resume on B after frame %d: status %d, %d frames", seen, res.StatusCode, len(rest))
	}
	if got, want := rest[0].ID, wire.RestartedEventID(turnID, mirrored+1, 1); chunkType(t, rest[0].Data) != "data-restart" || got != want {
		t.Fatalf("the resumed stream starts with %s %s, want a restart %s", got, rest[0].Data, want)
	}
	if end := rest[len(rest)-2].Data; end != `{"type":"finish","finishReason":"stop"}` {
		t.Fatalf("the resumed stream ends with %s, want finish stop", end)
	}
	checkShown(t, streamed, rest, answer)
}

// redisClient is a connection of its own to srv, as another process has.
func redisClient(t *testing.T, srv *redistest.Server, prefix string) redis.UniversalClient {
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store.Client()
}

// checkShown checks that a client that got the frames seen, then resumed
// and got rest, shows the answer want, honouring data-restart.
func checkShown(t *testing.T, seen []frame, rest []sseEvent, want string) {
	t.Helper()
	client := slices.Clone(seen)
	for _, ev := range rest {
		if !ev.HasID {
			continue
		}
		_, seq, _, err := wire.ParseEventID(ev.ID)
		if err != nil {
			t.Fatalf("frame %+v: %v", ev, err)
		}
		client = append(client, frame{seq: seq, data: []byte(ev.Data)})
	}
	if got := shownText(client); got != want {
		t.Fatalf("the client shows %q, want %q", got, want)
	}
}

// streamedAnswer is what replica A streamed of turnID before it died: the
// start, a step and the answer's text "Answer: w0 w1 w2 w3", as numbered
// frames and as the data the shared log holds of them.
func streamedAnswer(turnID string) (streamed []frame, data [][]byte) {
	a := &uiMapper{turnID: turnID}
	streamed = []frame{a.start()}
	for _, w := range []string{"", "Answer:", " w0", " w1", " w2", " w3"} {
		ev := chat.Event{Kind: chat.KindTextDelta, Text: w}
		if w == "" {
			ev = chat.Event{Kind: chat.KindStepStart}
		}
		streamed = append(streamed, a.mapEvent(ev)...)
	}
	for i := range streamed {
		streamed[i].seq = int64(i + 1)
		data = append(data, streamed[i].data)
	}
	return streamed, data
}
