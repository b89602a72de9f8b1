package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	respredis "github.com/agentdock-go/agentdock/responses/redisstore"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oar "github.com/openai/openai-go/v3/responses"
)

const explore = "Please explore options for a team offsite"

func input(text string) oar.ResponseNewParamsInputUnion {
	return oar.ResponseNewParamsInputUnion{OfString: openai.String(text)}
}

// itemTypes lists a response's output item types, with a function call's
// name.
func itemTypes(r *oar.Response) []string {
	var out []string
	for _, it := range r.Output {
		switch it.Type {
		case "function_call":
			out = append(out, "function_call:"+it.Name)
		default:
			out = append(out, it.Type)
		}
	}
	return out
}

// TestResponsesNonStreaming: the official Go client reads a stored
// response: the agent's tool calls as function_call items each followed by
// its function_call_output, then the answer as a message; the conversation
// is a session holding the answer, and GET returns the same object.
func TestResponsesNonStreaming(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	var res *http.Response
	r, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input(explore),
		Metadata: map[string]string{"ticket": "42"}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || r.Object != "response" || r.Model != "explorer" || !strings.HasPrefix(r.ID, "resp_") || r.Metadata["ticket"] != "42" {
		t.Fatalf("response %s", r.RawJSON())
	}
	if got, want := itemTypes(r), []string{"function_call:brainstorm", "function_call_output", "function_call:compare", "function_call_output", "message"}; !slices.Equal(got, want) {
		t.Fatalf("output items %v, want %v", got, want)
	}
	for i, it := range r.Output {
		if it.Type == "function_call_output" && (it.CallID != r.Output[i-1].CallID || it.Output.OfString == "") {
			t.Fatalf("output %d does not answer the call before it: %s", i, it.RawJSON())
		}
		if it.Type == "function_call" && !json.Valid([]byte(it.Arguments.OfString)) {
			t.Fatalf("arguments %q", it.Arguments.OfString)
		}
	}
	sid := r.Conversation.ID
	if sid == "" || res.Header.Get("X-Session-Id") != sid {
		t.Fatalf("conversation %q, header %q", sid, res.Header.Get("X-Session-Id"))
	}
	if got, want := r.OutputText(), e.lastAnswer(sid); got != want || got == "" {
		t.Fatalf("output text %q, want the saved answer %q", got, want)
	}
	if r.Usage.TotalTokens == 0 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens || r.CompletedAt == 0 {
		t.Fatalf("usage %+v completed_at %v", r.Usage, r.CompletedAt)
	}
	got, err := client.Responses.Get(t.Context(), r.ID, oar.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.RawJSON() != r.RawJSON() {
		t.Fatalf("GET differs from the answer:\n%s\n%s", got.RawJSON(), r.RawJSON())
	}
	_, err = client.Responses.Get(t.Context(), "resp_"+session.NewID(), oar.ResponseGetParams{})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of an unknown response: %v", err)
	}
}

// TestResponsesStreaming: the stream has the Responses API's events, with
// sequence numbers from 0, items added before their deltas and done after,
// and ends with response.completed carrying the object GET returns.
func TestResponsesStreaming(t *testing.T) {
	e := newEnv(t, envOptions{delay: time.Millisecond})
	client := e.openai()
	stream := client.Responses.NewStreaming(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input(explore)})
	var (
		types   []string
		seq     int64
		text    = map[string]string{}
		args    = map[string]string{}
		open    = map[string]bool{}
		final   oar.Response
		created string
	)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("event %d has sequence_number %d", seq, ev.SequenceNumber)
		}
		seq++
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		switch v := ev.AsAny().(type) {
		case oar.ResponseCreatedEvent:
			created = v.Response.ID
			if v.Response.Status != "in_progress" {
				t.Fatalf("created %s", v.Response.RawJSON())
			}
		case oar.ResponseOutputItemAddedEvent:
			open[v.Item.ID] = true
		case oar.ResponseTextDeltaEvent:
			if !open[v.ItemID] {
				t.Fatalf("delta for item %s before it was added", v.ItemID)
			}
			text[v.ItemID] += v.Delta
		case oar.ResponseTextDoneEvent:
			if v.Text != text[v.ItemID] {
				t.Fatalf("output_text.done %q, deltas %q", v.Text, text[v.ItemID])
			}
		case oar.ResponseFunctionCallArgumentsDeltaEvent:
			args[v.ItemID] += v.Delta
		case oar.ResponseFunctionCallArgumentsDoneEvent:
			if v.Arguments != args[v.ItemID] || !json.Valid([]byte(v.Arguments)) {
				t.Fatalf("arguments done %q, deltas %q", v.Arguments, args[v.ItemID])
			}
		case oar.ResponseOutputItemDoneEvent:
			if !open[v.Item.ID] || v.Item.Status != "completed" {
				t.Fatalf("item done %s", v.Item.RawJSON())
			}
			delete(open, v.Item.ID)
		case oar.ResponseCompletedEvent:
			final = v.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(open) != 0 || final.ID != created || final.Status != "completed" {
		t.Fatalf("items left open %v, final %s", open, final.RawJSON())
	}
	wantTypes := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("event types\n%v\nwant\n%v", types, wantTypes)
	}
	msg := final.Output[len(final.Output)-1]
	if text[msg.ID] != final.OutputText() || final.OutputText() != e.lastAnswer(final.Conversation.ID) {
		t.Fatalf("streamed text %q, final %q", text[msg.ID], final.OutputText())
	}
	got, err := client.Responses.Get(t.Context(), final.ID, oar.ResponseGetParams{})
	if err != nil || got.RawJSON() != final.RawJSON() {
		t.Fatalf("GET after the stream: %v\n%s\n%s", err, got.RawJSON(), final.RawJSON())
	}
}

