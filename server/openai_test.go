package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func (e *env) openai() openai.Client {
	return openai.NewClient(option.WithBaseURL(e.base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func (e *env) lastAnswer(sid string) string {
	e.t.Helper()
	msgs, err := e.store.Messages(e.t.Context(), sid, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	if last.Role != chat.RoleAssistant {
		e.t.Fatalf("last message is %s", last.Role)
	}
	return last.Content
}

func TestOpenAIClientNonStreaming(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	var res *http.Response
	cc, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "explorer",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("ignored: the agent has its own prompt"),
			openai.UserMessage("Please explore options for a team offsite"),
		},
	}, option.WithHeader("X-Session-Id", "openai-session-1"), option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if res.Header.Get("X-Session-Id") != "openai-session-1" {
		t.Fatalf("x-session-id %q", res.Header.Get("X-Session-Id"))
	}
	if len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "stop" || cc.Object != "chat.completion" || cc.Model != "explorer" {
		t.Fatalf("completion %+v", cc)
	}
	if got, want := cc.Choices[0].Message.Content, e.lastAnswer("openai-session-1"); got != want || got == "" {
		t.Fatalf("content %q, want the saved answer %q", got, want)
	}
	if cc.Usage.TotalTokens == 0 || cc.Usage.TotalTokens != cc.Usage.PromptTokens+cc.Usage.CompletionTokens {
		t.Fatalf("usage %+v", cc.Usage)
	}
	var ext oaExtended
	if err := json.Unmarshal([]byte(cc.JSON.ExtraFields["agentdock"].Raw()), &ext); err != nil {
		t.Fatal(err)
	}
	if len(ext.ToolCalls) != 2 || ext.ToolCalls[0].Name != "brainstorm" || ext.ToolCalls[1].Name != "compare" || len(ext.ToolResults) != 2 || ext.SessionID != "openai-session-1" {
		t.Fatalf("extension %+v", ext)
	}
}

func TestOpenAIClientStreaming(t *testing.T) {
	e := newEnv(t, envOptions{delay: time.Millisecond})
	client := e.openai()
	var res *http.Response
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         "explorer",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please explore options for a team offsite")},
		User:          openai.String("alice@example.com"),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithResponseInto(&res))
	var acc openai.ChatCompletionAccumulator
	var tools []string
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			t.Fatalf("the accumulator refused chunk %s", chunk.RawJSON())
		}
		if raw := chunk.JSON.ExtraFields["agentdock"].Raw(); raw != "" {
			var ext oaExtended
			if err := json.Unmarshal([]byte(raw), &ext); err != nil {
				t.Fatal(err)
			}
			if ext.ToolCall != nil {
				tools = append(tools, ext.ToolCall.Name)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	sid := res.Header.Get("X-Session-Id")
	if !strings.HasPrefix(sid, "user-") {
		t.Fatalf("session %q, want one derived from user", sid)
	}
	if got, want := acc.Choices[0].Message.Content, e.lastAnswer(sid); got != want || got == "" {
		t.Fatalf("streamed %q, want the saved answer %q", got, want)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens == 0 {
		t.Fatalf("finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
	if strings.Join(tools, ",") != "brainstorm,compare" {
		t.Fatalf("tool extension %v", tools)
	}
	// The same user string continues the same session.
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "explorer", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("thanks")},
		User: openai.String("alice@example.com"),
	}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if res.Header.Get("X-Session-Id") != sid {
		t.Fatalf("second call session %q, want %q", res.Header.Get("X-Session-Id"), sid)
	}
}

func TestOpenAIErrors(t *testing.T) {
	e := newEnv(t, envOptions{delay: slowWord, budget: llmorch.Budget{TurnTimeout: 300 * time.Millisecond}})
	client := e.openai()
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "nobody", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound || oe.Code != "model_not_found" {
		t.Fatalf("unknown model: %v", err)
	}
	// Our error shape is there too.
	var eb errBodyT
	getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", `{"model":"plain","messages":[{"role":"system","content":"x"}]}`), http.StatusBadRequest, &eb)
	if eb.Error.Code != "invalid_message" {
		t.Fatalf("%+v", eb.Error)
	}
	getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", `{"messages":[]}`), http.StatusBadRequest, &eb)
	getJSON(t, e.do(http.MethodPost, "/v1/chat/completions", `{"model":"plain",`), http.StatusBadRequest, &eb)

	// A turn that reaches its time budget is not an error: the partial
	// answer ends with finish_reason "length", streaming or not.
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model: "plain", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a long story")},
	})
	n, finish := 0, ""
	for stream.Next() {
		n++
		if c := stream.Current(); len(c.Choices) > 0 && c.Choices[0].FinishReason != "" {
			finish = c.Choices[0].FinishReason
		}
	}
	if err := stream.Err(); err != nil || finish != "length" || n == 0 {
		t.Fatalf("after %d chunks: finish %q, %v", n, finish, err)
	}
	done, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "plain", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a long story")},
	})
	if err != nil || done.Choices[0].FinishReason != "length" || done.Choices[0].Message.Content == "" {
		t.Fatalf("non-streaming timeout: %v %+v", err, done)
	}

	page, err := client.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.Created < time.Now().Add(-time.Hour).Unix() || m.OwnedBy != "agentdock" {
			t.Errorf("model %s: created %d, owned by %q; want the server's start and agentdock", m.ID, m.Created, m.OwnedBy)
		}
	}
	if strings.Join(ids, ",") != "explorer,plain,approver" {
		t.Fatalf("models %v", ids)
	}
}
