package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
)

// The OpenAI-compatible endpoints read OpenAI's request bodies. Every
// parameter OpenAI defines is either honoured, refused when its value asks
// for something the server cannot do (a ParamError naming it), or accepted
// and ignored as docs/api.md lists; a parameter OpenAI does not define is
// refused, as OpenAI refuses it. None is dropped silently.

// A ParamError is a request the server refuses because of one parameter:
// Param is its path in OpenAI's notation ("messages[2].content[0]").
type ParamError struct {
	Param string
	// Code is unknown_parameter, unsupported_parameter or invalid_request
	// (invalid_message for a message the agent cannot take).
	Code    string
	Message string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Message }

func paramErrorf(param, code, format string, args ...any) *ParamError {
	return &ParamError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// paramRule says what the server does with one parameter: accept, when
// set, reports whether a value asks only for what the server does (null is
// always accepted); why is the message of a refusal.
type paramRule struct {
	accept func(json.RawMessage) bool
	why    string
}

// anyValue is the rule of a parameter honoured or ignored whatever its value.
var anyValue = paramRule{}

// checkParams refuses the first top-level parameter of the JSON object data
// that rules does not know, or whose value its rule does not accept, in the
// order of the body. A body that is not an object is left to the decoder.
func checkParams(data []byte, rules map[string]paramRule) *ParamError {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		rule, known := rules[name]
		switch {
		case !known:
			return paramErrorf(clipParam(name), "unknown_parameter", "unrecognized request argument supplied: %s", clipParam(name))
		case rule.accept != nil && !isNull(raw) && !rule.accept(raw):
			return paramErrorf(name, "unsupported_parameter", "%s", rule.why)
		}
	}
	return nil
}

func clipParam(s string) string {
	if len(s) > 64 {
		return s[:61] + "..."
	}
	return s
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// isString returns a rule test accepting the JSON strings given.
func isString(want ...string) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		for _, w := range want {
			if s == w {
				return true
			}
		}
		return false
	}
}

func isNumber(want float64) func(json.RawMessage) bool {
	return func(raw json.RawMessage) bool {
		var f float64
		return json.Unmarshal(raw, &f) == nil && f == want
	}
}

func isFalse(raw json.RawMessage) bool {
	var b bool
	return json.Unmarshal(raw, &b) == nil && !b
}

func isEmptyArray(raw json.RawMessage) bool {
	var a []json.RawMessage
	return json.Unmarshal(raw, &a) == nil && len(a) == 0
}

func isEmptyObject(raw json.RawMessage) bool {
	var o map[string]json.RawMessage
	return json.Unmarshal(raw, &o) == nil && len(o) == 0
}

// isEmptyStop accepts a stop parameter that asks for no stop sequence.
func isEmptyStop(raw json.RawMessage) bool { return isEmptyArray(raw) || isString("")(raw) }

// isTextFormat accepts {"type": "text"} (a response_format or a
// text.format asking for plain text, the only format the agent gives).
func isTextFormat(raw json.RawMessage) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) == nil && f.Type == "text"
}

// isTextOnly accepts modalities that ask for text only.
func isTextOnly(raw json.RawMessage) bool {
	var m []string
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for _, s := range m {
		if s != "text" {
			return false
		}
	}
	return true
}

func never(json.RawMessage) bool { return false }

const noClientTools = "client tools are not supported: the agent offers its own tools under its orchestration (GET /api/agents/{model} lists them); send the request without them"

