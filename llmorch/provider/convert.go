package provider

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// maxWireID is the longest call ID both APIs take (OpenAI's limit;
// Anthropic's is 64), which take letters, digits, '_' and '-' only.
const maxWireID = 40

// wireID is a call ID as a provider takes it. IDs come from the model, but
// also from clients (a conversation's own, a client call's with its trail,
// orchestration.TrailID), which may be longer or use other characters;
// such an ID is replaced by one made from its hash, the same in every
// request, so that a call and its result still match.
func wireID(id string) string {
	ok := len(id) <= maxWireID
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "call_" + base64.RawURLEncoding.EncodeToString(sum[:])[:maxWireID-len("call_")]
}

// emptySchema is the parameters schema of a tool that declares none; both
// APIs reject a tool without one.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// noopStream only makes langchaingo ask for a stream; the transport takes
// the stream itself.
func noopStream(context.Context, []byte) error { return nil }

// convert turns req into langchaingo messages and call options. The call
// state collects what the transport must correct in the request.
func (m *model) convert(req llmorch.Request, st *callState) ([]llms.MessageContent, []llms.CallOption, error) {
	anth := m.cfg.Provider == Anthropic
	msgs := make([]llms.MessageContent, 0, len(req.Messages)+1)

	// System text goes first, merged: langchaingo's Anthropic conversion
	// concatenates system messages without a separator.
	system := req.System
	for _, msg := range req.Messages {
		if msg.Role == chat.RoleSystem && msg.Content != "" {
			if system != "" {
				system += "\n\n"
			}
			system += msg.Content
		}
	}
	// A model that takes no system messages gets the text at the head of
	// the first user message, as langchaingo's own folding did (see
	// capability.go).
	fold := ""
	if system != "" && m.foldSystem {
		fold = system + "\n\n"
	} else if system != "" {
		msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeSystem, system))
	}

	for i, msg := range req.Messages {
		switch msg.Role {
		case chat.RoleSystem:
		case chat.RoleUser:
			texts := []string{msg.Content}
			if fold != "" {
				texts, fold = []string{fold, msg.Content}, ""
			}
			if len(msg.Attachments) == 0 {
				msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeHuman, texts...))
				continue
			}
			// The attachments first and the text last, where the call's
			// note may join it.
			parts := make([]llms.ContentPart, 0, len(msg.Attachments)+1)
			for k, a := range msg.Attachments {
				p, err := m.attachment(a, st)
				if err != nil {
					return nil, nil, fmt.Errorf("messages[%d].attachments[%d]: %w", i, k, err)
				}
				parts = append(parts, p)
			}
			for _, t := range texts {
				if t != "" {
					parts = append(parts, llms.TextContent{Text: t})
				}
			}
			msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: parts})
		case chat.RoleAssistant:
			var parts []llms.ContentPart
			if msg.Content != "" {
				parts = append(parts, llms.TextContent{Text: msg.Content})
			}
			for j, tc := range msg.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return nil, nil, fmt.Errorf("messages[%d].toolCalls[%d]: ID and Name are required", i, j)
				}
				args := string(tc.Arguments)
				if strings.TrimSpace(args) == "" {
					args = "{}"
				} else if !isJSONObject(tc.Arguments) {
					return nil, nil, fmt.Errorf("messages[%d].toolCalls[%d] (%s): arguments are not a JSON object", i, j, tc.Name)
				}
				parts = append(parts, llms.ToolCall{ID: wireID(tc.ID), Type: "function",
					FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: args}})
			}
			if len(parts) == 0 {
				// An empty assistant turn is rejected by both APIs and says
				// nothing to the model.
				continue
			}
			if anth {
				// langchaingo keeps only the first part of an Anthropic
				// assistant message; one message per part gets every part
				// through, and the transport merges them back into one.
				for _, p := range parts {
					msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{p}})
				}
				if len(parts) > 1 {
					st.mergeRoles = true
				}
			} else {
				msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts})
			}
		case chat.RoleTool:
			if msg.ToolCallID == "" {
				return nil, nil, fmt.Errorf("messages[%d]: a tool message needs ToolCallID", i)
			}
			msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
				llms.ToolCallResponse{ToolCallID: wireID(msg.ToolCallID), Name: msg.ToolName, Content: msg.Content}}})
			if anth {
				// Each result is its own user message in langchaingo;
				// the API wants the results of one turn in one message.
				st.mergeRoles = true
				if msg.IsError {
					if st.errorResults == nil {
						st.errorResults = map[string]bool{}
					}
					st.errorResults[wireID(msg.ToolCallID)] = true
				}
			}
		default:
			return nil, nil, fmt.Errorf("messages[%d]: unknown role %q", i, msg.Role)
		}
	}

	if req.Note != "" {
		msgs = appendNote(msgs, req.Note, anth)
		if anth {
			// The note is a user message of its own here; the transport
			// merges it into the user message before it.
			st.mergeRoles, st.note = true, true
		}
	}
	// The tools are the stable set: Anthropic caches only up to its
	// breakpoints, which the transport marks.
	st.cache = anth && req.Offered != nil && len(req.Tools) > 0

	opts := make([]llms.CallOption, 0, 7)
	opts = append(opts, llms.WithModel(m.cfg.Model), llms.WithStreamingFunc(noopStream))
	temp := req.Temperature
	if temp == nil {
		temp = m.cfg.Temperature
	}
	if temp != nil {
		opts = append(opts, llms.WithTemperature(*temp))
	} else {
		st.dropTemperature = true
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.cfg.MaxTokens
	}
	if maxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(maxTokens))
	}
	if m.cfg.LegacyMaxTokensField {
		opts = append(opts, openai.WithLegacyMaxTokensField())
	}
	st.format = req.Format
	if len(req.Tools) > 0 {
		tools := make([]llms.Tool, len(req.Tools))
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, nil, fmt.Errorf("tools[%d]: Name is empty", i)
			}
			params := t.Parameters
			if len(params) == 0 {
				params = emptySchema
			}
			tools[i] = llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
				Name: t.Name, Description: t.Description, Parameters: params}}
		}
		opts = append(opts, llms.WithTools(tools))
		switch {
		case anth:
			if req.Require || req.OneCallPerAnswer {
				st.anthropicChoice = anthropicChoice(req)
			}
		case m.cfg.RestrictsTools && req.Offered != nil:
			opts = append(opts, llms.WithToolChoice(allowedTools(req)))
		case req.Require:
			opts = append(opts, llms.WithToolChoice(requiredTool(req)))
		}
	}
	st.oneCall = req.OneCallPerAnswer && !anth
	return msgs, opts, nil
}

