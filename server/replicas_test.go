package server

import (
	"errors"
	"net/http"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
	"github.com/agentdock-go/agentdock/turns"
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
	log, err := redislog.New(t.Context(), redislog.Config{Client: store.Client(), Prefix: prefix + "-turns", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	o.store = store
	o.log = log
	rtFn := o.rt
	o.rt = func(c *turns.Config) {
		c.Log = log
		if rtFn != nil {
			rtFn(c)
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
		st, err := e.log.Lookup(t.Context(), turnlog.Ref{Session: sid, Turn: turnID})
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
	// B knows of the turn at once: the shared log lists it with its first
	// batch, up to 100 ms later, and the session's turn marker names it
	// until then (what follows runs in that window, as a rule).
	_, err := b.log.Lookup(t.Context(), turnlog.Ref{Session: sid, Turn: turnID})
	t.Logf("the shared log when A answered: %v", err)

	var eb errBodyT
	getJSON(t, b.do(http.MethodPost, "/api/chat/explorer", exploreFor(sid), "X-Busy", "reject"), http.StatusConflict, &eb)
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
	if _, err := a.log.Latest(t.Context(), sid); err == nil {
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
	b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) { c.Heartbeat = 100 * time.Millisecond }, rt: func(c *turns.Config) { c.Heartbeat = 100 * time.Millisecond }})
	sid := session.NewID()
	if _, err := session.Update(t.Context(), b.store, sid, func(*orchestration.State) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ref := turnlog.Ref{Session: sid, Turn: session.NewID()}
	log := b.log
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

// TestReplicasBeforeTheTurnIsListed: the shared log lists a turn with its
// first batch, up to 100 ms after the client heard of it; until then the
// other replicas find it by the session's turn marker. A client that
// resumes on B with the turn's first frame gets the rest of the turn, the
// frames A streamed; a stop sent to B stops the turn; B's session view
// calls it running.
func TestReplicasBeforeTheTurnIsListed(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	a := replica(t, srv, prefix, envOptions{delay: 10 * time.Millisecond})
	b := replica(t, srv, prefix, envOptions{delay: 10 * time.Millisecond})
	words := jsonBody(map[string]string{"message": "[offline:echo] " + strings.Repeat("word ", 40)})
	post := func(sid string) (*http.Response, *sseReader, sseEvent, bool) {
		t.Helper()
		res := a.do(http.MethodPost, "/api/chat/plain", strings.Replace(words, "{", `{"sessionId":"`+sid+`",`, 1))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("chat on A: %d", res.StatusCode)
		}
		r := newSSEReader(res.Body)
		first, ok := r.next()
		if !ok {
			t.Fatal("A's stream ended at once")
		}
		_, err := b.log.Lookup(t.Context(), turnlog.Ref{Session: sid, Turn: res.Header.Get("X-Turn-Id")})
		return res, r, first, errors.Is(err, turnlog.ErrNotFound)
	}

	sid := session.NewID()
	res, fromA, first, unlisted := post(sid)
	defer res.Body.Close()
	turnID := res.Header.Get("X-Turn-Id")
	var sv sessionView
	getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
	resB := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", first.ID)
	t.Logf("the turn was unlisted when B was asked: %v", unlisted)
	if sv.Turn == nil || sv.Turn.ID != turnID || !sv.Turn.Running {
		t.Fatalf("B's view of the session's turn: %+v, want %s running", sv.Turn, turnID)
	}
	if resB.StatusCode != http.StatusOK || resB.Header.Get("X-Turn-Id") != turnID {
		t.Fatalf("resume on B after the first frame: %d, turn %q; want 200 %s", resB.StatusCode, resB.Header.Get("X-Turn-Id"), turnID)
	}
	restB := newSSEReader(resB.Body).all()
	resB.Body.Close()
	restA := fromA.all()
	if len(restA) != len(restB) {
		t.Fatalf("after the first frame, B streamed %d frames and A %d", len(restB), len(restA))
	}
	for i := range restA {
		if restA[i] != restB[i] {
			t.Fatalf("frame %d differs: A %+v, B %+v", i+2, restA[i], restB[i])
		}
	}
	checkTurnStream(t, turnID, append([]sseEvent{first}, restA...), 1)

	sid2 := session.NewID()
	res2, fromA2, _, unlisted := post(sid2)
	defer res2.Body.Close()
	var accepted struct{ TurnID, Status string }
	getJSON(t, b.do(http.MethodPost, "/api/sessions/"+sid2+"/stop", ""), http.StatusAccepted, &accepted)
	t.Logf("the turn was unlisted when B was asked to stop it: %v", unlisted)
	if accepted.Status != "stopping" || accepted.TurnID != res2.Header.Get("X-Turn-Id") {
		t.Fatalf("stop on B: %+v, want turn %s stopping", accepted, res2.Header.Get("X-Turn-Id"))
	}
	var types []string
	for _, ev := range fromA2.all() {
		types = append(types, chunkType(t, ev.Data))
	}
	if n := len(types); n < 3 || strings.Join(types[n-3:], " ") != "abort finish [DONE]" {
		t.Fatalf("the turn stopped through B ended with %v", types[max(0, n-6):])
	}
}

// TestReplicaWriterGoneBeforeListing: a turn whose replica died before its
// first batch is named by the session's marker only. B calls it running
// while its lease holds; a client resuming it waits three heartbeats for
// it to be listed, then gets turn_interrupted, finish and [DONE]; once the
// lease expired, the session view no longer calls it running, a resume
// finds nothing to stream and the session can be deleted.
func TestReplicaWriterGoneBeforeListing(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	b := replica(t, srv, prefix, envOptions{cfg: func(c *Config) { c.Heartbeat = 100 * time.Millisecond }, rt: func(c *turns.Config) { c.Heartbeat = 100 * time.Millisecond }})
	// The dead replica's turn: the session's lease (short, so that the
	// test need not wait 30 s for it) and the marker its first write set.
	dead, err := redisstore.New(redisstore.Config{URL: srv.URL(), Prefix: prefix, Config: session.Config{LockTTL: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	sid, turnID := session.NewID(), session.NewID()
	_, lease, err := dead.Claim(t.Context(), sid, session.WithAgent("explorer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := session.Update(t.Context(), dead, sid, func(*orchestration.State) error { return nil }, session.WithTurn(turnID), session.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
	var sv sessionView
	getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
	if sv.Turn == nil || sv.Turn.ID != turnID || !sv.Turn.Running {
		t.Fatalf("B's view right after the turn's first write: %+v, want %s running", sv.Turn, turnID)
	}
	res := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", wire.EventID(turnID, 1))
	evs := newSSEReader(res.Body).all()
	res.Body.Close()
	if res.StatusCode != http.StatusOK || len(evs) != 3 {
		t.Fatalf("resume of the unlisted turn: status %d, frames %+v", res.StatusCode, evs)
	}
	if !strings.Contains(evs[0].Data, "turn_interrupted") || chunkType(t, evs[1].Data) != "finish" || evs[2].Data != "[DONE]" {
		t.Fatalf("the stream of a turn whose writer died before listing it: %+v, want turn_interrupted, finish, [DONE]", evs)
	}
	// Once the dead turn's lease expired, nothing calls it running.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
		if sv.Turn == nil || !sv.Turn.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's view 5 s after the writer's lease expired: %+v, want not running", sv.Turn)
		}
	}
	if res := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", ""); res.StatusCode != http.StatusNoContent {
		t.Fatalf("resume once the turn is given up: %d, want 204", res.StatusCode)
	}
	getJSON(t, b.do(http.MethodDelete, "/api/sessions/"+sid, ""), http.StatusNoContent, nil)
}

// TestReplicaMirrorsOnOneGoroutine: the turns a replica streams at once are
// copied to the shared log by one goroutine of the replica's mirror (plus
// one per write in flight), not one goroutine per turn, and that goroutine
// is gone once no turn is left; every turn still reaches the shared log
// whole and finished.
func TestReplicaMirrorsOnOneGoroutine(t *testing.T) {
	// The goroutines are counted in the whole process: the mirrors of
	// the package's earlier tests' replicas must be done first (a copy
	// ends within 10 s of its turn's end, turns' mirrorDrain).
	waitNoMirrorLoop(t, 10*time.Second+200*time.Millisecond, "an earlier test's mirror outlived its turns")
	srv := redistest.Start(t)
	prefix := "replicas-" + session.NewID()
	a := replica(t, srv, prefix, envOptions{delay: 5 * time.Millisecond})
	const n = 4
	var (
		sids    [n]string
		turnIDs [n]string
		bodies  [n]*sseReader
	)
	for i := range n {
		sids[i] = session.NewID()
		res := a.do(http.MethodPost, "/api/chat/explorer", exploreFor(sids[i]))
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %d: %d", i, res.StatusCode)
		}
		turnIDs[i] = res.Header.Get("X-Turn-Id")
		bodies[i] = newSSEReader(res.Body)
	}
	for i := range n {
		waitShared(t, a, sids[i], turnIDs[i], false)
	}
	if loops, perTurn := mirrorGoroutines(); loops != 1 || perTurn != 0 {
		t.Fatalf("with %d turns streaming: %d mirror loops and %d per-turn mirrors, want 1 and 0", n, loops, perTurn)
	}
	for i := range n {
		evs := bodies[i].all()
		checkTurnStream(t, turnIDs[i], evs, 1)
		waitShared(t, a, sids[i], turnIDs[i], true)
		st, err := a.log.Lookup(t.Context(), turnlog.Ref{Session: sids[i], Turn: turnIDs[i]})
		tr, terr := a.srv.rt.Turn(t.Context(), "", sids[i], turnIDs[i])
		if terr != nil {
			t.Fatal(terr)
		}
		last, _, _, _ := tr.Last(t.Context())
		if err != nil || st.Last != last || lastSeq(t, evs) == 0 {
			t.Fatalf("turn %d: the shared log has %d events (%v), the turn %d", i, st.Last, err, last)
		}
	}
	waitNoMirrorLoop(t, 5*time.Second, "the mirror's goroutine outlived the last turn")
}

// waitNoMirrorLoop waits up to d for no goroutine to run a mirror loop,
// and fails with msg if one still does.
func waitNoMirrorLoop(t *testing.T, d time.Duration, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		loops, _ := mirrorGoroutines()
		if loops == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mirrorGoroutines counts the goroutines running the replica's mirror loop
// and those waiting in a per-turn mirror.
func mirrorGoroutines() (loops, perTurn int) {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		// "(*mirrors).loop(" is the loop's own frame: the short goroutines
		// it starts for the writes name it only in "created by".
		if strings.Contains(g, "turns.(*mirrors).loop(") {
			loops++
		} else if strings.Contains(g, "turns.(*Runtime).mirror(") {
			perTurn++
		}
	}
	return loops, perTurn
}

// lastSeq is the seq of the last event a stream's chunks name.
func lastSeq(t *testing.T, evs []sseEvent) int64 {
	t.Helper()
	var last int64
	for _, ev := range evs {
		if ev.HasID {
			_, seq, _, err := wire.ParseEventID(ev.ID)
			if err != nil {
				t.Fatalf("event ID %q: %v", ev.ID, err)
			}
			last = seq
		}
	}
	return last
}
