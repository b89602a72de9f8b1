package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"
)

// socketBuffer is the size of the test connections' socket buffers, on
// both ends. Left to the kernel, loopback buffers grow with the traffic
// (here up to 32 MiB received and 4 MiB sent), so how much a client that
// stops reading leaves the server able to write would depend on the
// machine; set, it is known.
const socketBuffer = 64 << 10

// serveStream serves tr's stream over real HTTP and returns its events as
// they arrive; the client reads no further than the test receives. Both
// ends' socket buffers are socketBuffer.
func serveStream(t *testing.T, e *env, tr *turn) <-chan sseEvent {
	t.Helper()
	evs, _ := serveStreamCancel(t, e, tr)
	return evs
}

// serveStreamCancel is serveStream with a cancel that ends the client's
// request.
func serveStreamCancel(t *testing.T, e *env, tr *turn) (<-chan sseEvent, context.CancelFunc) {
	t.Helper()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := gin.CreateTestContext(w)
		c.Request = r
		e.srv.streamTurn(c, tr, 0)
	}))
	hs.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
			_ = tc.SetWriteBuffer(socketBuffer)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(socketBuffer)
		}
		return c, err
	}}}
	t.Cleanup(client.CloseIdleConnections)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL, nil)
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
	return evs, cancel
}

func liveCount(tr *turn) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.live)
}

func waitLive(t *testing.T, tr *turn, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for liveCount(tr) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d live connections, want %d", liveCount(tr), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func readFrame(t *testing.T, evs <-chan sseEvent, tr *turn, i int, data []byte) {
	t.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			t.Fatalf("frame %d: the stream ended", i)
		}
		if ev.Data != string(data) || ev.ID != wire.EventID(tr.id, int64(i)) {
			t.Fatalf("frame %d: got %s %.40s", i, ev.ID, ev.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("frame %d did not come", i)
	}
}

// TestLiveConnection: a connection that has written every frame goes live,
// the turn publishes the next frames to it, each comes at once; after the
// linger without a frame it is not live (its r3labs session ended) and the
// next frame still comes, after which it is live again; the turn's end
// ends the response.
func TestLiveConnection(t *testing.T) {
	// The linger is the heartbeat's when shorter: a second, long enough
	// for a loaded machine to add the next frame before it.
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.Heartbeat = time.Second }})
	tr := newTurn("live-turn-1", "live-session-1", "plain", "", func(error) {}, 1000, 0)
	data := func(i int) []byte { return []byte(`{"type":"data-n","data":` + strconv.Itoa(i) + `}`) }
	tr.add(frame{data: data(1)})
	evs := serveStream(t, e, tr)
	readFrame(t, evs, tr, 1, data(1))
	waitLive(t, tr, 1)
	for i := 2; i <= 20; i++ {
		tr.add(frame{data: data(i)}, frame{data: data(i + 100)})
		if liveCount(tr) != 1 {
			t.Fatalf("frame %d was added with no live connection", i)
		}
		readFrame(t, evs, tr, 2*i-2, data(i))
		readFrame(t, evs, tr, 2*i-1, data(i+100))
	}
	// The linger ends the live session; the next frame opens another.
	waitLive(t, tr, 0)
	tr.add(frame{data: data(999)})
	readFrame(t, evs, tr, 40, data(999))
	waitLive(t, tr, 1)
	tr.finish()
	if ev, ok := <-evs; ok {
		t.Fatalf("after the turn's end: %+v", ev)
	}
	if n := liveCount(tr); n != 0 {
		t.Fatalf("%d live connections after the turn's end", n)
	}
}

// TestLingersOneLoop: the live connections of several turns that wait are
// checked by one loop, which ends their sessions after the linger, exits
// once none is live, and starts again with the next live connection.
func TestLingersOneLoop(t *testing.T) {
	// The linger is the heartbeat's when shorter: a second, long enough
	// for a loaded machine to see every connection live before it.
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.Heartbeat = time.Second }})
	l := &e.srv.lingers
	state := func() (conns int, running bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.conns), l.running
	}
	data := func(i int) []byte { return []byte(`{"type":"data-n","data":` + strconv.Itoa(i) + `}`) }
	const n = 3
	var turns [n]*turn
	var evs [n]<-chan sseEvent
	for i := range n {
		turns[i] = newTurn("linger-turn-"+strconv.Itoa(i), "linger-session", "plain", "", func(error) {}, 100, 0)
		turns[i].add(frame{data: data(1)})
		evs[i] = serveStream(t, e, turns[i])
		readFrame(t, evs[i], turns[i], 1, data(1))
		waitLive(t, turns[i], 1)
	}
	if conns, running := state(); conns != n || !running {
		t.Fatalf("%d live connections: %d checked, loop running %v; want %d, true", n, conns, running, n)
	}
	for i := range n {
		waitLive(t, turns[i], 0)
	}
	deadline := time.Now().Add(10 * time.Second)
	for conns, running := state(); conns != 0 || running; conns, running = state() {
		if time.Now().After(deadline) {
			t.Fatalf("after every session's linger: %d connections checked, loop running %v; want 0, false", conns, running)
		}
		time.Sleep(time.Millisecond)
	}
	// The next frame makes a connection live again, and the loop with it.
	turns[0].add(frame{data: data(2)})
	readFrame(t, evs[0], turns[0], 2, data(2))
	waitLive(t, turns[0], 1)
	if conns, running := state(); conns != 1 || !running {
		t.Fatalf("one live connection: %d checked, loop running %v; want 1, true", conns, running)
	}
	for i := range n {
		turns[i].finish()
		for range evs[i] {
		}
	}
	if conns, _ := state(); conns != 0 {
		t.Fatalf("%d connections checked after every turn's end", conns)
	}
}

