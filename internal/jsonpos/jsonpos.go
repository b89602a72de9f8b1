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
// unknown).
func Describe(data []byte, err error, fallback int64) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := Position(data, syn.Offset)
		return fmt.Sprintf("line %d, column %d: malformed JSON: %s", line, col, syn.Error())
	case errors.As(err, &typ):
		line, col := Position(data, typ.Offset)
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
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
