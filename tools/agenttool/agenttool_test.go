package agenttool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// call runs one call of the tool name of t in a turn of session "parent-1".
func call(t *testing.T, tb *Toolbox, name, args string, ds ...chat.Decision) (chat.ToolResult, []chat.Progress) {
	t.Helper()
	var mu sync.Mutex
	var progress []chat.Progress
	ctx := tools.WithCall(context.Background(), tools.Call{SessionID: "parent-1", TurnID: "turn-1", ToolCallID: "call_1",
		Report: func(p chat.Progress) { mu.Lock(); progress = append(progress, p); mu.Unlock() }, Decisions: ds})
	res := tb.Execute(ctx, chat.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(args)})
	mu.Lock()
	defer mu.Unlock()
	return res, progress
}

func newTools(t *testing.T, cfg Config, agents string) *Toolbox {
	t.Helper()
	tmpl := &template.Template{AgentID: "lead", Name: "Lead"}
	if err := json.Unmarshal([]byte(agents), &tmpl.Agents); err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	tb, err := New(cfg, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// fakeRunner runs turns of scripted events; a turn whose script ends
// without Done waits for Stop, then aborts.
type fakeRunner struct {
	mu       sync.Mutex
	requests []Request
	answers  [][]chat.Decision
	script   []chat.Event
	err      error
	stopped  atomic.Bool
}

func (f *fakeRunner) Start(_ context.Context, r Request) (Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	return &fakeTurn{f: f}, f.err
}

func (f *fakeRunner) Answer(_ context.Context, r Request, ds []chat.Decision) (Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	f.answers = append(f.answers, ds)
	return &fakeTurn{f: f}, f.err
}

type fakeTurn struct {
	f    *fakeRunner
	stop chan struct{}
	once sync.Once
}

func (t *fakeTurn) ch() chan struct{} {
	t.once.Do(func() { t.stop = make(chan struct{}) })
	return t.stop
}

func (t *fakeTurn) Events(ctx context.Context) iter.Seq2[chat.Event, error] {
	return func(yield func(chat.Event, error) bool) {
		for _, ev := range t.f.script {
			if !yield(ev, nil) {
				return
			}
			if ev.Kind == chat.KindDone {
				return
			}
		}
		select {
		case <-t.ch():
			if yield(chat.Event{Kind: chat.KindAbort, Text: "stopped"}, nil) {
				yield(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishStopped}, nil)
			}
		case <-ctx.Done():
			yield(chat.Event{}, ctx.Err())
		}
	}
}

func (t *fakeTurn) Stop() {
	t.f.stopped.Store(true)
	close(t.ch())
}

// TestLocal: a local agent's turn is the call's result, its events the
// call's progress, its usage the result's; the child session and the
// request key are the caller's session's and call's; approvals hold the
// call, and the decisions answer them.
func TestLocal(t *testing.T) {
	f := &fakeRunner{script: []chat.Event{
		{Kind: chat.KindStepStart},
		{Kind: chat.KindTextDelta, Text: "Tea "},
		{Kind: chat.KindTextDelta, Text: "cools."},
		{Kind: chat.KindUsage, Usage: &chat.Usage{Prompt: 10, Completion: 5, Total: 15}, Final: true},
		{Kind: chat.KindDone, FinishReason: chat.FinishStop},
	}}
	tb := newTools(t, Config{Runner: f}, `{"ask": {"agent": "probe"}}`)
	if s := tb.Specs([]string{"ask"}); len(s) != 1 || !strings.Contains(string(s[0].Parameters), `"required":["message"]`) || !tb.Idempotent("ask") {
		t.Fatalf("spec %+v", s)
	}
	res, progress := call(t, tb, "ask", `{"message": "why does tea cool?"}`)
	if res.IsError || res.Content != "Tea cools." || res.Usage == nil || res.Usage.Total != 15 {
		t.Fatalf("result %+v", res)
	}
	if len(progress) != 3 || progress[0].Event.Kind != chat.KindStepStart || progress[1].Agent != "probe" || progress[1].Event.Text != "Tea " {
		t.Fatalf("progress %+v: want the step and its two text events", progress)
	}
	r := f.requests[0]
	if r.Agent != "probe" || r.Message != "why does tea cool?" || !strings.HasPrefix(r.Session, "child-") || !strings.HasPrefix(r.Key, "agent-call-") {
		t.Fatalf("request %+v", r)
	}
	// The same call runs again (a takeover): the same key.
	call(t, tb, "ask", `{"message": "why does tea cool?"}`)
	if f.requests[1].Key != r.Key || f.requests[1].Session != r.Session {
		t.Fatalf("a call run again asks with %+v, first %+v", f.requests[1], r)
	}

	search := chat.ToolCall{ID: "c9", Name: "search", Arguments: json.RawMessage(`{"q":"tea"}`)}
	f.script = []chat.Event{
		{Kind: chat.KindApproval, ToolCall: &search, Approval: &chat.Approval{ID: "approval-1", ToolCallID: "c9"}},
		{Kind: chat.KindDone, FinishReason: chat.FinishApproval},
	}
	res, _ = call(t, tb, "ask", `{"message": "search for tea"}`)
	if len(res.Pending) != 1 || res.Pending[0].ID != "approval-1" || res.Pending[0].Agent != "probe" || res.Pending[0].Call.Name != "search" {
		t.Fatalf("a held call's result %+v", res)
	}
	f.script = []chat.Event{{Kind: chat.KindTextDelta, Text: "Found it."}, {Kind: chat.KindDone, FinishReason: chat.FinishStop}}
	res, _ = call(t, tb, "ask", `{"message": "search for tea"}`, chat.Decision{ID: "approval-1", Approved: true})
	if res.Content != "Found it." || len(f.answers) != 1 || f.answers[0][0].ID != "approval-1" || f.requests[3].Key == f.requests[2].Key {
		t.Fatalf("the answered call: %+v, answers %+v", res, f.answers)
	}

	f.script = []chat.Event{{Kind: chat.KindTextDelta, Text: "Half"}, {Kind: chat.KindError, Error: &chat.Error{Code: "x", Message: "the model failed"}}, {Kind: chat.KindDone, FinishReason: chat.FinishError}}
	if res, _ = call(t, tb, "ask", `{"message": "x"}`); !res.IsError || !strings.HasPrefix(res.Content, "probe failed: the model failed") || !strings.Contains(res.Content, "Half") {
		t.Fatalf("a failed turn: %+v", res)
	}
	f.err = errors.New("session_busy: a turn is running")
	if res, _ = call(t, tb, "ask", `{"message": "x"}`); !res.IsError || !strings.Contains(res.Content, "probe could not start: session_busy") {
		t.Fatalf("a turn that cannot start: %+v", res)
	}
}

// TestLocalArguments: bad arguments are not run, and say why.
func TestLocalArguments(t *testing.T) {
	f := &fakeRunner{}
	tb := newTools(t, Config{Runner: f}, `{"ask": {"agent": "probe"}}`)
	for args, want := range map[string]string{
		`{}`:                       `"message" is required`,
		`{"message": 3}`:           `"message" must be a string`,
		`{"message": "x", "q": 1}`: `unknown field "q"`,
		`[]`:                       `the arguments must be an object`,
		`{"message": "` + strings.Repeat("x", MaxMessageBytes+1) + `"}`: `"message" is 32769 bytes`,
	} {
		res, _ := call(t, tb, "ask", args)
		if !res.IsError || !res.NotRun || !strings.Contains(res.Content, want) {
			t.Errorf("%.40s: %+v, want %q", args, res, want)
		}
	}
	if len(f.requests) != 0 {
		t.Errorf("bad arguments started turns: %+v", f.requests)
	}
}

// TestDepth: a call past MaxDepth is refused, and runs (recorded) without
// asking anyone; below it, the child runs one deeper.
func TestDepth(t *testing.T) {
	f := &fakeRunner{script: []chat.Event{{Kind: chat.KindDone, FinishReason: chat.FinishStop}}}
	var depths []int
	tb := newTools(t, Config{Runner: depthRunner{f, &depths}, MaxDepth: 2}, `{"ask": {"agent": "probe"}}`)
	for _, d := range []int{0, 1, 2} {
		ctx := WithDepth(tools.WithCall(context.Background(), tools.Call{SessionID: "p-12345678", TurnID: "t", ToolCallID: "c"}), d)
		res := tb.Execute(ctx, chat.ToolCall{ID: "c", Name: "ask", Arguments: json.RawMessage(`{"message": "x"}`)})
		if refused := strings.Contains(res.Content, "at most 2 may nest (AGENT_CALL_DEPTH)"); refused != (d == 2) || res.NotRun {
			t.Errorf("depth %d: %+v", d, res)
		}
	}
	if fmt.Sprint(depths) != "[1 2]" {
		t.Errorf("the children ran at depths %v, want [1 2]", depths)
	}
}

type depthRunner struct {
	*fakeRunner
	depths *[]int
}

func (d depthRunner) Start(ctx context.Context, r Request) (Turn, error) {
	*d.depths = append(*d.depths, Depth(ctx))
	return d.fakeRunner.Start(ctx, r)
}

// TestLocalStop: the call's context ending stops the child's turn, and
// the call returns once the child ended; a call past its timeout says so.
func TestLocalStop(t *testing.T) {
	f := &fakeRunner{script: []chat.Event{{Kind: chat.KindTextDelta, Text: "Thinking"}}}
	tb := newTools(t, Config{Runner: f, Timeout: time.Second}, `{"ask": {"agent": "probe"}}`)
	ctx, cancel := context.WithCancelCause(tools.WithCall(context.Background(), tools.Call{SessionID: "p-12345678", TurnID: "t", ToolCallID: "c",
		Report: func(chat.Progress) {}}))
	go func() {
		for !f.stoppedOrRequested() {
			time.Sleep(time.Millisecond)
		}
		cancel(chat.StoppedByUser)
	}()
	res := tb.Execute(ctx, chat.ToolCall{ID: "c", Name: "ask", Arguments: json.RawMessage(`{"message": "x"}`)})
	if !f.stopped.Load() || !res.IsError || !strings.Contains(res.Content, "probe was stopped: the call was stopped. What it said so far:\n\nThinking") {
		t.Fatalf("a stopped call: stopped %v, %+v", f.stopped.Load(), res)
	}
	f.stopped.Store(false)
	res, _ = call(t, tb, "ask", `{"message": "x"}`)
	if !f.stopped.Load() || !strings.Contains(res.Content, "took longer than 1s (AGENT_CALL_TIMEOUT)") {
		t.Fatalf("a call past its timeout: stopped %v, %+v", f.stopped.Load(), res)
	}
}

func (f *fakeRunner) stoppedOrRequested() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests) > 0
}

