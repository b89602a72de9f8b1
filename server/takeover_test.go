package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
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
	"github.com/agentdock-go/agentdock/turns"
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

// TestResumeAheadMeetsATakeover: a client got frames 1-8 (events 1-7)
// from replica A, whose mirror copied only events 1-4 (frames 1-5) to the
// shared log before A died, and resumes on B with Last-Event-ID 8. Replica
// C takes the turn over (its restart is event 5, frame 6) and later writes
// its events up to the turn's end, at the worst moments for B's reader:
// right before its first read, or after a read that a heartbeat cut short
// while C showed signs of life. Either way the client gets C's restart
// first, so that the text it shows is C's answer only, not A's partial one
// followed by C's.
func TestResumeAheadMeetsATakeover(t *testing.T) {
	const mirrored, seen = 4, 8 // events in the shared log; frames the client got
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
		// hook runs before each of B's waits: claim makes C the turn's
		// writer, write appends C's events.
		hook func(after int64, claim, write func())
	}{
		{"before a read", time.Minute, func(after int64, claim, write func()) {
			if after == mirrored {
				claim()
				write()
			}
		}},
		{"across a heartbeat", 200 * time.Millisecond, func() func(after int64, claim, write func()) {
			waits := 0
			return func(after int64, claim, write func()) {
				if after != mirrored {
					return
				}
				waits++
				switch waits {
				case 1:
					// C claims; B's wait lasts until the heartbeat.
					claim()
				case 2:
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
			if len(streamed) != seen || len(data) != 7 {
				t.Fatalf("A streamed %d frames of %d events, want %d of 7", len(streamed), len(data), seen)
			}
			if err := deadA.Start(t.Context(), meta); err != nil {
				t.Fatal(err)
			}
			if _, err := deadA.Append(t.Context(), ref, data[:mirrored]...); err != nil {
				t.Fatal(err)
			}

			// C goes on from event 2 (the step start, the last event whose
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
					evs := []chat.Event{{Kind: chat.KindRestart, Restart: &chat.Restart{Step: 1, Since: 2, Message: "taken over"}}, {Kind: chat.KindStepStart}}
					for _, w := range []string{"Answer:", " w0", " w1", " w2", " w3", " w4"} {
						evs = append(evs, chat.Event{Kind: chat.KindTextDelta, Text: w})
					}
					evs = append(evs, chat.Event{Kind: chat.KindStepFinish}, chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStop})
					if err := takerC.Finish(ctx, ref, eventData(evs)...); err != nil {
						t.Errorf("C's frames: %v", err)
					}
				})
			}

			b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) { c.Heartbeat = tc.heartbeat }, rt: func(c *turns.Config) {
				c.Heartbeat = tc.heartbeat
				var mu sync.Mutex
				c.Log = &beforeWait{Taker: c.Log.(turnlog.Taker), fn: func(after int64) {
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
			if id, want := got[0].ID, wire.RestartedEventID(turnID, 6, 1); chunkType(t, got[0].Data) != "data-restart" || id != want {
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
	b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) { c.Heartbeat = 50 * time.Millisecond }, rt: func(c *turns.Config) { c.Heartbeat = 50 * time.Millisecond }})
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
	const mirrored, seen = 4, 8 // events in the shared log; frames the client got
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
	if got, want := rest[0].ID, wire.RestartedEventID(turnID, 6, 1); chunkType(t, rest[0].Data) != "data-restart" || got != want {
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

// shownFrame is a frame a client got: its number and its data.
type shownFrame struct {
	seq  int64
	data []byte
}

// checkShown checks that a client that got the frames seen, then resumed
// and got rest, shows the answer want, honouring data-restart.
func checkShown(t *testing.T, seen []shownFrame, rest []sseEvent, want string) {
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
		client = append(client, shownFrame{seq: seq, data: []byte(ev.Data)})
	}
	if got := shownText(client); got != want {
		t.Fatalf("the client shows %q, want %q", got, want)
	}
}

// shownText is the answer text of a UI stream's frames, as a client that
// honours data-restart shows it: a restart drops the text parts it names
// and those that began after its since.
func shownText(frames []shownFrame) string {
	type part struct {
		start int64
		text  strings.Builder
	}
	var (
		order []string
		parts = map[string]*part{}
	)
	for _, f := range frames {
		var c struct {
			Type, ID, Delta string
			Data            struct {
				Since   int64    `json:"since"`
				TextIDs []string `json:"textIds"`
			} `json:"data"`
		}
		if json.Unmarshal(f.data, &c) != nil {
			continue
		}
		switch c.Type {
		case "text-delta":
			p := parts[c.ID]
			if p == nil {
				p = &part{start: f.seq}
				parts[c.ID] = p
				order = append(order, c.ID)
			}
			p.text.WriteString(c.Delta)
		case "data-restart":
			for id, p := range parts {
				if p.start > c.Data.Since || slices.Contains(c.Data.TextIDs, id) {
					delete(parts, id)
				}
			}
			order = slices.DeleteFunc(order, func(id string) bool { return parts[id] == nil })
		}
	}
	var out strings.Builder
	for _, id := range order {
		out.WriteString(parts[id].text.String())
	}
	return out.String()
}

// streamedAnswer is what replica A streamed of turnID before it died: the
// start, a step and the answer's text "Answer: w0 w1 w2 w3", as the
// frames its client got and as the events' data the shared log holds.
func streamedAnswer(turnID string) (streamed []shownFrame, data [][]byte) {
	a := &uiMapper{turnID: turnID}
	evs := []chat.Event{{Kind: chat.KindStart, Start: &chat.Start{Turn: turnID, Message: turnID}}, {Kind: chat.KindStepStart}}
	for _, w := range []string{"Answer:", " w0", " w1", " w2", " w3"} {
		evs = append(evs, chat.Event{Kind: chat.KindTextDelta, Text: w})
	}
	for i, ev := range evs {
		ev.Seq = int64(i + 1)
		for _, chunk := range a.add(ev, true) {
			streamed = append(streamed, shownFrame{seq: int64(len(streamed) + 1), data: chunk})
		}
	}
	return streamed, eventData(evs)
}

// eventData is the shared log's data of events.
func eventData(evs []chat.Event) [][]byte {
	var out [][]byte
	for _, ev := range evs {
		ev.Seq = 0
		b, _ := json.Marshal(ev)
		out = append(out, b)
	}
	return out
}
