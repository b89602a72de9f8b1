package llmorch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
)

// TestOneCallPerAnswer: a turn that runs one call per answer (a client's
// parallel_tool_calls: false) asks the provider for one call on the wire
// (OpenAI's parallel_tool_calls, Anthropic's disable_parallel_tool_use)
// and in the note; an answer with three calls all the same runs the
// first, refuses the second with a result the model reads, standing for
// the third, records only the first, and reports no budget reached. The
// model is a scripted server over loopback, the adapter the real one.
func TestOneCallPerAnswer(t *testing.T) {
	for _, wire := range []string{provider.OpenAI, provider.Anthropic} {
		t.Run(wire, func(t *testing.T) {
			srv := mockllm.New()
			defer srv.Close()
			model, err := provider.New(provider.Config{Provider: wire, Model: "wire-test", APIKey: "k", BaseURL: srv.URL() + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			srv.Enqueue(
				mockllm.Script{ToolCalls: []mockllm.ToolCall{
					{ID: "call_1", Name: "think", Arguments: `{"topic":"a","reasoning":"r"}`},
					{ID: "call_2", Name: "reflect", Arguments: `{"topic":"b","reflection":"r"}`},
					{ID: "call_3", Name: "think", Arguments: `{"topic":"c","reasoning":"r"}`},
				}},
				mockllm.Script{Text: []string{"done"}},
			)
			svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{})
			turn := startTurn(t, store, a, "one-call", "go")
			turn.OneCallPerAnswer = true
			evs := collect(svc.StreamWithOrchestration(context.Background(), turn))

			if done := evs[len(evs)-1]; done.Kind != chat.KindDone || done.FinishReason != chat.FinishStop {
				t.Fatalf("last event %+v: the model goes on after the refusal", done)
			}
			if l := limits(evs); len(l) != 0 {
				t.Fatalf("limits %+v: one call per answer is the client's choice, not a budget", l)
			}
			var results []chat.ToolResult
			for _, ev := range evs {
				if ev.Kind == chat.KindToolResult {
					results = append(results, *ev.ToolResult)
				}
			}
			if len(results) != 2 || results[0].CallID != "call_1" || results[0].IsError || results[1].CallID != "call_2" || !results[1].NotRun ||
				!strings.HasPrefix(results[1].Content, chat.RefusedPrefix) || !strings.Contains(results[1].Content, "this call and the 1 after it were not run") {
				t.Fatalf("results %+v, want call_1 run and call_2 refused for the rest", results)
			}
			sess, _ := store.Get(context.Background(), "one-call")
			if used := sess.State.RecentlyUsedTools.Slice(); len(used) != 1 || used[0] != "think" {
				t.Fatalf("recorded %v, want the first call only", used)
			}

			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the model was called %d times, want 2", len(reqs))
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
				t.Fatal(err)
			}
			switch wire {
			case provider.OpenAI:
				if string(body["parallel_tool_calls"]) != "false" {
					t.Errorf("parallel_tool_calls %s, want false", body["parallel_tool_calls"])
				}
			case provider.Anthropic:
				var choice map[string]any
				_ = json.Unmarshal(body["tool_choice"], &choice)
				if choice["type"] != "auto" || choice["disable_parallel_tool_use"] != true {
					t.Errorf("tool_choice %s, want auto with disable_parallel_tool_use", body["tool_choice"])
				}
			}
			if !strings.Contains(string(reqs[0].Body), "Make at most one tool call in this answer") {
				t.Error("the note does not ask for one call")
			}
			// What the model read next: the first call's result and the
			// refusal, and no result for the call it stands for.
			var read []mockllm.ToolResult
			for _, m := range reqs[1].Messages {
				read = append(read, m.ToolResults...)
			}
			if len(read) != 2 || read[1].CallID != "call_2" || !strings.Contains(read[1].Content, "Make one call per answer") {
				t.Fatalf("the model read %+v", read)
			}
		})
	}
}

// TestParallelCallsByDefault: without OneCallPerAnswer the provider is
// not told anything about parallel calls, and every call of an answer
// runs.
func TestParallelCallsByDefault(t *testing.T) {
	srv := mockllm.New()
	defer srv.Close()
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "wire-test", APIKey: "k", BaseURL: srv.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Enqueue(
		mockllm.Script{ToolCalls: []mockllm.ToolCall{
			{ID: "call_1", Name: "think", Arguments: `{"topic":"a","reasoning":"r"}`},
			{ID: "call_2", Name: "reflect", Arguments: `{"topic":"b","reflection":"r"}`},
		}},
		mockllm.Script{Text: []string{"done"}},
	)
	svc, store, a := newBudgetFixture(t, plainTemplate, model, llmorch.Budget{})
	evs := collect(svc.StreamWithOrchestration(context.Background(), startTurn(t, store, a, "parallel", "go")))
	ran := 0
	for _, ev := range evs {
		if ev.Kind == chat.KindToolResult && !ev.ToolResult.NotRun {
			ran++
		}
	}
	if ran != 2 {
		t.Fatalf("%d calls ran, want both", ran)
	}
	if body := string(srv.Requests()[0].Body); strings.Contains(body, "parallel_tool_calls") || strings.Contains(body, "one tool call") {
		t.Fatalf("the request speaks of parallel calls: %s", body)
	}
}
