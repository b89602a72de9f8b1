package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// toOpenAI converts a session's history into the messages an OpenAI client
// would hold.
func toOpenAI(history []chat.Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	for _, m := range history {
		switch m.Role {
		case chat.RoleUser:
			out = append(out, openai.UserMessage(m.Content))
		case chat.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, c := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(c.Arguments)},
				}})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case chat.RoleTool:
			out = append(out, openai.ToolMessage(m.Content, m.ToolCallID))
		}
	}
	return out
}

func extension(t *testing.T, raw string) oaExtended {
	t.Helper()
	var ext oaExtended
	if err := json.Unmarshal([]byte(raw), &ext); err != nil {
		t.Fatal(err)
	}
	return ext
}

// TestOpenAIStatelessConversation: without a session, the request's
// messages are the conversation. Sent the history a session holds, a
// stateless request takes the same orchestration steps and tools as the
// session's own next turn, the model gets the earlier messages (the
// offline model answers from them), and nothing is stored.
func TestOpenAIStatelessConversation(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	ctx := t.Context()
	sid := "conv-" + session.NewID()
	first := "Please explore options for a team offsite"
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "explorer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(first)},
	}, option.WithHeader("X-Session-Id", sid)); err != nil {
		t.Fatal(err)
	}
	history, err := e.store.Messages(ctx, sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	sessions := e.store.(*session.Memory).Len()

	second := "Which one is cheapest?"
	msgs := append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("ignored: the agent has its own prompt")}, toOpenAI(history)...)
	msgs = append(msgs, openai.UserMessage(second))
	var res *http.Response
	stateless, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "explorer", Messages: msgs}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if res.Header.Get("X-Session-Id") != "" || res.Header.Get("X-Turn-Id") == "" {
		t.Fatalf("a stateless answer has x-session-id %q, x-turn-id %q", res.Header.Get("X-Session-Id"), res.Header.Get("X-Turn-Id"))
	}
	sessionful, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "explorer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(second)},
	}, option.WithHeader("X-Session-Id", sid))
	if err != nil {
		t.Fatal(err)
	}
	got, want := extension(t, stateless.JSON.ExtraFields["agentdock"].Raw()), extension(t, sessionful.JSON.ExtraFields["agentdock"].Raw())
	names := func(cs []chat.ToolCall) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	if !slices.Equal(names(got.ToolCalls), names(want.ToolCalls)) || got.Orchestration == nil || want.Orchestration == nil ||
		got.Orchestration.ActiveStep != want.Orchestration.ActiveStep || got.Orchestration.SequenceIndex != want.Orchestration.SequenceIndex {
		t.Fatalf("stateless turn: tools %v, orchestration %+v; the session's: %v, %+v", names(got.ToolCalls), got.Orchestration, names(want.ToolCalls), want.Orchestration)
	}
	if got.Orchestration.ActiveStep != "Explore" {
		t.Fatalf("the replayed conversation should stay in Explore, got %+v", got.Orchestration)
	}
	if got.SessionID != "" {
		t.Fatalf("a stateless answer names session %q", got.SessionID)
	}
	if stateless.Choices[0].Message.Content != sessionful.Choices[0].Message.Content {
		t.Fatalf("the answers differ:\nstateless %q\nsession   %q", stateless.Choices[0].Message.Content, sessionful.Choices[0].Message.Content)
	}
	if n := e.store.(*session.Memory).Len(); n != sessions {
		t.Fatalf("the stateless request stored a session (%d sessions, was %d)", n, sessions)
	}

	// Streaming works the same way.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "explorer", Messages: msgs})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != stateless.Choices[0].Message.Content {
		t.Fatalf("streamed %q, want %q", acc.Choices[0].Message.Content, stateless.Choices[0].Message.Content)
	}
}

