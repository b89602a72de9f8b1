package mcp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// cutter is a server awaiting the calls of ids with limit.
func cutter(limit int, ids ...string) *server {
	s := &server{calls: map[string]int{}}
	for _, id := range ids {
		s.noteCall(id, limit)
	}
	return s
}

func TestCutCall(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6,000 bytes
	escaped := strings.Repeat(`a\"\\\n\u00e9`, 1000)
	tests := []struct {
		name string
		line string
		ids  []string
		// want: the text of the first content block after the cut, and its
		// recorded weight (0: the line must come back unchanged).
		wantText   string
		wantWeight float64
	}{
		{"text cut at a character", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`, []string{"7"}, strings.Repeat("é", 512), 6000},
		{"escapes kept whole", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + escaped + `"}]}}`, []string{"7"}, "", 13000},
		{"image data dropped", `{"id":"c-1","result":{"content":[{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("QUJD", 2000) + `","_meta":{"k":1}}]}}`, []string{`"c-1"`}, "", 6000},
		{"resource text dropped", `{"id":3,"result":{"isError":false,"content":[{"type":"text","text":"ok"},{"type":"resource","resource":{"uri":"file:///r","text":"` + strings.Repeat("r", 5000) + `"}}]}}`, []string{"3"}, "ok", 0},
		{"within the limit", `{"id":7,"result":{"content":[{"type":"text","text":"short"}]}}`, []string{"7"}, "", 0},
		{"escapes that decode within the limit", `{"id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat(`\n`, 600) + `"}]}}`, []string{"7"}, "", 0},
		{"an answer to no awaited call", `{"id":8,"result":{"content":[{"type":"text","text":"` + long + `"}]}}`, []string{"7"}, "", 0},
		{"not JSON", `{"id":7,"result":{"content":[{"type":"text","text":"` + long, []string{"7"}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := cutter(1024, tc.ids...)
			got := s.cutCall([]byte(tc.line))
			if tc.wantWeight == 0 && tc.name != "resource text dropped" {
				if string(got) != tc.line {
					t.Fatalf("changed the line: %.200s", got)
				}
				return
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result struct {
					Content []struct {
						Type     string         `json:"type"`
						Text     string         `json:"text"`
						Data     string         `json:"data"`
						Meta     map[string]any `json:"_meta"`
						Resource map[string]any `json:"resource"`
					} `json:"content"`
				} `json:"result"`
			}
			if err := json.Unmarshal(got, &msg); err != nil {
				t.Fatalf("the cut line is not JSON: %v: %.300s", err, got)
			}
			if len(got) > 2048 {
				t.Errorf("the cut line is %d bytes", len(got))
			}
			first := msg.Result.Content[0]
			if tc.wantText != "" && first.Text != tc.wantText {
				t.Errorf("text %.60q…, want %.60q…", first.Text, tc.wantText)
			}
			if !utf8.ValidString(first.Text) || len(first.Text) > 1024 {
				t.Errorf("text of %d bytes, valid UTF-8: %v", len(first.Text), utf8.ValidString(first.Text))
			}
			block := first
			if tc.name == "resource text dropped" {
				block = msg.Result.Content[1]
				if _, has := block.Resource["text"]; has || block.Resource["uri"] != "file:///r" {
					t.Errorf("resource %v", block.Resource)
				}
				tc.wantWeight = 5000
			}
			if w, _ := block.Meta[weightKey].(float64); w != tc.wantWeight {
				t.Errorf("weight %v, want %v (meta %v)", block.Meta[weightKey], tc.wantWeight, block.Meta)
			}
			if tc.name == "image data dropped" && (block.Data != "" || block.Meta["k"] != float64(1)) {
				t.Errorf("image block %+v", block)
			}
		})
	}
}

// FuzzCutCall: whatever a server sends, cutCall does not panic, and a
// line that was JSON stays JSON, no longer than it was but for the _meta
// each cut block gains (weightKey and its count: under 64 bytes).
func FuzzCutCall(f *testing.F) {
	f.Add(`{"id":1,"result":{"content":[{"type":"text","text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\u00e9\n"}]}}`, 8)
	f.Add(`{"id":1,"result":{"content":[{"type":"image","data":"QUJDRA==","_meta":[]}]}}`, 2)
	f.Add(`{"id":1,"result":{"content":[{"type":"resource","resource":{"text":"xxxxxxxx","blob":"QQ=="}}]}}`, 3)
	f.Add(`{"id":1,"result":{"Content":[{"type":"text","text":"0000000000000&&&&&&000000000000000000000"}]}}`, 39)
	f.Add(`{"id":1,"result":{"content":[{"type":"text","text":"\ud83d\ude00\ud83d\ude00 <b>\u2028\u2028</b>"}]}}`, 5)
	f.Fuzz(func(t *testing.T, line string, limit int) {
		limit = max(1, limit%4096)
		s := cutter(limit, "1")
		got := s.cutCall([]byte(line))
		if !json.Valid([]byte(line)) {
			return
		}
		var msg struct {
			Result struct {
				Content []json.RawMessage `json:"content"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(line), &msg)
		if !json.Valid(got) || len(got) > len(line)+64*len(msg.Result.Content) {
			t.Fatalf("cut %q into %q", line, got)
		}
	})
}

// TestCutText: a text is cut in the server's own bytes, to what decodes
// to at most the limit, never inside a character, an escape or a
// surrogate pair, and comes out a prefix of what was sent.
func TestCutText(t *testing.T) {
	tests := []struct {
		name, text string // text: the JSON string's content as sent
		limit      int
		want       string // the cut's JSON content
	}{
		{"HTML characters as sent", `a&b<c>d&e<f>g`, 8, `a&b<c>d&`},
		{"line separators as sent", "x\\u2028y\u2028z\u2028", 8, "x\\u2028y\u2028"},
		{"a surrogate pair kept whole", `ab\ud83d\ude00cd`, 5, `ab`},
		{"a surrogate pair that fits", `ab\ud83d\ude00cd`, 6, `ab\ud83d\ude00`},
		{"a lone surrogate counts as U+FFFD", `\ud83dabc`, 4, `\ud83da`},
		{"a character not split", "éééé", 5, "éé"},
		{"an invalid byte counts as U+FFFD", "a\xffbcd", 4, "a\xff"},
		{"short escapes whole", `\n\"\\\/x`, 3, `\n\"\\`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			line := `{"id":1,"result":{"content":[{"type":"text","text":"` + tc.text + strings.Repeat("z", 64) + `"}]}}`
			got := cutter(tc.limit, "1").cutCall([]byte(line))
			var msg struct {
				Result struct {
					Content []struct {
						Text json.RawMessage `json:"text"`
					} `json:"content"`
				} `json:"result"`
			}
			if err := json.Unmarshal(got, &msg); err != nil || len(msg.Result.Content) != 1 {
				t.Fatalf("cut into %q (%v)", got, err)
			}
			if raw := string(msg.Result.Content[0].Text); raw != `"`+tc.want+`"` {
				t.Errorf("cut to %s, want %q", raw, `"`+tc.want+`"`)
			}
			var cut, full string
			_ = json.Unmarshal(msg.Result.Content[0].Text, &cut)
			_ = json.Unmarshal([]byte(`"`+tc.text+`"`), &full)
			if len(cut) > tc.limit || !strings.HasPrefix(full, cut) {
				t.Errorf("decoded %q (%d bytes, limit %d), not a prefix of %q", cut, len(cut), tc.limit, full)
			}
		})
	}
}

func TestLightenLine(t *testing.T) {
	m := NewManager(Config{MaxSchemaBytes: 1000})
	s := &server{m: m}
	huge := `{"name":"huge","description":"d","inputSchema":{"type":"object","properties":{"p":{"description":"` + strings.Repeat("x", 5000) + `"}}}}`
	small := `{"name":"small","inputSchema":{"type":"object"}}`
	line := `{"jsonrpc":"2.0","id":4,"result":{"tools":[` + small + `,` + huge + `],"nextCursor":"c2"}}` + "\n"
	got := s.lightenLine([]byte(line))
	var msg struct {
		ID     int `json:"id"`
		Result struct {
			Tools      []map[string]any `json:"tools"`
			NextCursor string           `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal(got, &msg); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if len(got) > 300 || msg.ID != 4 || msg.Result.NextCursor != "c2" || len(msg.Result.Tools) != 2 ||
		msg.Result.Tools[0]["name"] != "small" || msg.Result.Tools[1]["name"] != "huge" || msg.Result.Tools[1]["description"] != nil {
		t.Fatalf("lightened into %s", got)
	}
	if n := s.oversize["huge"]; n < 5000 {
		t.Errorf("the weight recorded for huge: %d", n)
	}
	for _, same := range []string{`{"jsonrpc":"2.0","id":4,"result":{"tools":[` + small + `]}}`, `{"id":4,"result":{"content":[]}}`, `{"tools": [`} {
		if got := s.lightenLine([]byte(same)); string(got) != same {
			t.Errorf("changed %q into %q", same, got)
		}
	}
}