// remoteAgent is a fake A2A v1.0 agent: its card, and a JSON-RPC endpoint
// that answers with the given task events (streamed when the card says
// so), recording the requests.
type remoteAgent struct {
	*httptest.Server
	streaming bool
	events    []string // StreamResponse JSON, each a result
	card      func(base string) string
	mu        sync.Mutex
	requests  []map[string]any
	headers   []http.Header
	cards     int
}

func newRemoteAgent(t *testing.T, streaming bool, events ...string) *remoteAgent {
	ra := &remoteAgent{streaming: streaming, events: events}
	ra.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/.well-known/agent-card.json") {
			ra.mu.Lock()
			ra.cards++
			ra.mu.Unlock()
			if ra.card != nil {
				io.WriteString(w, ra.card(ra.URL))
				return
			}
			fmt.Fprintf(w, `{"name": "Planner", "supportedInterfaces": [{"url": "%s/a2a/planner", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}], "capabilities": {"streaming": %v}}`, ra.URL, ra.streaming)
			return
		}
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		ra.mu.Lock()
		ra.requests = append(ra.requests, req)
		ra.headers = append(ra.headers, r.Header.Clone())
		ra.mu.Unlock()
		if req["method"] == "SendStreamingMessage" {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range ra.events {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":%s}\n\n", ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		last := ra.events[len(ra.events)-1]
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":%s}`, last)
	}))
	t.Cleanup(ra.Close)
	return ra
}

