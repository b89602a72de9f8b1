package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/llmorch/provider"
	"github.com/agentdock-go/agentdock/responses"
	respredis "github.com/agentdock-go/agentdock/responses/redisstore"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/a2a/redistasks"
	"github.com/agentdock-go/agentdock/server/agui"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/mcpserver"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The door table: every door of the server (the chat API, /v1/chat/
// completions, /v1/responses, A2A, AG-UI and MCP over HTTP) through the
// same cases, on one server with the memory store and on two replicas of
// one redis-server, where what follows a request goes to the other
// replica. Each door is a translator over the one turn runtime, so each
// case holds the same way through every door; a case a protocol cannot
// carry is listed, with the reason, as not applicable.
//
// The agents are testdata/doors': enqueue, interrupt and reject (no tools;
// options.busy says their name) and approver (critique, held for
// approval; busy reject).

// doorAnswer is what a door answered, in the terms every door shares.
type doorAnswer struct {
	// err is the code of a refusal ("" for an answer).
	err    string
	text   string
	finish string // a chat.Finish* reason
	turnID string
	// replayed: the door said the answer is an earlier request's.
	replayed  bool
	approvals []string // the IDs of the calls held for approval
	calls     []string // the IDs of the calls of the client's tools
	// task is an A2A answer's task.
	task string
}

// sendOpts are what a message carries besides its text.
type sendOpts struct {
	key    string // the idempotency key
	attach string // a file part's URL
	tools  bool   // the client tool lookup
}

// pending is a request under way (doorClient.start).
type pending struct {
	wait   func() doorAnswer // the answer, once the turn ended
	cancel func()            // the client goes away
	task   string            // an A2A request's task, known at once
}

// doorClient speaks one door.
type doorClient struct {
	name string
	// send sends a message to the agent on session sid and waits for the
	// answer.
	send func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer
	// start sends a message without waiting.
	start func(t *testing.T, e *env, agentID, sid, text string) pending
	// result sends the client's result of its tool's call.
	result func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, callID, content string) doorAnswer
	// approve approves the held calls.
	approve func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, ids []string) doorAnswer
	// stop stops the turn p started, the door's way.
	stop func(t *testing.T, e *env, sid string, p pending)
	// follow follows a turn that another door started, to its end.
	follow func(t *testing.T, e *env, sid, turnID string) doorAnswer
	// na are the cases the door's protocol cannot carry, with the reason;
	// via are those it carries in part, another door doing the rest.
	na, via map[string]string
	// replays: the door says when it answers with an earlier request's
	// turn (Idempotent-Replayed); A2A says it with the task's ID, MCP
	// not at all.
	replays bool
}

// The door cases.
const (
	caseEnqueue     = "busy enqueue"
	caseInterrupt   = "busy interrupt"
	caseReject      = "busy reject"
	caseRetry       = "idempotent retry"
	caseAttachments = "attachments"
	caseClientTools = "client tools"
	caseResume      = "resume"
	caseFollow      = "follow"
	caseStop        = "stop"
	caseApproval    = "approval"
)

// pngURL is a one-pixel PNG as a data: URL.
const pngURL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// slowWords is an answer that streams for about two seconds.
var slowWords = strings.Fields("this answer streams slowly , one word after another , so that a test can stop it , resume it or queue behind it .")

func slowScript() mockllm.Script {
	words := make([]string, len(slowWords))
	for i, w := range slowWords {
		words[i] = w + " "
	}
	return mockllm.Script{Text: words, InterTokenDelay: 100 * time.Millisecond}
}

var slowText = strings.Join(slowWords, " ") + " "

// longScript is an answer that would stream for a minute: a case that
// needs a turn to run while it acts stops it when done, so that nothing
// depends on how fast the machine is.
func longScript() mockllm.Script {
	return mockllm.Script{Chunks: 600, InterTokenDelay: 100 * time.Millisecond}
}

// isPartial reports whether a history line is a partial answer of
// longScript's.
func isPartial(line string) bool {
	text, ok := strings.CutPrefix(line, "assistant: tok0 ")
	return ok && !strings.Contains(text, "tok599")
}

