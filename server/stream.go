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
	"github.com/gin-gonic/gin"
	"github.com/r3labs/sse/v2"
)

// Streams go out through github.com/r3labs/sse/v2, used so that none of its
// traps applies and so that it costs as little as it can (docs/api.md,
// "Implementation notes"):
//
//   - AutoReplay is off: its replay log grows without bound, renumbers our
//     event IDs to 0, 1, 2 ... and replays Last-Event-ID inclusively. The
//     turn's own bounded log (turn.frames) is the replay source instead.
//   - One sse stream per connection, not per turn: in a shared stream one
//     slow subscriber stalls every other (and, through the stream's
//     buffer, the turn that publishes), and a shared stream cannot give
//     each reconnecting client a different starting point. Each connection
//     reads the turn's log from the client's position; the turn itself
//     never waits for any client.
//   - No goroutine of ours per connection: the connection's handler feeds
//     its own sse stream. r3labs' ServeHTTP runs in the handler and calls
//     the writer's Flush after every event; that Flush (sseConn.Flush)
//     publishes the next frames of the turn's log once the ones handed
//     over are written, waiting for new ones when there are none. A
//     connection that has written every frame of a turn this replica runs
//     goes live instead of waiting: the turn publishes its next frames
//     itself, without blocking (live.go).
//   - r3labs' own cost is two goroutines per stream (the stream's and
//     ServeHTTP's close watcher), two channel hops and its formatting per
//     event. A connection holds them only while it has something to send:
//     after sseLinger without a frame it ends its r3labs session (the
//     response goes on) and waits for the next frame on its own, then
//     serves it through a new session. Sessions reuse the response: the
//     headers r3labs sets again are already sent and ignored.
//   - Our IDs ("<turnId>:<seq>") are not numbers, which its ServeHTTP answers
//     with 400, so Last-Event-ID is parsed here and the request handed to it
//     has none; its 500 for unknown streams never happens because the
//     stream is created just before.
//   - An event with empty data ends its response: frames never have empty
//     data (JSON objects or [DONE]); an empty event is published on purpose
//     to end the response once the turn's last frame went out. Heartbeats are
//     comment events.
//   - RemoveStream with a subscriber still registered leaks a goroutine: the
//     stream is removed only after OnUnsubscribe reported the subscriber gone.
//   - Publishing one *sse.Event to two streams is a data race: every publish
//     gets a new event.
//   - Publish blocks while the stream's buffer is full, and the stream's
//     goroutine blocks while the subscriber's 64-event channel is full; only
//     this connection's handler drains it. So the handler publishes at most
//     maxBurst events at a time, and only once the previous ones are
//     written: a publish never blocks. The turn publishes to a live
//     connection with TryPublish, which never blocks either.

// maxBurst bounds the events a connection publishes to its sse stream
// before they are written: the stream's buffer (newSSE's BufferSize) and
// the subscriber's channel hold 64 each, so a publish never blocks.
const maxBurst = 64

// sseLinger is how long a connection keeps its r3labs stream (and the two
// goroutines that come with it) once it has nothing to send: a turn that
// streams tokens, however slowly, keeps it, and a connection that waits
// (for the model's first token, a long tool call, a turn on another
// replica) holds none while it waits.
const sseLinger = time.Second

// linger is how long a connection keeps its r3labs session without a
// frame: sseLinger, or the heartbeat when that is shorter.
func (s *Server) linger() time.Duration { return min(sseLinger, s.cfg.Heartbeat) }