// TestRemote: a remote agent's streamed task is the call's result and
// progress; its card is read once, its headers and the depth are sent,
// and the contextId is the caller's child session.
func TestRemote(t *testing.T) {
	ra := newRemoteAgent(t, true,
		`{"task": {"id": "task-1", "contextId": "x", "status": {"state": "TASK_STATE_WORKING"}}}`,
		`{"statusUpdate": {"taskId": "task-1", "status": {"state": "TASK_STATE_WORKING", "message": {"role": "ROLE_AGENT", "parts": [{"data": {"toolCall": {"id": "c1", "name": "search", "arguments": {}}}}]}}}}`,
		`{"artifactUpdate": {"taskId": "task-1", "artifact": {"artifactId": "answer", "parts": [{"text": "Book "}]}}}`,
		`{"artifactUpdate": {"taskId": "task-1", "artifact": {"artifactId": "answer", "parts": [{"text": "the hall."}]}, "append": true}}`,
		`{"statusUpdate": {"taskId": "task-1", "status": {"state": "TASK_STATE_COMPLETED"}}}`)
	lookup := func(k string) (string, bool) { return map[string]string{"KEY": "s3cret"}[k], k == "KEY" }
	tb := newTools(t, Config{LookupEnv: lookup}, `{"plan": {"a2a": "`+ra.URL+`/a2a/planner", "headers": {"Authorization": "Bearer ${KEY}"}}}`)
	for range 2 {
		res, progress := call(t, tb, "plan", `{"message": "plan the offsite"}`)
		if res.IsError || res.Content != "Book the hall." {
			t.Fatalf("result %+v", res)
		}
		if len(progress) != 3 || progress[0].Agent != "Planner" || progress[0].Event.Kind != chat.KindToolCall || progress[1].Event.Text != "Book " {
			t.Fatalf("progress %+v", progress)
		}
	}
	if ra.cards != 1 || len(ra.requests) != 2 {
		t.Fatalf("%d card reads, %d requests: want the card read once", ra.cards, len(ra.requests))
	}
	h := ra.headers[0]
	msg := ra.requests[0]["params"].(map[string]any)["message"].(map[string]any)
	if h.Get("Authorization") != "Bearer s3cret" || h.Get(DepthHeader) != "1" || h.Get("A2A-Version") != "1.0" ||
		!strings.HasPrefix(msg["contextId"].(string), "child-") || ra.requests[0]["method"] != "SendStreamingMessage" {
		t.Fatalf("request %v, headers %v", ra.requests[0], h)
	}
}