// TestOpenAIParameters: every parameter that asks for what the server
// cannot do is refused with a 400 naming it, through the official client.
func TestOpenAIParameters(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}
	tests := []struct {
		name      string
		params    openai.ChatCompletionNewParams
		opts      []option.RequestOption
		wantParam string
		wantCode  string
	}{
		{"a client tool named like the agent's", openai.ChatCompletionNewParams{Messages: user, Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "brainstorm"}),
		}}, nil, "tools[0]", "invalid_request"},
		{"tool_choice naming no tool of the request", openai.ChatCompletionNewParams{Messages: user, ToolChoice: openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})}, nil, "tool_choice", "invalid_request"},
		{"an invalid JSON schema", openai.ChatCompletionNewParams{Messages: user, ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "x", Schema: map[string]any{"type": "nonsense"}}}}}, nil, "response_format", "invalid_request"},
		{"n", openai.ChatCompletionNewParams{Messages: user, N: openai.Int(2)}, nil, "n", "unsupported_parameter"},
		{"logprobs", openai.ChatCompletionNewParams{Messages: user, Logprobs: openai.Bool(true)}, nil, "logprobs", "unsupported_parameter"},
		{"stop", openai.ChatCompletionNewParams{Messages: user, Stop: openai.ChatCompletionNewParamsStopUnion{OfString: openai.String("END")}}, nil, "stop", "unsupported_parameter"},
		{"audio", openai.ChatCompletionNewParams{Messages: user, Modalities: []string{"text", "audio"}}, nil, "modalities", "unsupported_parameter"},
		{"an unknown parameter", openai.ChatCompletionNewParams{Messages: user}, []option.RequestOption{option.WithJSONSet("top_k", 5)}, "top_k", "unknown_parameter"},
		{"an image", openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("what is this?"), openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/x.png"}),
		})}}, nil, "messages[0].content", "unsupported_parameter"},
		{"a call without a tool name", openai.ChatCompletionNewParams{Messages: append(toOpenAI([]chat.Message{
			{Role: chat.RoleUser, Content: "weather?"},
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "", Arguments: json.RawMessage(`{}`)}}},
			{Role: chat.RoleTool, ToolCallID: "call_1", Content: "sunny"},
		}), openai.UserMessage("thanks"))}, nil, "messages[1].tool_calls[0]", "invalid_request"},
		{"a call without its result", openai.ChatCompletionNewParams{Messages: append(toOpenAI([]chat.Message{
			{Role: chat.RoleUser, Content: "explore"},
			{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "brainstorm", Arguments: json.RawMessage(`{}`)}}},
		}), openai.UserMessage("thanks"))}, nil, "messages[1]", "invalid_message"},
		{"a conversation ending with the assistant", openai.ChatCompletionNewParams{Messages: append(user, openai.AssistantMessage("hi"))}, nil, "messages", "invalid_message"},
	}
	for _, tt := range tests {
		tt.params.Model = "explorer"
		_, err := client.Chat.Completions.New(t.Context(), tt.params, tt.opts...)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Param != tt.wantParam || oe.Code != tt.wantCode || oe.Type != "invalid_request_error" {
			t.Errorf("%s: %v, want 400 %s naming %s", tt.name, err, tt.wantCode, tt.wantParam)
			continue
		}
		if strings.Contains(oe.Message, "wire.") || oe.Message == "" {
			t.Errorf("%s: message %q", tt.name, oe.Message)
		}
	}
	// Parameters the server honours or documents as ignored pass.
	cc, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "explorer", Messages: user, N: openai.Int(1), Temperature: openai.Float(0.2), MaxCompletionTokens: openai.Int(100),
		Seed: openai.Int(7), ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfText: &shared.ResponseFormatTextParam{}},
		Metadata:       shared.Metadata{"k": "v"}, Store: openai.Bool(false), ParallelToolCalls: openai.Bool(true),
	})
	if err != nil || cc.Choices[0].Message.Content == "" {
		t.Fatalf("accepted parameters: %v", err)
	}
}
