package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oar "github.com/openai/openai-go/v3/responses"
)

// Stateless conversations, which the client keeps and sends whole, as the
// official openai client does: on the memory store and on Redis (a
// replica's stores), each on a scripted model over real HTTP.

// statelessEnvs runs f on a server with the memory store and on one
// whose stores are on a redis-server of its own.
func statelessEnvs(t *testing.T, f func(t *testing.T, e *env, mock *mockllm.Server)) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			mock := mockllm.New()
			t.Cleanup(mock.Close)
			model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "scripted", BaseURL: mock.URL() + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			o := envOptions{model: model, templates: "testdata/clienttools"}
			var e *env
			if store == "memory" {
				e = newEnv(t, o)
			} else {
				e = replica(t, redistest.Start(t), "stateless-"+session.NewID(), o)
			}
			f(t, e, mock)
		})
	}
}

func extOf(t *testing.T, cc *openai.ChatCompletion) oaExtended {
	t.Helper()
	return extension(t, cc.JSON.ExtraFields["agentdock"].Raw())
}

// callOf is an assistant message of a client's conversation with one call.
func callOf(id, name, args string) openai.ChatCompletionMessageParamUnion {
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
		ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: name, Arguments: args}}}}}}
}

// TestStatelessMixedSequence: think -> client_edit -> reflect over
// /v1/chat/completions without a session, the official client keeping
// only what OpenAI's messages hold (its own call and result, none of the
// agent's calls), reaches the position a session reaches: the client
// call's ID carries the agent's think, which the next request replays.
func TestStatelessMixedSequence(t *testing.T) {
	statelessEnvs(t, func(t *testing.T, e *env, mock *mockllm.Server) {
		client := e.openai()
		run := func(opts ...option.RequestOption) (ran []string, last *openai.ChatCompletion, offered [][]string) {
			from := len(mock.Requests())
			mock.Enqueue(toolScript("think", `{"topic":"the draft","reasoning":"tighten the intro"}`),
				toolScript("client_edit", `{"part":"intro"}`),
				toolScript("reflect", `{"topic":"the edit","reflection":"shorter and clearer"}`),
				mockllm.TextScript("Edited."))
			params := openai.ChatCompletionNewParams{Model: "editor", Tools: []openai.ChatCompletionToolUnionParam{clientTool("client_edit")},
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please edit my draft")}}
			for range 4 {
				cc, err := client.Chat.Completions.New(t.Context(), params, opts...)
				if err != nil {
					t.Fatal(err)
				}
				last = cc
				msg := cc.Choices[0].Message
				if cc.Choices[0].FinishReason != "tool_calls" {
					break
				}
				params.Messages = append(params.Messages, msg.ToParam())
				for _, call := range msg.ToolCalls {
					ran = append(ran, call.Function.Name)
					params.Messages = append(params.Messages, openai.ToolMessage("the intro is edited", call.ID))
				}
			}
			for _, r := range mock.Requests()[from:] {
				offered = append(offered, r.ToolNames())
			}
			return ran, last, offered
		}
		ran, stateless, offered := run()
		if !slices.Equal(ran, []string{"client_edit"}) || stateless.Choices[0].Message.Content != "Edited." {
			t.Fatalf("stateless: the client ran %v, answer %q", ran, stateless.Choices[0].Message.Content)
		}
		want := [][]string{{"think"}, {"client_edit"}, {"reflect"}, {"think", "reflect", "client_edit"}}
		if !slices.EqualFunc(offered, want, func(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }) {
			t.Fatalf("stateless: model calls offered %v, want %v", offered, want)
		}
		// The model never sees an ID a provider would refuse.
		valid := regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
		for _, r := range mock.Requests() {
			for _, m := range r.Messages {
				for _, c := range m.ToolCalls {
					if !valid.MatchString(c.ID) {
						t.Errorf("the model got call ID %q", c.ID)
					}
				}
			}
		}

		sid := "mixed-" + session.NewID()
		ran, stateful, _ := run(option.WithHeader("X-Session-Id", sid))
		if !slices.Equal(ran, []string{"client_edit"}) {
			t.Fatalf("with a session: the client ran %v", ran)
		}
		sess, err := e.store.Get(t.Context(), sid)
		if err != nil {
			t.Fatal(err)
		}
		got, ref := extOf(t, stateless).Orchestration, extOf(t, stateful).Orchestration
		if got == nil || ref == nil || got.ActiveStep != "Edit" || got.SequenceIndex != 3 || got.ActiveStep != ref.ActiveStep || got.SequenceIndex != ref.SequenceIndex ||
			sess.State.SequenceIndex != got.SequenceIndex || !sess.State.RecentlyUsedTools.Equal("think", "client_edit", "reflect") {
			t.Fatalf("stateless ends %+v; the session's turn %+v, its state %+v", got, ref, sess.State)
		}
	})
}

func sorted(l []string) []string {
	c := slices.Clone(l)
	slices.Sort(c)
	return c
}

// TestStatelessForeignCalls: a conversation holding calls of tools that
// neither the agent nor the request has is replayed, never refused: a
// call the model made up and the runtime refused (the Responses API's own
// output fed back, and the same history over chat completions), the client
// tools an earlier request brought, and an Agents SDK handoff whose
// history holds the earlier agent's tools. Those calls count as not run;
// the model reads them as history. A malformed conversation is still a 400.
func TestStatelessForeignCalls(t *testing.T) {
	statelessEnvs(t, func(t *testing.T, e *env, mock *mockllm.Server) {
		client := e.openai()
		ctx := t.Context()
		stepOf := func(raw string) *chat.Snapshot {
			var ext struct {
				Orchestration *chat.Snapshot `json:"orchestration"`
			}
			if err := json.Unmarshal([]byte(raw), &ext); err != nil {
				t.Fatal(err)
			}
			return ext.Orchestration
		}

		// The Responses API: the model calls a tool the agent lacks; the
		// runtime refuses it; the client feeds the output back.
		mock.Enqueue(toolScript("pubmed_search", `{"query":"x"}`), mockllm.TextScript("I cannot search PubMed."))
		first, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "editor", Store: openai.Bool(false), Input: input("Please edit my draft")})
		if err != nil {
			t.Fatal(err)
		}
		items := append(oar.ResponseInputParam{oar.ResponseInputItemParamOfMessage("Please edit my draft", oar.EasyInputMessageRoleUser)}, fedBack(first)...)
		calls := toolItems(t, first)
		if len(calls) != 1 || calls[0].Output == nil || !strings.HasPrefix(*calls[0].Output, "Refused: ") || !calls[0].NotRun {
			t.Fatalf("the call of a tool the agent lacks got %+v", calls)
		}
		refusal := *calls[0].Output
		mock.Enqueue(mockllm.TextScript("Here is the plan."))
		second, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "editor", Store: openai.Bool(false),
			Input: oar.ResponseNewParamsInputUnion{OfInputItemList: append(items, oar.ResponseInputItemParamOfMessage("then edit it", oar.EasyInputMessageRoleUser))}})
		if err != nil {
			t.Fatalf("the Responses API's own output fed back: %v", err)
		}
		if snap := stepOf(second.JSON.ExtraFields["agentdock"].Raw()); second.OutputText() != "Here is the plan." || snap == nil || snap.ActiveStep != "Edit" || snap.SequenceIndex != 0 {
			t.Fatalf("answer %q, orchestration %+v", second.OutputText(), snap)
		}

		// The same history over chat completions.
		history := []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Please edit my draft"),
			callOf("call_pm", "pubmed_search", `{"query":"x"}`),
			openai.ToolMessage(refusal, "call_pm"),
			openai.AssistantMessage("I cannot search PubMed."),
			openai.UserMessage("then edit it"),
		}
		mock.Enqueue(mockllm.TextScript("Here is the plan."))
		cc, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "editor", Messages: history})
		if err != nil {
			t.Fatalf("chat completions with that history: %v", err)
		}
		if snap := extOf(t, cc).Orchestration; snap == nil || snap.ActiveStep != "Edit" || snap.SequenceIndex != 0 {
			t.Fatalf("orchestration %+v", snap)
		}
		sent := mock.Requests()[len(mock.Requests())-1]
		if !slices.ContainsFunc(sent.Messages, func(m mockllm.Message) bool {
			return slices.ContainsFunc(m.ToolCalls, func(c mockllm.ToolCall) bool { return c.Name == "pubmed_search" })
		}) {
			t.Fatal("the model did not see the refused call in its history")
		}

		// A previous request's client tool, which this request no longer
		// brings, and an Agents SDK handoff: the earlier agent's tools ran
		// at the client; this request brings the next agent's tools only.
		// Neither moves the orchestration: the turn starts where the
		// conversation without them would.
		ran := []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Please edit my draft"),
			callOf("call_old", "client_lint", `{}`),
			openai.ToolMessage("no problems", "call_old"),
			callOf("call_handoff", "transfer_to_editor", `{}`),
			openai.ToolMessage(`{"assistant": "editor"}`, "call_handoff"),
			openai.UserMessage("go on"),
		}
		for _, tools := range [][]openai.ChatCompletionToolUnionParam{nil, {clientTool("client_edit")}} {
			mock.Enqueue(toolScript("think", `{"topic":"t","reasoning":"r"}`), mockllm.TextScript("Thought it through."))
			cc, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "editor", Messages: ran, Tools: tools})
			if err != nil {
				t.Fatalf("a history with tools the request lacks (tools %d): %v", len(tools), err)
			}
			if snap := extOf(t, cc).Orchestration; snap == nil || snap.ActiveStep != "Edit" || snap.SequenceIndex != 1 {
				t.Fatalf("orchestration %+v: the foreign calls moved it, or think did not", snap)
			}
		}
		// The handoff over the Responses API, as the Agents SDK sends it.
		handoff := oar.ResponseInputParam{
			oar.ResponseInputItemParamOfMessage("Please edit my draft", oar.EasyInputMessageRoleUser),
			oar.ResponseInputItemParamOfFunctionCall(`{}`, "call_handoff", "transfer_to_editor"),
		}
		out := oar.ResponseInputItemParamOfFunctionCallOutput(`{"assistant": "editor"}`)
		out.OfFunctionCallOutput.CallID = openai.String("call_handoff")
		handoff = append(handoff, out, oar.ResponseInputItemParamOfMessage("go on", oar.EasyInputMessageRoleUser))
		mock.Enqueue(mockllm.TextScript("On it."))
		r, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "editor", Store: openai.Bool(false),
			Input: oar.ResponseNewParamsInputUnion{OfInputItemList: handoff},
			Tools: []oar.ToolUnionParam{{OfFunction: &oar.FunctionToolParam{Name: "client_edit", Parameters: map[string]any{"type": "object"}}}}})
		if err != nil || r.OutputText() != "On it." {
			t.Fatalf("a handoff over the Responses API: %v", err)
		}

		// Malformed conversations are still refused, naming the message.
		for _, tt := range []struct {
			name  string
			msgs  []openai.ChatCompletionMessageParamUnion
			param string
		}{
			{"a call without its result", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("edit"), callOf("call_1", "client_lint", `{}`), openai.UserMessage("go on")}, "messages[1]"},
			{"a result without its call", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("edit"), openai.ToolMessage("r", "call_9"), openai.UserMessage("go on")}, "messages[1]"},
			{"a call ID used twice", []openai.ChatCompletionMessageParamUnion{openai.UserMessage("edit"), callOf("call_1", "x", `{}`), openai.ToolMessage("r", "call_1"), callOf("call_1", "y", `{}`), openai.ToolMessage("r", "call_1"), openai.UserMessage("go on")}, "messages[3]"},
		} {
			_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "editor", Messages: tt.msgs})
			var oe *openai.Error
			if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || oe.Code != "invalid_message" || oe.Param != tt.param {
				t.Errorf("%s: %v, want 400 invalid_message naming %s", tt.name, err, tt.param)
			}
		}
		if n := mock.Pending(); n != 0 {
			t.Fatalf("%d scripts left: a turn made fewer model calls than expected", n)
		}
	})
}
