package server

import (
	"context"
	"encoding/json"
	"iter"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"go.uber.org/goleak"
)

// The tests of a connection that streams a turn of this replica live: the
// turn hands it each event as it logs it (sseConn.Push), it ends its
// r3labs session when the turn pauses (lingerCheck), and it falls behind
// and catches up from the turn's log when its client cannot keep up. The
// turns are real agent turns whose model says what the test feeds it
// (fedModel), one text delta at a time.

// socketBuffer is the size of the test connections' socket buffers, on
// both ends. Left to the kernel, loopback buffers grow with the traffic
// (here up to 32 MiB received and 4 MiB sent), so how much a client that
// stops reading leaves the server able to write would depend on the
// machine; set, it is known.
const socketBuffer = 64 << 10

// fedModel answers a model call with the texts fed to the turn (a feed
// per user message: the turn's), one text delta each, until the feed is
// closed.
type fedModel struct {
	mu    sync.Mutex
	feeds map[string]chan string
}

func newFedModel() *fedModel { return &fedModel{feeds: map[string]chan string{}} }

// feed is the feed of the turn whose user message is message.
func (m *fedModel) feed(message string) chan string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.feeds[message] == nil {
		m.feeds[message] = make(chan string)
	}
	return m.feeds[message]
}

func (m *fedModel) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	message := ""
	for _, msg := range req.Messages {
		if msg.Role == chat.RoleUser {
			message = msg.Content
		}
	}
	feed := m.feed(message)
	return func(yield func(chat.Event, error) bool) {
		for {
			select {
			case text, ok := <-feed:
				if !ok {
					return
				}
				if !yield(chat.Event{Kind: chat.KindTextDelta, Text: text}, nil) {
					return
				}
			case <-ctx.Done():
				yield(chat.Event{}, ctx.Err())
				return
			}
		}
	}
}

func (m *fedModel) Info() llmorch.Info { return llmorch.Info{Provider: "offline", Model: "fed"} }

// liveStream is a client of one streamed turn over real HTTP, whose socket
// buffers are socketBuffer on both ends: it reads no further than the
// test receives from evs. feed is what the turn's model says.
type liveStream struct {
	evs    <-chan sseEvent
	cancel context.CancelFunc
	turnID string
	next   int64 // the number of the next frame
	feed   chan string
}

// startLive starts a turn of plain on the session (its message is the
// session's ID, which names its feed) on a server whose model is m, and
// reads its stream until its first text delta, text.
func startLive(t *testing.T, e *env, m *fedModel, session, text string) *liveStream {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(socketBuffer)
		}
		return c, err
	}}}
	t.Cleanup(client.CloseIdleConnections)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/api/chat/plain", strings.NewReader(`{"message":"`+session+`","sessionId":"`+session+`"}`))
	req.Header.Set("Content-Type", "application/json")
	feed := m.feed(session)
	go func() { feed <- text }()
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	evs := make(chan sseEvent)
	go func() {
		defer close(evs)
		r := newSSEReader(res.Body)
		for {
			ev, ok := r.next()
			if !ok {
				return
			}
			evs <- ev
		}
	}()
	s := &liveStream{evs: evs, cancel: cancel, turnID: res.Header.Get("X-Turn-Id"), next: 1, feed: feed}
	s.until(t, text)
	return s
}

// smallBuffers, as an env's connState, makes the server's side of every
// connection write through a socketBuffer buffer.
func smallBuffers(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
		_ = tc.SetWriteBuffer(socketBuffer)
	}
}

// frame reads the next frame: its number must be the next one.
func (s *liveStream) frame(t *testing.T) (sseEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.evs:
		if !ok {
			return ev, false
		}
		if want := wire.EventID(s.turnID, s.next); !ev.HasID || ev.ID != want {
			t.Fatalf("frame %s, want %s (no gap, no duplicate)", ev.ID, want)
		}
		s.next++
		return ev, true
	case <-time.After(10 * time.Second):
		t.Fatalf("frame %d did not come", s.next)
		return sseEvent{}, false
	}
}

// until reads frames until the text delta of text, which must come.
func (s *liveStream) until(t *testing.T, text string) {
	t.Helper()
	for {
		ev, ok := s.frame(t)
		if !ok {
			t.Fatalf("the stream ended before the delta %q", text)
		}
		var c struct{ Type, Delta string }
		_ = json.Unmarshal([]byte(ev.Data), &c)
		if c.Type == "text-delta" {
			if c.Delta != text {
				t.Fatalf("delta %q, want %q", c.Delta, text)
			}
			return
		}
	}
}

