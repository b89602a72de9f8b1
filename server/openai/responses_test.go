package openai

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
)

// TestRespBuilder: the output items and final status a turn's events
// make, for each way a turn ends; two builders fed the same events agree
// (the stream and the recorder rely on it).
func TestRespBuilder(t *testing.T) {
	call := &chat.ToolCall{ID: "call_1", Name: "think", Arguments: json.RawMessage(`{"q":1}`)}
	body := []chat.Event{
		{Kind: chat.KindStepStart}, {Kind: chat.KindTextDelta, Text: "Let me "}, {Kind: chat.KindTextDelta, Text: "think."},
		{Kind: chat.KindToolCall, ToolCall: call},
		{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{CallID: "call_1", Name: "think", Content: "thought"}},
		{Kind: chat.KindStepFinish}, {Kind: chat.KindStepStart}, {Kind: chat.KindTextDelta, Text: "Answer"},
	}
	usage := chat.Event{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 10, Completion: 5}, Final: true}
	tests := []struct {
		name       string
		end        []chat.Event
		status     string
		reason     string
		lastStatus string
	}{
		{"completed", []chat.Event{{Kind: chat.KindStepFinish}, usage, {Kind: chat.KindDone, FinishReason: chat.FinishStop}}, "completed", "", "completed"},
		{"output budget", []chat.Event{{Kind: chat.KindLimit, Limit: &chat.Limit{Name: chat.LimitOutput}}, usage, {Kind: chat.KindDone, FinishReason: chat.FinishLength}}, "incomplete", "max_output_tokens", "incomplete"},
		{"time budget", []chat.Event{{Kind: chat.KindLimit, Limit: &chat.Limit{Name: chat.LimitTime}}, {Kind: chat.KindDone, FinishReason: chat.FinishTimeout}}, "incomplete", "turn_timeout", "incomplete"},
		{"steps", []chat.Event{{Kind: chat.KindStepFinish}, {Kind: chat.KindDone, FinishReason: chat.FinishMaxSteps}}, "incomplete", "max_steps", "completed"},
		{"stopped", []chat.Event{{Kind: chat.KindDone, FinishReason: chat.FinishCancelled}}, "incomplete", "cancelled", "incomplete"},
		{"failed", []chat.Event{{Kind: chat.KindError, Error: &chat.Error{Code: "model_error", Message: "the model failed"}}, {Kind: chat.KindDone, FinishReason: chat.FinishError}}, "failed", "", "incomplete"},
	}
	for _, tt := range tests {
		base := oaResponse{ID: "resp_x", Object: "response", Status: "in_progress", AgentDock: &oaRespExtension{TurnID: "turn1234"}}
		a, b := newRespBuilder(base), newRespBuilder(base)
		var events []oaRespEvent
		for _, ev := range append(slices.Clone(body), tt.end...) {
			events = append(events, a.add(ev)...)
			b.add(ev)
		}
		now := time.Unix(1700000000, 0)
		fa, fb := a.finish(now), b.finish(now)
		if string(mustJSON(fa)) != string(mustJSON(fb)) {
			t.Errorf("%s: two builders disagree", tt.name)
		}
		if fa.Status != tt.status || (tt.reason != "") != (fa.IncompleteDetails != nil) || (fa.IncompleteDetails != nil && fa.IncompleteDetails.Reason != tt.reason) {
			t.Errorf("%s: status %q details %+v", tt.name, fa.Status, fa.IncompleteDetails)
		}
		if tt.status == "failed" && (fa.Error == nil || fa.Error.Code != "model_error") {
			t.Errorf("%s: error %+v", tt.name, fa.Error)
		}
		if len(fa.Output) != 4 {
			t.Fatalf("%s: %d items", tt.name, len(fa.Output))
		}
		first, last := fa.Output[0].(*oaMessageItem), fa.Output[3].(*oaMessageItem)
		if first.Content[0].Text != "Let me think." || first.Status != "completed" || last.Content[0].Text != "Answer" || last.Status != tt.lastStatus {
			t.Errorf("%s: messages %+v %+v", tt.name, first, last)
		}
		if fc := fa.Output[1].(*oaFunctionCall); fc.Arguments != `{"q":1}` || fc.CallID != "call_1" || fc.ID != "fc_turn1234_1" {
			t.Errorf("%s: function call %+v", tt.name, fc)
		}
		// Every added item is done, in order.
		open := map[int]bool{}
		for _, ev := range events {
			switch ev.Type {
			case "response.output_item.added":
				open[*ev.OutputIndex] = true
			case "response.output_item.done":
				if !open[*ev.OutputIndex] {
					t.Errorf("%s: item %d done before added", tt.name, *ev.OutputIndex)
				}
				delete(open, *ev.OutputIndex)
			}
		}
		if len(open) != 0 {
			t.Errorf("%s: items left open %v", tt.name, open)
		}
	}
}
