package server

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/gin-gonic/gin"
	"github.com/r3labs/sse/v2"
)

// A connection's frames go out through github.com/r3labs/sse/v2 in
// sessions, each an r3labs stream and ServeHTTP on the same response, held
// only while there is something to write (docs/api.md, "Implementation
// notes", has the library's traps this avoids). A frame is handed to
// r3labs once: by the turn's goroutine to a connection that has every
// frame so far (live), else by the handler as it catches up with the
// turn's log. Nothing waits for a client: the turn hands over with
// TryPublish, and a connection whose buffers are full stops being live
// and reads the log again; the handler hands over at most maxBurst events,
// once those before them are written.

// maxBurst bounds the events the handler hands over at once: r3labs'
// stream buffer (BufferSize) holds them.
const maxBurst = 64

// sseLinger is how long a live connection keeps its session without a
// frame: a turn that streams tokens, however slowly, keeps it; one that
// waits (for the model's first token, a long tool call) does not.
const sseLinger = time.Second

func (s *Server) linger() time.Duration { return min(sseLinger, s.cfg.Heartbeat) }

func newSSE() *sse.Server {
	srv := sse.New()
	srv.AutoReplay, srv.AutoStream, srv.BufferSize = false, true, maxBurst
	return srv
}

// source is where a connection's frames come from: a turn this replica
// runs (*turn), or one another replica runs, read from the shared turn log
// (*sharedTurn).
type source interface {
	ids() (sessionID, turnID string)
	// attach counts a reader of the turn until the returned func is called.
	attach() (detach func())
	// next waits for the frames after seq `after` until the turn ends,
	// tick fires, stop is closed or ctx ends (then none, not done). An
	// error ends the connection with it: the frames cannot be served.
	next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) (frames []frame, done bool, err *chat.Error)
}

// sseConn is one connection: the writer of r3labs' sessions, whose Flush
// hands over the next events. While live, after, live, over, ended and
// lastPush are guarded by the turn's mu; published is atomic.
type sseConn struct {
	http.ResponseWriter
	s        *Server
	src      source
	after    int64        // the seq of the last frame handed over
	out      []*sse.Event // what the next session hands over first
	streamID string       // the session's r3labs stream
	// published counts the events with content handed to the session,
	// written r3labs' Flushes after them (its first is the headers').
	published atomic.Int64
	written   int64
	live      bool // the turn pushes its frames
	over      bool // the session's end is handed over
	ended     bool // ... and the response's
	lastPush  time.Time
	// restarts are the seqs at which the turn was taken over by another
	// replica (restartsOf): a frame's ID counts those up to it. For a
	// turn this replica runs they are fixed; for one read from the
	// shared log queue adds those it finds.
	restarts []int64
}

// streamTurn writes the frames of src after seq `after` to the response,
// until the turn's last frame, the client's disconnect or the shutdown.
func (s *Server) streamTurn(c *gin.Context, src source, after int64) {
	ctx := c.Request.Context()
	// The http.Server's WriteTimeout (and a ReadTimeout) would cut a long
	// stream: it has no deadline.
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	sessionID, turnID := src.ids()
	h := c.Writer.Header()
	h.Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Session-Id", sessionID)
	h.Set("X-Turn-Id", turnID)
	defer src.attach()()
	defer s.cfg.Telemetry.TrackStream(ctx, "chat")()
	conn := &sseConn{ResponseWriter: c.Writer, s: s, src: src, after: after, restarts: restartsOf(src)}
	heartbeat := time.NewTimer(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		conn.session(ctx)
		if conn.ended || ctx.Err() != nil {
			return
		}
		heartbeat.Reset(s.cfg.Heartbeat)
		for len(conn.out) == 0 {
			frames, done, err := src.next(ctx, conn.after, heartbeat.C, s.closing)
			switch {
			case err != nil:
				conn.closeWith(err)
			case len(frames) > 0:
				conn.queue(frames)
			case done, ctx.Err() != nil:
				return // every frame is written, or nobody reads them
			case isClosed(s.closing):
				conn.closeWith(errShutdown)
			default:
				conn.out = append(conn.out, &sse.Event{Comment: []byte("heartbeat")})
				heartbeat.Reset(s.cfg.Heartbeat)
			}
		}
	}
}