// chatParams are the parameters of POST /v1/chat/completions.
var chatParams = map[string]paramRule{
	// Honoured.
	"model": anyValue, "messages": anyValue, "stream": anyValue, "stream_options": anyValue, "user": anyValue,
	// Refused unless they ask for nothing the server cannot do.
	"tools":              {isEmptyArray, noClientTools},
	"functions":          {isEmptyArray, noClientTools},
	"tool_choice":        {isString("auto"), `tool_choice applies to client tools, which are not supported; the agent's orchestration decides which of its own tools the model may call ("auto" is accepted)`},
	"function_call":      {isString("auto"), `function_call applies to client functions, which are not supported ("auto" is accepted)`},
	"n":                  {isNumber(1), "n must be 1: a turn gives one answer"},
	"stop":               {isEmptyStop, "stop sequences are not supported: the agent's answer spans several model calls and cannot be cut at a stop sequence"},
	"logit_bias":         {isEmptyObject, "logit_bias is not supported: the agent's model is chosen by its template and may not take it"},
	"logprobs":           {isFalse, "logprobs are not supported"},
	"top_logprobs":       {isNumber(0), "top_logprobs is not supported (logprobs are not)"},
	"response_format":    {isTextFormat, `only {"type": "text"} is supported: the agent's answer is not guaranteed to match a JSON format`},
	"modalities":         {isTextOnly, `only the "text" modality is supported`},
	"audio":              {never, "audio output is not supported"},
	"web_search_options": {never, "web_search_options is not supported: searching is one of the agent's own tools, offered by its orchestration"},
	// Accepted and ignored (docs/api.md says why for each).
	"temperature": anyValue, "top_p": anyValue, "presence_penalty": anyValue, "frequency_penalty": anyValue,
	"seed": anyValue, "max_tokens": anyValue, "max_completion_tokens": anyValue, "reasoning_effort": anyValue,
	"verbosity": anyValue, "service_tier": anyValue, "metadata": anyValue, "store": anyValue, "prediction": anyValue,
	"parallel_tool_calls": anyValue, "safety_identifier": anyValue, "prompt_cache_key": anyValue,
	"prompt_cache_retention": anyValue,
}

// ChatCompletionRequest is the body of POST /v1/chat/completions, as far as
// the server uses it.
type ChatCompletionRequest struct {
	Model         string        `json:"model"`
	Messages      []ChatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

// ChatMessage is one of a chat completion request's messages.
type ChatMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	ToolCalls    []ChatToolCall  `json:"tool_calls"`
	ToolCallID   string          `json:"tool_call_id"`
	FunctionCall json.RawMessage `json:"function_call"`
	Audio        json.RawMessage `json:"audio"`
}

// ChatToolCall is one tool call of an assistant message.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ParseChatCompletion reads a chat completion request: a *ParamError for a
// parameter the server refuses, a *JSONError for a body that does not
// decode.
func ParseChatCompletion(data []byte) (*ChatCompletionRequest, error) {
	if pe := checkParams(data, chatParams); pe != nil {
		return nil, pe
	}
	var r ChatCompletionRequest
	if err := Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Conversation converts the messages into the conversation: system and
// developer messages are left out (the agent's template gives its system
// prompt), and the others become chat messages. index[i] is the position in
// Messages of the i-th message returned, to name it in errors.
func (r *ChatCompletionRequest) Conversation() (msgs []chat.Message, index []int, err *ParamError) {
	for i, m := range r.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		var cm chat.Message
		switch m.Role {
		case "system", "developer":
			continue
		case "user":
			text, pe := contentText(m.Content, at+".content", "text")
			if pe != nil {
				return nil, nil, pe
			}
			cm = chat.Message{Role: chat.RoleUser, Content: text}
		case "assistant":
			if !isAbsent(m.FunctionCall) {
				return nil, nil, paramErrorf(at+".function_call", "unsupported_parameter", "function_call messages are not supported (client functions are not)")
			}
			if !isAbsent(m.Audio) {
				return nil, nil, paramErrorf(at+".audio", "unsupported_parameter", "audio is not supported")
			}
			text := ""
			if !isAbsent(m.Content) {
				var pe *ParamError
				if text, pe = contentText(m.Content, at+".content", "text", "refusal"); pe != nil {
					return nil, nil, pe
				}
			}
			cm = chat.Message{Role: chat.RoleAssistant, Content: text}
			for j, c := range m.ToolCalls {
				call, pe := toolCall(c.ID, c.Type, c.Function.Name, c.Function.Arguments, fmt.Sprintf("%s.tool_calls[%d]", at, j))
				if pe != nil {
					return nil, nil, pe
				}
				cm.ToolCalls = append(cm.ToolCalls, call)
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, paramErrorf(at+".tool_call_id", "invalid_request", "a tool message needs tool_call_id")
			}
			text, pe := contentText(m.Content, at+".content", "text")
			if pe != nil {
				return nil, nil, pe
			}
			// The result of a call that did not run says so in its first
			// words, which is all a conversation in OpenAI's format keeps.
			cm = chat.Message{Role: chat.RoleTool, ToolCallID: m.ToolCallID, Content: text, NotRun: chat.NotRunContent(text)}
		case "function":
			return nil, nil, paramErrorf(at+".role", "unsupported_parameter", `the "function" role is not supported (client functions are not)`)
		default:
			return nil, nil, paramErrorf(at+".role", "invalid_request", "role %q is not one of system, developer, user, assistant, tool", clipParam(m.Role))
		}
		msgs = append(msgs, cm)
		index = append(index, i)
	}
	return msgs, index, nil
}

