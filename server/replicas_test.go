package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
)

// replica is one server of a deployment on a shared redis-server: its own
// session store connection and its own shared turn log, as a separate
// process would have.
func replica(t testing.TB, srv *redistest.Server, prefix string, o envOptions) *env {
	t.Helper()
	store, err := redisstore.New(redisstore.Config{URL: srv.URL(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := redislog.New(t.Context(), redislog.Config{Client: store.Client(), Prefix: prefix + "-turns", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { turns.Close() })
	o.store = store
	cfgFn := o.cfg
	o.cfg = func(c *Config) {
		c.Turns = turns
		if cfgFn != nil {
			cfgFn(c)
		}
	}
	return newEnv(t, o)
}

// TestReplicasResume: a stream started on replica A and cut after n frames
// resumes on replica B from Last-Event-ID with no duplicate and no gap;
// together the two parts are the whole turn, which B can also replay from
// any frame after the turn ended.
func TestReplicasResume(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	a := replica(t, srv, prefix, envOptions{delay: 2 * time.Millisecond})
	b := replica(t, srv, prefix, envOptions{delay: 2 * time.Millisecond})
	for _, n := range []int{1, 7, 40} {
		sid := session.NewID()
		turnID, first := startAndCut(t, a, sid, n)

		res2 := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", first[n-1].ID)
		if res2.StatusCode != http.StatusOK || res2.Header.Get("X-Turn-Id") != turnID {
			t.Fatalf("n=%d: resume on B: status %d turn %q, want 200 %q", n, res2.StatusCode, res2.Header.Get("X-Turn-Id"), turnID)
		}
		rest := newSSEReader(res2.Body).all()
		res2.Body.Close()
		all := append(first, rest...)
		_, _, text := checkTurnStream(t, turnID, all, 1)

		a.waitIdle(sid)
		var sv sessionView
		getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
		if got := sv.Messages[len(sv.Messages)-1].Content; got != text {
			t.Fatalf("n=%d: the answer streamed through B differs from the saved one", n)
		}
		// The finished turn replays on B from any frame, and 204 after
		// its last.
		waitShared(t, b, sid, turnID, true)
		res3 := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", wire.EventID(turnID, 3))
		replay := newSSEReader(res3.Body).all()
		res3.Body.Close()
		if len(replay) != len(all)-3 || replay[0].ID != all[3].ID || replay[len(replay)-1].Data != "[DONE]" {
			t.Fatalf("n=%d: replay after frame 3 on B: %d frames, want %d ending in [DONE]", n, len(replay), len(all)-3)
		}
		res4 := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", all[len(all)-1].ID)
		res4.Body.Close()
		if res4.StatusCode != http.StatusNoContent {
			t.Fatalf("n=%d: resume on B after the last frame: %d, want 204", n, res4.StatusCode)
		}
	}
}

// waitShared waits until replica e sees the session's turn in the shared
// log, finished or not.
func waitShared(t *testing.T, e *env, sid, turnID string, done bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := e.srv.cfg.Turns.Lookup(t.Context(), turnlog.Ref{Session: sid, Turn: turnID})
		if err == nil && st.Done == done {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the shared log did not show turn %s with done=%v", turnID, done)
}

// TestReplicasShareTheSession: while a turn runs on A, B sees it (session
// view, resume without Last-Event-ID from the first frame), refuses a second
// turn on the session (one turn at a time across replicas) and refuses to
// delete the session; once it ended both work.
func TestReplicasShareTheSession(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	a := replica(t, srv, prefix, envOptions{delay: 5 * time.Millisecond})
	b := replica(t, srv, prefix, envOptions{delay: 5 * time.Millisecond})
	sid := session.NewID()
	res := a.do(http.MethodPost, "/api/chat/explorer", exploreFor(sid))
	defer res.Body.Close()
	turnID := res.Header.Get("X-Turn-Id")
	if res.StatusCode != http.StatusOK || turnID == "" {
		t.Fatalf("POST on A: %d", res.StatusCode)
	}
	// The turn is in the shared log before the client hears of it.
	if _, err := b.srv.cfg.Turns.Lookup(t.Context(), turnlog.Ref{Session: sid, Turn: turnID}); err != nil {
		t.Fatalf("the turn is not in the shared log when A answered: %v", err)
	}

	var eb errBodyT
	getJSON(t, b.do(http.MethodPost, "/api/chat/explorer", exploreFor(sid)), http.StatusConflict, &eb)
	if eb.Error.Code != "session_busy" {
		t.Fatalf("second turn on B: %+v, want session_busy", eb.Error)
	}
	getJSON(t, b.do(http.MethodDelete, "/api/sessions/"+sid, ""), http.StatusConflict, &eb)
	var sv sessionView
	getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
	if sv.Turn == nil || sv.Turn.ID != turnID || !sv.Turn.Running {
		t.Fatalf("B's view of the session's turn: %+v, want %s running", sv.Turn, turnID)
	}

	// B streams the running turn from its first frame, like A.
	resB := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "")
	fromB := newSSEReader(resB.Body).all()
	resB.Body.Close()
	fromA := newSSEReader(res.Body).all()
	if len(fromB) != len(fromA) {
		t.Fatalf("B streamed %d frames, A %d", len(fromB), len(fromA))
	}
	for i := range fromA {
		if fromA[i] != fromB[i] {
			t.Fatalf("frame %d differs: A %+v, B %+v", i, fromA[i], fromB[i])
		}
	}
	checkTurnStream(t, turnID, fromA, 1)

	a.waitIdle(sid)
	waitShared(t, b, sid, turnID, true)
	res2 := b.do(http.MethodPost, "/api/chat/explorer", exploreFor(sid))
	second := newSSEReader(res2.Body).all()
	res2.Body.Close()
	checkTurnStream(t, res2.Header.Get("X-Turn-Id"), second, 1)
	b.waitIdle(sid)
	getJSON(t, b.do(http.MethodDelete, "/api/sessions/"+sid, ""), http.StatusNoContent, nil)
	if _, err := a.srv.cfg.Turns.Latest(t.Context(), sid); err == nil {
		t.Fatal("the deleted session's turns are still in the shared log")
	}
}

// TestReplicaWriterGone: a turn whose writer stopped (no frame and no sign
// of life for three heartbeats, as when its replica is killed) is served by
// another replica up to its last copied frame, then ended with a
// turn_interrupted error, finish and [DONE]; the session view no longer
// calls it running.
func TestReplicaWriterGone(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) { c.Heartbeat = 100 * time.Millisecond }})
	sid := session.NewID()
	if _, _, err := b.store.GetOrCreate(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	ref := turnlog.Ref{Session: sid, Turn: session.NewID()}
	log := b.srv.cfg.Turns
	if err := log.Start(t.Context(), turnlog.Meta{Ref: ref, AgentID: "explorer"}); err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(t.Context(), ref, []byte(`{"type":"start","messageId":"`+ref.Turn+`"}`), []byte(`{"type":"start-step"}`)); err != nil {
		t.Fatal(err)
	}
	for _, lei := range []string{"", wire.EventID(ref.Turn, 1), wire.EventID(ref.Turn, 2), wire.EventID(ref.Turn, 5)} {
		res := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", lei)
		evs := newSSEReader(res.Body).all()
		res.Body.Close()
		if res.StatusCode != http.StatusOK || len(evs) < 3 {
			t.Fatalf("Last-Event-ID %q: status %d, %d frames", lei, res.StatusCode, len(evs))
		}
		tail := evs[len(evs)-3:]
		if !strings.Contains(tail[0].Data, "turn_interrupted") || chunkType(t, tail[1].Data) != "finish" || tail[2].Data != "[DONE]" {
			t.Fatalf("Last-Event-ID %q: the stream ends %+v, want turn_interrupted, finish, [DONE]", lei, tail)
		}
	}
	var sv sessionView
	getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
	if sv.Turn == nil || sv.Turn.Running {
		t.Fatalf("the session view: %+v, want the turn not running", sv.Turn)
	}
}
