package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	oar "github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// clientEnv is a server whose agents (testdata/clienttools) run on a
// scripted model over real HTTP, which keeps the requests it received.
func clientEnv(t *testing.T) (*env, *mockllm.Server) {
	t.Helper()
	mock := mockllm.New()
	t.Cleanup(mock.Close)
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "scripted", BaseURL: mock.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOptions{model: model, templates: "testdata/clienttools"}), mock
}

func clientTool(name string) openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Description: param.NewOpt("the client's " + name),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"part": map[string]any{"type": "string"}}}})
}

func toolScript(name, args string) mockllm.Script {
	return mockllm.ToolScript(mockllm.ToolCall{ID: "call_" + name, Name: name, Arguments: args})
}

// TestClientToolsOpenAIGo: the official openai-go client runs a tool loop
// of its own with two client tools through a step whose sequence is
// [client_a, client_b], without a session: each request replays the
// conversation with the client's results. The model is offered client_a,
// then client_b; its call out of order is refused and never reaches the
// client.
func TestClientToolsOpenAIGo(t *testing.T) {
	e, mock := clientEnv(t)
	mock.Enqueue(toolScript("client_b", `{"part":"roof"}`), toolScript("client_a", `{"part":"base"}`),
		toolScript("client_b", `{"part":"roof"}`), mockllm.TextScript("Built."))
	client := e.openai()
	params := openai.ChatCompletionNewParams{Model: "builder", Tools: []openai.ChatCompletionToolUnionParam{clientTool("client_a"), clientTool("client_b")},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please build a shed")}}
	var ran []string
	for range 5 {
		cc, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		msg := cc.Choices[0].Message
		if cc.Choices[0].FinishReason != "tool_calls" {
			if msg.Content != "Built." || cc.Choices[0].FinishReason != "stop" {
				t.Fatalf("final answer %q (%s)", msg.Content, cc.Choices[0].FinishReason)
			}
			break
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for _, call := range msg.ToolCalls {
			ran = append(ran, call.Function.Name)
			params.Messages = append(params.Messages, openai.ToolMessage(call.Function.Name+" done", call.ID))
		}
	}
	if !slices.Equal(ran, []string{"client_a", "client_b"}) {
		t.Fatalf("the client ran %v, want client_a then client_b", ran)
	}
	reqs := mock.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	for i, want := range [][]string{{"client_a"}, {"client_a"}, {"client_b"}} {
		if got := reqs[i].ToolNames(); !slices.Equal(got, want) {
			t.Errorf("model call %d was offered %v, want %v", i+1, got, want)
		}
	}
	var refusal string
	for _, m := range reqs[1].Messages {
		for _, r := range m.ToolResults {
			refusal = r.Content
		}
	}
	if !strings.HasPrefix(refusal, `Refused: tool "client_b" is not available in step "Build", which requires the sequence client_a -> client_b and is at position 1`) {
		t.Fatalf("the call out of order got %q", refusal)
	}
}

// TestClientToolsStatelessReplay: a conversation without a session whose
// client tool calls have their results replays through the orchestration:
// the turn starts at the sequence position a session holding it is at.
func TestClientToolsStatelessReplay(t *testing.T) {
	e, mock := clientEnv(t)
	mock.Enqueue(mockllm.TextScript("Ready for the roof."))
	call := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "call_1",
		Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "client_a", Arguments: `{"part":"base"}`}}}
	client := e.openai()
	cc, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "builder",
		Tools: []openai.ChatCompletionToolUnionParam{clientTool("client_a"), clientTool("client_b")},
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Please build a shed"),
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call}}},
			openai.ToolMessage("the base is built", "call_1"),
			openai.UserMessage("Go on building"),
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mock.Requests()[0].ToolNames(); !slices.Equal(got, []string{"client_b"}) {
		t.Fatalf("the turn's model call was offered %v, want client_b: the replay recorded client_a", got)
	}
	var ext struct {
		AgentDock oaExtended `json:"agentdock"`
	}
	if err := json.Unmarshal([]byte(cc.RawJSON()), &ext); err != nil || ext.AgentDock.Orchestration.SequenceIndex != 1 || ext.AgentDock.SessionID != "" {
		t.Fatalf("extension %+v %v", ext.AgentDock, err)
	}
}

// TestClientInstructions: a system message reaches the model's request
// after the template's instructions, marked as the client's, and the
// orchestration's guidance stays after them; the Responses API's
// instructions too. A template that refuses them answers 400.
func TestClientInstructions(t *testing.T) {
	e, mock := clientEnv(t)
	client := e.openai()
	if _, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("Answer in French."), openai.UserMessage("hello")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "builder", Instructions: openai.String("Answer in Italian."), Input: input("hello")}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"Answer in French.", "Answer in Italian."} {
		sys := mock.Requests()[i].System
		tmpl, client, guide := strings.Index(sys, "You are the builder agent of the template."), strings.Index(sys, llmorch.ClientHeading), strings.Index(sys, "## Orchestration")
		if tmpl < 0 || client < tmpl || !strings.Contains(sys[client:], want) || guide < client {
			t.Fatalf("request %d's system prompt does not give the client's instructions after the template's, before the orchestration:\n%s", i, sys)
		}
	}
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "strict", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("Answer in French."), openai.UserMessage("hello")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Code != "instructions_refused" || !strings.Contains(oe.Message, `options.clientInstructions is "refuse"`) {
		t.Fatalf("a template that refuses them: %v", err)
	}
}