// sseConn is one connection's stream: the writer r3labs writes its events
// to, which feeds r3labs the frames of the turn's log from the client's
// position. Its fields are used by the connection's handler goroutine only
// (r3labs calls Flush from ServeHTTP), except the current session's
// unsubscribed channel, which r3labs' callback closes.
type sseConn struct {
	http.ResponseWriter
	s      *Server
	src    source
	ctx    context.Context
	turnID string
	after  int64 // the last seq published
	out    []*sse.Event
	// ended: the response's last event is published, or the client left.
	ended     bool
	detach    func()
	untrack   func()
	heartbeat *time.Timer
	linger    *time.Timer

	// The current r3labs session (see session): its stream, whether its
	// end is published, and the events with content published to it and
	// flushed by r3labs after them (one Flush per such event, after the
	// one that follows the headers).
	streamID     string
	sessionOver  bool
	counting     bool
	published    atomic.Int64 // by this handler, and by the turn while live
	written      int64
	unsubscribed chan struct{}
	unsubOnce    *sync.Once

	// restarts are the seqs at which the turn was taken over by another
	// replica (restartsOf): a frame's ID counts those up to it. For a
	// turn this replica runs they are fixed; for one read from the
	// shared log the handler adds those it finds (queue).
	restarts []int64

	// Live (goLive): the turn publishes this connection's frames itself.
	// live, lastPush, lingered and endPushed are guarded by the turn's mu;
	// wentLive, liveFrom and liveWritten are the handler's.
	live        bool
	lastPush    time.Time
	lingered    bool // the linger check ended the session
	endPushed   bool // the turn ended and published the response's end
	wentLive    bool
	liveFrom    int64 // after, when the connection went live
	liveWritten int64 // written, likewise
	liveTimer   *time.Timer
}

func newSSE(s *Server) *sse.Server {
	srv := sse.NewWithCallback(nil,
		func(id string, _ *sse.Subscriber) {
			if v, ok := s.subs.Load(id); ok {
				c := v.(*sseConn)
				c.unsubOnce.Do(func() { close(c.unsubscribed) })
			}
		})
	srv.AutoReplay = false
	srv.AutoStream = false
	// The turn's log is the buffer; the stream's channel holds one burst.
	srv.BufferSize = maxBurst
	return srv
}

// source is where one connection's frames come from: the turn this
// replica runs (*turn), or the shared log for a turn another replica runs
// (*sharedTurn, replicas.go).
type source interface {
	// ids names the turn.
	ids() (sessionID, turnID string)
	// attach counts a reader of the turn until the returned func is called.
	attach() (detach func())
	// next returns the frames after seq `after`. With wait false it
	// returns at once, with the frames at hand if any (a source that has
	// none without a round trip returns none). With wait true it waits for
	// some until the turn ends, tick fires, stop is closed or ctx ends
	// (then it returns none and done false). A non-nil error ends the
	// connection with it: the frames cannot be served.
	next(ctx context.Context, after int64, wait bool, tick <-chan time.Time, stop <-chan struct{}) (frames []frame, done bool, err *chat.Error)
}

func (t *turn) ids() (string, string) { return t.sessionID, t.id }

func (t *turn) next(ctx context.Context, after int64, wait bool, tick <-chan time.Time, stop <-chan struct{}) ([]frame, bool, *chat.Error) {
	for {
		frames, done, gap, changed := t.read(after)
		switch {
		case gap:
			return nil, false, errGap
		case len(frames) > 0 || done || !wait:
			return frames, done, nil
		}
		select {
		case <-changed:
		case <-tick:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, nil
		case <-stop:
			return nil, false, nil
		}
	}
}

// streamHeaders are the headers of every UI message stream response.
func streamHeaders(h http.Header, src source) {
	sessionID, turnID := src.ids()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Vercel-Ai-Ui-Message-Stream", "v1")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Session-Id", sessionID)
	h.Set("X-Turn-Id", turnID)
}