// TestLiveConnectionFallsBehind: a client that stops reading fills the
// live connection's buffers; the turn, which never waits, stops publishing
// to it, and once the client reads again every frame comes, in order, once.
func TestLiveConnectionFallsBehind(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.Heartbeat = time.Minute }})
	tr := newTurn("live-turn-2", "live-session-2", "plain", "", func(error) {}, 2000, 0)
	big := strings.Repeat("x", 8<<10)
	data := func(i int) []byte { return []byte(`{"type":"data-n","data":"` + strconv.Itoa(i) + big + `"}`) }
	tr.add(frame{data: data(1)})
	evs := serveStream(t, e, tr)
	readFrame(t, evs, tr, 1, data(1))
	waitLive(t, tr, 1)
	// 600 frames of 8 KiB: more than the socket buffers (socketBuffer on
	// each end) and r3labs' two 64-event buffers hold while the client
	// reads nothing.
	const n = 600
	// add returns while the client reads nothing (a turn that waited
	// would hang here).
	for i := 2; i <= n; i++ {
		tr.add(frame{data: data(i)})
	}
	if c := liveCount(tr); c != 0 {
		t.Fatalf("%d live connections after the client stopped reading", c)
	}
	tr.finish()
	for i := 2; i <= n; i++ {
		readFrame(t, evs, tr, i, data(i))
	}
	if ev, ok := <-evs; ok {
		t.Fatalf("after the turn's end: %+v", ev.ID)
	}
}

// TestLiveBurst: turns that add frames faster than r3labs hands them over,
// to a client that reads as fast as it can: the live connections fall
// behind mid-write and catch up from the log; every frame comes once, in
// order, and every stream ends.
func TestLiveBurst(t *testing.T) {
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.Heartbeat = time.Minute }})
	for turn := range 20 {
		tr := newTurn("burst-turn-"+strconv.Itoa(turn), "burst-session-1", "plain", "", func(error) {}, 2000, 0)
		data := func(i int) []byte { return []byte(`{"type":"data-n","data":` + strconv.Itoa(i) + `}`) }
		tr.add(frame{data: data(1)})
		evs := serveStream(t, e, tr)
		readFrame(t, evs, tr, 1, data(1))
		waitLive(t, tr, 1)
		const n = 400
		go func() {
			for i := 2; i <= n; i++ {
				tr.add(frame{data: data(i)})
			}
			tr.finish()
		}()
		for i := 2; i <= n; i++ {
			readFrame(t, evs, tr, i, data(i))
		}
		select {
		case ev, ok := <-evs:
			if ok {
				t.Fatalf("turn %d: after its last frame: %s", turn, ev.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("turn %d: the stream did not end", turn)
		}
	}
}

// TestStreamsLeaveNoGoroutines: however a stream ends (its turn's end, a
// pause past the linger and more frames, the client leaving while live or
// while it waits without r3labs), r3labs' sessions end with it: every
// goroutine of theirs is gone, and their streams are removed.
func TestStreamsLeaveNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	data := func(i int) []byte { return []byte(`{"type":"data-n","data":` + strconv.Itoa(i) + `}`) }
	var streams []string
	t.Run("streams", func(t *testing.T) {
		e := newEnv(t, envOptions{cfg: func(c *Config) { c.Heartbeat = 20 * time.Millisecond }})
		seen := func(tr *turn) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			for _, r := range tr.live {
				streams = append(streams, r.(*sseConn).streamID)
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
			tr := newTurn("leak-turn-"+strconv.Itoa(n), "leak-session", "plain", "", func(error) {}, 100, 0)
			tr.add(frame{data: data(1)})
			evs, cancel := serveStreamCancel(t, e, tr)
			readFrame(t, evs, tr, 1, data(1))
			waitLive(t, tr, 1)
			seen(tr)
			// Past the linger, the session ends (the response does not);
			// the next frame comes through another.
			waitLive(t, tr, 0)
			gone(streams[len(streams)-1])
			tr.add(frame{data: data(2)})
			readFrame(t, evs, tr, 2, data(2))
			waitLive(t, tr, 1)
			seen(tr)
			switch leave {
			case "end":
				tr.finish()
			case "while live":
				cancel()
			case "while waiting":
				waitLive(t, tr, 0)
				cancel()
			}
			for range evs {
			}
			tr.finish()
		}
		for _, id := range streams {
			gone(id)
		}
	})
	if len(streams) != 6 {
		t.Fatalf("%d live sessions seen, want 6", len(streams))
	}
}
