package mcpserver_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// keyed adds an API key to every request.
type keyed struct{ key string }

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("x-api-key", k.key)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, key, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}
	if key != "" {
		tr.HTTPClient = &http.Client{Transport: keyed{key}}
	}
	cs, err := c.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// scriptedModel is a model answering from mock's scripts over HTTP.
func scriptedModel(t *testing.T) (*mockllm.Server, llmorch.Model) {
	t.Helper()
	mock := mockllm.New()
	t.Cleanup(mock.Close)
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1", APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	return mock, model
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The official Go SDK's client calls an agent whose step enforces a
// sequence, on a scripted model, in both protocol revisions: the answer
// comes back with progress notifications along the way, and the model was
// offered the sequence's tools one at a time.
func TestCallAnAgentWithASequence(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			mock, model := scriptedModel(t)
			mock.Enqueue(
				mockllm.ToolScript(mockllm.ToolCall{Name: "brainstorm", Arguments: `{"challenge":"an offsite","ideas":"a lake, a city"}`}),
				mockllm.ToolScript(mockllm.ToolCall{Name: "compare", Arguments: `{"adTopic":"lake or city","comparison":"the lake is calmer"}`}),
				mockllm.TextScript("Go to the ", "lake."),
			)
			s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}, Model: model})
			var (
				mu    sync.Mutex
				notes []string
			)
			cs := connect(t, s.URL, "", version, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				notes = append(notes, r.Params.Message)
				mu.Unlock()
			}})
			if got := cs.InitializeResult(); got != nil && got.ProtocolVersion != version {
				t.Fatalf("negotiated %s", got.ProtocolVersion)
			}
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil || len(tools.Tools) != s.Agents {
				t.Fatalf("tools: %v %+v", err, tools)
			}
			params := &mcp.CallToolParams{Name: "explorer", Arguments: map[string]any{"message": "explore offsite options"}}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || text(res) != "Go to the lake." {
				t.Fatalf("result %v %q", res.IsError, text(res))
			}
			out := res.StructuredContent.(map[string]any)
			if out["finishReason"] != "stop" || out["sessionId"] == "" {
				t.Fatalf("structured %v", out)
			}
			// The client hands notifications to its handler on goroutines
			// of its own: the last may come after the result.
			want := []string{"calling brainstorm", "brainstorm answered", "calling compare", "compare answered", "answering"}
			var got string
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				got = strings.Join(notes, "|")
				mu.Unlock()
				if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(got, w) }) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("progress %q lacks one of %q", got, want)
				}
			}
			var offered [][]string
			for _, r := range mock.Requests() {
				offered = append(offered, r.ToolNames())
			}
			if len(offered) != 3 || strings.Join(offered[0], ",") != "brainstorm" || strings.Join(offered[1], ",") != "compare" {
				t.Fatalf("the model was offered %v", offered)
			}
		})
	}
}

// A held call is asked through elicitation when the client supports it,
// and comes back in the result when it does not; approvals then answer it.
func TestApprovals(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	asked := 0
	cs := connect(t, s.URL, "", "2025-11-25", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		if !strings.Contains(r.Params.Message, "think") {
			t.Errorf("elicitation %q", r.Params.Message)
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, nil
	}})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "think about tea"}})
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || res.IsError || res.StructuredContent.(map[string]any)["finishReason"] != "stop" {
		t.Fatalf("asked %d, result %v %q", asked, res.IsError, text(res))
	}

	plain := connect(t, s.URL, "", "2025-11-25", nil)
	res, err = plain.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "think about tea", "sessionId": "tea-session-1"}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.StructuredContent.(map[string]any)
	pending, _ := out["pendingApprovals"].([]any)
	if out["finishReason"] != "approval" || len(pending) != 1 || !strings.Contains(text(res), "Waiting for approval: think") {
		t.Fatalf("without elicitation: %v %q", out, text(res))
	}
	id := pending[0].(map[string]any)["id"].(string)
	res, err = plain.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"sessionId": "tea-session-1", "approvals": []any{map[string]any{"id": id, "approved": false, "reason": "no"}}}})
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["finishReason"] != "stop" {
		t.Fatalf("after the answer: %v %+v", err, res)
	}
}

