package server

import (
	"slices"
	"time"

	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/r3labs/sse/v2"
)

// A connection that has written every frame of its turn's log and waits in
// an r3labs session for the next goes live: the turn's goroutine publishes
// the frames it adds to the connection's r3labs stream itself, and r3labs'
// stream goroutine hands them to the handler, which writes them. Otherwise
// the turn woke the handler, which published the frame to r3labs, whose
// goroutine woke the handler again: a wake-up less per frame, on every
// frame's way and on the first token's.
//
// The turn never waits for a live connection: it publishes with
// TryPublish, and a connection whose r3labs buffers are full (a slow
// client) stops being live and reads the log again from the frame after
// the last it wrote (liveFlush), as every connection does that is not live.
// A live connection stops being live, too, when its turn ends (the turn
// publishes the response's end after its last frame), after sseLinger
// without a frame (the linger check ends its r3labs session, which goes
// back to waiting without r3labs' goroutines), and when r3labs' session
// ends (the client left).
//
// Which frames a live connection wrote is counted, not recorded: it went
// live having written every frame up to liveFrom, and the turn publishes
// each frame after that, in order, once; so the frames it has written are
// those up to liveFrom plus the events it wrote since.

// goLive makes the connection live when it has written every frame of a
// turn this replica runs that has not ended: true when it did, and the
// handler's Flush returns without waiting.
func (c *sseConn) goLive() bool {
	t, ok := c.src.(*turn)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || t.nextSeq-1 != c.after || c.ctx.Err() != nil {
		return false
	}
	t.live = append(t.live, c)
	c.live, c.lingered, c.endPushed = true, false, false
	c.lastPush = time.Now()
	c.wentLive, c.liveFrom, c.liveWritten = true, c.after, c.written
	d := c.s.linger()
	if c.liveTimer == nil {
		c.liveTimer = time.AfterFunc(d, c.lingerCheck)
	} else {
		c.liveTimer.Reset(d)
	}
	return true
}

// liveFlush is Flush for a connection that went live, once it has written
// every event handed over: true when Flush is done (the connection is
// still live, or its session ends with the event r3labs reads next);
// false when it fell behind, and Flush goes on to read the log.
func (c *sseConn) liveFlush() bool {
	t := c.src.(*turn)
	t.mu.Lock()
	// The turn counts an event after TryPublish took it, under mu, so
	// r3labs may write it (and Flush compare the counts) before it is
	// counted. Read under mu, the count has every event TryPublish took:
	// one still on its way means more Flushes to come, and a connection
	// that fell behind settles only once it has written all it was given
	// (otherwise it would publish them again, and Publish could block on
	// buffers only it drains).
	if c.written < c.published.Load() {
		t.mu.Unlock()
		return true
	}
	live, lingered, ended := c.live, c.lingered, c.endPushed
	t.mu.Unlock()
	if live {
		c.flush()
		return true
	}
	c.settleLive()
	if lingered || ended {
		c.ended = ended
		c.sessionOver = true
		c.flushEnd()
		return true
	}
	return false
}

// settleLive takes the connection's position in the log from the events it
// wrote while live.
func (c *sseConn) settleLive() {
	c.after = c.liveFrom + (c.written - c.liveWritten)
	c.wentLive = false
	c.heartbeat.Reset(c.s.cfg.Heartbeat)
}

// leaveLive ends the connection's live state as its r3labs session ends.
func (c *sseConn) leaveLive() {
	if !c.wentLive {
		return
	}
	t := c.src.(*turn)
	t.mu.Lock()
	if c.live {
		t.removeLive(c)
	}
	ended := c.endPushed
	t.mu.Unlock()
	c.liveTimer.Stop()
	c.settleLive()
	c.ended = c.ended || ended
}

// lingerCheck ends a live connection's r3labs session after sseLinger
// without a frame; it runs on the live timer.
func (c *sseConn) lingerCheck() {
	t := c.src.(*turn)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.live {
		return
	}
	d := c.s.linger()
	if idle := time.Since(c.lastPush); idle < d {
		c.liveTimer.Reset(d - idle)
		return
	}
	t.removeLive(c)
	// The empty event ends the session after the frames before it. The
	// stream's buffer is empty after a second without a frame; should it
	// not be, the handler reads the log again and lingers by itself.
	c.lingered = c.s.sse.TryPublish(c.streamID, &sse.Event{})
}

// publishLive publishes the last n frames to the live connections; t.mu is
// held.
func (t *turn) publishLive(n int) {
	frames := t.frames[len(t.frames)-n:]
	now := time.Now()
	for i := 0; i < len(t.live); {
		c := t.live[i]
		ok := true
		for _, f := range frames {
			if ok = c.s.sse.TryPublish(c.streamID, c.event(f)); !ok {
				break
			}
			c.published.Add(1)
		}
		if !ok {
			// Behind: it reads the log from its last written frame.
			t.removeLive(c)
			continue
		}
		c.lastPush = now
		i++
	}
}

// frameEvent is an event and the bytes of its ID, in one allocation.
type frameEvent struct {
	ev sse.Event
	id [48]byte
}

// event is f's event for r3labs; every publish needs an event of its own.
func (c *sseConn) event(f frame) *sse.Event {
	e := new(frameEvent)
	e.ev.ID = wire.AppendEventID(e.id[:0], c.turnID, f.seq, restartsUpTo(c.restarts, f.seq))
	e.ev.Data = f.data
	return &e.ev
}

// endLive publishes the response's end to the live connections, after the
// turn's last frame; t.mu is held.
func (t *turn) endLive() {
	for _, c := range t.live {
		c.live = false
		c.endPushed = c.s.sse.TryPublish(c.streamID, &sse.Event{})
	}
	clear(t.live)
	t.live = t.live[:0]
}

// removeLive drops c from the live connections; t.mu is held.
func (t *turn) removeLive(c *sseConn) {
	c.live = false
	if i := slices.Index(t.live, c); i >= 0 {
		t.live = slices.Delete(t.live, i, i+1)
	}
}
