package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestChatRequestText(t *testing.T) {
	tests := []struct {
		name, body, want, wantErr string
	}{
		{"plain message", `{"message":"hi","sessionId":"s-123456"}`, "hi", ""},
		{"empty message is a message", `{"message":""}`, "", ""},
		{"message wins over messages", `{"message":"a","messages":[{"role":"user","parts":[{"type":"text","text":"b"}]}]}`, "a", ""},
		{"UI parts joined, non-text skipped", `{"messages":[{"role":"user","parts":[{"type":"text","text":"a"},{"type":"file","url":"x"},{"type":"text","text":"b"}]}]}`, "a\nb", ""},
		{"last user message", `{"messages":[{"role":"user","parts":[{"type":"text","text":"old"}]},{"role":"assistant","parts":[{"type":"text","text":"r"}]},{"role":"user","parts":[{"type":"text","text":"new"}]},{"role":"assistant","parts":[]}]}`, "new", ""},
		{"content string", `{"messages":[{"role":"user","content":"c"}]}`, "c", ""},
		{"content parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url"},{"type":"text","text":"y"}]}]}`, "x\ny", ""},
		{"content of the wrong type", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":5}]}`, "", "messages[1].content: want a string"},
		{"no user message", `{"messages":[{"role":"assistant","content":"a"}]}`, "", `no user message`},
		{"neither", `{"id":"x"}`, "", `needs "message"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r ChatRequest
			if err := Unmarshal([]byte(tc.body), &r); err != nil {
				t.Fatal(err)
			}
			got, err := r.Text()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Text() = %q, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Text() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseEventID(t *testing.T) {
	tests := []struct {
		in      string
		turn    string
		seq     int64
		restart int
		ok      bool
	}{
		{"abcdef0123456789:12", "abcdef0123456789", 12, 0, true},
		{"abcdef0123456789:0", "abcdef0123456789", 0, 0, true},
		{"abcdef0123456789:12.1", "abcdef0123456789", 12, 1, true},
		{"abcdef0123456789:7.23", "abcdef0123456789", 7, 23, true},
		{"abcdef0123456789", "", 0, 0, false},
		{"abcdef0123456789:", "", 0, 0, false},
		{"abcdef0123456789:-3", "", 0, 0, false},
		{"abcdef0123456789:1:2", "", 0, 0, false},
		{"abcdef0123456789:1.", "", 0, 0, false},
		{"abcdef0123456789:1.0", "", 0, 0, false},
		{"abcdef0123456789:1.01", "", 0, 0, false},
		{"abcdef0123456789:1.-1", "", 0, 0, false},
		{"abcdef0123456789:1.2.3", "", 0, 0, false},
		{"short:1", "", 0, 0, false},
		{"12", "", 0, 0, false},
	}
	for _, tc := range tests {
		turn, seq, restart, err := ParseEventID(tc.in)
		if (err == nil) != tc.ok || turn != tc.turn || seq != tc.seq || restart != tc.restart {
			t.Errorf("ParseEventID(%q) = %q, %d, %d, %v", tc.in, turn, seq, restart, err)
		}
		if err == nil && RestartedEventID(turn, seq, restart) != tc.in {
			t.Errorf("round trip of %q gave %q", tc.in, RestartedEventID(turn, seq, restart))
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"abcdef0123456789:12", "abcdef0123456789:12.3", "x:1", ":", "a:b:c", "abcdefgh:99999999999999999999", "abcdefgh:1.99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		turn, seq, restart, err := ParseEventID(s)
		if err != nil {
			return
		}
		if seq < 0 || restart < 0 || !strings.HasPrefix(s, turn+":") || strings.Contains(turn, ":") {
			t.Fatalf("%q parsed as %q %d %d", s, turn, seq, restart)
		}
		t2, s2, r2, err := ParseEventID(RestartedEventID(turn, seq, restart))
		if err != nil || t2 != turn || s2 != seq || r2 != restart {
			t.Fatalf("%q does not round-trip", s)
		}
	})
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		body, want string
	}{
		{"{\"a\": }", "line 1, column 7"},
		{"{\n\"message\": \"x\",\n  ]\n}", "line 3, column 3"},
		{`{"message": [1]}`, "line 1, column 13: message must be a string, not an array"},
		{`{"messages": "hi"}`, "line 1, column 17: messages must be an array, not a string"},
		{`{"messages": [{"parts": 3}]}`, "messages.parts must be an array, not a number"},
		{`[1,2]`, "the body must be"},
		{`{"message": "hi"`, "line 1, column 16: the body ends too early"},
		{" \n", "empty"},
	}
	for _, tc := range tests {
		var v ChatRequest
		err := Unmarshal([]byte(tc.body), &v)
		var je *JSONError
		if !errors.As(err, &je) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a *JSONError with %q", tc.body, err, tc.want)
		}
	}
	var v ChatRequest
	if err := Unmarshal([]byte(`{"message":"ok"}`), &v); err != nil || *v.Message != "ok" {
		t.Errorf("a valid body: %v", err)
	}
}

// FuzzChatBody: no body makes the chat body parsing panic, a body that does
// not decode gets a located reason, and one that does yields the user's text
// or a reason.
func FuzzChatBody(f *testing.F) {
	for _, s := range []string{
		`{"message":"hi"}`, `{"id":"x","messages":[{"role":"user","parts":[{"type":"text","text":"a"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`, `{"messages":[{"role":"user","content":5}]}`, `{`, `[]`,
		"{\n\"messages\": [{\"role\": \"user\", \"parts\": [1]}]\n}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var body ChatRequest
		if err := Unmarshal(data, &body); err != nil {
			var je *JSONError
			if !errors.As(err, &je) || je.Reason == "" || (je.Line == 0) != (je.Column == 0) {
				t.Fatalf("decoding error %#v", err)
			}
			if je.Line > strings.Count(string(data), "\n")+1 {
				t.Fatalf("line %d of a body of %d lines", je.Line, strings.Count(string(data), "\n")+1)
			}
			return
		}
		text, err := body.Text()
		if err != nil && (text != "" || err.Error() == "") {
			t.Fatalf("Text() = %q, %v", text, err)
		}
		if json.Valid(data) == false {
			t.Fatalf("%q decoded but is not valid JSON", data)
		}
		if CheckUTF8(data) == nil && !utf8.Valid(data) {
			t.Fatalf("%q passed CheckUTF8", data)
		}
	})
}

func TestCheckUTF8(t *testing.T) {
	for _, tc := range []struct {
		body string
		want string // "" for valid
	}{
		{`{"message": "héllo ✓ 😀"}`, ""},
		{`{"message": "\u00e9 \ud83d\ude00 \\ud800 \"\u0041"}`, ""},
		{"{\"message\": \"a\xffb\"}", "line 1, column 15: the body is not valid UTF-8"},
		{"{\n  \"message\": \"ok\",\n  \"x\": \"\xc3\"\n}", "line 3, column 9: the body is not valid UTF-8"},
		{`{"message": "\ud800"}`, `line 1, column 14: a \u escape of half a surrogate pair`},
		{`{"message": "\ud800\u0041"}`, `line 1, column 14: a \u escape of half`},
		{`{"message": "x\uDC00"}`, `line 1, column 15: a \u escape of half`},
		{`{"message": "\ud83d\ude00\ud800"}`, `line 1, column 26: a \u escape of half`},
		{`{"message": "\u12"}`, ""}, // a syntax error, for decoding to report
	} {
		err := CheckUTF8([]byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestEdits(t *testing.T) {
	user := func(id string) Message { return Message{ID: id, Role: "user"} }
	tests := []struct {
		name string
		r    ChatRequest
		want bool
	}{
		{"plain edit", ChatRequest{Edit: true}, true},
		{"a new message", ChatRequest{Trigger: "submit-message", Messages: []Message{user("u1")}}, false},
		{"the AI SDK's edit", ChatRequest{Trigger: "submit-message", MessageID: "u2", Messages: []Message{user("u1"), {ID: "a1", Role: "assistant"}, user("u2")}}, true},
		{"a resend after an answer names the answer", ChatRequest{Trigger: "submit-message", MessageID: "a1", Messages: []Message{user("u1"), {ID: "a1", Role: "assistant"}}}, false},
		{"messageId of another message", ChatRequest{Trigger: "submit-message", MessageID: "u1", Messages: []Message{user("u1"), user("u2")}}, false},
		{"regenerate", ChatRequest{Trigger: "regenerate-message", MessageID: "u1", Messages: []Message{user("u1")}}, false},
	}
	for _, tt := range tests {
		if got := tt.r.Edits(); got != tt.want {
			t.Errorf("%s: Edits() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
