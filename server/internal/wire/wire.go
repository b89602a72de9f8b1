// Package wire parses what clients send the HTTP API: chat request bodies
// (the AI SDK's UI messages or a plain message), OpenAI-style message
// content, Last-Event-ID values, and JSON that fails to decode, located by
// line and column.
//
// It is apart from package server so that its fuzz targets do not link gin,
// OpenTelemetry or langchaingo: the fuzzer instruments every package a test
// binary links, and with server's dependencies these parsers were fuzzed
// about twenty times slower (1,000 inputs/s instead of 21,000 here).
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/jsonpos"
	"github.com/agentdock-go/agentdock/session"
)

// ChatRequest is the body of POST /api/chat/:agentId: the AI SDK's
// (id, messages) or the plain (message, sessionId).
type ChatRequest struct {
	ID        string    `json:"id"`
	Messages  []Message `json:"messages"`
	Message   *string   `json:"message"`
	SessionID string    `json:"sessionId"`
	// Trigger is the AI SDK's: "submit-message", or "regenerate-message"
	// to replace the answer to the last user message.
	Trigger string `json:"trigger"`
	// MessageID is the AI SDK's: with submit-message, the message the
	// request's last message replaces (sendMessage({text, messageId}));
	// with regenerate-message, the answer replaced.
	MessageID string `json:"messageId"`
	// Edit, in the plain shape, makes message replace the session's last
	// user message (edit and resend).
	Edit bool `json:"edit"`
	// Busy is the request's busy policy: reject, enqueue or interrupt
	// ("": the agent's, else enqueue).
	Busy string `json:"busy"`
	// Background starts the turn without streaming it: 202 with its ID.
	Background bool `json:"background"`
	// Webhook is the URL a background turn calls when it ends.
	Webhook string `json:"webhook"`
}

// Edits reports whether the request replaces the session's last user
// message with its text: the plain shape's "edit", or the AI SDK's
// submit-message whose messageId is its last message, a user message.
func (r *ChatRequest) Edits() bool {
	if r.Edit {
		return true
	}
	if r.Trigger != "submit-message" || r.MessageID == "" || len(r.Messages) == 0 {
		return false
	}
	last := r.Messages[len(r.Messages)-1]
	return last.ID == r.MessageID && last.Role == "user"
}

// Message is an AI SDK UI message (parts) or a classic one (content).
type Message struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Parts   []Part          `json:"parts"`
	Content json.RawMessage `json:"content"`
}

// Part is one part of a message; only text parts carry what the user said.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// MediaType, URL and Filename are a file part's (the AI SDK's
	// attachments: images and files, by a data: or an https URL).
	MediaType string `json:"mediaType"`
	URL       string `json:"url"`
	Filename  string `json:"filename"`
}

// Attachments returns the file parts of the last user message of
// messages, as attachments (an image when its media type is one), or the
// error naming the part that is not a usable attachment.
func (r *ChatRequest) Attachments() ([]chat.Attachment, *ParamError) {
	if r.Message != nil {
		return nil, nil
	}
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var out []chat.Attachment
		for j, p := range m.Parts {
			if p.Type != "file" {
				continue
			}
			if p.URL == "" {
				return nil, paramErrorf(fmt.Sprintf("messages[%d].parts[%d].url", i, j), "invalid_message", "want an https URL or a data: URL, not %q", "")
			}
			a, pe := Attachment(FilePart{URL: p.URL, MediaType: p.MediaType, Filename: p.Filename}, fmt.Sprintf("messages[%d].parts[%d].url", i, j))
			if pe != nil {
				return nil, pe
			}
			out = append(out, a)
		}
		return out, nil
	}
	return nil, nil
}

// Text returns what the user said: message when it is set, else the text of
// the last user message of messages.
func (r *ChatRequest) Text() (string, error) {
	switch {
	case r.Message != nil:
		return *r.Message, nil
	case len(r.Messages) > 0:
		return LastUserText(r.Messages)
	}
	return "", errors.New(`the body needs "message" (a string) or "messages" (AI SDK UI messages)`)
}

// LastUserText returns the text of the last user message: its text parts
// joined, or its content (a string, or a list of {type:"text", text} parts).
// Earlier messages are the client's copy of the history, which the server
// keeps itself.
func LastUserText(msgs []Message) (string, error) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != "user" {
			continue
		}
		var texts []string
		for _, p := range m.Parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		if len(m.Parts) == 0 && len(m.Content) > 0 {
			t, err := ContentText(m.Content)
			if err != nil {
				return "", fmt.Errorf("messages[%d].content: %w", i, err)
			}
			texts = append(texts, t)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", errors.New(`no user message: messages must contain one with role "user"`)
}

// ContentText reads an OpenAI-style content: a string or a list of parts.
func ContentText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []Part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New(`want a string or a list of {"type":"text","text":...} parts`)
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// EventID is the SSE id of a turn's frame: "<turnId>:<seq>".
func EventID(turnID string, seq int64) string { return string(AppendEventID(nil, turnID, seq, 0)) }

// RestartedEventID is the SSE id of a turn's frame that follows restart
// takeovers of the turn (chat.KindRestart): "<turnId>:<seq>.<restart>",
// EventID's for 0. A server that takes a turn over numbers its frames
// after the last one the shared log had, which may come before the last
// one the dead server sent its clients: the restart count tells a frame
// of the dead server from the new one's of the same seq.
func RestartedEventID(turnID string, seq int64, restart int) string {
	return string(AppendEventID(nil, turnID, seq, restart))
}