// session serves the connection through r3labs until the session ends.
func (c *sseConn) session(ctx context.Context) {
	_, turnID := c.src.ids()
	c.streamID = turnID + "/" + strconv.FormatInt(c.s.connSeq.Add(1), 10)
	c.published.Store(0)
	c.written, c.over = -1, false
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // r3labs' close watcher then removes the stream
	req := (&http.Request{Method: http.MethodGet, URL: &url.URL{RawQuery: "stream=" + url.QueryEscape(c.streamID)}, Header: http.Header{}}).WithContext(ctx)
	c.s.sse.ServeHTTP(c, req)
	if t, ok := c.src.(*turn); ok {
		t.mu.Lock()
		t.dropLive(c)
		c.live = false
		c.s.lingers.remove(c)
		t.mu.Unlock()
	}
}

// Flush is r3labs' call after the headers and after every event it
// writes. A flush is a write system call, a streamed turn's largest single
// CPU cost, so it is made only once every event handed over is written:
// events that queue up leave in one write. The response's last events are
// not flushed: they leave with the response's end when the handler
// returns, in one write, so that a client that stops reading at [DONE]
// finds the response whole and keeps its connection.
func (c *sseConn) Flush() {
	c.written++
	if c.written < c.published.Load() || !c.handOver() {
		return
	}
	c.ResponseWriter.(http.Flusher).Flush()
}

// handOver runs once every event handed over is written: it hands over
// the next ones, makes the connection live or ends the session, and
// reports whether what was written must be flushed now.
func (c *sseConn) handOver() (flush bool) {
	t, local := c.src.(*turn)
	if local {
		t.mu.Lock()
		defer t.mu.Unlock()
		if c.written < c.published.Load() {
			return false // the turn pushed more meanwhile
		}
		if !c.over && !c.live && len(c.out) == 0 {
			frames, gap := t.after(c.after)
			switch {
			case gap:
				c.closeWith(errGap)
			case len(frames) > 0:
				c.queue(frames)
			case t.done:
				c.ended = true
			default:
				c.goLive(t)
			}
		}
	}
	switch {
	case c.over:
		return !c.ended
	case c.live:
		return true
	case len(c.out) == 0 && !c.ended:
		// Another replica's turn: its frames are a round trip away.
		c.endSession()
		return true
	}
	for _, ev := range c.out {
		c.published.Add(1)
		c.s.sse.Publish(c.streamID, ev)
	}
	clear(c.out)
	c.out = c.out[:0]
	if c.ended {
		c.endSession()
	}
	return false
}

// goLive makes the connection a live reader of t; t.mu is held.
func (c *sseConn) goLive(t *turn) {
	t.live = append(t.live, c)
	c.live, c.lastPush = true, time.Now()
	c.s.lingers.add(c, t, c.s.linger())
}

// push hands the turn's new frames to r3labs (liveReader); t.mu is held.
func (c *sseConn) push(frames []frame) bool {
	for _, f := range frames {
		if !c.s.sse.TryPublish(c.streamID, c.event(f)) {
			c.live = false
			return false
		}
		c.after = f.seq
		c.published.Add(1)
	}
	c.lastPush = time.Now()
	return true
}

// end hands over the response's end after the turn's last frame
// (liveReader); t.mu is held. When r3labs' buffers are full, handOver does
// once they are written.
func (c *sseConn) end() {
	c.live = false
	if c.s.sse.TryPublish(c.streamID, &sse.Event{}) {
		c.over, c.ended = true, true
	}
}

// lingerCheck ends a live connection's session after linger without a
// frame (lingers calls it); a stalled client's session ends once its
// events are written.
func (c *sseConn) lingerCheck(t *turn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !c.live:
		c.s.lingers.remove(c)
	case time.Since(c.lastPush) < c.s.linger():
	case c.s.sse.TryPublish(c.streamID, &sse.Event{}):
		t.dropLive(c)
		c.live, c.over = false, true
		c.s.lingers.remove(c)
	}
}