// From 2026-07-28 a held call comes back as an input-required result, a
// question per approval keyed by its ID, with the session as requestState;
// the call made again with the person's answers goes on with the turn.
// The Go SDK's client does that itself when it has an elicitation handler;
// the rows without it answer by hand, as any client may.
func TestApprovalsAsInputRequired(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	for _, tc := range []struct {
		name     string
		auto     bool
		response *mcp.ElicitResult
		want     string // in the answer
	}{
		{"the SDK's client asks and calls again", true, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, "Thinking: tea"},
		{"approved by hand", false, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, "Thinking: tea"},
		{"denied with a reason", false, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": false, "reason": "not now"}}, "Your reason: not now"},
		{"declined", false, &mcp.ElicitResult{Action: "decline"}, "the user declined the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			cs := connect(t, s.URL, "", "2026-07-28", &mcp.ClientOptions{
				MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: !tc.auto},
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					if !strings.Contains(r.Params.Message, "think") {
						t.Errorf("question %q", r.Params.Message)
					}
					return tc.response, nil
				},
			})
			call := &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "think about tea"}}
			res, err := cs.CallTool(t.Context(), call)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.auto {
				if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
					t.Fatalf("first call: input required %v, %d questions, state %q; want one question and a state", res.NeedsInput(), len(res.InputRequests), res.RequestState)
				}
				answers := mcp.InputResponseMap{}
				for id, q := range res.InputRequests {
					form, ok := q.(*mcp.ElicitParams)
					if !ok || !strings.HasPrefix(id, "approval-") || !strings.Contains(form.Message, "think") {
						t.Fatalf("question %s: %#v", id, q)
					}
					answers[id] = tc.response
				}
				again := *call
				again.InputResponses, again.RequestState = answers, res.RequestState
				if res, err = cs.CallTool(t.Context(), &again); err != nil {
					t.Fatal(err)
				}
			} else if asked != 1 {
				t.Fatalf("asked %d times, want 1", asked)
			}
			out, _ := res.StructuredContent.(map[string]any)
			if res.IsError || res.NeedsInput() || out["finishReason"] != "stop" || !strings.Contains(text(res), tc.want) {
				t.Fatalf("after the answer: error %v, input required %v, %v; want stop and %q in %q", res.IsError, res.NeedsInput(), out["finishReason"], tc.want, text(res))
			}
		})
	}

	// A client without elicitation gets the held calls in the result, as
	// before 2026-07-28.
	plain := connect(t, s.URL, "", "2026-07-28", nil)
	res, err := plain.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "think about tea", "sessionId": "tea-session-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.NeedsInput() || res.StructuredContent.(map[string]any)["finishReason"] != "approval" || !strings.Contains(text(res), "Waiting for approval: think") {
		t.Fatalf("without elicitation: input required %v, %q", res.NeedsInput(), text(res))
	}

	// Answers that cannot be read are the call's error, saying why.
	manual := connect(t, s.URL, "", "2026-07-28", &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, nil }})
	first, err := manual.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "think about tea"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first call: %v, input required %v", err, first.NeedsInput())
	}
	for _, tc := range []struct {
		name  string
		state string
		resp  mcp.InputResponse
		want  string
	}{
		{"not an elicitation result", first.RequestState, &mcp.ListRootsResult{Roots: []*mcp.Root{}}, "want the elicitation result"},
		{"a state this server did not give", "tea-session-2", &mcp.ElicitResult{Action: "accept"}, "requestState is not one this server gave"},
		{"an approval that does not wait", first.RequestState, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, "unknown_approval"},
	} {
		res, err := manual.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "think about tea"},
			InputResponses: mcp.InputResponseMap{"approval-0123456789abcdef": tc.resp}, RequestState: tc.state})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s: error %v %q; want an error saying %q", tc.name, res.IsError, text(res), tc.want)
		}
	}
}

// The answer of a call that answers an input-required result is the
// whole turn's: the text before the held call too, which the
// input-required result could not carry.
func TestInputRequiredKeepsTheAnswer(t *testing.T) {
	mock, model := scriptedModel(t)
	mock.Enqueue(
		mockllm.Script{Text: []string{"Let me think. "}, ToolCalls: []mockllm.ToolCall{{Name: "think", Arguments: `{"topic":"tea","reasoning":"**Problem** which tea"}`}}},
		mockllm.TextScript("Green ", "tea."),
	)
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}, Model: model})
	cs := connect(t, s.URL, "", "2026-07-28", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, nil
	}})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "gatekeeper", Arguments: map[string]any{"message": "which tea?"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != "Let me think. Green tea." || res.StructuredContent.(map[string]any)["answer"] != "Let me think. Green tea." {
		t.Fatalf("result %v %q %v; want the whole answer", res.IsError, text(res), res.StructuredContent)
	}
}

// An MCP session belongs to the key that opened it, and a sessionId names
// a session in the caller's keyspace.
func TestOwners(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}, Keys: []string{"key-one", "key-two"}})
	one := connect(t, s.URL, "key-one", "2025-11-25", nil)
	if _, err := one.CallTool(t.Context(), &mcp.CallToolParams{Name: "plain", Arguments: map[string]any{"message": "[offline:echo] hi", "sessionId": "shared-name-1"}}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", one.ID())
	req.Header.Set("x-api-key", "key-two")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("another key's MCP session: %d", res.StatusCode)
	}
	if _, err := s.Runtime().Session(t.Context(), "", "shared-name-1"); err == nil {
		t.Fatal("the keyed session is in the anonymous keyspace")
	}
	two := connect(t, s.URL, "key-two", "2025-11-25", nil)
	r, err := two.CallTool(t.Context(), &mcp.CallToolParams{Name: "plain", Arguments: map[string]any{"approvals": []any{map[string]any{"id": "whatever", "approved": true}}, "sessionId": "shared-name-1"}})
	if err != nil || !r.IsError || !strings.Contains(text(r), "session_not_found") {
		t.Fatalf("answering in another key's session: %v %q", err, text(r))
	}
}

// Arguments an agent cannot use come back as a tool execution error that
// says what is wrong (so the calling model can correct them), not as a
// protocol error; and the server declares the prompts and resources
// capabilities whose (empty) lists it answers, and no tool list changes.
func TestInvalidArgumentsAndCapabilities(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{mcpserver.New(mcpserver.Config{})}})
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cs := connect(t, s.URL, "", version, nil)
			for _, tc := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{}, "message is required"},
				{map[string]any{"message": "   "}, "message is required"},
				{map[string]any{"message": "hi", "sessionId": "bad id!"}, "not a valid session ID"},
			} {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "plain", Arguments: tc.args})
				if err != nil {
					t.Fatalf("%v: a protocol error: %v", tc.args, err)
				}
				if !res.IsError || !strings.Contains(text(res), tc.want) {
					t.Fatalf("%v: %v %q, want an error result saying %q", tc.args, res.IsError, text(res), tc.want)
				}
			}
			if _, err := cs.ListPrompts(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ListResources(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	cs := connect(t, s.URL, "", "2025-11-25", nil)
	caps := cs.InitializeResult().Capabilities
	if caps.Prompts == nil || caps.Resources == nil || caps.Tools == nil || caps.Tools.ListChanged {
		t.Fatalf("capabilities %+v", caps)
	}
}
