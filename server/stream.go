package server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/gin-gonic/gin"
	"github.com/r3labs/sse/v2"
)

// A connection's frames go out through github.com/r3labs/sse/v2 in
// sessions, each an r3labs stream and ServeHTTP on the same response, held
// only while there is something to write (docs/design/sse.md has the
// library's traps this avoids). A frame is handed to
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

// seen is how far a client got in a turn's stream: the number of the last
// frame it got, and how many of the turn's takeovers (restart frames) it
// counted, as its Last-Event-ID says ("<turn>:<after>.<restarts>").
type seen struct {
	after    int64
	restarts int
	// counted is the restart frames mapped so far.
	counted int
	// whole: the client replays the turn from its start with no
	// Last-Event-ID (the AI SDK's resumeStream), and builds the message
	// from what it gets without honouring data-restart: the events a
	// restart voids are left out (void, restarts known when the replay
	// began), and so is the restart; a restart that comes later and voids
	// events already written ends the response with no chunk, for the
	// client to replay the turn again (written: the last event written).
	whole   bool
	void    []voidSpan
	written int64
}

// voidSpan is what a restart voids: the events after since and before
// the restart's own.
type voidSpan struct{ since, restart int64 }

// wholeReplay is the seen of a client that replays t from its start with
// no Last-Event-ID: the spans its restarts so far void (none read when
// it had none). A turn that cannot be read now (not yet listed in the
// shared log, say) has none known: a restart it meets is handled live.
func wholeReplay(ctx context.Context, t *turns.Turn) seen {
	sn := seen{whole: true}
	if _, _, restarts, err := t.Last(ctx); err != nil || len(restarts) == 0 {
		return sn
	}
	events, _, err := t.Read(ctx, 0)
	if err != nil {
		return sn
	}
	for _, ev := range events {
		if ev.Kind == chat.KindRestart && ev.Restart != nil {
			sn.void = append(sn.void, voidSpan{since: ev.Restart.Since, restart: ev.Seq})
		}
	}
	return sn
}

// skips reports whether a whole replay leaves ev out (never the turn's
// start: the client starts its message there).
func (s *seen) skips(ev chat.Event) bool {
	switch ev.Kind {
	case chat.KindStart:
		return false
	case chat.KindRestart:
		return true
	}
	for _, v := range s.void {
		if ev.Seq > v.since && ev.Seq < v.restart {
			return true
		}
	}
	return false
}

// restart counts a takeover whose restart is the turn's frame first: one
// the client did not count, at or before its position, means that the
// frames it holds from there on were a dead replica's, which the shared
// log never got: it gets everything from the restart on.
func (s *seen) restart(first int64) {
	s.counted++
	if s.counted > s.restarts && first <= s.after {
		s.after = first - 1
	}
}

// sseConn is one connection: the writer of r3labs' sessions, whose Flush
// hands over the next events. It reads its turn's events in order from the
// first and maps each into its chunks (uiMapper); those its client already
// has (seen, for a resumed stream) are counted but not written. While
// live, read, out, live, over, ended and lastPush are guarded by the
// turn's lock (turns.Turn.Locked); published is atomic.
type sseConn struct {
	http.ResponseWriter
	s    *Server
	t    *turns.Turn
	m    uiMapper
	seen seen
	read int64        // the seq of the last event mapped
	out  []*sse.Event // what the next session hands over first
	// streamID is the session's r3labs stream.
	streamID string
	// published counts the events with content handed to the session,
	// written r3labs' Flushes after them (its first is the headers').
	published atomic.Int64
	written   int64
	live      bool // the turn pushes its events
	over      bool // the session's end is handed over
	ended     bool // ... and the response's
	lastPush  time.Time
}

// streamTurn writes the frames of t that the client has not got (seen) to
// the response, until the turn's last event, the client's disconnect or
// the shutdown.
func (s *Server) streamTurn(c *gin.Context, t *turns.Turn, seen seen) {
	ctx := c.Request.Context()
	// The http.Server's WriteTimeout (and a ReadTimeout) would cut a long
	// stream: it has no deadline.
	rc := http.NewResponseController(c.Writer)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	h := c.Writer.Header()
	h.Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Session-Id", t.SessionID())
	h.Set("X-Turn-Id", t.ID())
	defer t.Attach()()
	defer s.cfg.Telemetry.TrackStream(ctx, "chat")()
	conn := &sseConn{ResponseWriter: c.Writer, s: s, t: t, m: uiMapper{turnID: t.ID()}, seen: seen}
	heartbeat := time.NewTimer(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		conn.session(ctx)
		if conn.ended || ctx.Err() != nil {
			return
		}
		heartbeat.Reset(s.cfg.Heartbeat)
		for len(conn.out) == 0 {
			if conn.ended {
				return // ended with no chunk (closeWith)
			}
			events, done, err := t.Next(ctx, conn.read, heartbeat.C, s.rt.Closing())
			switch {
			case err != nil:
				conn.closeWith(err)
			case len(events) > 0:
				conn.queue(events)
			case done, ctx.Err() != nil:
				return // every event is written, or nobody reads them
			case isClosed(s.rt.Closing()):
				conn.closeWith(s.rt.StreamEnd())
			default:
				conn.out = append(conn.out, &sse.Event{Comment: []byte("heartbeat")})
				heartbeat.Reset(s.cfg.Heartbeat)
			}
		}
	}
}

