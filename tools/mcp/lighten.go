package mcp

import "encoding/json"

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

// MarshalJSON writes the value as it is (a span holds JSON).
func (s span) MarshalJSON() ([]byte, error) { return s, nil }

// weight is the size in bytes of a JSON value, read without keeping it.
type weight int

func (w *weight) UnmarshalJSON(b []byte) error { *w = weight(len(b)); return nil }