// TestResponsesChained: previous_response_id continues the conversation
// (the same session, the earlier messages before the new one); only the
// latest response can be continued; conversation continues it too.
func TestResponsesChained(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	ctx := t.Context()
	first, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input(explore)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input("Which one is cheapest?"), PreviousResponseID: openai.String(first.ID)})
	if err != nil {
		t.Fatal(err)
	}
	sid := first.Conversation.ID
	if second.Conversation.ID != sid || second.PreviousResponseID != first.ID {
		t.Fatalf("second response: conversation %q previous %q", second.Conversation.ID, second.PreviousResponseID)
	}
	msgs, _ := e.store.Messages(ctx, sid, 0)
	var users []string
	for _, m := range msgs {
		if m.Role == chat.RoleUser {
			users = append(users, m.Content)
		}
	}
	if !slices.Equal(users, []string{explore, "Which one is cheapest?"}) {
		t.Fatalf("the session holds the user messages %q", users)
	}
	// The orchestration went on from the first turn: Explore's sequence is
	// done, so the second response calls no tool of the sequence again.
	var ext oaRespExtension
	if err := json.Unmarshal([]byte(second.JSON.ExtraFields["agentdock"].Raw()), &ext); err != nil || ext.Orchestration == nil || ext.Orchestration.ActiveStep != "Explore" || ext.Orchestration.SequenceIndex != 2 {
		t.Fatalf("second response's orchestration %+v (%v)", ext.Orchestration, err)
	}

	_, err = client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input("again"), PreviousResponseID: openai.String(first.ID)})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusConflict || oe.Code != "previous_response_not_latest" || oe.Param != "previous_response_id" {
		t.Fatalf("continuing from an earlier response: %v", err)
	}
	third, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input("and the fastest?"),
		Conversation: oar.ResponseNewParamsConversationUnion{OfString: openai.String(sid)}})
	if err != nil || third.Conversation.ID != sid {
		t.Fatalf("continuing by conversation: %v", err)
	}
	if _, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input("x"), PreviousResponseID: openai.String(third.ID)}); err != nil {
		t.Fatalf("continuing from the latest response: %v", err)
	}
	_, err = client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input("x"), PreviousResponseID: openai.String("resp_" + session.NewID())})
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound || oe.Param != "previous_response_id" {
		t.Fatalf("an unknown previous response: %v", err)
	}
}

