package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/turns"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// TestTooLongMessageNamesItsField: a /v1 message over the length limit is
// a 400 whose param names the message, with a session or without, in
// chat completions and in the Responses API.
func TestTooLongMessageNamesItsField(t *testing.T) {
	e := newEnv(t, envOptions{rt: func(c *turns.Config) { c.MaxMessageBytes = 10 }})
	client := e.openai()
	long := strings.Repeat("x", 11)
	check := func(name string, err error, param string) {
		t.Helper()
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Code != "invalid_message" || oe.Param != param {
			t.Errorf("%s: %v (param %q), want 400 invalid_message naming %s", name, err, paramOf(oe), param)
		}
	}
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "explorer",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi"), openai.AssistantMessage("hello"), openai.UserMessage(long)}})
	check("chat completions without a session", err, "messages[2].content")
	_, err = client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "explorer", User: openai.String("param-test-user"),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(long)}})
	check("chat completions with a session", err, "messages[0].content")
	_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "explorer",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(long)}})
	check("responses, a string input", err, "input")
	_, err = client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "explorer",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage(long, responses.EasyInputMessageRoleUser),
		}}})
	check("responses, a list", err, "input[1].content")
}

func paramOf(oe *openai.Error) string {
	if oe == nil {
		return ""
	}
	return oe.Param
}
