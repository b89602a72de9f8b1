package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
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

// responsesParams are the parameters of POST /v1/responses.
var responsesParams = map[string]paramRule{
	// Honoured.
	"model": anyValue, "input": anyValue, "stream": anyValue, "store": anyValue,
	"previous_response_id": anyValue, "conversation": anyValue, "metadata": anyValue,
	"tools": anyValue, "tool_choice": anyValue, "text": anyValue, "instructions": anyValue, "background": anyValue,
	"prompt_cache_key": anyValue, "safety_identifier": anyValue,
	// Refused unless they ask for nothing the server cannot do.
	"include":             {includesNothing, `include may only name output the agent never produces (reasoning.encrypted_content, hosted tools' results, input images); logprobs are not supported`},
	"prompt":              {never, "prompt templates are not supported: the agent's template gives its prompt"},
	"top_logprobs":        {isNumber(0), "top_logprobs is not supported (logprobs are not)"},
	"moderation":          {never, "moderation is not supported"},
	"parallel_tool_calls": {isTrue, "parallel_tool_calls false is not supported: a model answer may call several tools, each checked against the step's offer"},
	// Accepted and ignored (docs/api.md says why for each).
	"max_output_tokens": anyValue, "max_tool_calls": anyValue, "temperature": anyValue,
	"top_p": anyValue, "prompt_cache_retention": anyValue,
	"prompt_cache_options": anyValue, "service_tier": anyValue, "user": anyValue,
	"truncation": anyValue, "reasoning": anyValue, "context_management": anyValue, "stream_options": anyValue,
	"access_programs": anyValue,
}

// compactParams are the parameters of POST /v1/responses/compact.
var compactParams = map[string]paramRule{
	"model": anyValue, "input": anyValue, "previous_response_id": anyValue, "instructions": anyValue, "prompt_cache_key": anyValue,
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
	ToolsParam         json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Text               *struct {
		Format    json.RawMessage `json:"format"`
		Verbosity *string         `json:"verbosity"`
	} `json:"text"`
	InstructionsParam *string `json:"instructions"`
	Background        bool    `json:"background"`
	PromptCacheKey    *string `json:"prompt_cache_key"`
	SafetyIdentifier  *string `json:"safety_identifier"`
}

// Tools returns the client's function tools.
func (r *ResponsesRequest) Tools() ([]chat.ToolSpec, *ParamError) {
	return clientTools(r.ToolsParam, "tools")
}

// Choice returns the client's tool_choice.
func (r *ResponsesRequest) Choice() (orchestration.ToolChoice, *ParamError) {
	return toolChoice(r.ToolChoice, "tool_choice")
}

// Format returns the answer's format, text.format (nil: text).
func (r *ResponsesRequest) Format() (*Format, *ParamError) {
	if r.Text == nil {
		return nil, nil
	}
	return format(r.Text.Format, "text.format")
}

// ParseCompact reads a POST /v1/responses/compact body; its input is read
// like a response's (Conversation).
func ParseCompact(data []byte) (*ResponsesRequest, error) {
	if pe := checkParams(data, compactParams); pe != nil {
		return nil, pe
	}
	var r ResponsesRequest
	if err := Unmarshal(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
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
// "message", or no type), a function_call, a function_call_output or a
// compaction.
type inputItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        *string         `json:"arguments"`
	Output           json.RawMessage `json:"output"`
	EncryptedContent string          `json:"encrypted_content"`
}

// Input is a Responses input as the agent takes it.
type Input struct {
	// Messages are the conversation; Index[i] is the input position of
	// Messages[i] (0 for a string input), to name it in errors.
	Messages []chat.Message
	Index    []int
	// Instructions are the text of the system and developer messages.
	Instructions string
	// Compacted and Summary are what a compaction item stands for: the
	// messages it left out, which the orchestration replays and the
	// model does not see, and what the model reads instead.
	Compacted []chat.Message
	Summary   string
}

// Conversation converts the input into the conversation: a string is one
// user message; a list's message items (system and developer messages are
// the client's instructions, Input.Instructions), function_call items
// (joined to the assistant message before them), function_call_output
// items and a compaction item (first) become what Input holds. The
// request's instructions parameter comes before the messages'. A
// compaction item must be one signed with key (DecodeCompaction).
func (r *ResponsesRequest) Conversation(key CompactionKey) (in Input, err *ParamError) {
	var instructions []string
	if r.InstructionsParam != nil && *r.InstructionsParam != "" {
		instructions = append(instructions, *r.InstructionsParam)
	}
	defer func() { in.Instructions = strings.Join(instructions, "\n\n") }()
	if isAbsent(r.Input) {
		return in, paramErrorf("input", "invalid_request", "input is required: a string or a list of input items")
	}
	var s string
	if json.Unmarshal(r.Input, &s) == nil {
		in.Messages, in.Index = []chat.Message{{Role: chat.RoleUser, Content: s}}, []int{0}
		return in, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(r.Input, &items) != nil {
		return in, paramErrorf("input", "invalid_request", "input must be a string or a list of input items")
	}
	msgs, index := in.Messages, in.Index
	defer func() { in.Messages, in.Index = msgs, index }()
	for i, raw := range items {
		at := fmt.Sprintf("input[%d]", i)
		var it inputItem
		if json.Unmarshal(raw, &it) != nil {
			return in, paramErrorf(at, "invalid_request", "an input item must be an object")
		}
		switch it.Type {
		case "", "message":
			var cm chat.Message
			switch it.Role {
			case "system", "developer":
				text, _, pe := content(it.Content, at+".content", false, "input_text")
				if pe != nil {
					return in, pe
				}
				instructions = append(instructions, text)
				continue
			case "user":
				text, atts, pe := content(it.Content, at+".content", true, "input_text", "output_text")
				if pe != nil {
					return in, pe
				}
				cm = chat.Message{Role: chat.RoleUser, Content: text, Attachments: atts}
			case "assistant":
				text, _, pe := content(it.Content, at+".content", false, "output_text", "input_text", "refusal")
				if pe != nil {
					return in, pe
				}
				cm = chat.Message{Role: chat.RoleAssistant, Content: text}
			default:
				return in, paramErrorf(at+".role", "invalid_request", "role %q is not one of user, assistant, system, developer", clipParam(it.Role))
			}
			msgs, index = append(msgs, cm), append(index, i)
		case "compaction":
			if i > 0 {
				return in, paramErrorf(at, "invalid_request", "a compaction item must open the input: it stands for the conversation before the items after it")
			}
			c, cerr := DecodeCompaction(it.EncryptedContent, key)
			if cerr != nil {
				return in, paramErrorf(at+".encrypted_content", "invalid_request", "%s", cerr.Error())
			}
			in.Compacted, in.Summary = c.Messages, c.Summary
		case "function_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			call, pe := toolCall(it.CallID, "function", it.Name, args, at)
			if pe != nil {
				return in, pe
			}
			if n := len(msgs); n > 0 && msgs[n-1].Role == chat.RoleAssistant {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
				continue
			}
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{call}})
			index = append(index, i)
		case "function_call_output":
			if it.CallID == "" {
				return in, paramErrorf(at+".call_id", "invalid_request", "a function_call_output needs call_id")
			}
			text, _, pe := content(it.Output, at+".output", false, "input_text", "output_text")
			if pe != nil {
				return in, pe
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
			return in, paramErrorf(at+".type", "unsupported_parameter", "input items of type %q are not supported (message, function_call, function_call_output and compaction are)", clipParam(it.Type))
		}
	}
	if len(msgs) == 0 {
		return in, paramErrorf("input", "invalid_message", "input has no message")
	}
	return in, nil
}
