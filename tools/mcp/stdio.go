package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/tools"
)

// stdioTransport starts a stdio server's command and speaks MCP over its
// stdin and stdout (the SDK's newline-delimited JSON, IOTransport). It
// records the child's process group and its supervisor's lifeline, so that
// the server can end the child's whole tree (killGroup), and it reads the
// child's stdout through a lightReader. Closing the connection closes the
// child's stdin, then signals it as the SDK's CommandTransport does.
type stdioTransport struct {
	s   *server
	cmd *exec.Cmd
	// lifeline is the writer of the supervisor's lifeline (supervised);
	// childEnd, its reader, is the supervisor's to hold. Both nil without
	// a supervisor.
	lifeline, childEnd *os.File
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	fail := func(err error) (sdk.Connection, error) {
		if t.childEnd != nil {
			t.childEnd.Close()
		}
		if t.lifeline != nil {
			t.lifeline.Close()
		}
		return nil, err
	}
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return fail(err)
	}
	if err := t.cmd.Start(); err != nil {
		return fail(err)
	}
	if t.childEnd != nil {
		t.childEnd.Close()
	}
	t.s.mu.Lock()
	t.s.pgid, t.s.lifeline = t.cmd.Process.Pid, t.lifeline
	t.s.mu.Unlock()
	t.s.mu.Lock()
	t.s.calls = map[string]int{}
	t.s.mu.Unlock()
	io := &sdk.IOTransport{
		Reader: &lightReader{s: t.s, r: bufio.NewReaderSize(stdout, 64<<10)},
		Writer: &childInput{cmd: t.cmd, stdin: stdin},
	}
	conn, err := io.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &callConn{Connection: conn, s: t.s}, nil
}

// callConn is a stdio server's connection that notes, as each tools/call
// is sent, the result limit of the call it is for (tools.ResultLimit of
// the context the SDK writes it with: the call's), so that the
// lightReader can cut the answer to it before the SDK reads it. Over
// stdio the SDK's connection has no other methods to forward.
type callConn struct {
	sdk.Connection
	s *server
}

func (c *callConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/call" && req.ID.IsValid() {
		if id, err := json.Marshal(req.ID.Raw()); err == nil {
			c.s.noteCall(string(id), tools.ResultLimit(ctx))
		}
	}
	return c.Connection.Write(ctx, msg)
}

// maxCalls bounds the calls whose answer is awaited that a server keeps
// (a call cancelled at its timeout may never be answered).
const maxCalls = 1024

// noteCall records the result limit of the call with the JSON-RPC id.
func (s *server) noteCall(id string, limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		return
	}
	for k := range s.calls {
		if len(s.calls) < maxCalls {
			break
		}
		delete(s.calls, k)
	}
	s.calls[id] = limit
}

// takeCall returns and forgets the result limit of the call with the
// JSON-RPC id.
func (s *server) takeCall(id string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, ok := s.calls[id]
	delete(s.calls, id)
	return limit, ok
}

// awaiting reports whether any call's answer is awaited.
func (s *server) awaiting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls) > 0
}

// childInput writes to the child's stdin; closing it ends the child: its
// stdin is closed, it gets SIGTERM if it has not exited terminateAfter
// later, and SIGKILL terminateAfter after that (the MCP specification's
// shutdown of a stdio server).
type childInput struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
	err   error
}

func (c *childInput) Write(p []byte) (int, error) { return c.stdin.Write(p) }

func (c *childInput) Close() error {
	c.once.Do(func() {
		if err := c.stdin.Close(); err != nil {
			c.err = fmt.Errorf("closing stdin: %w", err)
			return
		}
		exited := make(chan error, 1)
		go func() { exited <- c.cmd.Wait() }()
		wait := func() bool {
			select {
			case c.err = <-exited:
				return true
			case <-time.After(terminateAfter):
				return false
			}
		}
		if wait() {
			return
		}
		if c.cmd.Process.Signal(syscall.SIGTERM) == nil && wait() {
			return
		}
		_ = c.cmd.Process.Kill()
		if !wait() {
			c.err = errors.New("the server's process did not exit after SIGKILL")
		}
	})
	return c.err
}

// lightReader passes a stdio server's stdout through line by line, and
// lightens the lines too long for its buffer before the SDK reads them: a
// tools/list answer loses its tools over MaxSchemaBytes (lightenLine),
// a tools/call answer is cut to its call's result limit (server.cutCall).
// The SDK would otherwise buffer such a line twice and copy it twice more
// before handing it over, then decode it, for a 10 MB schema decode,
// encode and decode it again: hundreds of megabytes for what is skipped
// or cut anyway. Other lines pass as they are.
type lightReader struct {
	s   *server
	r   *bufio.Reader
	out []byte // what is left of the current line
	err error  // the read error to report once out is handed over
}

func (l *lightReader) Read(p []byte) (int, error) {
	if len(l.out) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		line, err := l.r.ReadSlice('\n')
		list := errors.Is(err, bufio.ErrBufferFull) && bytes.Contains(line, []byte(`"tools"`))
		if errors.Is(err, bufio.ErrBufferFull) && (list || l.s.awaiting()) {
			// A long line that may be a tools/list answer (its start
			// names tools, where a tools/call answer names its content)
			// or a call's: gathered whole, up to the SDK's frame limit
			// (past it the SDK refuses the line anyway). Other long
			// lines stream through, copied no more than the SDK does.
			whole := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(whole) <= sdk.DefaultMaxLineLength {
				line, err = l.r.ReadSlice('\n')
				whole = append(whole, line...)
			}
			if err == nil && list {
				whole = l.s.lightenLine(whole)
			} else if err == nil {
				whole = l.s.cutCall(whole)
			}
			line = whole
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			l.err = err
		}
		l.out = line
		if len(l.out) == 0 {
			return 0, l.err
		}
	}
	n := copy(p, l.out)
	l.out = l.out[n:]
	return n, nil
}