// streamTurn writes the frames of src after seq `after` to the response,
// live until the turn's last frame, the client's disconnect or the server's
// shutdown. The frames are written by r3labs in sessions (see session):
// one from the start, for the headers and whatever is at hand, then one
// each time something comes after a pause.
func (s *Server) streamTurn(c *gin.Context, src source, after int64) {
	conn := s.openStream(c, src, after)
	defer conn.close()
	for {
		if !conn.session() || conn.ended {
			return
		}
		// Nothing to send for a while: wait for more without r3labs.
		for len(conn.out) == 0 {
			switch conn.poll(true, conn.heartbeat.C) {
			case pollGone:
				return
			case pollTick:
				conn.out = append(conn.out, &sse.Event{Comment: []byte("heartbeat")})
				conn.heartbeat.Reset(s.cfg.Heartbeat)
			}
		}
	}
}

// openStream sends the stream's headers and returns its connection. The
// handler waits in streamTurn for as long as the stream lasts, so what is
// only needed to set it up stays out of streamTurn's frame.
func (s *Server) openStream(c *gin.Context, src source, after int64) *sseConn {
	w := c.Writer
	// The http.Server's WriteTimeout (and a ReadTimeout, if one is set) would
	// cut a long stream: this stream has no deadline.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	streamHeaders(w.Header(), src)

	_, turnID := src.ids()
	return &sseConn{ResponseWriter: w, s: s, src: src, ctx: c.Request.Context(), turnID: turnID, after: after, restarts: restartsOf(src),
		untrack: s.cfg.Telemetry.TrackStream(c.Request.Context(), "chat"),
		detach:  src.attach(), heartbeat: time.NewTimer(s.cfg.Heartbeat), linger: time.NewTimer(s.linger())}
}

func (c *sseConn) close() {
	c.heartbeat.Stop()
	c.linger.Stop()
	if c.liveTimer != nil {
		c.liveTimer.Stop()
	}
	c.detach()
	c.untrack()
}

// session serves the connection through r3labs until its response ends or
// it has had nothing to send for sseLinger; it reports false when r3labs'
// stream did not go away (a goroutine of its is then left behind).
func (c *sseConn) session() bool {
	c.streamID = c.turnID + "/" + strconv.FormatInt(c.s.connSeq.Add(1), 10)
	c.sessionOver, c.counting, c.written = false, false, 0
	c.published.Store(0)
	c.unsubscribed, c.unsubOnce = make(chan struct{}), new(sync.Once)
	ctx, cancel := context.WithCancel(c.ctx)
	c.s.subs.Store(c.streamID, c)
	defer c.s.subs.Delete(c.streamID)
	c.s.sse.CreateStream(c.streamID)
	// r3labs reads the stream's name from the query, and Last-Event-ID
	// from the headers (which it would refuse: ours are not numbers); it
	// needs nothing else of the request.
	req := (&http.Request{Method: http.MethodGet, URL: &url.URL{RawQuery: "stream=" + url.QueryEscape(c.streamID)}, Header: http.Header{}}).WithContext(ctx)
	c.s.sse.ServeHTTP(c, req)
	c.leaveLive()
	cancel()
	// ServeHTTP subscribed before it returned; its close watcher
	// unsubscribes now that ctx is cancelled.
	select {
	case <-c.unsubscribed:
	case <-time.After(5 * time.Second):
		c.s.log.Error("sse subscriber did not unsubscribe; leaving its stream", "stream", c.streamID)
		return false
	}
	c.s.sse.RemoveStream(c.streamID)
	return true
}

