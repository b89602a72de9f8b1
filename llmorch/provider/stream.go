package provider

import (
	"bufio"
	"context"
	"errors"
	"io"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// Stream runs one model call; see the package documentation for what it
// yields and how it fails.
func (m *model) Stream(ctx context.Context, req llmorch.Request) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		if m.cfg.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, m.cfg.Timeout)
			defer cancel()
		}
		var base callState
		msgs, opts, err := m.convert(req, &base)
		if err != nil {
			yield(chat.Event{}, m.fail(CodeInvalidRequest, false, "%s", err.Error()))
			return
		}
		for attempt := 1; ; attempt++ {
			if ctx.Err() != nil {
				yield(chat.Event{}, m.ctxFailure(ctx))
				return
			}
			st := base
			emitted, stopped, cerr := m.attempt(ctx, &st, msgs, opts, req, yield)
			if stopped || cerr == nil {
				return
			}
			if emitted || !cerr.retryable || attempt > m.cfg.MaxRetries {
				if attempt > 1 {
					cerr.ce.Message += " (after " + itoa(attempt) + " attempts)"
				}
				yield(chat.Event{}, cerr)
				return
			}
			limit := m.cfg.MaxRetryDelay
			if req.RetryWait > 0 && req.RetryWait < limit {
				limit = req.RetryWait
			}
			wait, ok := m.backoff(attempt, cerr.retryAfter, limit)
			if !ok {
				cerr.ce.Message += " (asked to wait " + cerr.retryAfter.Round(time.Millisecond).String() +
					", over the limit of " + limit.String() + ")"
				yield(chat.Event{}, cerr)
				return
			}
			if !m.sleep(ctx.Done(), wait) {
				yield(chat.Event{}, m.ctxFailure(ctx))
				return
			}
		}
	}
}

// backoff returns the wait before the next attempt: the server's
// Retry-After when given (false when it is over limit: MaxRetryDelay, or
// the request's RetryWait), else an exponential delay with jitter,
// bounded by limit.
func (m *model) backoff(attempt int, retryAfter, limit time.Duration) (time.Duration, bool) {
	if retryAfter > 0 {
		return retryAfter, retryAfter <= limit
	}
	d := m.cfg.RetryBaseDelay << (attempt - 1)
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	return min(d, limit), true
}

// attempt sends the request once and streams the answer. emitted says
// whether anything was yielded, stopped whether the consumer stopped.
func (m *model) attempt(ctx context.Context, st *callState, msgs []llms.MessageContent, opts []llms.CallOption,
	req llmorch.Request, yield func(chat.Event, error) bool) (emitted, stopped bool, cerr *callError) {
	// langchaingo builds the request; the transport takes it instead of
	// sending it, and it is sent from here, under the call's own context
	// (see callState.send).
	sctx := withState(ctx, st)
	_, lerr := m.llm.GenerateContent(sctx, msgs, opts...)
	if st.req != nil && ctx.Err() == nil {
		st.send(sctx)
	}
	if st.body != nil {
		defer st.body.Close()
	}
	// langchaingo may report success on a deadline, or an unrelated error on
	// cancellation: the context decides first.
	if ctx.Err() != nil {
		return false, false, m.ctxFailure(ctx)
	}
	switch {
	case st.body != nil:
		// The transport took the stream and answered langchaingo with a
		// stand-in (standInStatus): its error says nothing.
	case st.status != 0:
		return false, false, m.statusFailure(st)
	case st.sendErr != nil:
		return false, false, m.sendFailure(st.sendErr, "before the response")
	case lerr != nil:
		return false, false, m.fail(CodeProviderError, false, "the request could not be sent")
	default:
		return false, false, m.fail(CodeProviderError, false, "the provider sent no response")
	}

	p := &parser{m: m, yield: yield, budget: req.MaxOutputBytes}
	body := io.Reader(st.body)
	var idle *idleReader
	if m.cfg.IdleTimeout > 0 {
		idle = newIdleReader(st.body, m.cfg.IdleTimeout)
		defer idle.stop()
		body = idle
	}
	if st.contentType == "application/json" {
		p.whole(body)
	} else {
		p.stream(body)
		if !p.stopped && p.err == nil && ctx.Err() == nil {
			drainEnd(st.body)
		}
	}
	if p.stopped {
		return p.emitted, true, nil
	}
	if ctx.Err() != nil {
		return p.emitted, false, m.ctxFailure(ctx)
	}
	if idle != nil && idle.fired.Load() {
		return p.emitted, false, m.fail(CodeTimeout, true, "the provider sent nothing for %v", m.cfg.IdleTimeout)
	}
	return p.emitted, false, p.err
}