// end reads the stream to its end, which must be [DONE].
func (s *liveStream) end(t *testing.T) {
	t.Helper()
	last := ""
	for {
		ev, ok := s.frame(t)
		if !ok {
			break
		}
		last = ev.Data
	}
	if last != "[DONE]" {
		t.Fatalf("the stream ended with %q", last)
	}
}

// liveConns counts the connections that are live (the lingers check
// them).
func liveConns(e *env) int {
	e.srv.lingers.mu.Lock()
	defer e.srv.lingers.mu.Unlock()
	return len(e.srv.lingers.conns)
}

func waitLive(t *testing.T, e *env, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for liveConns(e) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d live connections, want %d", liveConns(e), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLiveConnection: a connection that has written every frame goes live,
// the turn hands it the next events, each comes at once; after the linger
// without one it is not live (its r3labs session ended) and the next
// event still comes, after which it is live again; the turn's end ends the
// response.
func TestLiveConnection(t *testing.T) {
	// The linger is the heartbeat's when shorter: a second, long enough
	// for a loaded machine to add the next event before it.
	m := newFedModel()
	e := newEnv(t, envOptions{model: m, cfg: func(c *Config) { c.Heartbeat = time.Second }})
	s := startLive(t, e, m, "live-session-1", "w1 ")
	waitLive(t, e, 1)
	for i := 2; i <= 20; i++ {
		w := "w" + strconv.Itoa(i) + " "
		s.feed <- w
		s.until(t, w)
		if liveConns(e) != 1 {
			t.Fatalf("event %d was added with no live connection", i)
		}
	}
	// The linger ends the live session; the next event opens another.
	waitLive(t, e, 0)
	s.feed <- "late "
	s.until(t, "late ")
	waitLive(t, e, 1)
	close(s.feed)
	s.end(t)
	waitLive(t, e, 0)
}

// TestLingersOneLoop: the live connections of several turns that wait are
// checked by one loop, which ends their sessions after the linger, exits
// once none is live, and starts again with the next live connection.
func TestLingersOneLoop(t *testing.T) {
	// The linger is the heartbeat's when shorter: a second, long enough
	// for a loaded machine to see every connection live before it.
	m := newFedModel()
	e := newEnv(t, envOptions{model: m, cfg: func(c *Config) { c.Heartbeat = time.Second }})
	l := &e.srv.lingers
	state := func() (conns int, running bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.conns), l.running
	}
	wait := func(conns int, running bool, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for c, r := state(); c != conns || r != running; c, r = state() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d connections checked, loop running %v; want %d, %v", what, c, r, conns, running)
			}
			time.Sleep(time.Millisecond)
		}
	}
	const n = 3
	var streams [n]*liveStream
	for i := range n {
		streams[i] = startLive(t, e, m, "linger-session-"+strconv.Itoa(i), "first ")
	}
	wait(n, true, "every connection live")
	wait(0, false, "after every session's linger")
	// The next event makes a connection live again, and the loop with it.
	streams[0].feed <- "second "
	streams[0].until(t, "second ")
	wait(1, true, "one live connection")
	for i := range n {
		close(streams[i].feed)
		streams[i].end(t)
	}
	if conns, _ := state(); conns != 0 {
		t.Fatalf("%d connections checked after every turn's end", conns)
	}
}

// TestLiveConnectionFallsBehind: a client that stops reading fills the
// live connection's buffers; the turn, which never waits, stops handing
// it events, and once the client reads again every frame comes, in order,
// once.
func TestLiveConnectionFallsBehind(t *testing.T) {
	m := newFedModel()
	// 5 MB of answer: past the default output budget.
	e := newEnv(t, envOptions{model: m, budget: llmorch.Budget{MaxOutputBytes: 64 << 20}, cfg: func(c *Config) { c.Heartbeat = time.Minute }, connState: smallBuffers})
	s := startLive(t, e, m, "live-session-2", "first ")
	waitLive(t, e, 1)
	// 600 deltas of 8 KiB: more than the socket buffers (socketBuffer on
	// each end) and r3labs' two 64-event buffers hold while the client
	// reads nothing. The model's feed returns while the client reads
	// nothing (a turn that waited would hang here).
	big := strings.Repeat("x", 8<<10)
	const n = 600
	for i := 2; i <= n; i++ {
		s.feed <- strconv.Itoa(i) + big
	}
	deadline := time.Now().Add(10 * time.Second)
	for liveConns(e) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection stayed live after its client stopped reading")
		}
		time.Sleep(time.Millisecond)
	}
	close(s.feed)
	for i := 2; i <= n; i++ {
		s.until(t, strconv.Itoa(i)+big)
	}
	s.end(t)
}

