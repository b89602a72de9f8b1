package llmorch

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func img(name string) chat.Attachment {
	return chat.Attachment{Kind: chat.AttachImage, URL: "https://img.example/" + name, Filename: name}
}

// TestLimitAttachments: a request keeps the newest attachments, the
// older ones a line each in their message; the history is not changed.
func TestLimitAttachments(t *testing.T) {
	history := []chat.Message{
		{Role: chat.RoleUser, Content: "first", Attachments: []chat.Attachment{img("a"), img("b")}},
		{Role: chat.RoleAssistant, Content: "seen"},
		{Role: chat.RoleUser, Attachments: []chat.Attachment{img("c")}},
		{Role: chat.RoleUser, Content: "last", Attachments: []chat.Attachment{img("d"), img("e")}},
	}
	before := slices.Clone(history)
	names := func(msgs []chat.Message) (kept []string, lines int) {
		for _, m := range msgs {
			for _, a := range m.Attachments {
				kept = append(kept, a.Filename)
			}
			lines += strings.Count(m.Content, "is no longer shown")
		}
		return kept, lines
	}
	for _, tc := range []struct {
		max   int
		kept  string
		lines int
	}{
		{-1, "a b c d e", 0},
		{8, "a b c d e", 0},
		{5, "a b c d e", 0},
		{4, "b c d e", 1},
		{2, "d e", 3},
		{1, "e", 4},
		{0, "", 5},
	} {
		out := limitAttachments(history, tc.max)
		kept, lines := names(out)
		if strings.Join(kept, " ") != tc.kept || lines != tc.lines {
			t.Errorf("max %d: kept %v with %d lines; want %q and %d", tc.max, kept, lines, tc.kept, tc.lines)
		}
		if len(out) != len(history) {
			t.Errorf("max %d: %d messages", tc.max, len(out))
		}
	}
	if out := limitAttachments(history, 4); !strings.HasPrefix(out[0].Content, "first\n[an image (a)") {
		t.Errorf("the marker: %q", out[0].Content)
	}
	for i := range history {
		if history[i].Content != before[i].Content || len(history[i].Attachments) != len(before[i].Attachments) {
			t.Fatalf("the history changed: %+v", history[i])
		}
	}
}

func pngURL(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestAttachmentTokens: images count as their provider counts them, by
// their size when it can be read, else as the most; files by their data.
func TestAttachmentTokens(t *testing.T) {
	text := func(s string) int { return EstimateTokens(s) }
	for _, tc := range []struct {
		name     string
		provider string
		a        chat.Attachment
		want     int
	}{
		{"OpenAI, 512 x 512", "openai", chat.Attachment{Kind: chat.AttachImage, URL: pngURL(t, 512, 512)}, 85 + 170},
		{"OpenAI, 1024 x 1024 (scaled to 768)", "openai", chat.Attachment{Kind: chat.AttachImage, URL: pngURL(t, 1024, 1024)}, 85 + 170*4},
		{"OpenAI, 4096 x 1024 (scaled to 2048 x 512)", "openai", chat.Attachment{Kind: chat.AttachImage, URL: pngURL(t, 4096, 1024)}, 85 + 170*4},
		{"OpenAI, low detail", "openai", chat.Attachment{Kind: chat.AttachImage, URL: pngURL(t, 4000, 4000), Detail: "low"}, 85},
		{"OpenAI, by URL", "openai", img("x"), openAIMaxImage},
		{"Anthropic, 1000 x 750", "anthropic", chat.Attachment{Kind: chat.AttachImage, URL: pngURL(t, 1000, 750)}, 1000},
		{"Anthropic, 4000 x 3000 (scaled)", "anthropic", chat.Attachment{Kind: chat.AttachImage, URL: pngURL(t, 4000, 3000)}, 1534},
		{"Anthropic, by URL", "anthropic", img("x"), anthropicMax},
		{"not an image's data", "openai", chat.Attachment{Kind: chat.AttachImage, URL: "data:image/png;base64,AAAA"}, openAIMaxImage},
		{"a text file", "anthropic", chat.Attachment{Kind: chat.AttachFile, URL: "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("abcd", 100)))}, 100},
		{"a PDF", "openai", chat.Attachment{Kind: chat.AttachFile, URL: "data:application/pdf;base64," + base64.StdEncoding.EncodeToString(make([]byte, 4000))}, 1000},
		{"a file by URL", "anthropic", chat.Attachment{Kind: chat.AttachFile, URL: "https://x.example/a.pdf"}, fileByURL},
	} {
		if got := attachmentTokens(tc.provider, tc.a, text); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.name, got, tc.want)
		}
	}
}
