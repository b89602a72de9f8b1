package door

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/turns"
)

// EventStream is the one small writer of the doors' SSE responses (every
// door but the web chat's, which r3labs/sse writes): a "data:" line per
// event, flushed as it is written. Its zero value is not usable: Open
// makes one.
type EventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     bytes.Buffer
	started bool
	failed  bool
}

// Open prepares an SSE response on w; its headers (and status 200) go
// with the first event, so that an error found before it can still be
// answered otherwise. The stream has no deadline: the http.Server's
// WriteTimeout and ReadTimeout would cut a long one.
func Open(w http.ResponseWriter) *EventStream {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	return &EventStream{w: w, rc: rc}
}

// Header is the response's header, to set before the first event.
func (s *EventStream) Header() http.Header { return s.w.Header() }

// Started reports whether the stream's headers are out: after it, an
// error can only be told as an event.
func (s *EventStream) Started() bool { return s.started }

// Send writes and flushes events, each v as one JSON "data:" line; it
// reports false once the client is gone.
func (s *EventStream) Send(vs ...any) bool {
	s.buf.Reset()
	for _, v := range vs {
		data, err := json.Marshal(v)
		if err != nil {
			continue
		}
		s.buf.WriteString("data: ")
		s.buf.Write(data)
		s.buf.WriteString("\n\n")
	}
	return s.write(true)
}

// SendNamed writes and flushes one event of the given SSE event name.
func (s *EventStream) SendNamed(name string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		return !s.failed
	}
	s.buf.Reset()
	s.buf.WriteString("event: ")
	s.buf.WriteString(name)
	s.buf.WriteString("\ndata: ")
	s.buf.Write(data)
	s.buf.WriteString("\n\n")
	return s.write(true)
}

// Last writes the stream's last line ("data: [DONE]", say) without a
// flush: the handler returns right after, and net/http writes it with the
// response's end in one write, so that a client that stops reading there
// finds the response whole and keeps its connection.
func (s *EventStream) Last(data string) {
	s.buf.Reset()
	s.buf.WriteString("data: ")
	s.buf.WriteString(data)
	s.buf.WriteString("\n\n")
	s.write(false)
}

// Heartbeat writes an SSE comment, which keeps proxies from closing an
// idle stream.
func (s *EventStream) Heartbeat() bool {
	s.buf.Reset()
	s.buf.WriteString(": heartbeat\n\n")
	return s.write(true)
}

func (s *EventStream) write(flush bool) bool {
	if s.failed {
		return false
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		s.failed = true
		return false
	}
	if flush && s.rc.Flush() != nil {
		s.failed = true
	}
	return !s.failed
}

// Follow calls fn for each event of t after seq after, in order, until
// the turn's Done or an error: ctx's, the runtime's shutdown
// (Runtime.StreamEnd) or one that ended the reading (a *chat.Error:
// turns.ErrHandedOver when the turn goes on on another replica).
// tick, when not nil, is called when every has passed without an event,
// for a heartbeat.
func Follow(ctx context.Context, rt *turns.Runtime, t *turns.Turn, after int64, every time.Duration, fn func(chat.Event), tick func()) error {
	hb := time.NewTicker(every)
	defer hb.Stop()
	for {
		events, done, cerr := t.Next(ctx, after, hb.C, rt.Closing())
		if cerr != nil {
			return cerr
		}
		for _, ev := range events {
			fn(ev)
			after = ev.Seq
			if ev.Kind == chat.KindDone {
				return nil
			}
		}
		switch {
		case len(events) > 0:
		case done:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case isClosed(rt.Closing()):
			return rt.StreamEnd()
		case tick != nil:
			tick()
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
