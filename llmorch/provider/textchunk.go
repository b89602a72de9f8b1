package provider

import (
	"encoding/json"
	"unicode/utf8"
)

// Most chunks of an OpenAI stream carry one text delta and nothing else the
// parser uses. Decoding each with encoding/json's reflection costs about
// five times as long and ten allocations more (BenchmarkTextChunk); over a
// streamed turn that is about a tenth of the server's CPU per turn
// (BenchmarkParseStream on the load harness's 64-chunk turn, with and
// without this path), so textChunk reads those chunks by hand, and
// everything else (tool calls, usage, errors, and any input it is not sure
// about) goes to json.Unmarshal.
//
// textChunk must agree with json.Unmarshal into oaChunk on every input it
// accepts (FuzzTextChunk checks it): it checks the JSON grammar as it goes
// (what json.Valid checks), and declines, for json.Unmarshal to decide or
// refuse, on anything malformed and on:
//   - a non-null usage, error, tool_calls or message;
//   - a key that is escaped, not ASCII, or a case-variant of a field
//     oaChunk declares (encoding/json matches keys case-insensitively);
//   - the same declared field twice;
//   - a declared field of an unexpected JSON type (Unmarshal's type errors);
//   - an index that is not a plain integer;
//   - more than maxTextChoices choices with text.

// maxTextChoices bounds the text deltas one chunk may carry on the fast
// path (providers send one).
const maxTextChoices = 4

// textChunk is the text deltas of one chunk, in order, of its choices with
// index 0 (the only one ever asked for).
type textChunk struct {
	texts [maxTextChoices]string
	n     int
}

// readTextChunk reads a chunk that carries text deltas at most, or reports
// false for json.Unmarshal to read it (or to refuse it as malformed).
func readTextChunk(data []byte) (textChunk, bool) {
	var c textChunk
	seen := [3]bool{}
	end, ok := eachField(data, skipSpace(data, 0), func(key []byte, v int) (int, bool) {
		f := fieldOf(key, "choices", "usage", "error")
		if f >= 0 {
			if seen[f] {
				return 0, false
			}
			seen[f] = true
		}
		switch f {
		case 0:
			return readChoices(data, v, &c)
		case 1, 2:
			return isNull(data, v)
		case -1:
			return skipped(data, v)
		}
		return 0, false
	})
	return c, ok && skipSpace(data, end) == len(data)
}

func readChoices(data []byte, i int, c *textChunk) (int, bool) {
	if end, ok := isNull(data, i); ok {
		return end, true
	}
	if at(data, i) != '[' {
		return 0, false
	}
	i = skipSpace(data, i+1)
	if at(data, i) == ']' {
		return i + 1, true
	}
	for {
		if at(data, i) != '{' {
			return 0, false
		}
		var (
			index int64
			text  string
		)
		seen := [4]bool{}
		end, ok := eachField(data, i, func(key []byte, v int) (int, bool) {
			f := fieldOf(key, "index", "delta", "message", "finish_reason")
			if f >= 0 {
				if seen[f] {
					return 0, false
				}
				seen[f] = true
			}
			switch f {
			case 0:
				return readIndex(data, v, &index)
			case 1:
				return readDelta(data, v, &text)
			case 2:
				return isNull(data, v)
			case 3:
				if end, ok := isNull(data, v); ok {
					return end, true
				}
				if at(data, v) != '"' {
					return 0, false
				}
				return skipped(data, v)
			case -1:
				return skipped(data, v)
			}
			return 0, false
		})
		if !ok {
			return 0, false
		}
		if index == 0 && text != "" {
			if c.n == maxTextChoices {
				return 0, false
			}
			c.texts[c.n] = text
			c.n++
		}
		i = skipSpace(data, end)
		switch at(data, i) {
		case ']':
			return i + 1, true
		case ',':
			i = skipSpace(data, i+1)
		default:
			return 0, false
		}
	}
}

func readDelta(data []byte, i int, text *string) (int, bool) {
	if end, ok := isNull(data, i); ok {
		return end, true
	}
	seen := [2]bool{}
	return eachField(data, i, func(key []byte, v int) (int, bool) {
		f := fieldOf(key, "content", "tool_calls")
		if f >= 0 {
			if seen[f] {
				return 0, false
			}
			seen[f] = true
		}
		switch f {
		case 0:
			if end, ok := isNull(data, v); ok {
				return end, true
			}
			if at(data, v) != '"' {
				return 0, false
			}
			end := skipValue(data, v)
			if end < 0 {
				return 0, false
			}
			s, ok := unquote(data[v:end])
			*text = s
			return end, ok
		case 1:
			return isNull(data, v)
		case -1:
			return skipped(data, v)
		}
		return 0, false
	})
}

