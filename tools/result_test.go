package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLimitResult(t *testing.T) {
	long := strings.Repeat("é", 40000) // 80,000 bytes of two-byte characters
	tests := []struct {
		name    string
		content string
		size    int
		limit   int
		// want: the content kept before the note, or the whole answer
		// when noted is false.
		keptPrefix string
		noted      bool
		note       string
	}{
		{name: "short", content: "hello", limit: 4096, keptPrefix: "hello"},
		{name: "exactly at the limit", content: strings.Repeat("a", 4096), limit: 4096, keptPrefix: strings.Repeat("a", 4096)},
		{name: "one over", content: strings.Repeat("a", 4097), limit: 4096, keptPrefix: "aaaa", noted: true, note: "[… 4 KiB cut to 4 KiB:"},
		{name: "multi-byte characters", content: long, limit: 64 << 10, keptPrefix: "éé", noted: true, note: "[… 78.1 KiB cut to 64 KiB:"},
		{name: "limit below the minimum", content: strings.Repeat("b", 5000), limit: 10, keptPrefix: "bb", noted: true, note: "cut to 1 KiB:"},
		{name: "a tool that stopped reading", content: "the beginning", size: 15 << 20, limit: 64 << 10, keptPrefix: "the beginning", noted: true, note: "[… 15 MiB cut to 64 KiB:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == 0 {
				size = len(tc.content)
			}
			got := LimitResultOf(tc.content, size, tc.limit)
			limit := max(tc.limit, MinMaxResultBytes)
			if len(got) > limit {
				t.Errorf("%d bytes, over the limit of %d", len(got), limit)
			}
			if !utf8.ValidString(got) {
				t.Error("the cut split a character")
			}
			if !strings.HasPrefix(got, tc.keptPrefix) {
				t.Errorf("does not start with %q: %.40q", tc.keptPrefix, got)
			}
			if !tc.noted {
				if got != tc.content {
					t.Errorf("changed a result within the limit: %.40q", got)
				}
				return
			}
			kept, note, ok := strings.Cut(got, "\n\n[…")
			if !ok || !strings.Contains("[…"+note, tc.note) {
				t.Errorf("note %q, want it to contain %q", note, tc.note)
			}
			if !strings.HasPrefix(tc.content, kept) {
				t.Error("the kept part is not the result's beginning")
			}
		})
	}
}

// FuzzLimitResult: whatever the content and limit, the answer is within
// the limit, a prefix of the content (plus the note), and valid UTF-8 when
// the content was.
func FuzzLimitResult(f *testing.F) {
	f.Add("hello", 5)
	f.Add(strings.Repeat("日本語", 1000), 1024)
	f.Add(strings.Repeat("x", 3000), 2000)
	f.Fuzz(func(t *testing.T, content string, limit int) {
		got := LimitResult(content, limit)
		if len(got) > max(limit, MinMaxResultBytes) {
			t.Fatalf("%d bytes for limit %d", len(got), limit)
		}
		if utf8.ValidString(content) && !utf8.ValidString(got) {
			t.Fatal("invalid UTF-8 from valid content")
		}
		kept, _, cut := strings.Cut(got, "\n\n[… ")
		if !cut {
			kept = got
		}
		if !strings.HasPrefix(content, kept) {
			t.Fatal("not a prefix of the content")
		}
	})
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB", 64 << 10: "64 KiB", 15_000_000: "14.3 MiB", 1 << 20: "1 MiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestExecuteCutsResults: Execute cuts every result, a tool's and an
// error's, to the call's ResultLimit, DefaultMaxResultBytes without one.
func TestExecuteCutsResults(t *testing.T) {
	huge := strings.Repeat("x", 15<<20)
	big := &fakeTool{name: "big", params: `{"type":"object"}`, call: func(context.Context, json.RawMessage) (Result, error) {
		return Result{Content: huge}, nil
	}}
	failing := &fakeTool{name: "failing", params: `{"type":"object"}`, call: func(context.Context, json.RawMessage) (Result, error) {
		return Result{}, errors.New(huge)
	}}
	r := mustRegistry(t, Config{}, big, failing)
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		tool  string
		limit int
	}{
		{"default limit", context.Background(), "big", DefaultMaxResultBytes},
		{"the call's limit", WithCall(context.Background(), Call{ResultLimit: 4096}), "big", 4096},
		{"an error's text", WithCall(context.Background(), Call{ResultLimit: 2048}), "failing", 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.Execute(tc.ctx, call(tc.tool, `{}`))
			if len(res.Content) > tc.limit || !strings.Contains(res.Content, "cut to "+FormatBytes(tc.limit)) {
				t.Errorf("%d bytes ending %q, want at most %d with the note", len(res.Content), res.Content[max(0, len(res.Content)-160):], tc.limit)
			}
			if !strings.Contains(res.Content, "15 MiB cut") {
				t.Errorf("the note does not give the result's size: %q", res.Content[len(res.Content)-160:])
			}
		})
	}
}

func BenchmarkLimitResultWithin(b *testing.B) {
	s := strings.Repeat("x", 4000)
	for b.Loop() {
		_ = LimitResult(s, DefaultMaxResultBytes)
	}
}

func TestHidePaths(t *testing.T) {
	for in, want := range map[string]string{
		"no path here": "no path here",
		"open /etc/agentdock/keys: permission denied":                                                "open …/keys: permission denied",
		"Cannot find module '/tmp/x/no-such-server.js'":                                              "Cannot find module '…/no-such-server.js'",
		"at Object.<anonymous> (/home/u/app/index.js:3:9)":                                           "at Object.<anonymous> (…/index.js:3:9)",
		"Access denied - path outside allowed directories: /home/alice/secret.txt not in /srv/data/": "Access denied - path outside allowed directories: …/secret.txt not in …/data",
		`ENOENT, open "C:\Users\me\notes.txt"`:                                                       `ENOENT, open "…\notes.txt"`,
		"see https://example.com/docs/errors/e1 for more":                                            "see https://example.com/docs/errors/e1 for more",
		"a/b/c is relative": "a/b/c is relative",
		"/":                 "/",
	} {
		if got := HidePaths(in); got != want {
			t.Errorf("HidePaths(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestExecuteHidesPathsInErrors: a tool's error naming host files reaches
// the model without their paths; a result that is not an error is left as
// it is (a file listing is the tool's answer).
func TestExecuteHidesPathsInErrors(t *testing.T) {
	failing := &fakeTool{name: "failing", params: `{"type":"object"}`, call: func(context.Context, json.RawMessage) (Result, error) {
		return Result{}, errors.New("open /var/lib/agentdock/data/file.txt: no such file")
	}}
	listing := &fakeTool{name: "listing", params: `{"type":"object"}`, call: func(context.Context, json.RawMessage) (Result, error) {
		return Result{Content: "/srv/data/a.txt"}, nil
	}}
	r := mustRegistry(t, Config{}, failing, listing)
	if res := r.Execute(context.Background(), call("failing", `{}`)); res.Content != `tool "failing" failed: open …/file.txt: no such file` {
		t.Errorf("error result %q", res.Content)
	}
	if res := r.Execute(context.Background(), call("listing", `{}`)); res.Content != "/srv/data/a.txt" {
		t.Errorf("result %q", res.Content)
	}
}
