package wire

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
)

// includable lists the values of the Responses API's include parameter
// that ask for output of item types the agent never produces (reasoning,
// hosted tools, input images): there is nothing to include, so asking is
// honoured as it is. Logprobs are refused.
var includable = map[string]bool{
	"reasoning.encrypted_content":           true,
	"file_search_call.results":              true,
	"web_search_call.results":               true,
	"web_search_call.action.sources":        true,
	"code_interpreter_call.outputs":         true,
	"computer_call_output.output.image_url": true,
	"message.input_image.image_url":         true,
}

func includesNothing(raw json.RawMessage) bool {
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, v := range list {
		if !includable[v] {
			return false
		}
	}
	return true
}

// isTextConfig accepts a text parameter whose format, when given, is
// plain text (its verbosity is ignored).
func isTextConfig(raw json.RawMessage) bool {
	var t struct {
		Format json.RawMessage `json:"format"`
	}
	return json.Unmarshal(raw, &t) == nil && (isAbsent(t.Format) || isTextFormat(t.Format))
}

// responsesParams are the parameters of POST /v1/responses.
var responsesParams = map[string]paramRule{
	// Honoured.
	"model": anyValue, "input": anyValue, "stream": anyValue, "store": anyValue,
	"previous_response_id": anyValue, "conversation": anyValue, "metadata": anyValue,
	// Refused unless they ask for nothing the server cannot do.
	"background":   {isFalse, "background responses are not supported: a response runs while its request is open (and, stored, runs on to its end when the client goes away)"},
	"include":      {includesNothing, `include may only name output the agent never produces (reasoning.encrypted_content, hosted tools' results, input images); logprobs are not supported`},
	"tools":        {isEmptyArray, noClientTools},
	"tool_choice":  {isString("auto"), `tool_choice applies to client tools, which are not supported; the agent's orchestration decides which of its own tools the model may call ("auto" is accepted)`},
	"text":         {isTextConfig, `only text.format {"type": "text"} is supported: the agent's answer is not guaranteed to match a JSON format`},
	"prompt":       {never, "prompt templates are not supported: the agent's template gives its prompt"},
	"top_logprobs": {isNumber(0), "top_logprobs is not supported (logprobs are not)"},
	"moderation":   {never, "moderation is not supported"},
	// Accepted and ignored (docs/api.md says why for each).
	"instructions": anyValue, "max_output_tokens": anyValue, "max_tool_calls": anyValue, "temperature": anyValue,
	"top_p": anyValue, "parallel_tool_calls": anyValue, "prompt_cache_key": anyValue, "prompt_cache_retention": anyValue,
	"prompt_cache_options": anyValue, "safety_identifier": anyValue, "service_tier": anyValue, "user": anyValue,
	"truncation": anyValue, "reasoning": anyValue, "context_management": anyValue, "stream_options": anyValue,
	"access_programs": anyValue,
}

// ResponsesRequest is the body of POST /v1/responses, as far as the server
// uses it.
type ResponsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID string          `json:"previous_response_id"`
	ConversationParam  json.RawMessage `json:"conversation"`
	Metadata           json.RawMessage `json:"metadata"`
}

