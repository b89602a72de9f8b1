package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
)

// What an OpenAI request brings besides its messages: client tools and
// tool_choice, the answer's format, and the images and files of a
// message's content. Each reader names the parameter at fault.

// Format is an answer format as a request gives it (response_format,
// text.format); the server compiles it (llmorch.NewFormat).
type Format struct {
	Type        string
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      bool
}

// functionTool is a tool of OpenAI's chat format ({"type": "function",
// "function": {...}}) or of the Responses API's ({"type": "function",
// "name": ...}).
type functionTool struct {
	Type        string          `json:"type"`
	Function    *functionDef    `json:"function"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// emptyParameters is the schema of a function that declares none.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// clientTools reads a tools parameter: function tools only (the agent's
// own tools stand for hosted ones).
func clientTools(raw json.RawMessage, param string) ([]chat.ToolSpec, *ParamError) {
	if isAbsent(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, paramErrorf(param, "invalid_request", "tools must be a list of function tools")
	}
	var out []chat.ToolSpec
	for i, item := range list {
		at := fmt.Sprintf("%s[%d]", param, i)
		var t functionTool
		if json.Unmarshal(item, &t) != nil {
			return nil, paramErrorf(at, "invalid_request", `a tool must be an object {"type": "function", ...}`)
		}
		if t.Type != "function" {
			return nil, paramErrorf(at+".type", "unsupported_parameter", "tools of type %q are not supported: only function tools, which the client runs itself (the agent's own tools stand for hosted ones)", clipParam(t.Type))
		}
		spec := chat.ToolSpec{Name: t.Name, Parameters: t.Parameters}
		if t.Description != nil {
			spec.Description = *t.Description
		}
		if t.Function != nil {
			spec = chat.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}
		}
		if spec.Name == "" {
			return nil, paramErrorf(at, "invalid_request", "a function tool needs its name")
		}
		if isAbsent(spec.Parameters) {
			spec.Parameters = emptyParameters
		} else {
			var obj map[string]json.RawMessage
			if json.Unmarshal(spec.Parameters, &obj) != nil {
				return nil, paramErrorf(at+".parameters", "invalid_request", "parameters must be a JSON Schema object")
			}
			var b bytes.Buffer
			if json.Compact(&b, spec.Parameters) == nil {
				spec.Parameters = b.Bytes()
			}
		}
		out = append(out, spec)
	}
	return out, nil
}

// toolChoice reads a tool_choice: "auto", "none", "required", a named
// function ({"type": "function", "function": {"name"}} or, in the
// Responses API, {"type": "function", "name"}), or allowed_tools
// ({"type": "allowed_tools", "mode", "tools"}, nested in "allowed_tools"
// in the chat format).
func toolChoice(raw json.RawMessage, param string) (orchestration.ToolChoice, *ParamError) {
	var c orchestration.ToolChoice
	if isAbsent(raw) {
		return c, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
		case "none":
			c.None = true
		case "required":
			c.Required = true
		default:
			return c, paramErrorf(param, "invalid_request", `tool_choice %q is not one of "auto", "none", "required" or an object naming tools`, clipParam(s))
		}
		return c, nil
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
		Mode         string            `json:"mode"`
		Tools        []json.RawMessage `json:"tools"`
		AllowedTools *struct {
			Mode  string            `json:"mode"`
			Tools []json.RawMessage `json:"tools"`
		} `json:"allowed_tools"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return c, paramErrorf(param, "invalid_request", "tool_choice must be a string or an object")
	}
	switch obj.Type {
	case "function":
		name := obj.Name
		if obj.Function != nil {
			name = obj.Function.Name
		}
		if name == "" {
			return c, paramErrorf(param, "invalid_request", "a named tool_choice needs the function's name")
		}
		c.Only, c.Required = []string{name}, true
	case "allowed_tools":
		mode, tools := obj.Mode, obj.Tools
		if obj.AllowedTools != nil {
			mode, tools = obj.AllowedTools.Mode, obj.AllowedTools.Tools
		}
		switch mode {
		case "", "auto":
		case "required":
			c.Required = true
		default:
			return c, paramErrorf(param, "invalid_request", `allowed_tools mode %q is not "auto" or "required"`, clipParam(mode))
		}
		c.Only = []string{}
		for i, t := range tools {
			var ft functionTool
			if json.Unmarshal(t, &ft) != nil || ft.Type != "function" {
				return c, paramErrorf(fmt.Sprintf("%s.tools[%d]", param, i), "unsupported_parameter", "allowed_tools may name function tools only")
			}
			name := ft.Name
			if ft.Function != nil {
				name = ft.Function.Name
			}
			if name == "" {
				return c, paramErrorf(fmt.Sprintf("%s.tools[%d]", param, i), "invalid_request", "a function tool needs its name")
			}
			c.Only = append(c.Only, name)
		}
	default:
		return c, paramErrorf(param, "unsupported_parameter", "tool_choice of type %q is not supported: function and allowed_tools are (hosted tools are the agent's own)", clipParam(obj.Type))
	}
	return c, nil
}

