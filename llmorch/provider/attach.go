package provider

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentdock-go/agentdock/chat"
)

// Attachments reach the provider as content parts of its wire: OpenAI's
// image_url and file parts, Anthropic's image and document blocks.
// langchaingo builds an image_url part and a base64 image block itself;
// for the other parts it has no type, so convert puts a marker text part
// in their place and the transport swaps each marker for the part
// (callState.parts).

// markerPrefix opens the text of a marker part. It starts with a NUL,
// which no text a client sends reaches a provider with.
const markerPrefix = "\x00agentdock-part:"

func isMarker(text string) bool { return strings.HasPrefix(text, markerPrefix) }

// marker stands for part in the request langchaingo builds.
func (st *callState) marker(part any) (llms.ContentPart, error) {
	raw, err := json.Marshal(part)
	if err != nil {
		return nil, err
	}
	if st.parts == nil {
		st.parts = map[string]json.RawMessage{}
	}
	m := markerPrefix + strconv.Itoa(len(st.parts))
	st.parts[m] = raw
	return llms.TextContent{Text: m}, nil
}

// attachment converts one attachment for the model's wire.
func (m *model) attachment(a chat.Attachment, st *callState) (llms.ContentPart, error) {
	mediaType, data, isData := splitDataURL(a.URL)
	if m.cfg.Provider == OpenAI {
		if a.Kind == chat.AttachImage {
			return llms.ImageURLContent{URL: a.URL, Detail: a.Detail}, nil
		}
		if !isData {
			return nil, errors.New("OpenAI's chat completions take a file as data only (a data: URL), not by URL")
		}
		file := map[string]string{"file_data": a.URL}
		if a.Filename != "" {
			file["filename"] = a.Filename
		}
		return st.marker(map[string]any{"type": "file", "file": file})
	}
	switch {
	case a.Kind == chat.AttachImage && isData:
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("the image's data URL is not base64: %w", err)
		}
		return llms.BinaryContent{MIMEType: mediaType, Data: raw}, nil
	case a.Kind == chat.AttachImage:
		return st.marker(map[string]any{"type": "image", "source": map[string]string{"type": "url", "url": a.URL}})
	case !isData:
		return st.marker(map[string]any{"type": "document", "source": map[string]string{"type": "url", "url": a.URL}})
	case mediaType == "application/pdf":
		return st.marker(map[string]any{"type": "document", "source": map[string]string{"type": "base64", "media_type": mediaType, "data": data}})
	case strings.HasPrefix(mediaType, "text/"):
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fmt.Errorf("the file's data URL is not base64: %w", err)
		}
		return st.marker(map[string]any{"type": "document", "source": map[string]string{"type": "text", "media_type": "text/plain", "data": string(raw)}})
	}
	return nil, fmt.Errorf("Anthropic takes PDF and text files, not %q", mediaType)
}

// splitDataURL returns a base64 data: URL's media type and data.
func splitDataURL(u string) (mediaType, data string, ok bool) {
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

// swapMarkers replaces, in a request's messages, every text part that is
// a marker with the part it stands for (and a content that is a marker
// alone, as langchaingo writes a message of one text part, with a list of
// that part).
func swapMarkers(raw json.RawMessage, parts map[string]json.RawMessage) (json.RawMessage, error) {
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, err
	}
	for _, msg := range msgs {
		var s string
		if json.Unmarshal(msg["content"], &s) == nil {
			if p, ok := parts[s]; ok {
				msg["content"], _ = json.Marshal([]json.RawMessage{p})
			}
			continue
		}
		var blocks []json.RawMessage
		if json.Unmarshal(msg["content"], &blocks) != nil {
			continue
		}
		changed := false
		for i, b := range blocks {
			var head struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(b, &head) == nil && head.Type == "text" {
				if p, ok := parts[head.Text]; ok {
					blocks[i], changed = p, true
				}
			}
		}
		if changed {
			msg["content"], _ = json.Marshal(blocks)
		}
	}
	return json.Marshal(msgs)
}