// TestResponsesStateless: store false runs on the input alone: its earlier
// messages and the agent's own tool calls are replayed, nothing is stored
// and the response cannot be fetched.
func TestResponsesStateless(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	ctx := t.Context()
	first, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: input(explore)})
	if err != nil {
		t.Fatal(err)
	}
	// The client keeps the conversation: its first message, the output
	// items it got back, and a new message.
	items := oar.ResponseInputParam{oar.ResponseInputItemParamOfMessage(explore, oar.EasyInputMessageRoleUser)}
	for _, it := range first.Output {
		switch it.Type {
		case "function_call":
			items = append(items, oar.ResponseInputItemParamOfFunctionCall(it.Arguments.OfString, it.CallID, it.Name))
		case "function_call_output":
			out := oar.ResponseInputItemParamOfFunctionCallOutput(it.Output.OfString)
			out.OfFunctionCallOutput.CallID = openai.String(it.CallID)
			items = append(items, out)
		case "message":
			items = append(items, oar.ResponseInputItemParamOfMessage(it.Content[0].Text, oar.EasyInputMessageRoleAssistant))
		}
	}
	items = append(items, oar.ResponseInputItemParamOfMessage("Which one is cheapest?", oar.EasyInputMessageRoleUser))
	sessions := e.store.(*session.Memory).Len()
	var res *http.Response
	r, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Store: openai.Bool(false),
		Input: oar.ResponseNewParamsInputUnion{OfInputItemList: items}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	var ext oaRespExtension
	if err := json.Unmarshal([]byte(r.JSON.ExtraFields["agentdock"].Raw()), &ext); err != nil || ext.Orchestration == nil || ext.Orchestration.SequenceIndex != 2 {
		t.Fatalf("the replayed orchestration %+v (%v)", ext.Orchestration, err)
	}
	if r.Status != "completed" || r.JSON.ExtraFields["store"].Raw() != "false" || r.Conversation.ID != "" || res.Header.Get("X-Session-Id") != "" {
		t.Fatalf("stateless response %s", r.RawJSON())
	}
	if n := e.store.(*session.Memory).Len(); n != sessions {
		t.Fatalf("store false kept a session (%d, was %d)", n, sessions)
	}
	_, err = client.Responses.Get(ctx, r.ID, oar.ResponseGetParams{})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of a response not stored: %v", err)
	}
	// A stored response seeded with a conversation keeps it in its session.
	seeded, err := client.Responses.New(ctx, oar.ResponseNewParams{Model: "explorer", Input: oar.ResponseNewParamsInputUnion{OfInputItemList: items}})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := e.store.Messages(ctx, seeded.Conversation.ID, 0)
	if len(msgs) < len(items)+1 || msgs[0].Content != explore {
		t.Fatalf("the seeded session holds %d messages", len(msgs))
	}
}

// TestResponsesRefusals: parameters the server cannot honour are refused,
// naming them, through the official client.
func TestResponsesRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	client := e.openai()
	base := func() oar.ResponseNewParams { return oar.ResponseNewParams{Model: "explorer", Input: input("hello")} }
	tests := []struct {
		name      string
		edit      func(*oar.ResponseNewParams)
		opts      []option.RequestOption
		wantParam string
		status    int
	}{
		{"a hosted tool", nil, []option.RequestOption{option.WithJSONSet("tools", []any{map[string]any{"type": "web_search"}})}, "tools[0].type", 400},
		{"background, not stored", func(p *oar.ResponseNewParams) { p.Background, p.Store = openai.Bool(true), openai.Bool(false) }, nil, "background", 400},
		{"logprobs", func(p *oar.ResponseNewParams) { p.Include = []oar.ResponseIncludable{"message.output_text.logprobs"} }, nil, "include", 400},
		{"a format of no type", nil, []option.RequestOption{option.WithJSONSet("text", map[string]any{"format": map[string]any{"type": "yaml"}})}, "text.format.type", 400},
		{"unknown", nil, []option.RequestOption{option.WithJSONSet("frobnicate", true)}, "frobnicate", 400},
		{"both ways to continue", func(p *oar.ResponseNewParams) {
			p.PreviousResponseID = openai.String("resp_" + session.NewID())
			p.Conversation = oar.ResponseNewParamsConversationUnion{OfString: openai.String("conv_" + session.NewID())}
		}, nil, "conversation", 400},
		{"store false continuing", func(p *oar.ResponseNewParams) {
			p.Store = openai.Bool(false)
			p.Conversation = oar.ResponseNewParamsConversationUnion{OfString: openai.String("conv_" + session.NewID())}
		}, nil, "store", 400},
		{"an image the offline model does not take", func(p *oar.ResponseNewParams) {
			img := oar.ResponseInputContentParamOfInputImage(oar.ResponseInputImageDetailAuto)
			img.OfInputImage.ImageURL = openai.String("https://example.com/x.png")
			p.Input = oar.ResponseNewParamsInputUnion{OfInputItemList: oar.ResponseInputParam{oar.ResponseInputItemParamOfMessage(oar.ResponseInputMessageContentListParam{img}, oar.EasyInputMessageRoleUser)}}
		}, nil, "input[0].content", 400},
		{"an image without its URL", func(p *oar.ResponseNewParams) {
			p.Input = oar.ResponseNewParamsInputUnion{OfInputItemList: oar.ResponseInputParam{oar.ResponseInputItemParamOfMessage(oar.ResponseInputMessageContentListParam{
				oar.ResponseInputContentParamOfInputImage(oar.ResponseInputImageDetailAuto),
			}, oar.EasyInputMessageRoleUser)}}
		}, nil, "input[0].content[0].image_url", 400},
		{"the output of no call", func(p *oar.ResponseNewParams) {
			out := oar.ResponseInputItemParamOfFunctionCallOutput("42")
			out.OfFunctionCallOutput.CallID = openai.String("call_1")
			p.Input = oar.ResponseNewParamsInputUnion{OfInputItemList: oar.ResponseInputParam{
				oar.ResponseInputItemParamOfMessage("hi", oar.EasyInputMessageRoleUser), out}}
		}, nil, "input[1]", 400},
	}
	// Accepted and ignored, or honoured: they pass.
	ok := base()
	ok.Instructions = openai.String("ignored")
	ok.Temperature = openai.Float(0.1)
	ok.MaxOutputTokens = openai.Int(50)
	ok.Include = []oar.ResponseIncludable{"reasoning.encrypted_content"}
	ok.ToolChoice = oar.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(oar.ToolChoiceOptionsAuto)}
	if _, err := client.Responses.New(t.Context(), ok); err != nil {
		t.Fatalf("accepted parameters: %v", err)
	}
	for _, tt := range tests {
		p := base()
		if tt.edit != nil {
			tt.edit(&p)
		}
		_, err := client.Responses.New(t.Context(), p, tt.opts...)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != tt.status || oe.Param != tt.wantParam || oe.Message == "" {
			t.Errorf("%s: %v, want %d naming %s", tt.name, err, tt.status, tt.wantParam)
		}
	}
}

