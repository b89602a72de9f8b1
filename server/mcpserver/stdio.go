package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLine bounds one line (one JSON-RPC message) read over stdio: a
// longer one is skipped, unread, and answered with an error.
const MaxStdioLine = 16 << 20

// lineTransport is MCP's stdio transport (newline-delimited JSON-RPC, one
// message a line) made to outlive what a client or a person at a terminal
// may type. The SDK's own transport ends the session at the first line it
// cannot decode; this one answers such a line with a JSON-RPC error and
// reads on, as JSON-RPC 2.0 asks of a server: a line that is not JSON
// (text, binary) gets a parse error (-32700), and JSON that is no message
// (an array, a string, a message without "jsonrpc": "2.0" or with a
// malformed ID) an invalid request error (-32600), with the message's ID
// when one can be read, else null. A line over MaxStdioLine is skipped
// unread and answered with -32600. Batches (arrays) are refused: MCP
// removed them in its 2025-06-18 revision.
type lineTransport struct {
	in  io.Reader
	out io.Writer
}

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{out: t.out, incoming: make(chan readResult), closed: make(chan struct{})}
	go c.readLines(t.in)
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

// lineConn is a lineTransport's connection.
type lineConn struct {
	writeMu sync.Mutex
	out     io.Writer

	incoming  chan readResult
	closed    chan struct{}
	closeOnce sync.Once
}

// readLines reads messages until the input ends or fails, answering the
// lines that are not messages itself. It leaks when the reader never
// returns after Close (stdin cannot be interrupted portably), as the SDK's
// transport does.
func (c *lineConn) readLines(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxStdioLine {
			line = line[:0]
			if errors.Is(err, bufio.ErrBufferFull) {
				err = skipLine(r)
			}
			c.refuse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message of more than %d bytes was skipped: send at most %d bytes a line", MaxStdioLine, MaxStdioLine))
		} else {
			line = append(line, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if msg, ok := c.decode(line); ok {
				select {
				case c.incoming <- readResult{msg: msg}:
				case <-c.closed:
					return
				}
			}
			line = line[:0]
		}
		if err != nil {
			select {
			case c.incoming <- readResult{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

// skipLine reads past the rest of a line.
func skipLine(r *bufio.Reader) error {
	for {
		_, err := r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// decode returns the message of a line, or answers a line that holds
// none (false). A blank line is skipped.
func (c *lineConn) decode(line []byte) (jsonrpc.Message, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, false
	}
	if !json.Valid(line) {
		c.refuse(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON; send one JSON-RPC message a line")
		return nil, false
	}
	var head struct {
		ID any `json:"id"`
	}
	switch line[0] {
	case '[':
		c.refuse(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not taken (MCP removed them in 2025-06-18); send one message a line")
		return nil, false
	case '{':
		_ = json.Unmarshal(line, &head)
	default:
		c.refuse(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message is a JSON object")
		return nil, false
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		var id *jsonrpc.ID
		if v, err := jsonrpc.MakeID(head.ID); err == nil && head.ID != nil {
			id = &v
		}
		c.refuse(id, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
		return nil, false
	}
	return msg, true
}

// refuse writes the error response of a line that is not a message.
func (c *lineConn) refuse(id *jsonrpc.ID, code int64, message string) {
	resp := struct {
		JSONRPC string        `json:"jsonrpc"`
		ID      any           `json:"id"`
		Error   jsonrpc.Error `json:"error"`
	}{JSONRPC: "2.0", Error: jsonrpc.Error{Code: code, Message: message}}
	if id != nil {
		resp.ID = id.Raw()
	}
	data, err := json.Marshal(resp)
	if err != nil {
		return
	}
	_ = c.writeLine(data)
}

func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	_, err := c.out.Write(append(data, '\n'))
	return err
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-c.incoming:
		return r.msg, r.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *lineConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	return c.writeLine(data)
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
