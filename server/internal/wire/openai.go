package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
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

// chatParams are the parameters of POST /v1/chat/completions.
var chatParams = map[string]paramRule{
	// Honoured.
	"model": anyValue, "messages": anyValue, "stream": anyValue, "stream_options": anyValue, "user": anyValue,
	"tools": anyValue, "tool_choice": anyValue, "response_format": anyValue, "parallel_tool_calls": anyValue,
	// Refused unless they ask for nothing the server cannot do.
	"functions":          {isEmptyArray, "functions (deprecated) are not supported: send them as tools"},
	"function_call":      {isString("auto"), `function_call (deprecated) is not supported: use tool_choice ("auto" is accepted)`},
	"n":                  {isNumber(1), "n must be 1: a turn gives one answer"},
	"stop":               {isEmptyStop, "stop sequences are not supported: the agent's answer spans several model calls and cannot be cut at a stop sequence"},
	"logit_bias":         {isEmptyObject, "logit_bias is not supported: the agent's model is chosen by its template and may not take it"},
	"logprobs":           {isFalse, "logprobs are not supported"},
	"top_logprobs":       {isNumber(0), "top_logprobs is not supported (logprobs are not)"},
	"modalities":         {isTextOnly, `only the "text" modality is supported`},
	"audio":              {never, "audio output is not supported"},
	"web_search_options": {never, "web_search_options is not supported: searching is one of the agent's own tools, offered by its orchestration"},
	// Accepted and ignored (docs/api.md says why for each).
	"temperature": anyValue, "top_p": anyValue, "presence_penalty": anyValue, "frequency_penalty": anyValue,
	"seed": anyValue, "max_tokens": anyValue, "max_completion_tokens": anyValue, "reasoning_effort": anyValue,
	"verbosity": anyValue, "service_tier": anyValue, "metadata": anyValue, "store": anyValue, "prediction": anyValue,
	"safety_identifier": anyValue, "prompt_cache_key": anyValue,
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
	User           string          `json:"user"`
	ToolsParam     json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
	// ParallelToolCalls is parallel_tool_calls (nil: absent, which is
	// true).
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
}

// OneCallPerAnswer reports whether the request turns parallel tool calls
// off (parallel_tool_calls: false): one call of each model answer runs.
func (r *ChatCompletionRequest) OneCallPerAnswer() bool {
	return r.ParallelToolCalls != nil && !*r.ParallelToolCalls
}

// Tools returns the client's tools.
func (r *ChatCompletionRequest) Tools() ([]chat.ToolSpec, *ParamError) {
	return clientTools(r.ToolsParam, "tools")
}

// Choice returns the client's tool_choice.
func (r *ChatCompletionRequest) Choice() (orchestration.ToolChoice, *ParamError) {
	return toolChoice(r.ToolChoice, "tool_choice")
}

// Format returns the answer's format (nil: text).
func (r *ChatCompletionRequest) Format() (*Format, *ParamError) {
	return format(r.ResponseFormat, "response_format")
}

