// Package jsonpos turns encoding/json errors into messages that say where in
// the input the problem is, as 1-based line and column, because a byte
// offset means nothing to a person editing a file.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Position converts a byte offset into a 1-based line and column; columns
// count characters, and the offset's own character is included, so for a
// syntax error the column points at the offending character.
func Position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len([]rune(string(before[bytes.LastIndexByte(before, '\n')+1:])))
	return line, max(col, 1)
}

// Describe explains a decoding error of data with its position. fallback is
// the decoder's input offset, used for errors that carry none (pass -1 when
// unknown). A value of the wrong type is named by its path with array
// indices, e.g. steps[2].conditions[0].window.
func Describe(data []byte, err error, fallback int64) string {
	return DescribeWith(data, err, fallback, Path.String)
}

// DescribeWith is Describe with the path of a wrongly typed value rendered
// by format, so that a caller can name what the path points at (a template
// names the step).
func DescribeWith(data []byte, err error, fallback int64, format func(Path) string) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := Position(data, syn.Offset)
		return fmt.Sprintf("line %d, column %d: malformed JSON: %s", line, col, syn.Error())
	case errors.As(err, &typ):
		offset, field := typ.Offset, typ.Field
		if path, start, ok := Locate(data, typ); ok {
			// Position counts the offset's own character: +1 points at
			// the value's first one.
			offset, field = start+1, format(path)
		}
		if field == "" {
			field = "(top level)"
		}
		line, col := Position(data, offset)
		return fmt.Sprintf("line %d, column %d: %s: expected %s, found a JSON %s", line, col, field, typ.Type, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		line, col := Position(data, int64(len(data)))
		return fmt.Sprintf("line %d, column %d: malformed JSON: unexpected end of JSON input", line, col)
	case fallback >= 0:
		line, col := Position(data, fallback)
		return fmt.Sprintf("near line %d, column %d: %s", line, col, err)
	}
	return err.Error()
}

// Elem is one step of a Path: an object member (Key) or, when Index >= 0,
// an array element.
type Elem struct {
	Key   string
	Index int
}

// Path locates a value in a JSON document.
type Path []Elem

// String renders p as steps[2].conditions[0].window.
func (p Path) String() string {
	var b strings.Builder
	for _, e := range p {
		if e.Index >= 0 {
			fmt.Fprintf(&b, "[%d]", e.Index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
	}
	return b.String()
}

// keys renders p's member names only, as encoding/json names a field.
func (p Path) keys() string {
	var b strings.Builder
	for _, e := range p {
		if e.Index >= 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
	}
	return b.String()
}

// Locate finds the value a type error is about: its path, with array
// indices, and the offset where it starts. encoding/json names the field
// without indices, and a type that decodes itself (UnmarshalJSON) reports
// offsets relative to its own part of the input, so neither the name nor
// the offset alone finds the value. Locate takes the first value in
// document order whose member names are the error's field and whose JSON
// kind is the one found, which is the value the decoder stopped at: it
// decodes in document order and keeps the first type error.
func Locate(data []byte, typ *json.UnmarshalTypeError) (Path, int64, bool) {
	var found Path
	start := int64(-1)
	walk(data, func(p Path, kind string, at int64) bool {
		if p.keys() == typ.Field && strings.HasPrefix(typ.Value, kind) {
			found, start = slices.Clone(p), at
			return false
		}
		return true
	})
	return found, start, start >= 0
}

// Find returns the offset where the value at path p starts, for messages
// about a value that decoded well but is wrong (a missing field's object, an
// empty list). Paths are compared by their elements.
func Find(data []byte, p Path) (int64, bool) {
	start := int64(-1)
	walk(data, func(q Path, _ string, at int64) bool {
		if slices.Equal(p, q) {
			start = at
			return false
		}
		return true
	})
	return start, start >= 0
}

// At renders "line L, column C: path" for the value at p, or the path alone
// when data has no such value.
func At(data []byte, p Path) string {
	if off, ok := Find(data, p); ok {
		line, col := Position(data, off+1)
		if len(p) == 0 {
			return fmt.Sprintf("line %d, column %d", line, col)
		}
		return fmt.Sprintf("line %d, column %d: %s", line, col, p)
	}
	if len(p) == 0 {
		return "(top level)"
	}
	return p.String()
}

// Key and Index build paths: Path{Key("turns"), Index(2)}.
func Key(k string) Elem { return Elem{Key: k, Index: -1} }

// Index is an array element of a Path.
func Index(i int) Elem { return Elem{Index: i} }

// walk calls visit for every value of data in document order with its path,
// its kind ("object", "array", "string", "number", "bool", "null") and the
// offset of its first byte, until visit returns false or data ends (or is
// malformed).
func walk(data []byte, visit func(p Path, kind string, start int64) bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		array   bool
		n       int    // next element index
		key     string // current member name
		wantKey bool
	}
	var stack []frame
	var path Path // the path of the innermost open container
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if !top.array && top.wantKey {
				if key, ok := tok.(string); ok {
					top.key, top.wantKey = key, false
					continue
				}
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				path = path[:len(path)-1]
			}
			continue
		}
		p := path
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.array {
				p = append(path[:len(path):len(path)], Elem{Index: top.n})
				top.n++
			} else {
				p = append(path[:len(path):len(path)], Elem{Key: top.key, Index: -1})
				top.wantKey = true
			}
		}
		kind := "null"
		switch v := tok.(type) {
		case json.Delim:
			kind = "object"
			if v == '[' {
				kind = "array"
			}
		case string:
			kind = "string"
		case json.Number:
			kind = "number"
		case bool:
			kind = "bool"
		}
		if !visit(p, kind, valueStart(data, before)) {
			return
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack) > 0 {
				path = p
			}
			stack = append(stack, frame{array: d == '[', wantKey: d == '{'})
		}
	}
}

// valueStart skips what a decoder reads between values (white space, the
// colon after a key, the comma between members) to the value's first byte.
func valueStart(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
			continue
		}
		break
	}
	return off
}