// TestLiveBurst: turns that add events faster than r3labs hands them over,
// to a client that reads as fast as it can: the live connections fall
// behind mid-write and catch up from the log; every frame comes once, in
// order, and every stream ends.
func TestLiveBurst(t *testing.T) {
	m := newFedModel()
	e := newEnv(t, envOptions{model: m, cfg: func(c *Config) { c.Heartbeat = time.Minute }})
	for turn := range 20 {
		s := startLive(t, e, m, "burst-session-"+strconv.Itoa(turn), "1 ")
		waitLive(t, e, 1)
		const n = 400
		go func() {
			for i := 2; i <= n; i++ {
				s.feed <- strconv.Itoa(i) + " "
			}
			close(s.feed)
		}()
		for i := 2; i <= n; i++ {
			s.until(t, strconv.Itoa(i)+" ")
		}
		s.end(t)
	}
}

// TestStreamsLeaveNoGoroutines: however a stream ends (its turn's end, a
// pause past the linger and more events, the client leaving while live or
// while it waits without r3labs), r3labs' sessions end with it: every
// goroutine of theirs is gone, and their streams are removed.
func TestStreamsLeaveNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var streams []string
	t.Run("streams", func(t *testing.T) {
		m := newFedModel()
		e := newEnv(t, envOptions{model: m, cfg: func(c *Config) { c.Heartbeat = 20 * time.Millisecond }})
		seen := func() {
			e.srv.lingers.mu.Lock()
			defer e.srv.lingers.mu.Unlock()
			for c := range e.srv.lingers.conns {
				streams = append(streams, c.streamID)
			}
		}
		gone := func(id string) {
			t.Helper()
			deadline := time.Now().Add(5 * time.Second)
			for e.srv.sse.StreamExists(id) {
				if time.Now().After(deadline) {
					t.Fatalf("r3labs stream %s outlived its session", id)
				}
				time.Sleep(time.Millisecond)
			}
		}
		for n, leave := range []string{"end", "while live", "while waiting"} {
			s := startLive(t, e, m, "leak-session-"+strconv.Itoa(n), "first ")
			waitLive(t, e, 1)
			seen()
			// Past the linger, the session ends (the response does not);
			// the next event comes through another.
			waitLive(t, e, 0)
			gone(streams[len(streams)-1])
			s.feed <- "second "
			s.until(t, "second ")
			waitLive(t, e, 1)
			seen()
			switch leave {
			case "end":
			case "while live":
				s.cancel()
			case "while waiting":
				waitLive(t, e, 0)
				s.cancel()
			}
			close(s.feed)
			for range s.evs {
			}
			e.waitIdle("leak-session-" + strconv.Itoa(n))
		}
		for _, id := range streams {
			gone(id)
		}
	})
	if len(streams) != 6 {
		t.Fatalf("%d live sessions seen, want 6", len(streams))
	}
}

// TestStreamFlushesEachFrame: a connection reading a live turn gets each
// event's frames as soon as the event is in the turn's log, without
// waiting for a later one (its flushes are skipped only while events it
// already handed to r3labs are on their way). Pauses longer than the
// r3labs session's linger (the heartbeat here) end sessions; the frames
// after them come through new ones on the same response.
func TestStreamFlushesEachFrame(t *testing.T) {
	m := newFedModel()
	e := newEnv(t, envOptions{model: m, cfg: func(c *Config) { c.Heartbeat = 10 * time.Millisecond }})
	s := startLive(t, e, m, "flush-session-1", "w1 ")
	for i := 2; i <= 10; i++ {
		if i > 7 {
			time.Sleep(30 * time.Millisecond)
		}
		w := "w" + strconv.Itoa(i) + " "
		s.feed <- w
		// The feed's next send waits for this read: a frame held back
		// until the next event would never come.
		s.until(t, w)
	}
	close(s.feed)
	s.end(t)
}