// lingers holds the live connections of this replica's turns and checks
// each every linger/4, at least a millisecond (lingerCheck): one goroutine
// for all of them, which runs while any is live. A timer per connection
// would start a goroutine as each fired: hundreds at once when a burst of
// streams waits together, each keeping its stack until the next
// collection.
//
// Lock order: a turn's mu before mu.
type lingers struct {
	mu      sync.Mutex
	conns   map[*sseConn]*turn
	running bool // the loop goroutine runs (it exits when conns is empty)
}

// add makes c, a live connection of t, checked; t.mu is held.
func (l *lingers) add(c *sseConn, t *turn, linger time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		l.conns = make(map[*sseConn]*turn)
	}
	l.conns[c] = t
	if !l.running {
		l.running = true
		go l.loop(max(linger/4, time.Millisecond))
	}
}

// remove stops checking c; its turn's mu is held.
func (l *lingers) remove(c *sseConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *lingers) loop(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	type live struct {
		c *sseConn
		t *turn
	}
	var due []live
	for range tick.C {
		l.mu.Lock()
		if len(l.conns) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		for c, t := range l.conns {
			due = append(due, live{c, t})
		}
		l.mu.Unlock()
		for _, d := range due {
			d.c.lingerCheck(d.t)
		}
		clear(due)
		due = due[:0]
	}
}

// endSession hands over the empty event that ends the session (and the
// response, when ended).
func (c *sseConn) endSession() {
	c.over = true
	c.s.sse.Publish(c.streamID, &sse.Event{})
}

// queue queues the events of frames, at most maxBurst.
func (c *sseConn) queue(frames []frame) {
	frames = frames[:min(len(frames), maxBurst)]
	_, shared := c.src.(*sharedTurn)
	for _, f := range frames {
		if shared && isRestart(f.data) && !slices.Contains(c.restarts, f.seq) {
			c.restarts = append(c.restarts, f.seq)
		}
		c.out = append(c.out, c.event(f))
	}
	c.after = frames[len(frames)-1].seq
}

// frameEvent is a frame's event for r3labs and its ID's bytes in one
// allocation; the data is the frame's own.
type frameEvent struct {
	ev sse.Event
	id [48]byte
}

func (c *sseConn) event(f frame) *sse.Event {
	_, turnID := c.src.ids()
	e := &frameEvent{ev: sse.Event{Data: f.data}}
	e.ev.ID = wire.AppendEventID(e.id[:0], turnID, f.seq, restartsUpTo(c.restarts, f.seq))
	return &e.ev
}

// closeWith queues frames that are not in the turn's log (so they carry no
// ID) and ends the response after them. finish and [DONE] follow only when
// the turn is surely over and its session free: it was abandoned (and
// recovered under its lease) or its session deleted. Otherwise (the shared
// log unreadable, the server shutting down before the turn ended, frames
// lost) the turn may still hold its session, and a client told it finished
// would get 409 for its next message: it may resume instead.
func (c *sseConn) closeWith(e *chat.Error) {
	c.out = append(c.out, &sse.Event{Data: mustJSON(uiChunk{Type: "error", ErrorText: e.Code + ": " + e.Message})})
	if e == errTurnGone || e.Code == errAbandoned.Code {
		c.out = append(c.out, &sse.Event{Data: mustJSON(uiChunk{Type: "finish", FinishReason: "error"})}, &sse.Event{Data: doneData})
	}
	c.ended = true
}

// restartsOf are the seqs at which src's turn was taken over, as far as
// this replica knows them.
func restartsOf(src source) []int64 {
	switch t := src.(type) {
	case *turn:
		return t.restarts
	case *sharedTurn:
		return t.restarts
	}
	return nil
}

// restartsUpTo counts the takeovers whose first frame is at or before
// seq: the restart count of frame seq's ID (wire.RestartedEventID).
func restartsUpTo(restarts []int64, seq int64) int {
	n := 0
	for _, r := range restarts {
		if r <= seq {
			n++
		}
	}
	return n
}
