package jsonpos

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	var v struct {
		N []int `json:"n"`
	}
	tests := []struct{ name, input, want string }{
		{"syntax error points at the character", "{\n  \"n\": [1,]\n}", "line 2, column 11: malformed JSON: invalid character ']'"},
		{"unicode counts as one column", "{\"é\": x}", "line 1, column 7: malformed JSON"},
		{"truncated input", "{\n\"n\": [1,", "line 2, column 8: malformed JSON: unexpected end of JSON input"},
		{"type error names the field", "{\"n\": \"x\"}", "line 1, column 9: n: expected []int, found a JSON string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := json.Unmarshal([]byte(tt.input), &v)
			if err == nil {
				t.Fatal("no error")
			}
			if got := Describe([]byte(tt.input), err, -1); !strings.Contains(got, tt.want) {
				t.Fatalf("Describe = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestPosition(t *testing.T) {
	data := []byte("ab\ncd\n\nef")
	for _, tt := range []struct {
		off       int64
		line, col int
	}{{0, 1, 1}, {1, 1, 1}, {2, 1, 2}, {4, 2, 1}, {7, 4, 1}, {100, 4, 2}, {-5, 1, 1}} {
		if l, c := Position(data, tt.off); l != tt.line || c != tt.col {
			t.Errorf("Position(%d) = %d:%d, want %d:%d", tt.off, l, c, tt.line, tt.col)
		}
	}
}
