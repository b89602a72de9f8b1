package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

const builderTemplate = `{
  "agentId": "builder", "name": "Builder", "nodes": ["llm.openai", "think"],
  "options": {"clientTools": ["client_*"]},
  "orchestration": {"steps": [
    {"name": "Build", "conditions": [{"type": "message_contains", "value": "build"}], "sequence": ["client_a", "client_b"]},
    {"name": "Chat", "isDefault": true}
  ]}
}`

var clientSpecs = []chat.ToolSpec{
	{Name: "client_a", Description: "a", Parameters: json.RawMessage(`{"type":"object"}`)},
	{Name: "client_b", Description: "b", Parameters: json.RawMessage(`{"type":"object"}`)},
}

func builder(t *testing.T, store session.Store) (*agent.Agent, *mockllm.Server) {
	t.Helper()
	mock := mockllm.New()
	t.Cleanup(mock.Close)
	a, ds := template.Load("builder.json", []byte(builderTemplate), template.Config{Provided: tools.BuiltinNames()})
	if a == nil {
		t.Fatal(ds.Err())
	}
	models := func(*template.Template) (llmorch.Model, error) {
		return provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1"})
	}
	n, _ := newAgents(t, store, models, []*template.Loaded{a}).Get("builder")
	return n, mock
}

func runAll(t *testing.T, seq iter.Seq2[chat.Event, error]) []chat.Event {
	t.Helper()
	events, err := agent.Started(seq)
	if err != nil {
		t.Fatal(err)
	}
	var out []chat.Event
	for ev := range events {
		out = append(out, ev)
	}
	return out
}

// TestClientCallHeldAndAnswered: a call of an offered client tool ends the
// turn with the call, held in the session; the client's result, given to
// Continue, records it (the sequence advances) and the model goes on. The
// session's history replays to its state with the request's client tools.
func TestClientCallHeldAndAnswered(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n, mock := builder(t, store)
	mock.Enqueue(mockllm.ToolScript(mockllm.ToolCall{ID: "call_a", Name: "client_a", Arguments: `{}`}), mockllm.TextScript("done"))
	id := session.NewID()
	ctx := context.Background()
	evs := runAll(t, n.Run(ctx, id, agent.Input{Text: "build it", ClientTools: clientSpecs}))
	last := evs[len(evs)-1]
	var held *chat.ToolCall
	for _, ev := range evs {
		if ev.Kind == chat.KindClientCall {
			held = ev.ToolCall
		}
		if ev.Kind == chat.KindToolCall || ev.Kind == chat.KindToolResult {
			t.Fatalf("a client call ran here: %+v", ev)
		}
	}
	if held == nil || held.Name != "client_a" || last.FinishReason != chat.FinishToolCalls {
		t.Fatalf("held %+v, finish %q", held, last.FinishReason)
	}
	sess, _ := store.Get(ctx, id)
	if p := sess.PendingApprovals(); len(p) != 1 || !p[0].Client || p[0].Call.ID != "call_a" || sess.State.SequenceIndex != 0 {
		t.Fatalf("session: pending %+v, state %+v", p, sess.State)
	}

	// A result for no call the session keeps, then one missing: refused.
	_, err := agent.Started(n.Run(ctx, id, agent.Input{ClientTools: clientSpecs, Results: []chat.ToolResult{{CallID: "call_x", Content: "?"}}}))
	var re *agent.ResultError
	if !errors.As(err, &re) || re.CallID != "call_x" {
		t.Fatalf("an unknown call's result: %v", err)
	}

	runAll(t, n.Run(ctx, id, agent.Input{ClientTools: clientSpecs, Results: []chat.ToolResult{{CallID: "call_a", Content: "built the base"}}}))
	sess, _ = store.Get(ctx, id)
	if sess.State.SequenceIndex != 1 || !sess.State.RecentlyUsedTools.Equal("client_a") || len(sess.PendingApprovals()) != 0 {
		t.Fatalf("after the result: %+v", sess.State)
	}
	if got := mock.Requests()[1].ToolNames(); len(got) != 1 || got[0] != "client_b" {
		t.Fatalf("the model call after the result was offered %v", got)
	}
	history, _ := store.Messages(ctx, id, 0)
	replayed := n.Replay(orchestration.State{}, history, []string{"client_a", "client_b"})
	if replayed.SequenceIndex != sess.State.SequenceIndex || !replayed.RecentlyUsedTools.Equal(sess.State.RecentlyUsedTools.Slice()...) {
		t.Fatalf("the history replays to %+v, the session holds %+v", replayed, sess.State)
	}
}

