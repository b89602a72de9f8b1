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
		{"type error names the field and points at the value", "{\"n\": \"x\"}", "line 1, column 7: n: expected []int, found a JSON string"},
		{"type error in an array names the element", "{\n  \"n\": [1, 2,\n    \"3\"]}", "line 3, column 5: n[2]: expected int, found a JSON string"},
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

// nested decodes itself, as the template types do: encoding/json then
// reports offsets relative to the nested object and fields without indices.
type nested struct {
	Steps []step `json:"steps"`
}

type step struct {
	Name       string `json:"name"`
	Conditions []struct {
		Window *int `json:"window"`
	} `json:"conditions"`
}

func (s *step) UnmarshalJSON(b []byte) error {
	type plain step
	return json.Unmarshal(b, (*plain)(s))
}

func TestDescribeLocatesValuesInsideSelfDecodingTypes(t *testing.T) {
	input := "{\"steps\": [\n  {\"name\": \"A\", \"conditions\": [{\"window\": 3}]},\n  {\"name\": \"B\", \"conditions\": [{\"window\": 1}, {\"window\": \"3\"}]}\n]}"
	var v nested
	err := json.Unmarshal([]byte(input), &v)
	if err == nil {
		t.Fatal("no error")
	}
	want := `line 3, column 58: steps[1].conditions[1].window: expected int, found a JSON string`
	if got := Describe([]byte(input), err, -1); got != want {
		t.Fatalf("Describe =\n  %s\nwant\n  %s", got, want)
	}
	named := DescribeWith([]byte(input), err, -1, func(p Path) string { return "<" + p[:2].String() + ">" })
	if !strings.Contains(named, "<steps[1]>") {
		t.Fatalf("DescribeWith = %s", named)
	}
}

func TestLocateWalksEveryKind(t *testing.T) {
	input := `[{"a": null, "b": [true, 1.5, {"c": "x"}]}, {"d": {}}]`
	var got []string
	walk([]byte(input), func(p Path, kind string, start int64) bool {
		got = append(got, p.String()+"="+kind+"@"+string(input[start]))
		return true
	})
	want := "=array@[ [0]=object@{ [0].a=null@n [0].b=array@[ [0].b[0]=bool@t [0].b[1]=number@1 [0].b[2]=object@{ [0].b[2].c=string@\" [1]=object@{ [1].d=object@{"
	if strings.Join(got, " ") != want {
		t.Fatalf("walk visited\n  %s\nwant\n  %s", strings.Join(got, " "), want)
	}
}

func TestAt(t *testing.T) {
	data := []byte("{\"turns\": [\n  {\"user\": \"a\"},\n  {\"user\": \"\"}\n]}")
	if got, want := At(data, Path{Key("turns"), Index(1), Key("user")}), "line 3, column 12: turns[1].user"; got != want {
		t.Errorf("At = %q, want %q", got, want)
	}
	if got, want := At(data, Path{Key("turns"), Index(5)}), "turns[5]"; got != want {
		t.Errorf("At of a missing value = %q, want %q", got, want)
	}
	if got, want := At(data, nil), "line 1, column 1"; got != want {
		t.Errorf("At of the top = %q, want %q", got, want)
	}
}