// requiredTool is OpenAI's tool_choice of a call that must call a tool:
// the one it may call by name, else "required".
func requiredTool(req llmorch.Request) any {
	if c := req.Callable(); len(c) == 1 {
		var at allowedTool
		at.Type, at.Function.Name = "function", c[0].Name
		return at
	}
	return "required"
}

// anthropicChoice is Anthropic's tool_choice of a call that must call a
// tool or may make one call only (langchaingo does not send one; the
// transport sets it): the tool, any tool or auto, with
// disable_parallel_tool_use for one call.
func anthropicChoice(req llmorch.Request) json.RawMessage {
	choice := map[string]any{"type": "auto"}
	if req.Require {
		choice["type"] = "any"
		if c := req.Callable(); len(c) == 1 {
			choice["type"], choice["name"] = "tool", c[0].Name
		}
	}
	if req.OneCallPerAnswer {
		choice["disable_parallel_tool_use"] = true
	}
	b, _ := json.Marshal(choice)
	return b
}

// appendNote puts the call's note after the conversation, on the user's
// side: appended to the last user message's text when the conversation
// ends with one (servers whose chat templates demand alternating roles
// take that), else as a user message of its own after the tool results.
// It is never stored; only this request carries it.
func appendNote(msgs []llms.MessageContent, note string, anth bool) []llms.MessageContent {
	if n := len(msgs); n > 0 && !anth && msgs[n-1].Role == llms.ChatMessageTypeHuman {
		last := msgs[n-1]
		parts := slices.Clone(last.Parts)
		if k := len(parts) - 1; k >= 0 {
			if tc, ok := parts[k].(llms.TextContent); ok && !isMarker(tc.Text) {
				parts[k] = llms.TextContent{Text: tc.Text + "\n\n" + note}
				msgs[n-1] = llms.MessageContent{Role: last.Role, Parts: parts}
				return msgs
			}
		}
	}
	return append(msgs, llms.TextParts(llms.ChatMessageTypeHuman, note))
}

// toolChoice is OpenAI's tool_choice restricting a call to some of the
// tools sent: {"type":"allowed_tools","allowed_tools":{"mode":"auto",
// "tools":[{"type":"function","function":{"name":...}}]}}. The tools
// array stays the same on every call, and so in the prompt cache.
type toolChoice struct {
	Type         string     `json:"type"`
	AllowedTools allowedSet `json:"allowed_tools"`
}

type allowedSet struct {
	Mode  string        `json:"mode"`
	Tools []allowedTool `json:"tools"`
}

type allowedTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// allowedTools is the tool_choice of req: its offered tools that it
// sends, or "none" when it offers none.
func allowedTools(req llmorch.Request) any {
	set := allowedSet{Mode: "auto", Tools: make([]allowedTool, 0, len(req.Offered))}
	if req.Require {
		set.Mode = "required"
	}
	for _, t := range req.Tools {
		if slices.Contains(req.Offered, t.Name) {
			var at allowedTool
			at.Type, at.Function.Name = "function", t.Name
			set.Tools = append(set.Tools, at)
		}
	}
	if len(set.Tools) == 0 {
		return "none"
	}
	return toolChoice{Type: "allowed_tools", AllowedTools: set}
}
