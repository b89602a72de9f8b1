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
	"github.com/gin-gonic/gin"
	"github.com/r3labs/sse/v2"
)

// Streams go out through github.com/r3labs/sse/v2, used so that none of its
// traps applies (docs/api.md, "Implementation notes"):
//
//   - AutoReplay is off: its replay log grows without bound, renumbers our
//     event IDs to 0, 1, 2 ... and replays Last-Event-ID inclusively. The
//     turn's own bounded log (turn.frames) is the replay source instead.
//   - One sse stream per connection, not per turn: in a shared stream one
//     slow subscriber stalls every other, and a shared stream cannot give
//     each reconnecting client a different starting point. Each connection
//     gets a publisher goroutine that reads the turn's log from the client's
//     position; the turn itself never waits for any client.
//   - Our IDs ("<turnId>:<seq>") are not numbers, which its ServeHTTP answers
//     with 400, so Last-Event-ID is parsed here and removed from the request
//     handed to it; its 500 for unknown streams never happens because the
//     stream is created just before.
//   - An event with empty data ends its response: frames never have empty
//     data (JSON objects or [DONE]); an empty event is published on purpose
//     to end the response once the turn's last frame went out. Heartbeats are
//     comment events.
//   - RemoveStream with a subscriber still registered leaks a goroutine: the
//     stream is removed only after OnUnsubscribe reported the subscriber gone.
//   - Publishing one *sse.Event to two streams is a data race: every publish
//     gets a new event.

// sseConn tracks one connection's subscription to its sse stream.
type sseConn struct {
	subscribed, unsubscribed chan struct{}
	subOnce, unsubOnce       sync.Once
}

// flushWriter is the response writer r3labs/sse writes one connection's
// events to. r3labs flushes after every event, and each flush is a write
// system call, the largest single CPU cost of a streamed turn. flushWriter
// skips a flush while events the publisher has already handed over are
// still on their way to the writer: the flush after the last of them
// carries this one's bytes too. So frames that queue up (a burst from the
// model, a connection catching up, a busy machine) leave in one write,
// and a frame that is the newest one is flushed at once, as before: no
// frame waits for a later one.
type flushWriter struct {
	http.ResponseWriter
	// published counts the events with content handed to r3labs; each
	// makes its writer call Flush once, after the headers' first Flush.
	published atomic.Int64
	// written counts those flushes; only the writer goroutine uses it.
	written     int64
	headersSent bool
}

func (w *flushWriter) Flush() {
	if w.headersSent {
		w.written++
		if w.written < w.published.Load() {
			return
		}
	}
	w.headersSent = true
	w.ResponseWriter.(http.Flusher).Flush()
}

func newSSE(s *Server) *sse.Server {
	srv := sse.NewWithCallback(
		func(id string, _ *sse.Subscriber) {
			if v, ok := s.subs.Load(id); ok {
				c := v.(*sseConn)
				c.subOnce.Do(func() { close(c.subscribed) })
			}
		},
		func(id string, _ *sse.Subscriber) {
			if v, ok := s.subs.Load(id); ok {
				c := v.(*sseConn)
				c.unsubOnce.Do(func() { close(c.unsubscribed) })
			}
		})
	srv.AutoReplay = false
	srv.AutoStream = false
	// The turn's log is the buffer; the stream's channel only decouples the
	// publisher from the writer.
	srv.BufferSize = 64
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
	// next returns the frames after seq `after`, waiting for some until the
	// turn ends, tick fires, stop is closed or ctx ends (then it returns
	// none and done false). A non-nil error ends the connection with it:
	// the frames cannot be served.
	next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) (frames []frame, done bool, err *chat.Error)
}

func (t *turn) ids() (string, string) { return t.sessionID, t.id }

