package llmorch

import (
	"encoding/base64"
	"hash/maphash"
	"image"
	_ "image/gif" // image.DecodeConfig reads the sizes of the formats registered
	_ "image/jpeg"
	_ "image/png"
	"io"
	"math"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
)

// A session keeps every image and file a user attached, with its message,
// and every model call of every later turn would send them all again: 25
// turns of a 700 KB image made each request 23 MB, until the provider
// refused it for good. So a request carries the attachments of the newest
// messages only, ServiceConfig.MaxAttachments of them; an older one is a
// line of text in its message that says what was there (omitted), and
// the context budget counts each one it carries as its provider does.

// DefaultMaxAttachments is ServiceConfig.MaxAttachments' default: the
// newest attachments a model request carries.
const DefaultMaxAttachments = 8

// omitted is the line that stands for an attachment a request leaves out.
func omitted(a chat.Attachment) string {
	what := "an image"
	if a.Kind != chat.AttachImage {
		what = "a file"
	}
	if a.Filename != "" {
		what += " (" + a.Filename + ")"
	}
	return "[" + what + " the user attached here is no longer shown: only the newest attachments of the conversation are]"
}

// limitAttachments returns msgs with the attachments beyond the newest
// max (max < 0: none are) replaced by the line omitted writes in their
// message. msgs is not changed: a message that loses attachments is a
// copy, and msgs itself comes back when nothing is left out.
func limitAttachments(msgs []chat.Message, max int) []chat.Message {
	if max < 0 {
		return msgs
	}
	kept := 0
	first := -1 // the newest message that loses an attachment
	for i := len(msgs) - 1; i >= 0 && first < 0; i-- {
		if kept+len(msgs[i].Attachments) > max {
			first = i
		}
		kept += len(msgs[i].Attachments)
	}
	if first < 0 {
		return msgs
	}
	out := make([]chat.Message, len(msgs))
	copy(out, msgs)
	left := max
	for i := len(out) - 1; i > first; i-- {
		left -= len(out[i].Attachments)
	}
	for i := first; i >= 0; i-- {
		m := &out[i]
		if len(m.Attachments) <= left {
			left -= len(m.Attachments)
			continue
		}
		// The message keeps its last attachments, the newest of it.
		drop := m.Attachments[:len(m.Attachments)-left]
		lines := make([]string, 0, len(drop)+1)
		if m.Content != "" {
			lines = append(lines, m.Content)
		}
		for _, a := range drop {
			lines = append(lines, omitted(a))
		}
		m.Content = strings.Join(lines, "\n")
		m.Attachments = m.Attachments[len(drop):len(m.Attachments):len(m.Attachments)]
		if len(m.Attachments) == 0 {
			m.Attachments = nil
		}
		left = 0
	}
	return out
}

// Image tokens as the providers count them (their docs, 2025):
//   - OpenAI (GPT-4o family): 85 at detail low; else the image scaled to
//     fit 2048 x 2048, then its shorter side to 768, and 85 + 170 per
//     512-pixel tile;
//   - Anthropic: width x height / 750 once scaled to fit 1568 pixels on
//     its longer side and 1.15 megapixels, about 1,600 at most.
//
// An image whose size cannot be read (a URL the provider fetches, a
// format not decoded here) counts as the most it can.
const (
	openAILowDetail  = 85
	openAIMaxImage   = 85 + 170*8 // 2048 x 768: 4 x 2 tiles
	anthropicMaxEdge = 1568
	anthropicMaxArea = 1_150_000
	anthropicMax     = 1600
)

// imageTokens is what provider counts for an image of w x h pixels (0, 0:
// unknown) at detail.
func imageTokens(provider string, w, h int, detail string) int {
	if provider == "anthropic" {
		if w <= 0 || h <= 0 {
			return anthropicMax
		}
		s := math.Min(1, float64(anthropicMaxEdge)/float64(max(w, h)))
		s = math.Min(s, math.Sqrt(anthropicMaxArea/(float64(w)*float64(h))))
		return max(1, min(anthropicMax, int(math.Ceil(float64(w)*s*float64(h)*s/750))))
	}
	if detail == "low" {
		return openAILowDetail
	}
	if w <= 0 || h <= 0 {
		return openAIMaxImage
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / math.Min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := int(math.Ceil(fw/512)) * int(math.Ceil(fh/512))
	return 85 + 170*tiles
}

// Files: a text file counts as its text; another (a PDF) by its size, a
// token per four bytes of its data (providers turn a PDF's pages into text
// and images, which this over-counts rather than under); a file by URL,
// whose size is unknown, as fileByURL.
const fileByURL = 4096

// attachmentTokens counts one attachment as provider would. count counts
// text.
func attachmentTokens(provider string, a chat.Attachment, count func(string) int) int {
	mediaType, data, isData := dataURL(a.URL)
	if a.Kind == chat.AttachImage {
		w, h := 0, 0
		if isData {
			if cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data))); err == nil {
				w, h = cfg.Width, cfg.Height
			}
		}
		return imageTokens(provider, w, h, a.Detail)
	}
	if !isData {
		return fileByURL
	}
	size := base64.StdEncoding.DecodedLen(len(data)) - (len(data) - len(strings.TrimRight(data, "=")))
	if strings.HasPrefix(mediaType, "text/") {
		raw, err := io.ReadAll(io.LimitReader(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)), int64(size)))
		if err == nil {
			return count(string(raw))
		}
	}
	return (size + 3) / 4
}

// dataURL returns a base64 data: URL's media type and data.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	head, data, found := strings.Cut(rest, ",")
	mediaType, enc, _ := strings.Cut(head, ";")
	if !found || enc != "base64" {
		return "", "", false
	}
	return mediaType, data, true
}

// attachment counts one attachment as the provider would; the count is
// kept by the hash of its URL (a data URL holds the content) and how it
// is shown, so that an image is decoded once while it is in use.
func (c *tokenCount) attachment(a chat.Attachment) int {
	k := c.cache.key(a.URL) ^ maphash.String(c.cache.seed, a.Kind+" "+a.Detail)
	if n, ok := c.cache.getKey(k); ok {
		return n
	}
	n := attachmentTokens(c.wire, a, c.count)
	c.cache.putKey(k, n)
	return n
}