// AppendEventID appends RestartedEventID(turnID, seq, restart) to dst.
func AppendEventID(dst []byte, turnID string, seq int64, restart int) []byte {
	dst = strconv.AppendInt(append(append(dst, turnID...), ':'), seq, 10)
	if restart > 0 {
		dst = strconv.AppendInt(append(dst, '.'), int64(restart), 10)
	}
	return dst
}

// ParseEventID splits a Last-Event-ID made by EventID or
// RestartedEventID.
func ParseEventID(s string) (turnID string, seq int64, restart int, err error) {
	id, n, ok := strings.Cut(s, ":")
	if !ok || !session.ValidID(id) {
		return "", 0, 0, errors.New(`want "<turnId>:<seq>"`)
	}
	n, r, restarted := strings.Cut(n, ".")
	seq, err = strconv.ParseInt(n, 10, 64)
	if err != nil || seq < 0 {
		return "", 0, 0, errors.New(`the part after ":" must be a non-negative integer`)
	}
	if restarted {
		k, err := strconv.Atoi(r)
		if err != nil || k <= 0 || strconv.Itoa(k) != r {
			return "", 0, 0, errors.New(`the part after "." must be a positive integer`)
		}
		restart = k
	}
	return id, seq, restart, nil
}

// A JSONError says where and why a request body is not the JSON expected.
// Line and Column are 1-based; both are 0 when the decoder gave no position.
type JSONError struct {
	Line, Column int
	Reason       string
}

func (e *JSONError) Error() string {
	if e.Line == 0 {
		return "invalid JSON: " + e.Reason
	}
	return fmt.Sprintf("invalid JSON at line %d, column %d: %s", e.Line, e.Column, e.Reason)
}

// Unmarshal decodes data into v like json.Unmarshal. Its errors are
// *JSONError, which a client can act on: encoding/json's offsets count bytes,
// but people look for lines and columns.
func Unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return &JSONError{Reason: "the body is empty; a JSON object is required"}
	case errors.As(err, &se) && se.Error() == "unexpected end of JSON input":
		line, col := jsonpos.Position(data, int64(len(data)))
		return &JSONError{line, col, "the body ends too early"}
	case errors.As(err, &se):
		line, col := jsonpos.Position(data, se.Offset)
		return &JSONError{line, col, se.Error()}
	case errors.As(err, &te):
		line, col := jsonpos.Position(data, te.Offset)
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return &JSONError{line, col, fmt.Sprintf("%s must be %s, not %s", field, jsonKind(te.Type), jsonValue(te.Value))}
	}
	return &JSONError{Reason: "the body is not the JSON object expected"}
}

// jsonKind names what a Go type decodes from, in JSON's words: a client
// knows arrays and objects, not []wire.Message.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// jsonValue names the kind of JSON value encoding/json found ("string",
// "number 1.5", "array", ...).
func jsonValue(v string) string {
	switch {
	case v == "array", v == "object":
		return "an " + v
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "":
		return "another value"
	}
	return "a " + v
}

// A UTF8Error says where a request body stops being UTF-8 text: a byte
// that is not UTF-8, or a \u escape of half a UTF-16 surrogate pair.
// encoding/json would quietly turn either into U+FFFD, changing what the
// client sent.
type UTF8Error struct {
	Line, Column int
	// Escape is set for a lone surrogate escape.
	Escape bool
}

func (e *UTF8Error) Error() string {
	if e.Escape {
		return fmt.Sprintf("invalid text at line %d, column %d: a \\u escape of half a surrogate pair is not a character", e.Line, e.Column)
	}
	return fmt.Sprintf("invalid text at line %d, column %d: the body is not valid UTF-8", e.Line, e.Column)
}

// CheckUTF8 reports the first place where data is not UTF-8 text (see
// UTF8Error), or nil.
func CheckUTF8(data []byte) error {
	fail := func(off int, escape bool) error {
		line, col := jsonpos.Position(data, int64(off)+1) // Position counts bytes read
		return &UTF8Error{Line: line, Column: col, Escape: escape}
	}
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return fail(i, false)
			}
			i += n
		}
	}
	// Escapes: outside strings a backslash is a syntax error, which
	// decoding reports, so every backslash starts an escape here.
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] != 'u' {
			i++ // a two-character escape, e.g. \\ or \"
			continue
		}
		u, ok := hex4(data, i+2)
		switch {
		case !ok:
			i++ // not an escape decoding accepts: a syntax error
		case u >= 0xDC00 && u <= 0xDFFF:
			return fail(i, true)
		case u >= 0xD800 && u <= 0xDBFF:
			lo, ok := uint16(0), false
			if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
				lo, ok = hex4(data, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fail(i, true)
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}

// hex4 reads four hex digits at data[at:].
func hex4(data []byte, at int) (uint16, bool) {
	if at+4 > len(data) {
		return 0, false
	}
	var v uint16
	for _, c := range data[at : at+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(d)
	}
	return v, true
}

// LastUserID is the ID of the request's last message when it is a user
// message (the AI SDK's UI message ID), "" otherwise.
func (r *ChatRequest) LastUserID() string {
	if len(r.Messages) == 0 {
		return ""
	}
	if last := r.Messages[len(r.Messages)-1]; last.Role == "user" {
		return last.ID
	}
	return ""
}