// Flush is called by r3labs after the response's headers and after every
// event with content. Each flush is a write system call, the largest
// single CPU cost of a streamed turn, so it flushes only once the events
// handed over are all written: frames that queue up (a burst from the
// model, a connection catching up, a busy machine) leave in one write.
// Then it publishes the next frames: at once when the log has some (their
// flush carries these bytes too), or after a flush and a wait for the
// turn's next frame. No frame waits for a later one to be made.
//
// The response's last frames are the exception: they are not flushed
// (flushEnd), and leave with the response's end when the handler returns.
func (c *sseConn) Flush() {
	if c.counting {
		c.written++
		if c.written < c.published.Load() {
			return
		}
	}
	c.counting = true
	if c.sessionOver {
		c.flushEnd()
		return
	}
	if c.wentLive && c.liveFlush() {
		return
	}
	if len(c.out) == 0 {
		c.poll(false, nil)
	}
	if len(c.out) > 0 {
		c.publishOut()
		return
	}
	c.flush()
	if c.goLive() {
		return
	}
	c.linger.Reset(c.s.linger())
	for len(c.out) == 0 {
		switch c.poll(true, c.linger.C) {
		case pollGone:
			// r3labs' close watcher ends ServeHTTP.
			c.sessionOver = true
			return
		case pollTick:
			// Idle: end the session, not the response.
			c.sessionOver = true
			c.s.sse.Publish(c.streamID, &sse.Event{})
			return
		}
	}
	c.publishOut()
}

// flushEnd flushes what a session that is over wrote, unless the response
// is over too: then net/http writes those bytes and the chunked encoding's
// end in one write when the handler returns. A client that stops reading
// at [DONE] (the load harness does) then finds the response
// complete and can keep the connection for its next request; had [DONE]
// gone out alone, the end would come a few goroutine hand-overs later
// (r3labs' session ends first), the client would close the connection
// unfinished, and open a new one for its next turn. It is a write system
// call less per response, too. The turn's last frames come with its end
// (turn.addLast), so a response's end is known when they are written.
func (c *sseConn) flushEnd() {
	if !c.ended {
		c.flush()
	}
}

func (c *sseConn) flush() { c.ResponseWriter.(http.Flusher).Flush() }

// publishOut hands the queued events to r3labs.
func (c *sseConn) publishOut() {
	for _, ev := range c.out {
		if len(ev.Data) > 0 || len(ev.Comment) > 0 {
			c.published.Add(1)
		} else {
			c.sessionOver = true
		}
		c.s.sse.Publish(c.streamID, ev)
	}
	clear(c.out)
	c.out = c.out[:0]
}

// What poll found.
const (
	pollNone   = iota // nothing at hand (wait false)
	pollEvents        // events to publish are queued in out
	pollTick          // the tick fired with nothing to send
	pollGone          // the client left
)

// poll queues what comes next in out: frames of the log (at most
// maxBurst), or the frames that end the response. With wait false it
// queues only what is at hand.
func (c *sseConn) poll(wait bool, tick <-chan time.Time) int {
	frames, done, err := c.src.next(c.ctx, c.after, wait, tick, c.s.closing)
	switch {
	case err != nil:
		c.closeWith(err)
	case len(frames) > 0:
		c.queue(frames)
	case done:
		c.end()
	case !wait:
		return pollNone
	case c.ctx.Err() != nil:
		c.ended = true
		return pollGone
	case isClosed(c.s.closing):
		c.closeWith(errShutdown)
	default:
		return pollTick
	}
	return pollEvents
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
	c.heartbeat.Reset(c.s.cfg.Heartbeat)
}

// end queues the empty event that ends the response.
func (c *sseConn) end() {
	c.out = append(c.out, &sse.Event{})
	c.ended = true
}

// closeWith sends frames that are not in the turn's log (so they carry no
// ID) and ends the response. finish and [DONE] follow only when the turn is
// surely over and its session free: it was abandoned (and recovered under
// its lease) or its session deleted. Otherwise (the shared log unreadable,
// the server shutting down before the turn ended, frames lost) the turn may
// still hold its session, and a client told it finished would get 409 for
// its next message: it may resume instead.
func (c *sseConn) closeWith(e *chat.Error) {
	c.out = append(c.out, &sse.Event{Data: mustJSON(uiChunk{Type: "error", ErrorText: e.Code + ": " + e.Message})})
	if e == errTurnGone || e.Code == errAbandoned.Code {
		c.out = append(c.out, &sse.Event{Data: mustJSON(uiChunk{Type: "finish", FinishReason: "error"})}, &sse.Event{Data: doneData})
	}
	c.end()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