// TestRemoteApprovals: a remote task that needs approvals holds the call,
// each approval named by the task and the remote's ID; the decisions go
// back as a message on the task.
func TestRemoteApprovals(t *testing.T) {
	ra := newRemoteAgent(t, false,
		`{"task": {"id": "task-7", "contextId": "x", "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"role": "ROLE_AGENT", "parts": [{"text": "waits"}, {"data": {"approvals": [{"id": "approval-9", "toolCallId": "c1", "toolName": "search", "input": {"q": "x"}}]}}]}}}}`)
	tb := newTools(t, Config{}, `{"plan": {"a2a": "`+ra.URL+`/a2a/planner"}}`)
	res, _ := call(t, tb, "plan", `{"message": "plan"}`)
	if len(res.Pending) != 1 || res.Pending[0].ID != "task-7~approval-9" || res.Pending[0].Call.Name != "search" || res.Pending[0].Agent != "Planner" {
		t.Fatalf("result %+v", res)
	}
	ra.events = []string{`{"task": {"id": "task-7", "contextId": "x", "status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": [{"artifactId": "answer", "parts": [{"text": "Done."}, {"data": {"venue": "hall"}}]}]}}`}
	res, _ = call(t, tb, "plan", `{"message": "plan"}`, chat.Decision{ID: "task-7~approval-9", Approved: false, Reason: "no"})
	if res.IsError || res.Content != "Done.\n\n```json\n{\"venue\": \"hall\"}\n```" {
		t.Fatalf("the answered call: %+v", res)
	}
	msg := ra.requests[1]["params"].(map[string]any)["message"].(map[string]any)
	b, _ := json.Marshal(msg["parts"])
	if msg["taskId"] != "task-7" || string(b) != `[{"data":{"approvals":[{"approved":false,"id":"approval-9","reason":"no"}]},"mediaType":"application/json"}]` {
		t.Fatalf("the answers went as %v", msg)
	}
}

