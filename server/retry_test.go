package server

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
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
	if !retryable("session_busy") || !retryable("rate_limited") || !retryable("provider_unavailable") {
		t.Error("a conflict or an outage that passes is marked not retryable")
	}
}

// TestRetryCodesAreTheProviders: the codes the server names by their
// value are package provider's.
func TestRetryCodesAreTheProviders(t *testing.T) {
	for _, code := range []string{provider.CodeAuth, provider.CodeInvalidRequest, provider.CodeOutputLimit} {
		if retryable(code) {
			t.Errorf("%s is retryable", code)
		}
	}
}

// TestRetryDocumented: docs/api.md says, for every code a retry cannot
// cure, that it carries x-should-retry: false.
func TestRetryDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Retrying")
	if !ok {
		t.Fatal("docs/api.md has no section ### Retrying")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for code := range noRetry {
		if !strings.Contains(section, "`"+code+"`") {
			t.Errorf("docs/api.md's Retrying section does not name %s", code)
		}
	}
}
