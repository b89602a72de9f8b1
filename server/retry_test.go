package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/session"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// TestStructuredOutputFailureIsNotRetried: the official client with its
// default retries sends a request whose answer misses the response
// format once: the failure is a 422 with x-should-retry: false, and the
// model was asked twice (the answer and its repair), not six times.
func TestStructuredOutputFailureIsNotRetried(t *testing.T) {
	e, mock := clientEnv(t)
	client := openai.NewClient(option.WithBaseURL(e.base+"/v1/"), option.WithAPIKey("unused")) // the default: 2 retries
	before := len(mock.Requests())
	mock.Enqueue(mockllm.TextScript("prose"), mockllm.TextScript("prose again"))
	var res *http.Response
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "builder",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Parts, please")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "parts", Strict: openai.Bool(true), Schema: map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"parts"},
				"properties": map[string]any{"parts": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
			}},
		}},
	}, option.WithResponseInto(&res))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusUnprocessableEntity || oe.Code != llmorch.CodeInvalidOutput {
		t.Fatalf("error %v, want 422 invalid_output", err)
	}
	if got := oe.Response.Header.Get("X-Should-Retry"); got != "false" {
		t.Errorf("x-should-retry %q, want false", got)
	}
	if n := len(mock.Requests()) - before; n != 2 {
		t.Fatalf("the model was asked %d times, want 2 (the answer and one repair): the client retried", n)
	}
}

// TestSettledConflictsAreNotRetried: an answer to an approval already
// answered is a 409 that says x-should-retry: false; a busy session's
// 409, which a later retry may pass, does not.
func TestSettledConflictsAreNotRetried(t *testing.T) {
	e := newEnv(t, envOptions{model: critiquesTwice{}})
	sid := "retry-" + session.NewID()
	_, evs := e.streamChat("approver", `{"message":"critique: remote work","sessionId":"`+sid+`"}`)
	approvalID := ""
	for _, ev := range evs {
		if strings.Contains(ev.Data, `"tool-approval-request"`) {
			_, rest, _ := strings.Cut(ev.Data, `"approvalId":"`)
			approvalID, _, _ = strings.Cut(rest, `"`)
		}
	}
	if approvalID == "" {
		t.Fatal("no approval asked")
	}
	answer := `{"sessionId":"` + sid + `","approvals":[{"id":"` + approvalID + `","approved":true}]}`
	e.streamChat("approver", answer)
	e.waitIdle(sid)
	res := e.do(http.MethodPost, "/api/chat/approver", answer)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict || !strings.Contains(string(body), "approval_answered") || res.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("answering again: %d %v %s", res.StatusCode, res.Header, body)
	}
	if !door.Retryable("session_busy") || !door.Retryable("rate_limited") || !door.Retryable("provider_unavailable") {
		t.Error("a conflict or an outage that passes is marked not retryable")
	}
}