// session serves the connection through r3labs until the session ends.
func (c *sseConn) session(ctx context.Context) {
	c.streamID = c.t.ID() + "/" + strconv.FormatInt(c.s.connSeq.Add(1), 10)
	c.published.Store(0)
	c.written, c.over = -1, false
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // r3labs' close watcher then removes the stream
	req := (&http.Request{Method: http.MethodGet, URL: &url.URL{RawQuery: "stream=" + url.QueryEscape(c.streamID)}, Header: http.Header{}}).WithContext(ctx)
	c.s.sse.ServeHTTP(c, req)
	c.t.Locked(func(h turns.Held) {
		h.Drop(c)
		c.live = false
		c.s.lingers.remove(c)
	})
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
	flush, local := false, false
	c.t.Locked(func(h turns.Held) {
		local = true
		flush = c.handOverLocked(h)
	})
	if !local {
		flush = c.handOverLocked(turns.Held{})
	}
	return flush
}

// handOverLocked is handOver under the turn's lock, h the turn held (zero
// for another replica's turn).
func (c *sseConn) handOverLocked(h turns.Held) (flush bool) {
	local := c.t.Local()
	if local {
		if c.written < c.published.Load() {
			return false // the turn pushed more meanwhile
		}
		if !c.over && !c.live && len(c.out) == 0 {
			events, done, gap := h.After(c.read)
			switch {
			case gap:
				c.closeWith(turns.ErrGap)
			case len(events) > 0:
				c.queue(events)
			case done:
				c.ended = true
			default:
				c.goLive(h)
			}
		}
	}
	switch {
	case c.over:
		return !c.ended
	case c.live:
		return true
	case len(c.out) == 0 && !c.ended:
		// Another replica's turn: its events are a round trip away.
		c.endSession()
		return true
	}
	// r3labs' buffer holds maxBurst events, and every event handed over
	// before is written: these go in without waiting.
	n := min(len(c.out), maxBurst)
	for _, ev := range c.out[:n] {
		c.published.Add(1)
		c.s.sse.Publish(c.streamID, ev)
	}
	clear(c.out[:n])
	c.out = append(c.out[:0], c.out[n:]...)
	if c.ended && len(c.out) == 0 {
		c.endSession()
	}
	return false
}

// goLive makes the connection a live reader of the turn held.
func (c *sseConn) goLive(h turns.Held) {
	h.Live(c)
	c.live, c.lastPush = true, time.Now()
	c.s.lingers.add(c, c.s.linger())
}

// Push hands the turn's new events to r3labs (turns.Live); the turn's
// lock is held. An event's chunks that r3labs cannot take at once wait in
// out, and the connection stops being live: handOver hands them over
// once the ones before them are written.
func (c *sseConn) Push(events []chat.Event) bool {
	for _, ev := range events {
		c.mapEvent(ev)
		if c.ended {
			// A whole replay a restart voided (mapEvent): its end.
			c.End()
			return false
		}
	}
	for i, ev := range c.out {
		if !c.s.sse.TryPublish(c.streamID, ev) {
			c.live = false
			n := copy(c.out, c.out[i:])
			clear(c.out[n:])
			c.out = c.out[:n]
			return false
		}
		c.published.Add(1)
	}
	clear(c.out)
	c.out = c.out[:0]
	c.lastPush = time.Now()
	return true
}

// End hands over the response's end after the turn's last event
// (turns.Live); the turn's lock is held. When r3labs' buffers are full,
// handOver does once they are written.
func (c *sseConn) End() {
	c.live = false
	if len(c.out) == 0 && c.s.sse.TryPublish(c.streamID, &sse.Event{}) {
		c.over, c.ended = true, true
	}
}