// doorPair is two servers of one deployment serving every door: the same
// server twice on the memory store, or two replicas of one redis-server
// (sharing the session store, the turn log, the Responses API's store and
// A2A's tasks).
func doorPair(t *testing.T, srv *redistest.Server, mock *mockllm.Server) (a, b *env) {
	t.Helper()
	model, err := provider.New(provider.Config{Provider: provider.OpenAI, Model: "scripted", BaseURL: mock.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	o := envOptions{model: model, templates: "testdata/doors"}
	if srv == nil {
		a2aDoor, err := a2a.New(a2a.Config{})
		if err != nil {
			t.Fatal(err)
		}
		o.cfg = func(c *Config) { c.Doors = []door.Door{a2aDoor, agui.New(), mcpserver.New(mcpserver.Config{})} }
		a = newEnv(t, o)
		return a, a
	}
	prefix := "doors-" + session.NewID()
	replica := func() *env {
		store, err := redisstore.New(redisstore.Config{URL: srv.URL(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		log, err := redislog.New(t.Context(), redislog.Config{Client: store.Client(), Prefix: prefix + "-turns", Poll: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { log.Close() })
		stored, err := respredis.New(respredis.Config{Config: responses.Config{}, Client: store.Client(), Prefix: prefix + "-responses"})
		if err != nil {
			t.Fatal(err)
		}
		a2aDoor, err := a2a.New(a2a.Config{Tasks: stored, Index: redistasks.New(store.Client(), prefix+"-a2a", time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		r := o
		r.store, r.log = store, log
		r.rt = func(c *turns.Config) { c.Log = log }
		r.cfg = func(c *Config) {
			c.Responses = stored
			c.Doors = []door.Door{a2aDoor, agui.New(), mcpserver.New(mcpserver.Config{})}
		}
		return newEnv(t, r)
	}
	return replica(), replica()
}

// TestDoors runs every door through the cases, on memory and on two
// replicas with Redis.
func TestDoors(t *testing.T) {
	cases := map[string]func(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server){
		caseEnqueue:     doorEnqueue,
		caseInterrupt:   doorInterrupt,
		caseReject:      doorReject,
		caseRetry:       doorRetry,
		caseAttachments: doorAttachments,
		caseClientTools: doorClientTools,
		caseResume:      doorResume,
		caseFollow:      doorFollow,
		caseStop:        doorStop,
		caseApproval:    doorApproval,
	}
	names := []string{caseEnqueue, caseInterrupt, caseReject, caseRetry, caseAttachments, caseClientTools, caseResume, caseFollow, caseStop, caseApproval}
	for _, replicas := range []bool{false, true} {
		deployment := "memory"
		if replicas {
			deployment = "two replicas"
		}
		t.Run(deployment, func(t *testing.T) {
			var srv *redistest.Server
			if replicas {
				srv = redistest.Start(t)
			}
			for _, d := range doorClients() {
				t.Run(d.name, func(t *testing.T) {
					t.Parallel()
					for _, name := range names {
						t.Run(name, func(t *testing.T) {
							if why, ok := d.na[name]; ok {
								t.Skipf("not applicable: %s", why)
							}
							if how, ok := d.via[name]; ok {
								t.Logf("in part through another door: %s", how)
							}
							mock := mockllm.New()
							t.Cleanup(mock.Close)
							a, b := doorPair(t, srv, mock)
							cases[name](t, d, a, b, mock)
						})
					}
				})
			}
		})
	}
}

// TestDoorsTableComplete: every door has every case, or says why not.
func TestDoorsTableComplete(t *testing.T) {
	for _, d := range doorClients() {
		for name, why := range d.na {
			if why == "" {
				t.Errorf("%s: %s is not applicable without a reason", d.name, name)
			}
		}
		if d.send == nil || d.start == nil {
			t.Errorf("%s cannot send", d.name)
		}
		if d.result == nil && d.na[caseClientTools] == "" || d.approve == nil && d.na[caseApproval] == "" ||
			d.stop == nil && d.na[caseStop] == "" || d.follow == nil && d.na[caseFollow] == "" {
			t.Errorf("%s lacks a case it does not say is not applicable", d.name)
		}
	}
}

// history is the session's messages as "role: content" lines, read on e.
func doorHistory(t *testing.T, e *env, sid string) []string {
	t.Helper()
	e.waitIdle(sid)
	return history(t, e, sid)
}

// waitRunning waits until a turn runs on the session, seen from e, and
// has streamed text; it returns the turn's ID.
func waitRunning(t *testing.T, e *env, sid string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if tr, err := e.srv.rt.Running(t.Context(), "", sid); err == nil && tr != nil {
			if evs, _, err := tr.Read(t.Context(), 0); err == nil && slices.ContainsFunc(evs, func(ev chat.Event) bool { return ev.Kind == chat.KindTextDelta }) {
				return tr.ID()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no turn ran on session %s", sid)
	return ""
}

// startSlow starts a slow turn of agentID through the chat API, which
// holds the session until it ends; read its stream from the returned body.
func startSlow(t *testing.T, e *env, agentID, sid string) *http.Response {
	t.Helper()
	res := e.do(http.MethodPost, "/api/chat/"+agentID, `{"sessionId":"`+sid+`","message":"one"}`)
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the first message: %d", res.StatusCode)
	}
	return res
}

func doorEnqueue(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(longScript(), mockllm.TextScript("second answer."))
	sid := session.NewID()
	first := startSlow(t, a, "enqueue", sid)
	waitRunning(t, b, sid)
	got := make(chan doorAnswer, 1)
	go func() { got <- d.send(t, b, "enqueue", sid, "two", sendOpts{}) }()
	waitQueued(t, a, sid, 1)
	// The running turn ends (stopped, its partial answer saved), and the
	// queued message's turn runs.
	stopBySession(t, a, sid, pending{})
	newSSEReader(first.Body).all()
	if ans := <-got; ans.err != "" || ans.text != "second answer." || ans.finish != chat.FinishStop {
		t.Fatalf("the queued message's answer: %+v", ans)
	}
	got2 := doorHistory(t, b, sid)
	if len(got2) != 4 || got2[0] != "user: one" || !isPartial(got2[1]) || got2[2] != "user: two" || got2[3] != "assistant: second answer." {
		t.Fatalf("history:\n%s", strings.Join(got2, "\n"))
	}
}

func doorInterrupt(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(longScript(), mockllm.TextScript("second answer."))
	sid := session.NewID()
	first := startSlow(t, a, "interrupt", sid)
	waitRunning(t, b, sid)
	if ans := d.send(t, b, "interrupt", sid, "stop that", sendOpts{}); ans.err != "" || ans.text != "second answer." {
		t.Fatalf("the interrupting message's answer: %+v", ans)
	}
	if evs := newSSEReader(first.Body).all(); !slices.ContainsFunc(evs, func(ev sseEvent) bool { return strings.Contains(ev.Data, `"type":"abort"`) }) {
		t.Fatalf("the interrupted stream has no abort: %d events", len(evs))
	}
	got := doorHistory(t, b, sid)
	if len(got) != 4 || !isPartial(got[1]) || got[2] != "user: stop that" || got[3] != "assistant: second answer." {
		t.Fatalf("history:\n%s", strings.Join(got, "\n"))
	}
}

func doorReject(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(longScript())
	sid := session.NewID()
	first := startSlow(t, a, "reject", sid)
	waitRunning(t, b, sid)
	if ans := d.send(t, b, "reject", sid, "two", sendOpts{}); ans.err != "session_busy" {
		t.Fatalf("a message for a busy session: %+v", ans)
	}
	stopBySession(t, a, sid, pending{})
	newSSEReader(first.Body).all()
	if got := doorHistory(t, b, sid); len(got) != 2 || !isPartial(got[1]) {
		t.Fatalf("history:\n%s", strings.Join(got, "\n"))
	}
	if n := len(mock.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

func doorRetry(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(mockllm.TextScript("only ", "once."))
	sid := session.NewID()
	key := "retry-" + session.NewID()
	first := d.send(t, a, "reject", sid, "hello", sendOpts{key: key})
	if first.err != "" || first.text != "only once." {
		t.Fatalf("the first attempt: %+v", first)
	}
	again := d.send(t, b, "reject", sid, "hello", sendOpts{key: key})
	if again.err != "" || again.text != first.text || again.turnID != first.turnID || again.task != first.task || d.replays && !again.replayed {
		t.Fatalf("the retry: %+v, first %+v", again, first)
	}
	if other := d.send(t, b, "reject", sid, "something else", sendOpts{key: key}); other.err != "idempotency_key_reused" {
		t.Fatalf("the key with another message: %+v", other)
	}
	if n := len(mock.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if got := doorHistory(t, b, sid); len(got) != 2 {
		t.Fatalf("history:\n%s", strings.Join(got, "\n"))
	}
}

func doorAttachments(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(mockllm.TextScript("a pixel."))
	sid := session.NewID()
	if ans := d.send(t, a, "reject", sid, "what is this?", sendOpts{attach: pngURL}); ans.err != "" || ans.text != "a pixel." {
		t.Fatalf("a message with an image: %+v", ans)
	}
	if body := string(mock.Requests()[0].Body); !strings.Contains(body, pngURL) {
		t.Fatalf("the model's request has no image: %s", body)
	}
	// The rule of every door: an http URL is not taken.
	if ans := d.send(t, b, "reject", sid, "and this?", sendOpts{attach: "http://example.com/a.png"}); ans.err != "invalid_message" {
		t.Fatalf("an http attachment: %+v", ans)
	}
	if n := len(mock.Requests()); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

func doorClientTools(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(mockllm.ToolScript(mockllm.ToolCall{ID: "call_lookup_1", Name: "lookup", Arguments: `{"q":"tea"}`}), mockllm.TextScript("found it."))
	sid := session.NewID()
	first := d.send(t, a, "reject", sid, "look up tea", sendOpts{tools: true})
	if first.err != "" || first.finish != chat.FinishToolCalls || len(first.calls) != 1 {
		t.Fatalf("the client tool's call: %+v", first)
	}
	ans := d.result(t, b, "reject", sid, first, first.calls[0], "tea is a drink")
	if ans.err != "" || ans.text != "found it." || ans.finish != chat.FinishStop {
		t.Fatalf("after the result: %+v", ans)
	}
	reqs := mock.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"lookup"`) || !strings.Contains(string(reqs[1].Body), "tea is a drink") {
		t.Fatalf("the model's requests: %d", len(reqs))
	}
}

func doorResume(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(slowScript())
	sid := session.NewID()
	p := d.start(t, a, "reject", sid, "tell me")
	turnID := waitRunning(t, b, sid)
	// The turn the door started streams through the chat API's resume,
	// on the other replica, to its end.
	res := b.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "")
	evs := newSSEReader(res.Body).all()
	res.Body.Close()
	if res.StatusCode != http.StatusOK || streamTextOf(evs) != slowText || !strings.HasPrefix(evs[0].ID, turnID+":") {
		t.Fatalf("resumed through /api/sessions: %d %q", res.StatusCode, streamTextOf(evs))
	}
	var st turnStatus
	getJSON(t, b.do(http.MethodGet, "/api/sessions/"+sid+"/turns/"+turnID, ""), http.StatusOK, &st)
	if st.Status != "finished" {
		t.Fatalf("the turn's status: %+v", st)
	}
	if ans := p.wait(); ans.err != "" || ans.text != slowText || ans.turnID != turnID {
		t.Fatalf("the door's answer: %+v (turn %s)", ans, turnID)
	}
}

func doorFollow(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(slowScript())
	sid := session.NewID()
	first := startSlow(t, a, "reject", sid)
	turnID := first.Header.Get("X-Turn-Id")
	waitRunning(t, b, sid)
	if ans := d.follow(t, b, sid, turnID); ans.err != "" || ans.text != slowText || ans.finish != chat.FinishStop {
		t.Fatalf("the chat API's turn followed: %+v", ans)
	}
}

func doorStop(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(longScript())
	sid := session.NewID()
	p := d.start(t, a, "reject", sid, "tell me")
	waitRunning(t, b, sid)
	d.stop(t, b, sid, p)
	ans := p.wait()
	if ans.err != "client_gone" && (ans.finish != chat.FinishStopped || !isPartial("assistant: "+ans.text)) {
		t.Fatalf("the stopped turn's answer: %+v", ans)
	}
	if got := doorHistory(t, b, sid); len(got) != 2 || !isPartial(got[1]) {
		t.Fatalf("history after the stop:\n%s", strings.Join(got, "\n"))
	}
}

func doorApproval(t *testing.T, d doorClient, a, b *env, mock *mockllm.Server) {
	mock.Enqueue(mockllm.ToolScript(mockllm.ToolCall{ID: "call_critique_1", Name: "critique", Arguments: `{"subject":"the plan","analysis":"**Understanding** a plan"}`}), mockllm.TextScript("critiqued."))
	sid := session.NewID()
	first := d.send(t, a, "approver", sid, "critique my plan", sendOpts{})
	if first.err != "" || first.finish != chat.FinishApproval || len(first.approvals) != 1 {
		t.Fatalf("the held call: %+v", first)
	}
	if n := len(mock.Requests()); n != 1 {
		t.Fatalf("%d model calls before the approval, want 1", n)
	}
	ans := d.approve(t, b, "approver", sid, first, first.approvals)
	if ans.err != "" || !strings.HasSuffix(ans.text, "critiqued.") || ans.finish != chat.FinishStop {
		t.Fatalf("after the approval: %+v", ans)
	}
	got := doorHistory(t, b, sid)
	if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "tool: ## Critique") }) {
		t.Fatalf("the approved call did not run:\n%s", strings.Join(got, "\n"))
	}
}

// doorClients are the doors under test.
func doorClients() []doorClient {
	return []doorClient{apiDoor(), chatCompletionsDoor(), responsesDoor(), a2aDoor(), aguiDoor(), mcpDoor()}
}

// async runs send in a goroutine under a context the returned pending
// cancels.
func async(t *testing.T, send func(ctx context.Context) doorAnswer) pending {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	t.Cleanup(cancel)
	ch := make(chan doorAnswer, 1)
	go func() { ch <- send(ctx) }()
	var (
		once sync.Once
		ans  doorAnswer
	)
	return pending{wait: func() doorAnswer { once.Do(func() { ans = <-ch }); return ans }, cancel: cancel}
}

// request sends a request under ctx; a request the client gave up is nil.
func request(t *testing.T, ctx context.Context, method, url, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		t.Error(err)
		return nil
	}
	return res
}

// errorCode reads a JSON error body's code: {"error": {"code"}}.
func errorCode(body []byte) string {
	var e errBodyT
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return "unreadable error: " + string(body)
	}
	return e.Error.Code
}

// stopBySession stops the session's turn with the chat API's stop.
func stopBySession(t *testing.T, e *env, sid string, _ pending) {
	t.Helper()
	getJSON(t, e.do(http.MethodPost, "/api/sessions/"+sid+"/stop", ""), http.StatusAccepted, nil)
}

// The chat API: POST /api/chat/:agentId, its AI SDK stream.

func apiDoor() doorClient {
	d := doorClient{name: "api-chat", replays: true}
	post := func(t *testing.T, ctx context.Context, e *env, agentID, key string, body any) doorAnswer {
		res := request(t, ctx, http.MethodPost, e.base+"/api/chat/"+agentID, jsonBody(body), "Idempotency-Key", key)
		if res == nil {
			return doorAnswer{err: "client_gone"}
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(res.Body)
			return doorAnswer{err: errorCode(data)}
		}
		ans := uiAnswer(t, newSSEReader(res.Body).all())
		ans.turnID, ans.replayed = res.Header.Get("X-Turn-Id"), res.Header.Get("Idempotent-Replayed") == "true"
		if ans.turnID == "" && ans.err == "" {
			t.Errorf("no x-turn-id")
		}
		return ans
	}
	message := func(sid, text string, o sendOpts) map[string]any {
		body := map[string]any{"sessionId": sid, "message": text}
		if o.attach != "" {
			delete(body, "message")
			body["messages"] = []any{map[string]any{"id": "u-" + session.NewID(), "role": "user", "parts": []any{
				map[string]any{"type": "text", "text": text}, map[string]any{"type": "file", "mediaType": "image/png", "url": o.attach}}}}
		}
		if o.tools {
			body["tools"] = []any{lookupTool}
		}
		return body
	}
	d.send = func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer {
		return post(t, t.Context(), e, agentID, o.key, message(sid, text, o))
	}
	d.start = func(t *testing.T, e *env, agentID, sid, text string) pending {
		return async(t, func(ctx context.Context) doorAnswer {
			return post(t, ctx, e, agentID, "", message(sid, text, sendOpts{}))
		})
	}
	d.result = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, callID, content string) doorAnswer {
		return post(t, t.Context(), e, agentID, "", map[string]any{"sessionId": sid, "tools": []any{lookupTool}, "messages": []any{
			map[string]any{"id": "u1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "look up tea"}}},
			map[string]any{"id": prev.turnID, "role": "assistant", "parts": []any{map[string]any{"type": "tool-lookup", "toolCallId": callID, "state": "output-available", "output": content}}}}})
	}
	d.approve = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, ids []string) doorAnswer {
		return post(t, t.Context(), e, agentID, "", map[string]any{"sessionId": sid, "approvals": approvalsOf(ids)})
	}
	d.stop = stopBySession
	d.follow = func(t *testing.T, e *env, sid, turnID string) doorAnswer {
		res := e.do(http.MethodGet, "/api/sessions/"+sid+"/stream", "", "Last-Event-ID", turnID+":0")
		defer res.Body.Close()
		return uiAnswer(t, newSSEReader(res.Body).all())
	}
	return d
}

var lookupTool = map[string]any{"name": "lookup", "description": "Looks a word up in the client's dictionary.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}}}

func approvalsOf(ids []string) []any {
	var out []any
	for _, id := range ids {
		out = append(out, map[string]any{"id": id, "approved": true})
	}
	return out
}

// uiAnswer reads an AI SDK UI message stream.
func uiAnswer(t *testing.T, evs []sseEvent) doorAnswer {
	t.Helper()
	var ans doorAnswer
	var b strings.Builder
	for _, ev := range evs {
		if ev.Data == "[DONE]" {
			continue
		}
		var c struct {
			Type         string `json:"type"`
			Delta        string `json:"delta"`
			ToolCallID   string `json:"toolCallId"`
			ToolName     string `json:"toolName"`
			ApprovalID   string `json:"approvalId"`
			FinishReason string `json:"finishReason"`
			ErrorText    string `json:"errorText"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			t.Fatalf("a chunk: %q", ev.Data)
		}
		switch c.Type {
		case "text-delta":
			b.WriteString(c.Delta)
		case "tool-approval-request":
			ans.approvals = append(ans.approvals, c.ApprovalID)
		case "tool-input-available":
			if c.ToolName == "lookup" {
				ans.calls = append(ans.calls, c.ToolCallID)
			}
		case "finish":
			switch {
			case ans.finish != "":
			case c.FinishReason == "tool-calls" && len(ans.approvals) > 0:
				ans.finish = chat.FinishApproval
			default:
				ans.finish = c.FinishReason
			}
		case "abort":
			ans.finish = chat.FinishStopped
		case "error":
			ans.err, _, _ = strings.Cut(c.ErrorText, ":")
		}
	}
	ans.text = b.String()
	return ans
}

// OpenAI's chat completions with a session (x-session-id).

func chatCompletionsDoor() doorClient {
	d := doorClient{name: "v1-chat-completions", replays: true, na: map[string]string{
		caseFollow: "a chat completion is answered once; OpenAI's API has no way to read a turn another request started (GET /api/sessions/:id/stream does)",
	}, via: map[string]string{
		caseApproval: "the held call is in the completion (finish_reason tool_calls, agentdock.finishReason approval); OpenAI's chat messages cannot answer it, POST /api/chat on the session does",
		caseStop:     "a client that goes away leaves a session's turn running (others may read it); POST /api/sessions/:id/stop stops it, and the completion says stopped",
	}}
	post := func(t *testing.T, ctx context.Context, e *env, sid, key string, body map[string]any) doorAnswer {
		res := request(t, ctx, http.MethodPost, e.base+"/v1/chat/completions", jsonBody(body), "X-Session-Id", sid, "Idempotency-Key", key)
		if res == nil {
			return doorAnswer{err: "client_gone"}
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			return doorAnswer{err: errorCode(data)}
		}
		var c struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID string `json:"id"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			AgentDock struct {
				TurnID       string          `json:"turnId"`
				FinishReason string          `json:"finishReason"`
				Approval     *chat.Approval  `json:"approval"`
				Error        *chat.Error     `json:"error"`
				ToolCalls    []chat.ToolCall `json:"toolCalls"`
			} `json:"agentdock"`
		}
		if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("a chat completion: %s", data)
		}
		ans := doorAnswer{turnID: c.AgentDock.TurnID, finish: c.AgentDock.FinishReason, replayed: res.Header.Get("Idempotent-Replayed") == "true"}
		if m := c.Choices[0].Message; m.Content != nil {
			ans.text = *m.Content
		}
		for _, tc := range c.Choices[0].Message.ToolCalls {
			ans.calls = append(ans.calls, tc.ID)
		}
		if ans.finish == chat.FinishApproval {
			ans.approvals = pendingApprovals(t, e, sid)
		}
		return ans
	}
	message := func(agentID, text string, o sendOpts) map[string]any {
		var content any = text
		if o.attach != "" {
			content = []any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": o.attach}}}
		}
		body := map[string]any{"model": agentID, "messages": []any{map[string]any{"role": "user", "content": content}}}
		if o.tools {
			body["tools"] = []any{map[string]any{"type": "function", "function": lookupTool}}
		}
		return body
	}
	d.send = func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer {
		return post(t, t.Context(), e, sid, o.key, message(agentID, text, o))
	}
	d.start = func(t *testing.T, e *env, agentID, sid, text string) pending {
		return async(t, func(ctx context.Context) doorAnswer {
			return post(t, ctx, e, sid, "", message(agentID, text, sendOpts{}))
		})
	}
	d.result = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, callID, content string) doorAnswer {
		return post(t, t.Context(), e, sid, "", map[string]any{"model": agentID, "tools": []any{map[string]any{"type": "function", "function": lookupTool}}, "messages": []any{
			map[string]any{"role": "user", "content": "look up tea"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": callID, "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"tea"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": callID, "content": content}}})
	}
	// OpenAI's chat messages have no answer to an approval: the held call
	// is in the completion's agentdock extension, and the chat API on
	// the same session answers it (docs/api.md, "Tool approvals").
	d.approve = approveThroughAPI
	// A client that goes away leaves a session's turn running (it is the
	// session's, which others may read): the chat API's stop stops it.
	d.stop = stopBySession
	return d
}

// approveThroughAPI answers held calls through the chat API.
func approveThroughAPI(t *testing.T, e *env, agentID, sid string, prev doorAnswer, ids []string) doorAnswer {
	return apiDoor().approve(t, e, agentID, sid, prev, ids)
}

// pendingApprovals are the IDs of the session's held calls.
func pendingApprovals(t *testing.T, e *env, sid string) []string {
	t.Helper()
	var sv sessionView
	getJSON(t, e.do(http.MethodGet, "/api/sessions/"+sid, ""), http.StatusOK, &sv)
	var out []string
	for _, p := range sv.PendingApprovals {
		out = append(out, p.ApprovalID)
	}
	return out
}

// The Responses API, continuing the conversation that the session is.

func responsesDoor() doorClient {
	d := doorClient{name: "v1-responses", replays: true, na: map[string]string{
		caseFollow: "a response is read whole once done (GET /v1/responses/{id}; streaming a stored response is not served), and a turn another door started is no response",
	}, via: map[string]string{
		caseApproval: "the held call is in the response (agentdock.finishReason approval); the Responses API's approvals are MCP servers' calls, so POST /api/chat on the conversation answers it",
		caseStop:     "only a background response has a cancel; POST /api/sessions/:id/stop stops a foreground one's turn, and the response says cancelled",
	}}
	post := func(t *testing.T, ctx context.Context, e *env, key string, body map[string]any) doorAnswer {
		res := request(t, ctx, http.MethodPost, e.base+"/v1/responses", jsonBody(body), "Idempotency-Key", key)
		if res == nil {
			return doorAnswer{err: "client_gone"}
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			return doorAnswer{err: errorCode(data)}
		}
		var r struct {
			Status string `json:"status"`
			Output []struct {
				Type    string `json:"type"`
				CallID  string `json:"call_id"`
				Name    string `json:"name"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
			AgentDock struct {
				TurnID       string `json:"turnId"`
				FinishReason string `json:"finishReason"`
			} `json:"agentdock"`
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("a response: %s", data)
		}
		ans := doorAnswer{turnID: r.AgentDock.TurnID, finish: r.AgentDock.FinishReason, replayed: res.Header.Get("Idempotent-Replayed") == "true"}
		for _, item := range r.Output {
			switch {
			case item.Type == "message":
				for _, c := range item.Content {
					ans.text += c.Text
				}
			case item.Type == "function_call" && item.Name == "lookup":
				ans.calls = append(ans.calls, item.CallID)
			}
		}
		if ans.finish == chat.FinishApproval {
			ans.approvals = pendingApprovals(t, e, body["conversation"].(string))
		}
		return ans
	}
	message := func(agentID, sid, text string, o sendOpts) map[string]any {
		content := []any{map[string]any{"type": "input_text", "text": text}}
		if o.attach != "" {
			content = append(content, map[string]any{"type": "input_image", "image_url": o.attach})
		}
		body := map[string]any{"model": agentID, "conversation": sid, "input": []any{map[string]any{"role": "user", "content": content}}}
		if o.tools {
			body["tools"] = []any{responsesLookup}
		}
		return body
	}
	d.send = func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer {
		return post(t, t.Context(), e, o.key, message(agentID, sid, text, o))
	}
	d.start = func(t *testing.T, e *env, agentID, sid, text string) pending {
		return async(t, func(ctx context.Context) doorAnswer {
			return post(t, ctx, e, "", message(agentID, sid, text, sendOpts{}))
		})
	}
	d.result = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, callID, content string) doorAnswer {
		return post(t, t.Context(), e, "", map[string]any{"model": agentID, "conversation": sid, "tools": []any{responsesLookup},
			"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": content}}})
	}
	// The Responses API's approvals are of MCP servers' calls; the held
	// call is in the conversation, and the chat API answers it.
	d.approve = approveThroughAPI
	// A foreground response has no cancel (a background one has):
	// the chat API's stop stops its turn.
	d.stop = stopBySession
	return d
}

var responsesLookup = map[string]any{"type": "function", "name": "lookup", "description": lookupTool["description"], "parameters": lookupTool["parameters"]}

// A2A's JSON-RPC binding: the session is the context.

func a2aDoor() doorClient {
	d := doorClient{name: "a2a", na: map[string]string{
		caseClientTools: "an A2A client cannot lend the agent tools: A2A has no tool of the client's",
	}}
	rpc := func(t *testing.T, ctx context.Context, e *env, path, method string, params any, busy string) (json.RawMessage, doorAnswer) {
		res := request(t, ctx, http.MethodPost, e.base+path, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+jsonBody(params)+`}`, "X-Busy", busy)
		if res == nil {
			return nil, doorAnswer{err: "client_gone"}
		}
		defer res.Body.Close()
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int            `json:"code"`
				Message string         `json:"message"`
				Data    map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if r.Error != nil {
			code, _ := r.Error.Data["code"].(string)
			if code == "" {
				code = fmt.Sprintf("a2a %d: %s", r.Error.Code, r.Error.Message)
			}
			return nil, doorAnswer{err: code}
		}
		return r.Result, doorAnswer{}
	}
	taskAnswer := func(t *testing.T, raw json.RawMessage) doorAnswer {
		var w struct {
			Task *a2a.Task `json:"task"`
		}
		task := new(a2a.Task)
		if json.Unmarshal(raw, &w) == nil && w.Task != nil {
			task = w.Task
		} else if err := json.Unmarshal(raw, task); err != nil {
			t.Fatalf("a task: %s", raw)
		}
		return a2aAnswer(t, *task)
	}
	send := func(t *testing.T, ctx context.Context, e *env, agentID, sid, text string, o sendOpts, extra map[string]any) doorAnswer {
		parts := []any{map[string]any{"text": text}}
		if o.attach != "" {
			parts = append(parts, map[string]any{"url": o.attach, "mediaType": "image/png"})
		}
		id := o.key
		if id == "" {
			id = session.NewID()
		}
		m := map[string]any{"messageId": id, "contextId": sid, "role": "ROLE_USER", "parts": parts}
		params := map[string]any{"message": m}
		for k, v := range extra {
			params[k] = v
		}
		raw, ans := rpc(t, ctx, e, "/a2a/"+agentID, "SendMessage", params, "")
		if ans.err != "" {
			return ans
		}
		return taskAnswer(t, raw)
	}
	d.send = func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer {
		return send(t, t.Context(), e, agentID, sid, text, o, nil)
	}
	d.start = func(t *testing.T, e *env, agentID, sid, text string) pending {
		// A non-blocking send: the task comes back working, and GetTask
		// reads it until it ends.
		started := send(t, t.Context(), e, agentID, sid, text, sendOpts{}, map[string]any{"configuration": map[string]any{"returnImmediately": true}})
		if started.err != "" || started.task == "" {
			t.Fatalf("a non-blocking send: %+v", started)
		}
		return pending{task: started.task, cancel: func() {}, wait: func() doorAnswer {
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				raw, ans := rpc(t, t.Context(), e, "/a2a", "GetTask", map[string]any{"id": started.task}, "")
				if ans.err != "" {
					return ans
				}
				if ans = taskAnswer(t, raw); ans.finish != "" {
					return ans
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("task %s never ended", started.task)
			return doorAnswer{}
		}}
	}
	d.approve = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, ids []string) doorAnswer {
		m := map[string]any{"messageId": session.NewID(), "taskId": prev.task, "contextId": sid, "role": "ROLE_USER",
			"parts": []any{map[string]any{"data": map[string]any{"approvals": approvalsOf(ids)}}}}
		raw, ans := rpc(t, t.Context(), e, "/a2a/"+agentID, "SendMessage", map[string]any{"message": m}, "")
		if ans.err != "" {
			return ans
		}
		return taskAnswer(t, raw)
	}
	d.stop = func(t *testing.T, e *env, sid string, p pending) {
		if _, ans := rpc(t, t.Context(), e, "/a2a", "CancelTask", map[string]any{"id": p.task}, ""); ans.err != "" {
			t.Fatalf("CancelTask: %s", ans.err)
		}
	}
	d.follow = func(t *testing.T, e *env, sid, turnID string) doorAnswer {
		// The chat API's turn is the task <sessionId>.<turnId>: its
		// subscription streams it from its first event.
		res := request(t, t.Context(), http.MethodPost, e.base+"/a2a", `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"`+sid+"."+turnID+`"}}`)
		defer res.Body.Close()
		var (
			ans  doorAnswer
			text strings.Builder
		)
		for _, ev := range newSSEReader(res.Body).all() {
			var r struct {
				Result a2a.StreamResponse `json:"result"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
				t.Fatalf("a stream event: %s", ev.Data)
			}
			if u := r.Result.ArtifactUpdate; u != nil && u.Artifact.Parts[0].Text != nil {
				text.WriteString(*u.Artifact.Parts[0].Text)
			}
			if u := r.Result.StatusUpdate; u != nil && u.Status.State != a2a.StateWorking {
				ans = a2aAnswer(t, a2a.Task{Status: u.Status, Metadata: u.Metadata})
			}
		}
		ans.text = text.String()
		return ans
	}
	return d
}

// a2aAnswer reads a task.
func a2aAnswer(t *testing.T, task a2a.Task) doorAnswer {
	ans := doorAnswer{task: task.ID}
	if id, ok := task.Metadata["turnId"].(string); ok {
		ans.turnID = id
	}
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			if p.Text != nil {
				ans.text += *p.Text
			}
		}
	}
	switch task.Status.State {
	case a2a.StateCompleted:
		ans.finish = chat.FinishStop
	case a2a.StateCanceled:
		ans.finish = chat.FinishStopped
	case a2a.StateFailed:
		ans.finish = chat.FinishError
	case a2a.StateInputRequired:
		ans.finish = chat.FinishApproval
		for _, p := range task.Status.Message.Parts {
			var d struct {
				Approvals []struct {
					ID string `json:"id"`
				} `json:"approvals"`
			}
			if len(p.Data) > 0 && json.Unmarshal(p.Data, &d) == nil {
				for _, a := range d.Approvals {
					ans.approvals = append(ans.approvals, a.ID)
				}
			}
		}
	}
	return ans
}

// AG-UI: a run per message, the thread the session.

func aguiDoor() doorClient {
	d := doorClient{name: "ag-ui", replays: true, na: map[string]string{
		caseFollow: "AG-UI's HTTP binding has no way to attach to a run under way (HttpAgent's connect is not implemented): GET /api/sessions/{threadId}/stream does it",
	}}
	run := func(t *testing.T, ctx context.Context, e *env, agentID, key string, body map[string]any) doorAnswer {
		res := request(t, ctx, http.MethodPost, e.base+"/api/agui/"+agentID, jsonBody(body), "Idempotency-Key", key)
		if res == nil {
			return doorAnswer{err: "client_gone"}
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(res.Body)
			return doorAnswer{err: errorCode(data)}
		}
		ans := doorAnswer{turnID: res.Header.Get("X-Turn-Id"), replayed: res.Header.Get("Idempotent-Replayed") == "true"}
		evs := newSSEReader(res.Body).all()
		if ctx.Err() != nil {
			return doorAnswer{err: "client_gone"}
		}
		for _, ev := range evs {
			var e struct {
				Type       string `json:"type"`
				Delta      string `json:"delta"`
				ToolCallID string `json:"toolCallId"`
				Name       string `json:"toolCallName"`
				Code       string `json:"code"`
				Outcome    struct {
					Type       string `json:"type"`
					Interrupts []struct {
						ID string `json:"id"`
					} `json:"interrupts"`
				} `json:"outcome"`
				Result struct {
					FinishReason string `json:"finishReason"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
				t.Fatalf("an AG-UI event: %s", ev.Data)
			}
			switch e.Type {
			case "TEXT_MESSAGE_CONTENT":
				ans.text += e.Delta
			case "TOOL_CALL_START":
				if e.Name == "lookup" {
					ans.calls = append(ans.calls, e.ToolCallID)
				}
			case "RUN_ERROR":
				ans.err = e.Code
			case "RUN_FINISHED":
				switch e.Outcome.Type {
				case "interrupt":
					ans.finish = chat.FinishApproval
					for _, i := range e.Outcome.Interrupts {
						ans.approvals = append(ans.approvals, i.ID)
					}
				case "cancelled":
					ans.finish = chat.FinishStopped
				default:
					ans.finish = e.Result.FinishReason
				}
			}
		}
		return ans
	}
	input := func(sid string, msgs ...any) map[string]any {
		return map[string]any{"threadId": sid, "runId": session.NewID(), "messages": msgs, "tools": []any{}}
	}
	user := func(text string, o sendOpts) map[string]any {
		var content any = text
		if o.attach != "" {
			content = []any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "image", "source": map[string]any{"type": "url", "value": o.attach, "mimeType": "image/png"}}}
		}
		return map[string]any{"id": session.NewID(), "role": "user", "content": content}
	}
	d.send = func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer {
		in := input(sid, user(text, o))
		if o.tools {
			in["tools"] = []any{lookupTool}
		}
		return run(t, t.Context(), e, agentID, o.key, in)
	}
	d.start = func(t *testing.T, e *env, agentID, sid, text string) pending {
		return async(t, func(ctx context.Context) doorAnswer {
			return run(t, ctx, e, agentID, "", input(sid, user(text, sendOpts{})))
		})
	}
	d.result = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, callID, content string) doorAnswer {
		in := input(sid, user("look up tea", sendOpts{}),
			map[string]any{"id": session.NewID(), "role": "assistant", "toolCalls": []any{map[string]any{"id": callID, "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"tea"}`}}}},
			map[string]any{"id": session.NewID(), "role": "tool", "toolCallId": callID, "content": content})
		in["tools"] = []any{lookupTool}
		return run(t, t.Context(), e, agentID, "", in)
	}
	d.approve = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, ids []string) doorAnswer {
		in := input(sid)
		var resume []any
		for _, id := range ids {
			resume = append(resume, map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"approved": true}})
		}
		in["resume"] = resume
		return run(t, t.Context(), e, agentID, "", in)
	}
	// A client that goes away stops its run's turn.
	d.stop = func(t *testing.T, e *env, sid string, p pending) { p.cancel() }
	return d
}

// MCP over streamable HTTP, with the official Go SDK's client: each agent
// a tool, the session its sessionId argument.

func mcpDoor() doorClient {
	d := doorClient{name: "mcp-http", na: map[string]string{
		caseAttachments: "a tools/call carries JSON arguments, and MCP has no file input for a tool: send files through another door on the same sessionId",
		caseClientTools: "the caller of an MCP tool cannot lend it tools",
		caseFollow:      "an MCP call answers its own turn; MCP has no way to attach to a turn under way",
	}}
	var (
		mu      sync.Mutex
		clients = map[*env]*mcp.ClientSession{}
	)
	client := func(t *testing.T, e *env) *mcp.ClientSession {
		mu.Lock()
		defer mu.Unlock()
		if cs := clients[e]; cs != nil {
			return cs
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "doors", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.base + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		clients[e] = cs
		t.Cleanup(func() {
			mu.Lock()
			delete(clients, e)
			mu.Unlock()
			cs.Close()
		})
		return cs
	}
	call := func(t *testing.T, ctx context.Context, e *env, agentID string, args map[string]any, key string) doorAnswer {
		p := &mcp.CallToolParams{Name: agentID, Arguments: args}
		if key != "" {
			p.Meta = mcp.Meta{mcpserver.MetaIdempotencyKey: key}
		}
		res, err := client(t, e).CallTool(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return doorAnswer{err: "client_gone"}
			}
			t.Fatalf("tools/call: %v", err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.IsError {
			code, _, _ := strings.Cut(text.String(), ":")
			return doorAnswer{err: code}
		}
		var out mcpserver.Output
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("a result: %s", raw)
		}
		ans := doorAnswer{text: out.Answer, finish: out.FinishReason, turnID: out.TurnID}
		for _, p := range out.PendingApprovals {
			ans.approvals = append(ans.approvals, p.ID)
		}
		return ans
	}
	d.send = func(t *testing.T, e *env, agentID, sid, text string, o sendOpts) doorAnswer {
		return call(t, t.Context(), e, agentID, map[string]any{"message": text, "sessionId": sid}, o.key)
	}
	d.start = func(t *testing.T, e *env, agentID, sid, text string) pending {
		return async(t, func(ctx context.Context) doorAnswer {
			return call(t, ctx, e, agentID, map[string]any{"message": text, "sessionId": sid}, "")
		})
	}
	d.approve = func(t *testing.T, e *env, agentID, sid string, prev doorAnswer, ids []string) doorAnswer {
		return call(t, t.Context(), e, agentID, map[string]any{"sessionId": sid, "approvals": approvalsOf(ids)}, "")
	}
	// A client that cancels the call stops the turn.
	d.stop = func(t *testing.T, e *env, sid string, p pending) { p.cancel() }
	return d
}