func (l *lightReader) Close() error { return nil } // the child's stdin ends the connection

// weightKey is the _meta key of a content block cut by cutCall: how many
// bytes the server sent for it (render weighs the block by it).
const weightKey = "agentdock.dev/weight"

// cutCall returns a JSON-RPC line with the result of the call it answers
// cut to that call's result limit, or as it is when it answers no call
// awaited or needs no cut: a text block longer than the limit keeps the
// limit's bytes, an image's, audio's or resource's data over it goes, and
// each such block records in its _meta (weightKey) what it weighed. The
// line is read in place and the cut blocks spliced in: a long text is
// scanned, never copied whole.
func (s *server) cutCall(line []byte) []byte {
	var msg struct {
		ID     span `json:"id"`
		Result struct {
			Content []span `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.ID == nil || len(msg.Result.Content) == 0 {
		return line
	}
	limit, ok := s.takeCall(string(bytes.TrimSpace(msg.ID)))
	if !ok {
		return line
	}
	var out []byte
	done := 0 // line[:done] is in out
	for _, b := range msg.Result.Content {
		if len(b) <= limit {
			continue
		}
		cut, ok := cutBlock(b, limit)
		if !ok {
			continue
		}
		// b is line[start:start+len(b)]: a slice of line shares its end.
		start := cap(line) - cap(b)
		out = append(append(out, line[done:start]...), cut...)
		done = start + len(b)
	}
	if out == nil {
		return line
	}
	return append(out, line[done:]...)
}

// cutBlock cuts one content block (see cutCall); ok is false when it
// needs no cut or is not one it knows.
func cutBlock(raw span, limit int) (json.RawMessage, bool) {
	var blk map[string]span
	var typ string
	if json.Unmarshal(raw, &blk) != nil || json.Unmarshal(blk["type"], &typ) != nil {
		return nil, false
	}
	var weight int
	switch typ {
	case "text":
		text := blk["text"]
		if len(text) <= limit+2 {
			return nil, false
		}
		prefix, ok := stringPrefix(text, limit)
		if !ok || len(prefix) == len(text) {
			return nil, false // not a string, or its escapes decode within the limit
		}
		// The whole text is not decoded: its JSON length stands for it.
		weight = len(text) - 2
		blk["text"] = prefix
	case "image", "audio":
		if len(blk["data"]) <= limit {
			return nil, false
		}
		weight = base64.StdEncoding.DecodedLen(len(blk["data"]) - 2)
		blk["data"] = span(`""`)
	case "resource":
		var res map[string]span
		if json.Unmarshal(blk["resource"], &res) != nil {
			return nil, false
		}
		weight = max(len(res["text"])-2, 0) + base64.StdEncoding.DecodedLen(max(len(res["blob"])-2, 0))
		if weight <= limit {
			return nil, false
		}
		delete(res, "text")
		delete(res, "blob")
		var err error
		if blk["resource"], err = marshal(res); err != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	meta := map[string]any{}
	if blk["_meta"] != nil {
		if json.Unmarshal(blk["_meta"], &meta) != nil {
			meta = map[string]any{}
		}
	}
	meta[weightKey] = weight
	var err error
	if blk["_meta"], err = marshal(meta); err != nil {
		return nil, false
	}
	out, err := marshal(blk)
	if err != nil {
		return nil, false
	}
	return out, true
}

// stringPrefix returns the JSON string str cut to what decodes to at most
// n bytes, at a character boundary, in str's own bytes: nothing is decoded
// and encoded again, so the cut is never longer than str and says what the
// server said. It reads only the bytes it keeps. ok is false when str is
// not a string; str is valid JSON (its block was decoded).
func stringPrefix(str span, n int) (span, bool) {
	if len(str) < 2 || str[0] != '"' {
		return nil, false
	}
	body := str[1 : len(str)-1]
	end, decoded := 0, 0 // body[:end] decodes to decoded bytes or fewer
	for end < len(body) {
		step, size := 1, 1
		switch c := body[end]; {
		case c == '\\' && body[end+1] == 'u':
			// At most 3 bytes of UTF-8 (a lone surrogate decodes to
			// U+FFFD); a surrogate pair is kept whole, 4 bytes.
			step, size = 6, 3
			if pairAt(body[end:]) {
				step, size = 12, 4
			}
		case c == '\\':
			step = 2
		case c >= utf8.RuneSelf:
			r, w := utf8.DecodeRune(body[end:])
			step, size = w, w
			if r == utf8.RuneError && w == 1 {
				size = 3 // an invalid byte decodes to U+FFFD
			}
		}
		if decoded+size > n {
			break
		}
		end, decoded = end+step, decoded+size
	}
	return append(append(span(nil), str[:1+end]...), '"'), true
}

// pairAt reports whether b starts with the two \u escapes of a UTF-16
// surrogate pair, which decode to one 4-byte character.
func pairAt(b []byte) bool {
	return len(b) >= 12 && b[6] == '\\' && b[7] == 'u' &&
		hexIn(b[2:6], 0xD800, 0xDC00) && hexIn(b[8:12], 0xDC00, 0xE000)
}

// hexIn reports whether four hex digits are a value in [lo, hi).
func hexIn(hex []byte, lo, hi uint64) bool {
	v, err := strconv.ParseUint(string(hex), 16, 16)
	return err == nil && v >= lo && v < hi
}
