package mockllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The wire formats the server speaks.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
)

// Request is one request the server received, decoded into one shape for
// both wire formats so that tests can assert what a provider sent.
type Request struct {
	// API is APIOpenAI or APIAnthropic.
	API    string
	Path   string
	Header http.Header
	// Body is the raw request body.
	Body json.RawMessage

	Model  string
	Stream bool
	// IncludeUsage is OpenAI's stream_options.include_usage.
	IncludeUsage bool
	// System is the system prompt: Anthropic's system field, or the
	// OpenAI system messages joined by blank lines.
	System string
	// Messages are the conversation without system messages.
	Messages []Message
	Tools    []Tool
	// ToolChoice is the request's tool_choice as sent (nil when absent).
	ToolChoice json.RawMessage
	// Prefix is what a prompt cache made of the request (nil without
	// Config.PrefixCache).
	Prefix *Prefix
	// Temperature, MaxTokens (max_tokens) and MaxCompletionTokens
	// (max_completion_tokens) are nil when the field was absent.
	Temperature         *float64
	MaxTokens           *int
	MaxCompletionTokens *int
}

// Message is one conversation entry as received.
type Message struct {
	Role string
	// Text is the message's text, its text parts concatenated.
	Text        string
	ToolCalls   []ToolCall
	ToolResults []ToolResult
}

// ToolResult answers one tool call (an OpenAI tool message or an Anthropic
// tool_result block).
type ToolResult struct {
	CallID  string
	Content string
	IsError bool
}

// Tool is one tool offered to the model.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ToolNames returns the names of the offered tools, in order.
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

// Callable names the tools the request lets the model call: those of
// OpenAI's tool_choice {"type":"allowed_tools"} (chat completions' shape),
// none for "none", else every tool sent.
func (r Request) Callable() []string {
	var choice struct {
		Type         string `json:"type"`
		AllowedTools struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		} `json:"allowed_tools"`
	}
	switch {
	case len(r.ToolChoice) == 0:
	case string(r.ToolChoice) == `"none"`:
		return []string{}
	case json.Unmarshal(r.ToolChoice, &choice) == nil && choice.Type == "allowed_tools":
		names := make([]string, 0, len(choice.AllowedTools.Tools))
		for _, t := range choice.AllowedTools.Tools {
			names = append(names, t.Function.Name)
		}
		return names
	}
	return r.ToolNames()
}

