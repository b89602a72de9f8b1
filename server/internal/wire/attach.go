package wire

import (
	"strings"

	"github.com/agentdock-go/agentdock/chat"
)

// FilePart is an image or a file a message carries, as the doors'
// protocols give it: by URL (an https URL, or a data: URL holding the
// content), or as raw base64 bytes with their media type (A2A's raw,
// AG-UI's data source). Filename names a file.
type FilePart struct {
	URL, Raw, MediaType, Filename string
}

// Attachment reads a file part of a message the same way on every door:
// an https URL or a base64 data: URL (raw bytes become one), whose media
// type is the data's own or the part's, an image when that type is one.
// at names the part in errors ("message.parts[1]"). What the agent checks
// of an attachment (its model takes its kind, MAX_ATTACHMENT_BYTES, where
// an https URL may point) it checks as the turn starts, whatever the door.
func Attachment(p FilePart, at string) (chat.Attachment, *ParamError) {
	a := chat.Attachment{Kind: chat.AttachFile, URL: p.URL, MediaType: p.MediaType, Filename: p.Filename}
	switch {
	case p.URL != "" && p.Raw != "":
		return a, paramErrorf(at, "invalid_message", "a file part holds its content by URL or as raw bytes, not both")
	case p.Raw != "" && p.MediaType == "":
		return a, paramErrorf(at, "invalid_message", "a file part with raw bytes needs its media type (mediaType)")
	case p.Raw != "":
		a.URL = "data:" + p.MediaType + ";base64," + p.Raw
	case p.URL == "":
		return a, paramErrorf(at, "invalid_message", "a file part needs its content: an https or data: URL, or raw base64 bytes")
	}
	mt, pe := checkURL(a.URL, at)
	if pe != nil {
		return a, pe
	}
	if mt != "" {
		a.MediaType = mt
	}
	if strings.HasPrefix(a.MediaType, "image/") {
		a.Kind = chat.AttachImage
	}
	return a, nil
}