// TestRemoteRefusals: what the operator did not choose is not followed (a
// redirect, an endpoint on another host), a card of A2A 0.3 says so, and
// a task that fails is an error result; none of it reaches a second host.
func TestRemoteRefusals(t *testing.T) {
	elsewhere := newRemoteAgent(t, true, `{"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}`)
	tests := []struct {
		name, card string
		status     int
		want       string
	}{
		{"redirect", "", http.StatusFound, "its card was answered with a redirect (302) to \"" + elsewhere.URL + "/x\", which is not followed"},
		{"other host", `{"name": "P", "supportedInterfaces": [{"url": "` + elsewhere.URL + `/a2a/p", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}`, 0, "on another host than"},
		{"0.3", `{"name": "P", "url": "http://x/a2a", "protocolVersion": "0.3.0"}`, 0, "its card speaks A2A 0.3.0; this client speaks A2A 1.0's JSON-RPC binding"},
		{"refused", "", http.StatusUnauthorized, "its card was refused (401): check the agent tool's headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tt.status == http.StatusFound:
					http.Redirect(w, r, elsewhere.URL+"/x", http.StatusFound)
				case tt.status != 0:
					w.WriteHeader(tt.status)
				default:
					io.WriteString(w, tt.card)
				}
			}))
			defer hs.Close()
			tb := newTools(t, Config{}, `{"plan": {"a2a": "`+hs.URL+`/a2a/p"}}`)
			res, _ := call(t, tb, "plan", `{"message": "x"}`)
			if !res.IsError || !strings.Contains(res.Content, tt.want) {
				t.Fatalf("%+v, want %q", res, tt.want)
			}
		})
	}
	if elsewhere.cards != 0 || len(elsewhere.requests) != 0 {
		t.Fatalf("the other host was reached: %d cards, %d requests", elsewhere.cards, len(elsewhere.requests))
	}
	failed := newRemoteAgent(t, true, `{"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_FAILED", "message": {"role": "ROLE_AGENT", "parts": [{"text": "the model is down"}]}}}}`)
	tb := newTools(t, Config{}, `{"plan": {"a2a": "`+failed.URL+`/a2a/planner"}}`)
	if res, _ := call(t, tb, "plan", `{"message": "x"}`); !res.IsError || !strings.Contains(res.Content, "its task failed: the model is down") {
		t.Fatalf("a failed task: %+v", res)
	}
}