// drainWait bounds drainEnd's wait for the end of a response after its
// [DONE]; maxDrain the bytes it reads.
const (
	drainWait = 100 * time.Millisecond
	maxDrain  = 4 << 10
)

// drainEnd reads a complete stream's body to its end. net/http keeps a
// connection for the next request only when its response was read to the
// end, and a provider's last bytes (the chunked encoding's end) often come
// just after the [DONE] the parser stops at: without the drain, about one
// response in seventeen at 200 paced streams was closed before them, and
// its connection dialled again for a later turn (with a remote provider, a
// TLS handshake; TestStreamEndKeepsConnection). A response that goes on
// after [DONE] is cut after drainWait or maxDrain bytes.
func drainEnd(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	defer t.Stop()
	var buf [64]byte
	for n := 0; n < maxDrain; {
		k, err := body.Read(buf[:])
		if err != nil {
			return
		}
		n += k
	}
}

// idleReader cuts a body that stays silent for longer than its timeout:
// closing the body ends the blocked Read. A timer reset per read costs
// far less than the read.
type idleReader struct {
	body  io.ReadCloser
	d     time.Duration
	timer *time.Timer
	fired atomic.Bool
}

func newIdleReader(body io.ReadCloser, d time.Duration) *idleReader {
	r := &idleReader{body: body, d: d}
	r.timer = time.AfterFunc(d, func() {
		r.fired.Store(true)
		r.body.Close()
	})
	return r
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.body.Read(p)
	if n > 0 {
		r.timer.Reset(r.d)
	}
	return n, err
}

func (r *idleReader) stop() { r.timer.Stop() }

// errLineTooLong ends a stream whose line exceeds maxLine.
var errLineTooLong = errors.New("stream line too long")

// maxLine bounds one SSE line. langchaingo's scanner stops at 64 KiB; a
// long tool argument or text delta can exceed that, so the bound here only
// protects memory.
const maxLine = 16 << 20

// lineReader reads lines of any length up to maxLine.
type lineReader struct {
	src  io.Reader
	r    *bufio.Reader
	long []byte
	// head holds the body's first bytes: a stream waits for the model's
	// first token (seconds, for a reasoning model) holding these and no
	// buffer.
	head   [64]byte
	hr, hw int
}

// The buffer is bufio's default 4 KiB: a stream's lines are mostly small
// deltas, longer ones are assembled in long. It is taken when bytes arrive
// and given back whenever every line it held has been read (next), and by
// release: a stream waits far longer than it reads (for its first token,
// after a provider's role chunk; between tokens), and 4 KiB per waiting
// stream was the largest piece of the runtime's own heap (32 KiB was half
// the heap of 2,000 streams waiting for their first token).
func newLineReader(r io.Reader) *lineReader { return &lineReader{src: r} }

var lineBuffers = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

// start waits for the body's next bytes, then reads the rest through a
// pooled buffer.
func (l *lineReader) start() error {
	n, err := io.ReadAtLeast(l.src, l.head[:], 1)
	if err != nil {
		return err
	}
	l.hr, l.hw = 0, n
	l.r = lineBuffers.Get().(*bufio.Reader)
	l.r.Reset(l)
	return nil
}

// Read gives the buffer the head first, then the body.
func (l *lineReader) Read(p []byte) (int, error) {
	if l.hr < l.hw {
		n := copy(p, l.head[l.hr:l.hw])
		l.hr += n
		return n, nil
	}
	return l.src.Read(p)
}

// release gives the buffer back; the lines next returned are then invalid.
func (l *lineReader) release() {
	if l.r != nil {
		l.r.Reset(nil)
		lineBuffers.Put(l.r)
		l.r = nil
	}
}

// next returns the next line without its line ending. An unterminated last
// line is dropped, as SSE drops an incomplete event.
func (l *lineReader) next() ([]byte, error) {
	if l.r != nil && l.r.Buffered() == 0 {
		// The read below would wait for the model with an empty buffer:
		// wait holding the 64-byte head instead. The line returned last is
		// invalid from here on, as with any bufio read; a pool round trip
		// per read costs far less than the read.
		l.release()
	}
	if l.r == nil {
		if err := l.start(); err != nil {
			return nil, err
		}
	}
	line, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = l.r.ReadSlice('\n')
			l.long = append(l.long, line...)
			if len(l.long) > maxLine {
				return nil, errLineTooLong
			}
		}
		line = l.long
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
