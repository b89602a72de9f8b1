package openai

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
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
		// The result of a call this response did not show (an earlier
		// answer's, carried out after its approval).
		{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{CallID: "call_0", Name: "edit", Content: "edited"}},
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
		// The agent's own call is one item with its result, never a
		// function_call (a call for the client to run).
		if tc := fa.Output[1].(*oaToolCallItem); tc.Type != "agentdock:tool_call" || tc.Arguments != `{"q":1}` || tc.CallID != "call_1" || tc.ID != "tc_turn1234_1" ||
			tc.Output == nil || *tc.Output != "thought" || tc.Status != "completed" || tc.Answer != 1 {
			t.Errorf("%s: tool call %+v", tt.name, tc)
		}
		if _, ok := fa.Output[2].(*oaFunctionCallOutput); !ok {
			t.Errorf("%s: item 2 is %T, want the client call's output", tt.name, fa.Output[2])
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

// TestToolCallItems: the agent's calls are agentdock:tool_call items: a
// call held for approval ends incomplete naming the approval, a call
// left without a result when the turn fails ends incomplete, and only a
// client's call is a function_call. Fed back as input, the items rebuild
// the conversation as the agent had it: the calls of one answer in one
// assistant message (with the answer's text), then their results; a
// call without output counts as not run.
func TestToolCallItems(t *testing.T) {
	args := json.RawMessage(`{"q":1}`)
	events := []chat.Event{
		{Kind: chat.KindStepStart}, {Kind: chat.KindTextDelta, Text: "Let me think."},
		{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "c_think", Name: "think", Arguments: args}},
		{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{CallID: "c_think", Name: "think", Content: "thought"}},
		{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "c_reflect", Name: "reflect", Arguments: args}},
		{Kind: chat.KindToolResult, ToolResult: &chat.ToolResult{CallID: "c_reflect", Name: "reflect", Content: chat.RefusedPrefix + "not now", IsError: true, NotRun: true}},
		{Kind: chat.KindStepFinish}, {Kind: chat.KindStepStart},
		{Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "c_compare", Name: "compare", Arguments: args}},
		{Kind: chat.KindApproval, ToolCall: &chat.ToolCall{ID: "c_compare", Name: "compare", Arguments: args}, Approval: &chat.Approval{ID: "approval-1", ToolCallID: "c_compare"}},
		{Kind: chat.KindClientCall, ToolCall: &chat.ToolCall{ID: "c_edit", Name: "client_edit", Arguments: args}},
		{Kind: chat.KindStepFinish}, {Kind: chat.KindDone, FinishReason: chat.FinishApproval},
	}
	b := newRespBuilder(oaResponse{ID: "resp_x", AgentDock: &oaRespExtension{TurnID: "t1"}})
	var stream []oaRespEvent
	for _, ev := range events {
		stream = append(stream, b.add(ev)...)
	}
	final := b.finish(time.Unix(1700000000, 0))
	if final.Status != "incomplete" || final.IncompleteDetails == nil || final.IncompleteDetails.Reason != "approval" {
		t.Fatalf("status %q %+v", final.Status, final.IncompleteDetails)
	}
	var types []string
	for _, it := range final.Output {
		types = append(types, itemType(it))
	}
	if want := []string{"message", "agentdock:tool_call", "agentdock:tool_call", "agentdock:tool_call", "function_call"}; !slices.Equal(types, want) {
		t.Fatalf("items %v, want %v", types, want)
	}
	held := final.Output[3].(*oaToolCallItem)
	if held.Status != "incomplete" || held.ApprovalID != "approval-1" || held.Output != nil || held.Answer != 2 {
		t.Fatalf("held call %+v", held)
	}
	if refused := final.Output[2].(*oaToolCallItem); !refused.NotRun || !refused.IsError || refused.Answer != 1 {
		t.Fatalf("refused call %+v", refused)
	}
	// Every item is added, then done once, and no function_call_arguments
	// event speaks of an agent's call.
	done := map[int]int{}
	for _, ev := range stream {
		switch ev.Type {
		case "response.output_item.done":
			done[*ev.OutputIndex]++
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			if *ev.OutputIndex != 4 {
				t.Errorf("%s for item %d", ev.Type, *ev.OutputIndex)
			}
		}
	}
	for i := range final.Output {
		if done[i] != 1 {
			t.Errorf("item %d done %d times", i, done[i])
		}
	}

	// A failed turn leaves no call open.
	f := newRespBuilder(oaResponse{ID: "resp_y", AgentDock: &oaRespExtension{TurnID: "t2"}})
	for _, ev := range []chat.Event{{Kind: chat.KindStepStart}, {Kind: chat.KindToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "think"}},
		{Kind: chat.KindError, Error: &chat.Error{Code: "model_error", Message: "x"}}, {Kind: chat.KindDone, FinishReason: chat.FinishError}} {
		f.add(ev)
	}
	if it := f.finish(time.Now()).Output[0].(*oaToolCallItem); it.Status != "incomplete" || it.Output != nil || it.Arguments != "{}" {
		t.Fatalf("the call of a failed turn %+v", it)
	}

	// Fed back: the user's message, the output as it came, the client's
	// result.
	input := []json.RawMessage{json.RawMessage(`{"role":"user","content":"go"}`)}
	for _, it := range final.Output {
		input = append(input, mustJSON(it))
	}
	input = append(input, json.RawMessage(`{"type":"function_call_output","call_id":"c_edit","output":"edited"}`))
	body, err := wire.ParseResponses(mustJSON(map[string]any{"model": "a", "input": input}))
	if err != nil {
		t.Fatal(err)
	}
	in, pe := body.Conversation(nil)
	if pe != nil {
		t.Fatal(pe)
	}
	var got []string
	for _, m := range in.Messages {
		s := string(m.Role)
		if m.Content != "" {
			s += " " + m.Content
		}
		for _, c := range m.ToolCalls {
			s += " call:" + c.Name
		}
		if m.NotRun {
			s += " (not run)"
		}
		got = append(got, s)
	}
	want := []string{
		"user go",
		"assistant Let me think. call:think call:reflect", "tool thought", "tool " + chat.RefusedPrefix + "not now (not run)",
		"assistant call:compare", "tool " + notAnsweredText + " (not run)",
		// A function_call does not say which answer made it: after the
		// agent's calls it starts a message of its own, as before.
		"assistant call:client_edit", "tool edited",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("conversation\n%q\nwant\n%q", got, want)
	}
}

// notAnsweredText is what the conversation holds for a call fed back
// without output.
const notAnsweredText = chat.NotRunPrefix + "this call did not run: it waited for a person's approval, or its turn stopped before it ran."

func itemType(it any) string {
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(mustJSON(it), &v)
	return v.Type
}
