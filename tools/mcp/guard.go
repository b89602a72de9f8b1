package mcp

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// guardTransport connects like its Transport, through a guardConn.
type guardTransport struct {
	sdk.Transport
	s *server
}

func (t guardTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &guardConn{Connection: conn, s: t.s, lists: map[jsonrpc.ID]bool{}}, nil
}

// guardConn is a server's connection, with its tools/list answers
// lightened before the SDK reads them: a tool whose inputSchema and
// description are over MaxSchemaBytes is replaced by its name alone, and
// its weight recorded for the reason it is skipped (server.oversize). The
// SDK would otherwise decode such a schema, encode it and decode it again
// (filterValidTools), hundreds of megabytes for one of 10 MB, for a tool
// that is skipped anyway.
type guardConn struct {
	sdk.Connection
	s *server

	mu    sync.Mutex
	lists map[jsonrpc.ID]bool // the tools/list requests waiting for their answer
}

func (c *guardConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		c.mu.Lock()
		c.lists[req.ID] = true
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *guardConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if res, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		list := c.lists[res.ID]
		delete(c.lists, res.ID)
		c.mu.Unlock()
		// A page within the limit cannot hold a tool over it.
		if list && len(res.Result) > c.s.m.cfg.MaxSchemaBytes {
			res.Result = c.s.lighten(res.Result)
		}
	}
	return msg, err
}

// lighten returns a tools/list result with every tool over MaxSchemaBytes
// replaced by its name alone, recording its weight in s.oversize; the
// result as it is when nothing was replaced or it does not decode (the SDK
// then reports it). It reads the result in place: only what it keeps is
// copied.
func (s *server) lighten(result json.RawMessage) json.RawMessage {
	var page map[string]span
	if json.Unmarshal(result, &page) != nil {
		return result
	}
	var list []span
	if json.Unmarshal(page["tools"], &list) != nil {
		return result
	}
	limit := s.m.cfg.MaxSchemaBytes
	tools := make([]json.RawMessage, len(list))
	changed := false
	for i, raw := range list {
		tools[i] = json.RawMessage(raw)
		if len(raw) <= limit {
			continue
		}
		var t struct {
			Name        string `json:"name"`
			Description weight `json:"description"`
			InputSchema weight `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		// The description's weight counts its quotes.
		if n := int(t.InputSchema) + max(int(t.Description)-2, 0); n > limit {
			tools[i], _ = json.Marshal(map[string]any{"name": t.Name, "inputSchema": map[string]string{"type": "object"}})
			s.mu.Lock()
			if s.oversize == nil {
				s.oversize = map[string]int{}
			}
			s.oversize[t.Name] = n
			s.mu.Unlock()
			changed = true
		}
	}
	if !changed {
		return result
	}
	out := make(map[string]json.RawMessage, len(page))
	for k, v := range page {
		out[k] = json.RawMessage(v)
	}
	var err error
	if out["tools"], err = json.Marshal(tools); err != nil {
		return result
	}
	b, err := json.Marshal(out)
	if err != nil {
		return result
	}
	return b
}

// span is a JSON value as a slice of the document it was decoded from,
// not a copy: encoding/json hands an Unmarshaler the value's bytes in
// place. It is valid as long as the document is.
type span []byte

func (s *span) UnmarshalJSON(b []byte) error { *s = b; return nil }

// weight is the size in bytes of a JSON value, read without keeping it.
type weight int

func (w *weight) UnmarshalJSON(b []byte) error { *w = weight(len(b)); return nil }
