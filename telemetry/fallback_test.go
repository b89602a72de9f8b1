package telemetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/telemetry"
)

// TestChatSpanNamesTheModelThatAnswered: a model call that a fallback
// answered says so on its span: the response model, the models that
// failed first, and a fallback event with the error's type; the step's
// model configuration is on it too.
func TestChatSpanNamesTheModelThatAnswered(t *testing.T) {
	rec := setupRecorded(t, false)
	_, call := rec.tel.StartChat(context.Background(), telemetry.ChatInfo{AgentID: "a", Provider: "openai", Model: "gpt-4.1", Config: "llm.openai", Call: 1})
	call.Observe(chat.Event{Kind: chat.KindFallback, Fallback: &chat.Fallback{
		From:  chat.ModelRef{Config: "llm.openai", Provider: "openai", Model: "gpt-4.1"},
		To:    chat.ModelRef{Config: "llm.backup", Provider: "anthropic", Model: "claude-sonnet-4-5"},
		Error: chat.Error{Code: "provider_unavailable", Message: "HTTP 503"},
	}}, nil)
	call.Observe(chat.Event{Kind: chat.KindTextDelta, Text: "hi"}, nil)
	call.End()
	spans := rec.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	checkAttrs(t, s, map[attribute.Key]attribute.Value{
		"gen_ai.request.model":     attribute.StringValue("gpt-4.1"),
		"gen_ai.response.model":    attribute.StringValue("claude-sonnet-4-5"),
		telemetry.AttrModelConfig:  attribute.StringValue("llm.openai"),
		telemetry.AttrFallbackFrom: attribute.StringSliceValue([]string{"llm.openai (openai gpt-4.1)"}),
	})
	if evs := s.Events(); len(evs) != 1 || evs[0].Name != "fallback" {
		t.Fatalf("span events %+v, want one fallback event", evs)
	}
}