// Instructions returns the text of the system and developer messages,
// joined by blank lines, and the position of the first ("" and -1 when
// there are none).
func (r *ChatCompletionRequest) Instructions() (string, int, *ParamError) {
	var texts []string
	first := -1
	for i, m := range r.Messages {
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		text, _, pe := content(m.Content, fmt.Sprintf("messages[%d].content", i), false, "text")
		if pe != nil {
			return "", -1, pe
		}
		if first < 0 {
			first = i
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n\n"), first, nil
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
// developer messages are left out (they are the client's instructions,
// Instructions), and the others become chat messages, a user message with
// its images and files. index[i] is the position in Messages of the i-th
// message returned, to name it in errors.
func (r *ChatCompletionRequest) Conversation() (msgs []chat.Message, index []int, err *ParamError) {
	for i, m := range r.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		var cm chat.Message
		switch m.Role {
		case "system", "developer":
			continue
		case "user":
			text, atts, pe := content(m.Content, at+".content", true, "text")
			if pe != nil {
				return nil, nil, pe
			}
			cm = chat.Message{Role: chat.RoleUser, Content: text, Attachments: atts}
		case "assistant":
			if !isAbsent(m.FunctionCall) {
				return nil, nil, paramErrorf(at+".function_call", "unsupported_parameter", "function_call (deprecated) is not supported: send the call in tool_calls")
			}
			if !isAbsent(m.Audio) {
				return nil, nil, paramErrorf(at+".audio", "unsupported_parameter", "audio is not supported")
			}
			text := ""
			if !isAbsent(m.Content) {
				var pe *ParamError
				if text, _, pe = content(m.Content, at+".content", false, "text", "refusal"); pe != nil {
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
			text, _, pe := content(m.Content, at+".content", false, "text")
			if pe != nil {
				return nil, nil, pe
			}
			// The result of a call that did not run says so in its first
			// words, which is all a conversation in OpenAI's format keeps.
			cm = chat.Message{Role: chat.RoleTool, ToolCallID: m.ToolCallID, Content: text, NotRun: chat.NotRunContent(text)}
		case "function":
			return nil, nil, paramErrorf(at+".role", "unsupported_parameter", `the "function" role (deprecated) is not supported: send the result as a "tool" message`)
		default:
			return nil, nil, paramErrorf(at+".role", "invalid_request", "role %q is not one of system, developer, user, assistant, tool", clipParam(m.Role))
		}
		msgs = append(msgs, cm)
		index = append(index, i)
	}
	return msgs, index, nil
}

// Turn returns what a request on a session adds to it: the last message,
// when it is the user's (its text and attachments; ok false when the
// request ends with tool results instead), and the results of the tool
// calls that come after the request's last assistant message with tool
// calls (before that user message): the results of the client's tools'
// calls the session waits for. Earlier messages are the client's copy of
// the history, which the session keeps.
func (r *ChatCompletionRequest) Turn() (msg chat.Message, ok bool, results []chat.ToolResult, err *ParamError) {
	n := len(r.Messages)
	if n == 0 {
		return msg, false, nil, paramErrorf("messages", "invalid_message", `messages must contain a message with role "user"`)
	}
	end := n
	if last := r.Messages[n-1]; last.Role == "user" {
		text, atts, pe := content(last.Content, fmt.Sprintf("messages[%d].content", n-1), true, "text")
		if pe != nil {
			return msg, false, nil, pe
		}
		msg, ok, end = chat.Message{Role: chat.RoleUser, Content: text, Attachments: atts}, true, n-1
	} else if last.Role != "tool" {
		return msg, false, nil, paramErrorf(fmt.Sprintf("messages[%d]", n-1), "invalid_message", `with a session the last message must be the user's, or the results ("tool" messages) of the calls of the client's tools the last answer made`)
	}
	start := end
	for start > 0 && r.Messages[start-1].Role == "tool" {
		start--
	}
	for i := start; i < end; i++ {
		m := r.Messages[i]
		at := fmt.Sprintf("messages[%d]", i)
		if m.ToolCallID == "" {
			return msg, false, nil, paramErrorf(at+".tool_call_id", "invalid_request", "a tool message needs tool_call_id")
		}
		text, _, pe := content(m.Content, at+".content", false, "text")
		if pe != nil {
			return msg, false, nil, pe
		}
		results = append(results, chat.ToolResult{CallID: m.ToolCallID, Content: text, NotRun: chat.NotRunContent(text)})
	}
	if !ok && len(results) == 0 {
		return msg, false, nil, paramErrorf("messages", "invalid_message", `messages must contain a message with role "user"`)
	}
	return msg, ok, results, nil
}

// toolCall converts one tool call of the conversation; the tool's name is
// checked by the agent (agent.Agent.CheckHistory).
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