// TestRemoteBounds: a stream event over the bound ends the call, and a
// remote that does not finish within the timeout has its task cancelled.
func TestRemoteBounds(t *testing.T) {
	big := `{"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "answer", "parts": [{"text": "` + strings.Repeat("x", maxEventBytes) + `"}]}}}`
	ra := newRemoteAgent(t, true, `{"task": {"id": "t", "contextId": "x", "status": {"state": "TASK_STATE_WORKING"}}}`, big)
	tb := newTools(t, Config{}, `{"plan": {"a2a": "`+ra.URL+`/a2a/planner"}}`)
	if res, _ := call(t, tb, "plan", `{"message": "x"}`); !res.IsError || !strings.Contains(res.Content, "an event of its stream is over 4 MiB") {
		t.Fatalf("an oversized event: %.300s", res.Content)
	}

	// The remote ends its stream once the task is cancelled, as A2A's do.
	var cancelled atomic.Bool
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "agent-card.json") {
			fmt.Fprintf(w, `{"name": "Slow", "supportedInterfaces": [{"url": "http://%s/a2a/s", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}], "capabilities": {"streaming": true}}`, r.Host)
			return
		}
		var req struct{ Method string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Method == "CancelTask" {
			if !cancelled.Swap(true) {
				close(hang)
			}
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"slow-1\",\"contextId\":\"x\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-hang:
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"slow-1\",\"status\":{\"state\":\"TASK_STATE_CANCELED\"}}}}\n\n")
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	tb = newTools(t, Config{Timeout: time.Second}, `{"plan": {"a2a": "`+slow.URL+`/a2a/s"}}`)
	res, _ := call(t, tb, "plan", `{"message": "x"}`)
	if !res.IsError || !strings.Contains(res.Content, "took longer than 1s (AGENT_CALL_TIMEOUT)") || !cancelled.Load() {
		t.Fatalf("a remote past the timeout: cancelled %v, %+v", cancelled.Load(), res)
	}
}

// TestAnswered: a key's turn that no runner keeps any more is read from
// the session: its answer, and, when it is the session's latest turn, the
// approvals it waits for.
func TestAnswered(t *testing.T) {
	ctx := context.Background()
	store := session.NewMemory(session.Config{})
	defer store.Close()
	key := session.Key("", "child-session-1")
	write := func(request, turn string, msgs ...chat.Message) {
		t.Helper()
		_, _, err := store.UpdateAppend(ctx, key, func(s *orchestration.State) error {
			s.UserMessages++
			return nil
		}, msgs, 0, session.WithRequest(request, turn, ""))
		if err != nil {
			t.Fatal(err)
		}
	}
	call := chat.ToolCall{ID: "c1", Name: "search", Arguments: json.RawMessage(`{}`)}
	write("k1", "turn-1", chat.Message{Role: chat.RoleUser, Content: "first"}, chat.Message{Role: chat.RoleAssistant, Content: "One."})
	write("k2", "turn-2", chat.Message{Role: chat.RoleUser, Content: "second"}, chat.Message{Role: chat.RoleAssistant, Content: "Searching.", ToolCalls: []chat.ToolCall{call}})
	if _, err := session.Update(ctx, store, key, func(*orchestration.State) error { return nil }, session.WithApprovals(func([]session.Approval) ([]session.Approval, error) {
		return []session.Approval{{ID: "approval-1", Call: call, Status: session.ApprovalPending}}, nil
	})); err != nil {
		t.Fatal(err)
	}
	events := func(k string) []chat.Event {
		turn, err := Answered(ctx, store, "", "child-session-1", k)
		if err != nil {
			t.Fatal(err)
		}
		var out []chat.Event
		for ev, err := range turn.Events(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
		return out
	}
	if evs := events("k1"); len(evs) != 2 || evs[0].Text != "One." || evs[1].FinishReason != chat.FinishStop {
		t.Fatalf("the first turn: %+v", evs)
	}
	if evs := events("k2"); len(evs) != 3 || evs[0].Text != "Searching." || evs[1].Approval == nil || evs[1].Approval.ID != "approval-1" || evs[2].FinishReason != chat.FinishApproval {
		t.Fatalf("the latest turn, waiting: %+v", evs)
	}
	if _, err := Answered(ctx, store, "", "child-session-1", "k3"); err == nil {
		t.Fatal("a key the session does not keep was answered")
	}
}