func (t *turn) next(ctx context.Context, after int64, tick <-chan time.Time, stop <-chan struct{}) ([]frame, bool, *chat.Error) {
	for {
		frames, done, gap, changed := t.read(after)
		switch {
		case gap:
			return nil, false, errGap
		case len(frames) > 0 || done:
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
// shutdown.
func (s *Server) streamTurn(c *gin.Context, src source, after int64) {
	defer s.cfg.Telemetry.TrackStream(c.Request.Context(), "chat")()
	w := c.Writer
	// The http.Server's WriteTimeout (and a ReadTimeout, if one is set) would
	// cut a long stream: this stream has no deadline.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	streamHeaders(w.Header(), src)

	_, turnID := src.ids()
	streamID := turnID + "/" + strconv.FormatInt(s.connSeq.Add(1), 10)
	conn := &sseConn{subscribed: make(chan struct{}), unsubscribed: make(chan struct{})}
	s.subs.Store(streamID, conn)
	defer s.subs.Delete(streamID)
	s.sse.CreateStream(streamID)

	ctx, cancel := context.WithCancel(c.Request.Context())
	req := c.Request.Clone(ctx)
	req.URL.RawQuery = url.Values{"stream": {streamID}}.Encode()
	req.Header.Del("Last-Event-ID")

	fw := &flushWriter{ResponseWriter: w}
	published := make(chan struct{})
	go func() {
		defer close(published)
		s.publish(ctx, streamID, conn, fw, src, after)
	}()
	s.sse.ServeHTTP(fw, req)
	cancel()
	<-published
	select {
	case <-conn.subscribed:
		select {
		case <-conn.unsubscribed:
		case <-time.After(5 * time.Second):
			s.log.Error("sse subscriber did not unsubscribe; leaving its stream", "stream", streamID)
			return
		}
	default:
	}
	s.sse.RemoveStream(streamID)
}

// publish feeds one connection's sse stream from src.
func (s *Server) publish(ctx context.Context, streamID string, conn *sseConn, fw *flushWriter, src source, after int64) {
	select {
	case <-conn.subscribed:
	case <-ctx.Done():
		return
	}
	defer src.attach()()
	_, turnID := src.ids()
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	pub := func(ev *sse.Event) {
		if len(ev.Data) > 0 || len(ev.Comment) > 0 {
			// Counted before it is handed over, so that the writer never
			// takes an event for the last one while this one is coming.
			fw.published.Add(1)
		}
		s.sse.Publish(streamID, ev)
	}
	// closeWith sends frames that are not in the turn's log (so they carry no
	// ID) and ends the response. finish and [DONE] follow only when the turn
	// is surely over and its session free: it was abandoned (and recovered
	// under its lease) or its session deleted. Otherwise (the shared log
	// unreadable, the server shutting down before the turn ended, frames
	// lost) the turn may still hold its session, and a client told it
	// finished would get 409 for its next message: it may resume instead.
	closeWith := func(e *chat.Error) {
		pub(&sse.Event{Data: mustJSON(uiChunk{Type: "error", ErrorText: e.Code + ": " + e.Message})})
		if e == errTurnGone || e.Code == errAbandoned.Code {
			pub(&sse.Event{Data: mustJSON(uiChunk{Type: "finish", FinishReason: "error"})})
			pub(&sse.Event{Data: doneData})
		}
		pub(&sse.Event{})
	}
	for {
		frames, done, err := src.next(ctx, after, hb.C, s.closing)
		if err != nil {
			closeWith(err)
			return
		}
		for _, f := range frames {
			if ctx.Err() != nil {
				return
			}
			pub(&sse.Event{ID: []byte(wire.EventID(turnID, f.seq)), Data: f.data})
			after = f.seq
		}
		switch {
		case len(frames) > 0:
			hb.Reset(s.cfg.Heartbeat)
		case done:
			pub(&sse.Event{})
			return
		case ctx.Err() != nil:
			return
		case isClosed(s.closing):
			closeWith(errShutdown)
			return
		default:
			pub(&sse.Event{Comment: []byte("heartbeat")})
		}
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