// decodeRequest decodes body as api's request. Errors say which field is
// wrong; they become 400 responses.
func decodeRequest(api string, body []byte) (Request, error) {
	req := Request{API: api, Body: append(json.RawMessage(nil), body...)}
	var raw struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages            []json.RawMessage `json:"messages"`
		System              json.RawMessage   `json:"system"`
		Tools               []json.RawMessage `json:"tools"`
		ToolChoice          json.RawMessage   `json:"tool_choice"`
		Temperature         *float64          `json:"temperature"`
		MaxTokens           *int              `json:"max_tokens"`
		MaxCompletionTokens *int              `json:"max_completion_tokens"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return req, fmt.Errorf("body is not a JSON request object: %w", err)
	}
	if raw.Model == "" {
		return req, errors.New(`"model" is required`)
	}
	if raw.Messages == nil {
		return req, errors.New(`"messages" is required`)
	}
	req.Model, req.Stream, req.ToolChoice = raw.Model, raw.Stream, raw.ToolChoice
	req.IncludeUsage = raw.StreamOptions != nil && raw.StreamOptions.IncludeUsage
	req.Temperature, req.MaxTokens, req.MaxCompletionTokens = raw.Temperature, raw.MaxTokens, raw.MaxCompletionTokens
	if api == APIAnthropic && raw.MaxTokens == nil {
		return req, errors.New(`"max_tokens" is required`)
	}

	var system []string
	if api == APIAnthropic && len(raw.System) > 0 && string(raw.System) != "null" {
		text, err := anthropicText(raw.System)
		if err != nil {
			return req, fmt.Errorf(`"system": %w`, err)
		}
		system = append(system, text)
	}
	for i, m := range raw.Messages {
		var msg Message
		var err error
		if api == APIOpenAI {
			msg, err = decodeOpenAIMessage(m)
		} else {
			msg, err = decodeAnthropicMessage(m)
		}
		if err != nil {
			return req, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if msg.Role == "system" {
			system = append(system, msg.Text)
			continue
		}
		req.Messages = append(req.Messages, msg)
	}
	req.System = strings.Join(system, "\n\n")

	for i, t := range raw.Tools {
		tool, err := decodeTool(api, t)
		if err != nil {
			return req, fmt.Errorf("tools[%d]: %w", i, err)
		}
		req.Tools = append(req.Tools, tool)
	}
	return req, nil
}

func decodeTool(api string, data json.RawMessage) (Tool, error) {
	if api == APIOpenAI {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(data, &t); err != nil {
			return Tool{}, err
		}
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return Tool{}, errors.New(`want {"type":"function","function":{"name":...}}`)
		}
		return Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters}, nil
	}
	var t struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return Tool{}, err
	}
	if t.Name == "" {
		return Tool{}, errors.New(`"name" is required`)
	}
	return Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}, nil
}

func decodeOpenAIMessage(data json.RawMessage) (Message, error) {
	var m struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Message{}, err
	}
	if m.Role == "" {
		return Message{}, errors.New(`"role" is required`)
	}
	text, err := openAIText(m.Content)
	if err != nil {
		return Message{}, fmt.Errorf(`"content": %w`, err)
	}
	msg := Message{Role: m.Role}
	for _, tc := range m.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if m.Role == "tool" {
		msg.ToolResults = []ToolResult{{CallID: m.ToolCallID, Content: text}}
	} else {
		msg.Text = text
	}
	return msg, nil
}

// openAIText reads OpenAI content: a string, null, or an array of parts.
func openAIText(content json.RawMessage) (string, error) {
	if len(content) == 0 || string(content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", errors.New("want a string, null or an array of parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// anthropicBlocks reads Anthropic content: a string or an array of blocks.
func anthropicBlocks(content json.RawMessage) ([]anthropicBlock, error) {
	var s string
	if err := json.Unmarshal(content, &s); err == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, errors.New("want a string or an array of content blocks")
	}
	return blocks, nil
}

func anthropicText(content json.RawMessage) (string, error) {
	if len(content) == 0 || string(content) == "null" {
		return "", nil
	}
	blocks, err := anthropicBlocks(content)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		}
	}
	return b.String(), nil
}

func decodeAnthropicMessage(data json.RawMessage) (Message, error) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Message{}, err
	}
	if m.Role != "user" && m.Role != "assistant" {
		return Message{}, fmt.Errorf(`"role" must be "user" or "assistant", not %q`, m.Role)
	}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return Message{}, errors.New(`"content" is required`)
	}
	blocks, err := anthropicBlocks(m.Content)
	if err != nil {
		return Message{}, fmt.Errorf(`"content": %w`, err)
	}
	msg := Message{Role: m.Role}
	var text strings.Builder
	for i, bl := range blocks {
		switch bl.Type {
		case "text":
			text.WriteString(bl.Text)
		case "tool_use":
			if bl.ID == "" || bl.Name == "" {
				return Message{}, fmt.Errorf("content[%d]: tool_use needs id and name", i)
			}
			args := string(bl.Input)
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: bl.ID, Name: bl.Name, Arguments: args})
		case "tool_result":
			if bl.ToolUseID == "" {
				return Message{}, fmt.Errorf("content[%d]: tool_result needs tool_use_id", i)
			}
			content, err := anthropicText(bl.Content)
			if err != nil {
				return Message{}, fmt.Errorf("content[%d].content: %w", i, err)
			}
			msg.ToolResults = append(msg.ToolResults, ToolResult{CallID: bl.ToolUseID, Content: content, IsError: bl.IsError})
		}
	}
	msg.Text = text.String()
	return msg, nil
}