// TestImageReachesModel: an image part of a user message reaches an
// OpenAI-compatible model's request as an image part.
func TestImageReachesModel(t *testing.T) {
	e, mock := clientEnv(t)
	const url = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	client := e.openai()
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "builder", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("what is this?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url, Detail: "low"})})}})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(mock.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var parts []map[string]any
	for _, m := range body.Messages {
		if m.Role == "user" {
			_ = json.Unmarshal(m.Content, &parts)
		}
	}
	var image map[string]any
	for _, p := range parts {
		if p["type"] == "image_url" {
			image, _ = p["image_url"].(map[string]any)
		}
	}
	if image == nil || image["url"] != url || image["detail"] != "low" {
		t.Fatalf("the user message's parts on the wire: %v", parts)
	}
}

// TestResponsesClientTools: a stored response ends with a function_call
// item of a client tool and status completed; the next response,
// continuing it by previous_response_id with the call's
// function_call_output alone, records it and goes on through the
// sequence.
func TestResponsesClientTools(t *testing.T) {
	e, mock := clientEnv(t)
	mock.Enqueue(toolScript("client_a", `{"part":"base"}`), toolScript("client_b", `{"part":"roof"}`), mockllm.TextScript("Built."))
	client := e.openai()
	tools := []oar.ToolUnionParam{
		{OfFunction: &oar.FunctionToolParam{Name: "client_a", Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}},
		{OfFunction: &oar.FunctionToolParam{Name: "client_b", Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}},
	}
	r, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "builder", Tools: tools, Input: input("Please build a shed")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for range 3 {
		if r.Status != "completed" {
			t.Fatalf("status %s", r.Status)
		}
		last := r.Output[len(r.Output)-1]
		if last.Type != "function_call" {
			break
		}
		names = append(names, last.Name)
		out := oar.ResponseInputItemParamOfFunctionCallOutput(last.Name + " done")
		out.OfFunctionCallOutput.CallID = openai.String(last.CallID)
		r, err = client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "builder", Tools: tools, PreviousResponseID: openai.String(r.ID),
			Input: oar.ResponseNewParamsInputUnion{OfInputItemList: oar.ResponseInputParam{out}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(names, []string{"client_a", "client_b"}) || r.OutputText() != "Built." {
		t.Fatalf("calls %v, final %q", names, r.OutputText())
	}
	sess, err := e.store.Get(t.Context(), r.Conversation.ID)
	if err != nil || sess.State.SequenceIndex != 2 || !sess.State.RecentlyUsedTools.Equal("client_a", "client_b") {
		t.Fatalf("session %+v %v", sess.State, err)
	}
}

// TestResponsesBackgroundCancel: a background response answers at once,
// in progress; cancelling it stops its turn and answers it cancelled, as
// GET then reads it.
func TestResponsesBackgroundCancel(t *testing.T) {
	e, mock := clientEnv(t)
	slow := mockllm.TextScript("never", "finished")
	slow.TimeToFirstToken = 30 * time.Second
	mock.Enqueue(slow)
	client := e.openai()
	r, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "builder", Input: input("hello"), Background: openai.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "in_progress" || !r.Background {
		t.Fatalf("background response %s background=%v", r.Status, r.Background)
	}
	for mock.Pending() > 0 {
		time.Sleep(5 * time.Millisecond) // until the model call started
	}
	c, err := client.Responses.Cancel(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != "cancelled" {
		t.Fatalf("cancelled response: %s", c.RawJSON())
	}
	got, err := client.Responses.Get(t.Context(), r.ID, oar.ResponseGetParams{})
	if err != nil || got.Status != "cancelled" {
		t.Fatalf("GET after cancel: %v %v", got.Status, err)
	}
	// Not a background response: 400.
	fg, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "builder", Input: input("hello")})
	if err != nil {
		t.Fatal(err)
	}
	var oe *openai.Error
	if _, err := client.Responses.Cancel(t.Context(), fg.ID); !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest {
		t.Fatalf("cancelling a foreground response: %v", err)
	}
}

// TestAISDKFileParts: the AI SDK's file parts of a chat message reach the
// model as image parts; an agent whose model takes none answers 400.
func TestAISDKFileParts(t *testing.T) {
	e, mock := clientEnv(t)
	const url = "data:image/png;base64,iVBORw0KGgo="
	body := `{"id":"chat-files-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"what is this?"},{"type":"file","mediaType":"image/png","url":"` + url + `"}]}]}`
	res := e.do(http.MethodPost, "/api/chat/builder", body)
	data, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(data), `"type":"finish"`) {
		t.Fatalf("%d %s", res.StatusCode, data)
	}
	if b := string(mock.Requests()[0].Body); !strings.Contains(b, `{"type":"image_url","image_url":{"url":"`+url+`"}}`) {
		t.Fatalf("the model's request: %s", b)
	}
	off := newEnv(t, envOptions{})
	res = off.do(http.MethodPost, "/api/chat/explorer", body)
	data, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "does not take these attachments") {
		t.Fatalf("the offline model: %d %s", res.StatusCode, data)
	}
}