// format reads an answer format: {"type": "text"} (none), {"type":
// "json_object"}, or a JSON schema format, its fields nested in
// "json_schema" (chat) or beside "type" (Responses' text.format).
func format(raw json.RawMessage, param string) (*Format, *ParamError) {
	if isAbsent(raw) {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
		JSONSchema  *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return nil, paramErrorf(param, "invalid_request", `the format must be an object {"type": ...}`)
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &Format{Type: f.Type}, nil
	case "json_schema":
		out := &Format{Type: f.Type, Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict != nil && *f.Strict}
		if f.JSONSchema != nil {
			j := f.JSONSchema
			out = &Format{Type: f.Type, Name: j.Name, Description: j.Description, Schema: j.Schema, Strict: j.Strict != nil && *j.Strict}
		}
		return out, nil
	}
	return nil, paramErrorf(param+".type", "unsupported_parameter", "format %q is not supported (text, json_object and json_schema are)", clipParam(f.Type))
}

// contentPart is one part of an OpenAI content list, of either API.
type contentPart struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text"`
	Refusal  *string         `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
	Detail   string          `json:"detail"`
	File     *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	FileURL  string `json:"file_url"`
	Filename string `json:"filename"`
}

// The content part types that carry attachments.
var attachmentParts = map[string]bool{"image_url": true, "file": true, "input_image": true, "input_file": true}

// content reads an OpenAI content: a string, or a list of parts whose
// types are among types (their text joined with newlines); with attach,
// image and file parts too (image_url and file in the chat format,
// input_image and input_file in the Responses API). Another part (audio,
// or an attachment where none may be) is refused: the text alone would not
// be what the client sent.
func content(raw json.RawMessage, at string, attach bool, types ...string) (string, []chat.Attachment, *ParamError) {
	if isAbsent(raw) {
		return "", nil, paramErrorf(at, "invalid_message", "content is missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var parts []contentPart
	if json.Unmarshal(raw, &parts) != nil {
		return "", nil, paramErrorf(at, "invalid_message", `want a string or a list of {"type":"%s","text":...} parts`, types[0])
	}
	var (
		texts []string
		atts  []chat.Attachment
	)
	for j, p := range parts {
		where := fmt.Sprintf("%s[%d]", at, j)
		if attach && attachmentParts[p.Type] {
			a, pe := attachment(p, where)
			if pe != nil {
				return "", nil, pe
			}
			atts = append(atts, a)
			continue
		}
		ok := false
		for _, t := range types {
			ok = ok || p.Type == t
		}
		switch {
		case !ok:
			what := "text (parts of type " + strings.Join(types, ", ") + ")"
			if attach {
				what += ", images and files"
			}
			return "", nil, paramErrorf(where, "unsupported_parameter", "content parts of type %q are not supported here: the agent reads %s", clipParam(p.Type), what)
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case p.Refusal != nil:
			texts = append(texts, *p.Refusal)
		default:
			return "", nil, paramErrorf(where, "invalid_message", "a %s part needs its text", p.Type)
		}
	}
	return strings.Join(texts, "\n"), atts, nil
}

// attachment reads an image or file part.
func attachment(p contentPart, at string) (chat.Attachment, *ParamError) {
	switch p.Type {
	case "image_url", "input_image":
		a := chat.Attachment{Kind: chat.AttachImage, Detail: p.Detail}
		var u struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		}
		switch {
		case json.Unmarshal(p.ImageURL, &a.URL) == nil:
		case json.Unmarshal(p.ImageURL, &u) == nil:
			a.URL, a.Detail = u.URL, u.Detail
		}
		if a.URL == "" {
			if p.FileID != "" {
				return a, paramErrorf(at+".file_id", "unsupported_parameter", "images by file_id are not supported (there is no Files API here); send the image as a data: URL or an https URL")
			}
			return a, paramErrorf(at+".image_url", "invalid_message", "an image part needs its image_url")
		}
		mt, pe := checkURL(a.URL, at+".image_url")
		if pe != nil {
			return a, pe
		}
		if mt != "" && !strings.HasPrefix(mt, "image/") {
			return a, paramErrorf(at+".image_url", "invalid_message", "an image's data URL holds %q, not an image", clipParam(mt))
		}
		a.MediaType = mt
		switch a.Detail {
		case "", "auto", "low", "high":
		default:
			return a, paramErrorf(at+".detail", "invalid_message", `detail %q is not "auto", "low" or "high"`, clipParam(a.Detail))
		}
		return a, nil
	}
	a := chat.Attachment{Kind: chat.AttachFile, Filename: p.Filename}
	data, id := p.FileData, p.FileID
	if p.File != nil {
		data, id, a.Filename = p.File.FileData, p.File.FileID, p.File.Filename
	}
	switch {
	case data != "":
		if !strings.HasPrefix(data, "data:") {
			return a, paramErrorf(at+".file_data", "invalid_message", "file_data must be a data: URL (data:<media type>;base64,<data>)")
		}
		a.URL = data
	case p.FileURL != "":
		a.URL = p.FileURL
	case id != "":
		return a, paramErrorf(at+".file_id", "unsupported_parameter", "files by file_id are not supported (there is no Files API here); send file_data as a data: URL")
	default:
		return a, paramErrorf(at, "invalid_message", "a file part needs file_data or file_url")
	}
	mt, pe := checkURL(a.URL, at)
	if pe != nil {
		return a, pe
	}
	a.MediaType = mt
	return a, nil
}

// checkURL accepts an https URL or a base64 data: URL whose data is
// base64, and returns the data URL's media type. Where an https URL may
// point is the agent's to check (it resolves the host); an http URL is
// never taken: the provider would fetch it in the clear, and a link to
// a machine beside it is what the check is there to stop.
func checkURL(u, at string) (string, *ParamError) {
	switch {
	case strings.HasPrefix(u, "https://"):
		return "", nil
	case strings.HasPrefix(u, "data:"):
		head, data, ok := strings.Cut(u[len("data:"):], ",")
		mt, enc, _ := strings.Cut(head, ";")
		if !ok || enc != "base64" || mt == "" {
			return "", paramErrorf(at, "invalid_message", "a data: URL must be data:<media type>;base64,<data>")
		}
		if !validBase64(data) {
			return "", paramErrorf(at, "invalid_message", "the data of the data: URL is not base64 (RFC 4648, with padding)")
		}
		return mt, nil
	}
	return "", paramErrorf(at, "invalid_message", "want an https URL or a data: URL, not %q", clipParam(u))
}

// validBase64 reports whether data is standard base64 with its padding,
// decoding it in small pieces rather than whole.
func validBase64(data string) bool {
	if len(data)%4 != 0 || strings.ContainsAny(data, "\r\n") {
		return false
	}
	_, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	return err == nil
}
