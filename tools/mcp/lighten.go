package mcp

import (
	"bytes"
	"encoding/json"
)

// lightenLine returns a JSON-RPC line with every tool of its tools/list
// result that is over MaxSchemaBytes replaced by its name alone, recording
// its weight in s.oversize; the line as it is when it is no such answer or
// nothing was replaced (the SDK then reads it, and reports it if it is
// bad). It reads the line in place and splices the stubs in: only what it
// writes is copied.
func (s *server) lightenLine(line []byte) []byte {
	var msg struct {
		ID     span `json:"id"`
		Result struct {
			Tools []span `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.ID == nil {
		return line
	}
	limit := s.m.cfg.MaxSchemaBytes
	var out []byte
	done := 0 // line[:done] is in out
	for _, raw := range msg.Result.Tools {
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
		n := int(t.InputSchema) + max(int(t.Description)-2, 0)
		if n <= limit {
			continue
		}
		stub, err := marshal(map[string]any{"name": t.Name, "inputSchema": map[string]string{"type": "object"}})
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.oversize == nil {
			s.oversize = map[string]int{}
		}
		s.oversize[t.Name] = n
		s.mu.Unlock()
		// raw is line[start:start+len(raw)]: a slice of line shares its end.
		start := cap(line) - cap(raw)
		out = append(append(out, line[done:start]...), stub...)
		done = start + len(raw)
	}
	if out == nil {
		return line
	}
	return append(out, line[done:]...)
}

// marshal is json.Marshal without its HTML escaping: what is encoded again
// of a server's line keeps the server's characters (json.Marshal would
// write each &, < and > as six bytes, in the spans it copies too).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// span is a JSON value as a slice of the document it was decoded from,
// not a copy: encoding/json hands an Unmarshaler the value's bytes in
// place. It is valid as long as the document is.
type span []byte

func (s *span) UnmarshalJSON(b []byte) error { *s = b; return nil }

// MarshalJSON writes the value as it is (a span holds JSON).
func (s span) MarshalJSON() ([]byte, error) { return s, nil }

// weight is the size in bytes of a JSON value, read without keeping it.
type weight int

func (w *weight) UnmarshalJSON(b []byte) error { *w = weight(len(b)); return nil }
