package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"
)

// turnTimes is one turn as the client saw it, on the harness's monotonic
// clock.
type turnTimes struct {
	// sent is when the request was fully written to the connection.
	sent time.Time
	// first is when the first text delta (runtime) or content chunk
	// (direct) was read.
	first time.Time
	end   time.Time
	// deltas counts text-delta frames (runtime) or content chunks (direct).
	deltas int
	tools  int
	// busy counts attempts refused with session_busy before this one.
	busy int
}

// sseScanner reads SSE data lines; comment and id lines are skipped.
type sseScanner struct {
	r *bufio.Reader
	// lazy: read every pause rather than as soon as data comes (Load's
	// ReadPause, after the turn's first text).
	lazy  bool
	pause time.Duration
	sleep func(time.Duration) // time.Sleep when nil; tests count the pauses
}

// next returns the payload of the next "data:" line, or io.EOF. When
// the scanner is lazy and no whole line is left of what was read, it
// sleeps for its pause first: the read then takes what came in the
// meantime at once.
func (s *sseScanner) next() ([]byte, error) {
	for {
		if s.lazy && s.pause > 0 {
			if b, _ := s.r.Peek(s.r.Buffered()); bytes.IndexByte(b, '\n') < 0 {
				if s.sleep != nil {
					s.sleep(s.pause)
				} else {
					time.Sleep(s.pause)
				}
			}
		}
		line, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A frame longer than the buffer: collect it whole, copying
			// its start before the buffer is read over.
			head := append([]byte(nil), line...)
			var rest []byte
			rest, err = s.r.ReadBytes('\n')
			line = append(head, rest...)
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.TrimPrefix(d, []byte(" ")), nil
		}
	}
}

var (
	uiTextDelta = []byte(`"type":"text-delta"`)
	uiToolInput = []byte(`"type":"tool-input-available"`)
	uiError     = []byte(`"type":"error"`)
	uiFinish    = []byte(`"type":"finish"`)
	oaContent   = []byte(`"content":"tok`)
	done        = []byte("[DONE]")
)

// readUIStream reads an AI SDK UI message stream to its [DONE], checking
// that it finished with reason stop. onFirst, when set, is called at the
// first frame (the stream is open). After the first text, it reads lazily
// (sseScanner), every pause (Load's ReadPause).
func readUIStream(body io.Reader, tt *turnTimes, pause time.Duration, onFirst func()) error {
	s := sseScanner{r: bufio.NewReaderSize(body, 16<<10), pause: pause}
	var finish, errText string
	frames := 0
	for {
		s.lazy = tt.deltas > 0
		d, err := s.next()
		if err != nil {
			return fmt.Errorf("stream ended before [DONE] after %d frames: %w", frames, err)
		}
		frames++
		if frames == 1 && onFirst != nil {
			onFirst()
		}
		switch {
		case bytes.Equal(d, done):
			tt.end = time.Now()
			if finish != "stop" {
				if errText != "" {
					return fmt.Errorf("turn finished with %q: %s", finish, errText)
				}
				return fmt.Errorf("turn finished with %q, want stop", finish)
			}
			return nil
		case bytes.Contains(d, uiTextDelta):
			if tt.deltas == 0 {
				tt.first = time.Now()
			}
			tt.deltas++
		case bytes.Contains(d, uiToolInput):
			tt.tools++
		case bytes.Contains(d, uiError):
			var f struct {
				ErrorText string `json:"errorText"`
			}
			if err := json.Unmarshal(d, &f); err != nil {
				return fmt.Errorf("error frame %q: %w", d, err)
			}
			errText = f.ErrorText
		case bytes.Contains(d, uiFinish):
			var f struct {
				FinishReason string `json:"finishReason"`
			}
			if err := json.Unmarshal(d, &f); err != nil {
				return fmt.Errorf("finish frame %q: %w", d, err)
			}
			finish = f.FinishReason
		}
	}
}

// readOpenAIStream reads an OpenAI chat completions stream to its [DONE],
// pausing as readUIStream does.
func readOpenAIStream(body io.Reader, tt *turnTimes, pause time.Duration) error {
	s := sseScanner{r: bufio.NewReaderSize(body, 16<<10), pause: pause}
	for {
		s.lazy = tt.deltas > 0
		d, err := s.next()
		if err != nil {
			return fmt.Errorf("model stream ended before [DONE]: %w", err)
		}
		switch {
		case bytes.Equal(d, done):
			tt.end = time.Now()
			return nil
		case bytes.Contains(d, oaContent):
			if tt.deltas == 0 {
				tt.first = time.Now()
			}
			tt.deltas++
		}
	}
}

// traced adds a trace that notes when the request was written.
func traced(ctx context.Context, tt *turnTimes) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { tt.sent = time.Now() },
	})
}

// errBusy is the server's 409 session_busy.
var errBusy = errors.New("session busy")

// busyRetries bounds the retries of a turn refused with session_busy. The
// server releases a session's lease after the stream's [DONE], so a client
// that sends its next turn at once can find the session still busy for a
// store round trip.
const busyRetries = 50

// runtimeTurn runs one chat turn through the runtime, retrying while the
// session is still busy with the previous turn (counted in tt.busy).
func runtimeTurn(ctx context.Context, hc *http.Client, base, sessionID, message string, pause time.Duration, onOpen func()) (turnTimes, error) {
	var tt turnTimes
	body, _ := json.Marshal(map[string]string{"message": message, "sessionId": sessionID})
	for {
		err := runtimeAttempt(ctx, hc, base, body, &tt, pause, onOpen)
		if !errors.Is(err, errBusy) || tt.busy >= busyRetries {
			return tt, err
		}
		tt.busy++
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return tt, ctx.Err()
		}
	}
}

func runtimeAttempt(ctx context.Context, hc *http.Client, base string, body []byte, tt *turnTimes, pause time.Duration, onOpen func()) error {
	req, err := http.NewRequestWithContext(traced(ctx, tt), http.MethodPost, base+"/api/chat/"+agentID, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("chat request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("chat request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("chat answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
		if resp.StatusCode == http.StatusConflict && bytes.Contains(b, []byte("session_busy")) {
			err = fmt.Errorf("%w: %w", errBusy, err)
		}
		return err
	}
	return readUIStream(resp.Body, tt, pause, onOpen)
}

// directTurn sends body (a request the runtime sent, with its marker
// replaced) straight to the mock, reading its answer as readOpenAIStream
// does.
func directTurn(ctx context.Context, hc *http.Client, mockURL string, body []byte, pause time.Duration) (turnTimes, error) {
	var tt turnTimes
	req, err := http.NewRequestWithContext(traced(ctx, &tt), http.MethodPost, mockURL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return tt, fmt.Errorf("model request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer loadtest")
	req.Header.Set("X-Loadtest-Direct", "1")
	resp, err := hc.Do(req)
	if err != nil {
		return tt, fmt.Errorf("model request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return tt, fmt.Errorf("mock answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return tt, readOpenAIStream(resp.Body, &tt, pause)
}

// remark replaces the marker ID in a sampled request body.
func remark(body []byte, kind Kind, id string) ([]byte, error) {
	oldKind, old, ok := parseMarker(body)
	if !ok {
		return nil, fmt.Errorf("sampled request has no marker")
	}
	return bytes.Replace(body, []byte(marker(oldKind, old)), []byte(marker(kind, id)), 1), nil
}

func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}