// lingerCheck ends a live connection's session after linger without an
// event (lingers calls it); a stalled client's session ends once its
// events are written.
func (c *sseConn) lingerCheck() {
	c.t.Locked(func(h turns.Held) {
		switch {
		case !c.live:
			c.s.lingers.remove(c)
		case time.Since(c.lastPush) < c.s.linger():
		case c.s.sse.TryPublish(c.streamID, &sse.Event{}):
			h.Drop(c)
			c.live, c.over = false, true
			c.s.lingers.remove(c)
		}
	})
}

// lingers holds the live connections of this replica's turns and checks
// each every linger/4, at least a millisecond (lingerCheck): one goroutine
// for all of them, which runs while any is live. A timer per connection
// would start a goroutine as each fired: hundreds at once when a burst of
// streams waits together, each keeping its stack until the next
// collection.
//
// Lock order: a turn's lock before mu.
type lingers struct {
	mu      sync.Mutex
	conns   map[*sseConn]struct{}
	running bool // the loop goroutine runs (it exits when conns is empty)
}

// add makes c, a live connection, checked; its turn's lock is held.
func (l *lingers) add(c *sseConn, linger time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		l.conns = make(map[*sseConn]struct{})
	}
	l.conns[c] = struct{}{}
	if !l.running {
		l.running = true
		go l.loop(max(linger/4, time.Millisecond))
	}
}

// remove stops checking c; its turn's lock is held.
func (l *lingers) remove(c *sseConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *lingers) loop(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var due []*sseConn
	for range tick.C {
		l.mu.Lock()
		if len(l.conns) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		for c := range l.conns {
			due = append(due, c)
		}
		l.mu.Unlock()
		for _, c := range due {
			c.lingerCheck()
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

// queue maps events into out, up to about maxBurst chunks; the rest are
// read again.
func (c *sseConn) queue(events []chat.Event) {
	for _, ev := range events {
		if len(c.out) >= maxBurst-maxChunks || c.ended {
			return
		}
		c.mapEvent(ev)
	}
}

// maxChunks is the most chunks one event maps to (finish after text-end,
// then [DONE]).
const maxChunks = 3

// mapEvent maps the next event of the turn, and queues its frames that
// the client has not got.
func (c *sseConn) mapEvent(ev chat.Event) {
	c.read = ev.Seq
	first := c.m.frames + 1 // the number of the event's first frame
	if ev.Kind == chat.KindRestart {
		c.seen.restart(first)
	}
	skip := c.seen.whole && c.seen.skips(ev)
	if skip && ev.Kind == chat.KindRestart && ev.Restart != nil && c.seen.written > ev.Restart.Since {
		// A whole replay got events this restart voids: it ends, and the
		// client replays the turn again, without them.
		c.ended = true
		return
	}
	chunks := c.m.add(ev, !skip && first+maxChunks-1 > c.seen.after)
	if skip {
		return // mapped, for the numbers of the frames after it
	}
	if ev.Kind != chat.KindStart {
		c.seen.written = ev.Seq // what a restart can void
	}
	for i, data := range chunks {
		n := first + int64(i)
		if n <= c.seen.after {
			continue
		}
		e := &frameEvent{ev: sse.Event{Data: data}}
		e.ev.ID = wire.AppendEventID(e.id[:0], c.t.ID(), n, c.seen.counted)
		c.out = append(c.out, &e.ev)
	}
}

// frameEvent is a chunk's event for r3labs and its ID's bytes in one
// allocation; the data is the chunk's own.
type frameEvent struct {
	ev sse.Event
	id [48]byte
}

// closeWith queues chunks that are not in the turn's log (so they carry
// no ID) and ends the response after them. finish and [DONE] follow only
// when the turn is surely over and its session free: it was abandoned
// (and recovered under its lease) or its session deleted. Otherwise (the
// shared log unreadable, the server shutting down before the turn ended,
// events lost) the turn may still hold its session, and a client told it
// finished would get 409 for its next message: it may resume instead. A
// turn that goes on on another replica (turns.ErrHandedOver) ends the
// response with no chunk: the client resumes there, as after a cut
// connection.
func (c *sseConn) closeWith(e *chat.Error) {
	c.ended = true
	if e.Code == turns.ErrHandedOver.Code {
		return
	}
	c.out = append(c.out, &sse.Event{Data: mustJSON(uiChunk{Type: "error", ErrorText: e.Code + ": " + e.Message})})
	if turns.Over(e) {
		c.out = append(c.out, &sse.Event{Data: mustJSON(uiChunk{Type: "finish", FinishReason: "error"})}, &sse.Event{Data: doneData})
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