// readIndex reads a plain integer, as json.Unmarshal into an int does;
// fractions and exponents (which Unmarshal refuses for an int) decline.
func readIndex(data []byte, i int, index *int64) (int, bool) {
	if end, ok := isNull(data, i); ok {
		return end, true
	}
	j, neg := i, false
	if at(data, j) == '-' {
		neg = true
		j++
	}
	var n int64
	start := j
	for c := at(data, j); c >= '0' && c <= '9'; c = at(data, j) {
		if j-start >= 15 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		j++
	}
	switch at(data, j) {
	case '.', 'e', 'E':
		return 0, false
	}
	if j == start || (data[start] == '0' && j-start > 1) {
		return 0, false
	}
	if neg {
		n = -n
	}
	*index = n
	return j, true
}

// eachField calls fn with each key of the object at data[i] and the offset
// of its value; fn returns the offset after the value. Keys that are
// escaped or not ASCII decline: encoding/json would unescape and fold them.
func eachField(data []byte, i int, fn func(key []byte, v int) (int, bool)) (int, bool) {
	if at(data, i) != '{' {
		return 0, false
	}
	i = skipSpace(data, i+1)
	if at(data, i) == '}' {
		return i + 1, true
	}
	for {
		if at(data, i) != '"' {
			return 0, false
		}
		end := skipValue(data, i)
		if end < 0 {
			return 0, false
		}
		key := data[i+1 : end-1]
		for _, b := range key {
			if b == '\\' || b >= utf8.RuneSelf {
				return 0, false
			}
		}
		i = skipSpace(data, end)
		if at(data, i) != ':' {
			return 0, false
		}
		var ok bool
		if i, ok = fn(key, skipSpace(data, i+1)); !ok {
			return 0, false
		}
		i = skipSpace(data, i)
		switch at(data, i) {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(data, i+1)
		default:
			return 0, false
		}
	}
}

// fieldOf is the position of key among names, -1 for a key that is none of
// them, or -2 for a case-variant of one (which encoding/json would match).
func fieldOf(key []byte, names ...string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for _, n := range names {
		if asciiEqualFold(key, n) {
			return -2
		}
	}
	return -1
}

// asciiEqualFold is strings.EqualFold for an ASCII key.
func asciiEqualFold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i, b := range key {
		c := name[i]
		if b|0x20 != c|0x20 || (b|0x20 < 'a' || b|0x20 > 'z') && b != c {
			return false
		}
	}
	return true
}

// at is data[i], or 0 past its end.
func at(data []byte, i int) byte {
	if i >= 0 && i < len(data) {
		return data[i]
	}
	return 0
}

func isNull(data []byte, i int) (int, bool) {
	if end := literal(data, i, "null"); end >= 0 {
		return end, true
	}
	return 0, false
}

// skipped is skipValue for a field the parser does not read.
func skipped(data []byte, i int) (int, bool) {
	end := skipValue(data, i)
	return end, end >= 0
}

// unquote is a JSON string's value: a copy when it has no escapes and is
// valid UTF-8, else what json.Unmarshal makes of it (escapes, replacement
// characters).
func unquote(q []byte) (string, bool) {
	body := q[1 : len(q)-1]
	plain := true
	for _, b := range body {
		if b == '\\' || b >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(body), true
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", false
	}
	return s, true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue is the offset after the JSON value at data[i], or -1 if it is
// not valid JSON (json.Valid's grammar: strings may hold any bytes but
// control characters, and escapes are checked; numbers follow RFC 8259).
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch c := data[i]; {
	case c == '"':
		for j := i + 1; j < len(data); j++ {
			switch b := data[j]; {
			case b == '"':
				return j + 1
			case b < 0x20:
				return -1
			case b == '\\':
				j++
				if j >= len(data) {
					return -1
				}
				switch data[j] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					if j+4 >= len(data) {
						return -1
					}
					for _, h := range data[j+1 : j+5] {
						if !isHex(h) {
							return -1
						}
					}
					j += 4
				default:
					return -1
				}
			}
		}
		return -1
	case c == '{':
		end, ok := eachField(data, i, func(_ []byte, v int) (int, bool) {
			end := skipValue(data, v)
			return end, end >= 0
		})
		if !ok {
			return -1
		}
		return end
	case c == '[':
		j := skipSpace(data, i+1)
		if j < len(data) && data[j] == ']' {
			return j + 1
		}
		for {
			if j = skipValue(data, j); j < 0 {
				return -1
			}
			j = skipSpace(data, j)
			if j >= len(data) {
				return -1
			}
			switch data[j] {
			case ']':
				return j + 1
			case ',':
				j = skipSpace(data, j+1)
			default:
				return -1
			}
		}
	case c == 't':
		return literal(data, i, "true")
	case c == 'f':
		return literal(data, i, "false")
	case c == 'n':
		return literal(data, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(data, i)
	}
	return -1
}

func literal(data []byte, i int, lit string) int {
	if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// skipNumber is the offset after the number at data[i], or -1.
func skipNumber(data []byte, i int) int {
	j := i
	if data[j] == '-' {
		j++
	}
	digits := func() bool {
		k := j
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		return j > k
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case !digits():
		return -1
	}
	if j < len(data) && data[j] == '.' {
		j++
		if !digits() {
			return -1
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		if !digits() {
			return -1
		}
	}
	return j
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}