// TestResponsesBudget: a turn stopped by a budget is an incomplete
// response with the reason, streaming and not.
func TestResponsesBudget(t *testing.T) {
	e := newEnv(t, envOptions{budget: llmorch.Budget{MaxOutputBytes: 200}})
	client := e.openai()
	r, err := client.Responses.New(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input(explore)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("response %s", r.RawJSON())
	}
	stream := client.Responses.NewStreaming(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input(explore)})
	last := ""
	for stream.Next() {
		last = stream.Current().Type
		if last == "response.incomplete" && stream.Current().Response.IncompleteDetails.Reason != "max_output_tokens" {
			t.Fatalf("incomplete %s", stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil || last != "response.incomplete" {
		t.Fatalf("stream ended with %q, %v", last, err)
	}
}

// TestResponsesOwners: another API key's responses do not exist for a
// caller, neither to GET nor to continue.
func TestResponsesOwners(t *testing.T) {
	auth, err := NewKeyAuth([]string{"key-alice-0123456789", "key-bob-0123456789"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{cfg: func(c *Config) { c.Owner = auth.Owner }})
	as := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(e.base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	alice, bob := as("key-alice-0123456789"), as("key-bob-0123456789")
	r, err := alice.Responses.New(t.Context(), oar.ResponseNewParams{Model: "plain", Input: input("hello")})
	if err != nil {
		t.Fatal(err)
	}
	var oe *openai.Error
	if _, err := bob.Responses.Get(t.Context(), r.ID, oar.ResponseGetParams{}); !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound {
		t.Fatalf("bob reads alice's response: %v", err)
	}
	if _, err := bob.Responses.New(t.Context(), oar.ResponseNewParams{Model: "plain", Input: input("x"), PreviousResponseID: openai.String(r.ID)}); !errors.As(err, &oe) || oe.StatusCode != http.StatusNotFound {
		t.Fatalf("bob continues alice's response: %v", err)
	}
	if _, err := alice.Responses.Get(t.Context(), r.ID, oar.ResponseGetParams{}); err != nil {
		t.Fatalf("alice reads her response: %v", err)
	}
}

// TestResponsesReplicas: with the Redis stores, a response made on one
// replica is read and continued on another.
func TestResponsesReplicas(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "responses-" + session.NewID()
	shared := func(c *Config) {
		store := c.Runtime.Store().(*redisstore.Store)
		rs, err := respredis.New(respredis.Config{Client: store.Client(), Prefix: prefix + "-responses"})
		if err != nil {
			t.Fatal(err)
		}
		c.Responses = rs
	}
	a := replica(t, srv, prefix, envOptions{cfg: shared})
	b := replica(t, srv, prefix, envOptions{cfg: shared})
	ca, cb := a.openai(), b.openai()
	r, err := ca.Responses.New(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input(explore)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cb.Responses.Get(t.Context(), r.ID, oar.ResponseGetParams{})
	if err != nil || got.RawJSON() != r.RawJSON() {
		t.Fatalf("GET on the other replica: %v", err)
	}
	next, err := cb.Responses.New(t.Context(), oar.ResponseNewParams{Model: "explorer", Input: input("Which one is cheapest?"), PreviousResponseID: openai.String(r.ID)})
	if err != nil || next.Conversation.ID != r.Conversation.ID {
		t.Fatalf("continuing on the other replica: %v", err)
	}
	// The raw answer names the event types on the wire, as OpenAI does.
	res := a.do(http.MethodPost, "/v1/responses", `{"model":"plain","input":"hi","stream":true,"store":false}`)
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.HasPrefix(string(raw), "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,") {
		t.Fatalf("stream starts %q", string(raw[:min(len(raw), 120)]))
	}
}