// ParseResponses reads a Responses API request: a *ParamError for a
// parameter the server refuses or a malformed conversation or metadata, a
// *JSONError for a body that does not decode.
func ParseResponses(data []byte) (*ResponsesRequest, error) {
	if pe := checkParams(data, responsesParams); pe != nil {
		return nil, pe
	}
	var r ResponsesRequest
	if err := Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Stored reports whether the response is to be stored (store defaults to
// true).
func (r *ResponsesRequest) Stored() bool { return r.Store == nil || *r.Store }

// ConversationID returns the conversation's ID ("" when none): the
// conversation parameter is an ID or {"id": ID}.
func (r *ResponsesRequest) ConversationID() (string, *ParamError) {
	if isAbsent(r.ConversationParam) {
		return "", nil
	}
	var id string
	if json.Unmarshal(r.ConversationParam, &id) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(r.ConversationParam, &obj) != nil || obj.ID == "" {
			return "", paramErrorf("conversation", "invalid_request", `conversation must be an ID or {"id": ID}`)
		}
		id = obj.ID
	}
	return id, nil
}

// MetadataMap checks metadata as OpenAI does (at most 16 string values,
// keys of at most 64 characters, values of at most 512) and returns it.
func (r *ResponsesRequest) MetadataMap() (map[string]string, *ParamError) {
	if isAbsent(r.Metadata) {
		return nil, nil
	}
	var m map[string]string
	if json.Unmarshal(r.Metadata, &m) != nil {
		return nil, paramErrorf("metadata", "invalid_request", "metadata must be an object of strings")
	}
	if len(m) > 16 {
		return nil, paramErrorf("metadata", "invalid_request", "metadata has %d keys; at most 16 are allowed", len(m))
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > 64 || utf8.RuneCountInString(v) > 512 {
			return nil, paramErrorf("metadata", "invalid_request", "metadata keys are at most 64 characters and values at most 512")
		}
	}
	return m, nil
}

// inputItem is one item of a Responses input list: a message (type
// "message", or no type), a function_call or a function_call_output.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// Conversation converts the input into the conversation: a string is one
// user message; a list's message items (system and developer messages left
// out, as the agent's template gives its prompt), function_call items
// (joined to the assistant message before them) and function_call_output
// items become chat messages. index[i] is the input position of the i-th
// message returned (0 for a string input), to name it in errors.
func (r *ResponsesRequest) Conversation() (msgs []chat.Message, index []int, err *ParamError) {
	if isAbsent(r.Input) {
		return nil, nil, paramErrorf("input", "invalid_request", "input is required: a string or a list of input items")
	}
	var s string
	if json.Unmarshal(r.Input, &s) == nil {
		return []chat.Message{{Role: chat.RoleUser, Content: s}}, []int{0}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(r.Input, &items) != nil {
		return nil, nil, paramErrorf("input", "invalid_request", "input must be a string or a list of input items")
	}
	for i, raw := range items {
		at := fmt.Sprintf("input[%d]", i)
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			return nil, nil, paramErrorf(at, "invalid_request", "an input item must be an object")
		}
		switch it.Type {
		case "", "message":
			var cm chat.Message
			switch it.Role {
			case "system", "developer":
				continue
			case "user":
				text, pe := contentText(it.Content, at+".content", "input_text", "output_text")
				if pe != nil {
					return nil, nil, pe
				}
				cm = chat.Message{Role: chat.RoleUser, Content: text}
			case "assistant":
				text, pe := contentText(it.Content, at+".content", "output_text", "input_text", "refusal")
				if pe != nil {
					return nil, nil, pe
				}
				cm = chat.Message{Role: chat.RoleAssistant, Content: text}
			default:
				return nil, nil, paramErrorf(at+".role", "invalid_request", "role %q is not one of user, assistant, system, developer", clipParam(it.Role))
			}
			msgs, index = append(msgs, cm), append(index, i)
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			call, pe := toolCall(it.CallID, "function", it.Name, args, at)
			if pe != nil {
				return nil, nil, pe
			}
			if n := len(msgs); n > 0 && msgs[n-1].Role == chat.RoleAssistant {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call}})
			index = append(index, i)
		case "function_call_output":
			if it.CallID == "" {
				return nil, nil, paramErrorf(at+".call_id", "invalid_request", "a function_call_output needs call_id")
			}
			text, pe := contentText(it.Output, at+".output", "input_text", "output_text")
			if pe != nil {
				return nil, nil, pe
			}
			name := ""
			for j := len(msgs) - 1; j >= 0 && name == ""; j-- {
				for _, c := range msgs[j].ToolCalls {
					if c.ID == it.CallID {
						name = c.Name
					}
				}
			}
			msgs = append(msgs, chat.Message{Role: chat.RoleTool, ToolCallID: it.CallID, ToolName: name, Content: text, NotRun: chat.NotRunContent(text)})
			index = append(index, i)
		default:
			return nil, nil, paramErrorf(at+".type", "unsupported_parameter", "input items of type %q are not supported (message, function_call and function_call_output are)", clipParam(it.Type))
		}
	}
	if len(msgs) == 0 {
		return nil, nil, paramErrorf("input", "invalid_message", "input has no user message")
	}
	return msgs, index, nil
}