// TestClientOptionsRefused: what a client brings is checked before a turn
// starts: a client tool named like an agent tool, a tool_choice the step
// cannot honour, instructions a template refuses.
func TestClientOptionsRefused(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n, _ := builder(t, store)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		in   agent.Input
		want error
	}{
		{"a client tool named think", agent.Input{ClientTools: []chat.ToolSpec{{Name: "think"}}}, agent.ErrClientTools},
		{"tool_choice naming client_b at client_a's position", agent.Input{ClientTools: clientSpecs,
			ToolChoice: orchestration.ToolChoice{Only: []string{"client_b"}, Required: true}}, agent.ErrToolChoice},
		{"an image the model takes", agent.Input{Attachments: []chat.Attachment{{Kind: chat.AttachImage, URL: "https://93.184.215.14/x.png"}}}, nil},
		// The provider fetches an image's URL: none that leads beside it.
		{"an image on the metadata service", agent.Input{Attachments: []chat.Attachment{{Kind: chat.AttachImage, URL: "http://169.254.169.254/latest/meta-data/"}}}, agent.ErrAttachment},
		{"an image over https on the metadata service", agent.Input{Attachments: []chat.Attachment{{Kind: chat.AttachImage, URL: "https://169.254.169.254/x.png"}}}, agent.ErrAttachment},
		{"an image on loopback", agent.Input{Attachments: []chat.Attachment{{Kind: chat.AttachImage, URL: "https://localhost:8080/x.png"}}}, agent.ErrAttachment},
		{"an image on a private network, in the history", agent.Input{Stateless: true, History: []chat.Message{{Role: chat.RoleUser, Content: "see", Attachments: []chat.Attachment{{Kind: chat.AttachImage, URL: "https://[fd00:ec2::254]/x.png"}}}}}, agent.ErrAttachment},
	} {
		tt.in.Text = "build it"
		_, err := agent.Started(n.Run(ctx, session.NewID(), tt.in))
		if tt.want == nil && err == nil {
			continue
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestClientResultCut: a client's result over the agent's result limit is
// cut, with the note the model reads, before it is stored or sent: the
// client's output costs later model requests as a built-in tool's would.
func TestClientResultCut(t *testing.T) {
	store := session.NewMemory(session.Config{})
	defer store.Close()
	n, mock := builder(t, store)
	mock.Enqueue(mockllm.ToolScript(mockllm.ToolCall{ID: "call_a", Name: "client_a", Arguments: `{}`}), mockllm.TextScript("done"))
	id := session.NewID()
	ctx := context.Background()
	runAll(t, n.Run(ctx, id, agent.Input{Text: "build it", ClientTools: clientSpecs}))
	huge := strings.Repeat("é", 1<<20) // 2 MiB of two-byte characters
	runAll(t, n.Run(ctx, id, agent.Input{ClientTools: clientSpecs, Results: []chat.ToolResult{{CallID: "call_a", Content: huge}}}))
	limit := n.Budget().MaxToolResultBytes
	history, _ := store.Messages(ctx, id, 0)
	var stored string
	for _, m := range history {
		if m.Role == chat.RoleTool {
			stored = m.Content
		}
	}
	if len(stored) == 0 || len(stored) > limit || !utf8.ValidString(stored) || !strings.Contains(stored, "cut to") {
		t.Fatalf("stored result: %d bytes (limit %d), valid UTF-8 %v, noted %v", len(stored), limit, utf8.ValidString(stored), strings.Contains(stored, "cut to"))
	}
	var sent string
	for _, m := range mock.Requests()[1].Messages {
		for _, r := range m.ToolResults {
			sent = r.Content
		}
	}
	if sent != stored {
		t.Fatalf("the model read %d bytes of the result, the session holds %d", len(sent), len(stored))
	}
}

// fakeResolver resolves every name to one address.
type fakeResolver string

func (r fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr(string(r))}, nil
}

// TestAttachmentURLs: an image URL is taken when its host resolves to a
// public address only, and with AttachmentURLs "none" no URL is, only
// data: URLs.
func TestAttachmentURLs(t *testing.T) {
	mock := mockllm.New()
	t.Cleanup(mock.Close)
	a, ds := template.Load("builder.json", []byte(builderTemplate), template.Config{Provided: tools.BuiltinNames()})
	if a == nil {
		t.Fatal(ds.Err())
	}
	models := func(*template.Template) (llmorch.Model, error) {
		return provider.New(provider.Config{Provider: provider.OpenAI, Model: "m", BaseURL: mock.URL() + "/v1"})
	}
	reg, err := tools.Builtin(tools.BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	byURL := []chat.Attachment{{Kind: chat.AttachImage, URL: "https://images.example.com/x.png"}}
	byData := []chat.Attachment{{Kind: chat.AttachImage, URL: "data:image/png;base64,AAAA"}}
	for _, tc := range []struct {
		name     string
		urls     string
		resolves string
		atts     []chat.Attachment
		refused  bool
	}{
		{"a name resolving to a public address", "", "93.184.215.14", byURL, false},
		{"a name resolving to the metadata service", "", "169.254.169.254", byURL, true},
		{"a name resolving to loopback", agent.AttachmentURLsPublic, "127.0.0.1", byURL, true},
		{"a public URL where only data is taken", agent.AttachmentURLsNone, "93.184.215.14", byURL, true},
		{"data where only data is taken", agent.AttachmentURLsNone, "93.184.215.14", byData, false},
	} {
		store := session.NewMemory(session.Config{})
		defer store.Close()
		set, err := agent.NewSet(agent.Config{Store: store, Tools: reg, Models: models, AttachmentURLs: tc.urls, Resolver: fakeResolver(tc.resolves)}, []*template.Loaded{a})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := set.Get("builder")
		mock.Enqueue(mockllm.TextScript("seen"))
		events, err := agent.Started(n.Run(t.Context(), session.NewID(), agent.Input{Text: "look", Attachments: tc.atts}))
		if err == nil {
			for range events {
			}
		}
		if got := errors.Is(err, agent.ErrAttachment); got != tc.refused {
			t.Errorf("%s: %v; refused %v, want %v", tc.name, err, got, tc.refused)
		}
	}
	if _, err := agent.NewSet(agent.Config{Store: session.NewMemory(session.Config{}), Tools: reg, Models: models, AttachmentURLs: "any"}, []*template.Loaded{a}); err == nil {
		t.Error("AttachmentURLs \"any\" accepted")
	}
}