// LastUserText returns the text of the last user message and its position.
func (r *ChatCompletionRequest) LastUserText() (string, *ParamError) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return contentText(r.Messages[i].Content, fmt.Sprintf("messages[%d].content", i), "text")
		}
	}
	return "", paramErrorf("messages", "invalid_message", `messages must contain a message with role "user"`)
}

// toolCall converts one tool call of the conversation; the tool's name is
// checked by the agent (only its own tools' calls can be replayed).
func toolCall(id, typ, name, arguments, at string) (chat.ToolCall, *ParamError) {
	switch {
	case typ != "" && typ != "function" && typ != "function_call":
		return chat.ToolCall{}, paramErrorf(at+".type", "unsupported_parameter", "tool calls of type %q are not supported", clipParam(typ))
	case id == "":
		return chat.ToolCall{}, paramErrorf(at, "invalid_request", "a tool call needs an ID")
	case name == "":
		return chat.ToolCall{}, paramErrorf(at, "invalid_request", "a tool call needs the function's name")
	}
	args := json.RawMessage(strings.TrimSpace(arguments))
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return chat.ToolCall{}, paramErrorf(at, "invalid_request", "the arguments of a tool call must be a JSON object, in a string")
	}
	return chat.ToolCall{ID: id, Name: name, Arguments: args}, nil
}

func isAbsent(raw json.RawMessage) bool { return len(raw) == 0 || isNull(raw) }

// contentText reads an OpenAI content: a string, or a list of parts whose
// types are among types (their text joined with newlines). A part of
// another type (an image, a file, audio) is refused: the text alone would
// not be what the client sent.
func contentText(raw json.RawMessage, at string, types ...string) (string, *ParamError) {
	if isAbsent(raw) {
		return "", paramErrorf(at, "invalid_message", "content is missing")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type    string  `json:"type"`
		Text    *string `json:"text"`
		Refusal *string `json:"refusal"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", paramErrorf(at, "invalid_message", `want a string or a list of {"type":"%s","text":...} parts`, types[0])
	}
	var texts []string
	for j, p := range parts {
		ok := false
		for _, t := range types {
			ok = ok || p.Type == t
		}
		switch {
		case !ok:
			return "", paramErrorf(fmt.Sprintf("%s[%d]", at, j), "unsupported_parameter", "content parts of type %q are not supported: the agent reads text (parts of type %s)", clipParam(p.Type), strings.Join(types, ", "))
		case p.Text != nil:
			texts = append(texts, *p.Text)
		case p.Refusal != nil:
			texts = append(texts, *p.Refusal)
		default:
			return "", paramErrorf(fmt.Sprintf("%s[%d]", at, j), "invalid_message", "a %s part needs its text", p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}
