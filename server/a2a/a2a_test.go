package a2a_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
)

func start(t *testing.T, keys ...string) *edgetest.Server {
	t.Helper()
	e, err := a2a.New(a2a.Config{PushHosts: []string{"hooks.example"}})
	if err != nil {
		t.Fatal(err)
	}
	return edgetest.Start(t, edgetest.Options{Doors: []door.Door{e}, Keys: keys})
}

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func rpc(t *testing.T, url, key, method string, params any) rpcReply {
	t.Helper()
	p, _ := json.Marshal(params)
	res := post(t, url, key, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+string(p)+`}`)
	defer res.Body.Close()
	var r rpcReply
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

func message(text string, extra map[string]any) map[string]any {
	m := map[string]any{"messageId": "m-" + text, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func task(t *testing.T, r rpcReply) a2a.Task {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var w struct {
		Task *a2a.Task `json:"task"`
	}
	if json.Unmarshal(r.Result, &w) == nil && w.Task != nil {
		return *w.Task
	}
	var tk a2a.Task
	if err := json.Unmarshal(r.Result, &tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

func answerText(tk a2a.Task) string {
	var b strings.Builder
	for _, a := range tk.Artifacts {
		for _, p := range a.Parts {
			if p.Text != nil {
				b.WriteString(*p.Text)
			}
		}
	}
	return b.String()
}

func TestSendGetAndContinueContext(t *testing.T) {
	s := start(t)
	r := rpc(t, s.URL+"/a2a/plain", "", "SendMessage", map[string]any{"message": message("[offline:echo] hello there", nil)})
	tk := task(t, r)
	if tk.Status.State != a2a.StateCompleted || answerText(tk) != "hello there" {
		t.Fatalf("task = %s %q", tk.Status.State, answerText(tk))
	}
	got := task(t, rpc(t, s.URL+"/a2a", "", "GetTask", map[string]any{"id": tk.ID}))
	if got.Status.State != a2a.StateCompleted || answerText(got) != "hello there" || got.ContextID != tk.ContextID {
		t.Fatalf("GetTask = %+v", got)
	}
	// The same context is the same session: its history has both turns.
	next := task(t, rpc(t, s.URL+"/a2a", "", "SendMessage", map[string]any{"message": message("[offline:echo] again", map[string]any{"contextId": tk.ContextID, "metadata": map[string]any{"agent": "plain"}})}))
	if next.ContextID != tk.ContextID || next.ID == tk.ID || answerText(next) != "again" {
		t.Fatalf("next = %+v", next)
	}
	sess, err := s.Runtime().Session(t.Context(), "", tk.ContextID)
	if err != nil || sess.State.UserMessages != 2 {
		t.Fatalf("session: %v, %d user messages", err, sess.State.UserMessages)
	}
}

func TestStreamFollowsTheTurn(t *testing.T) {
	s := start(t)
	res := post(t, s.URL+"/a2a/explorer", "", `{"jsonrpc":"2.0","id":"s1","method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"explore options for an offsite"}]}}}`)
	events := events(t, res, "s1")
	if len(events) < 3 || events[0].Task == nil || events[0].Task.Status.State != a2a.StateWorking {
		t.Fatalf("first event is not the working task: %+v", events[:min(len(events), 1)])
	}
	last := events[len(events)-1]
	if last.StatusUpdate == nil || last.StatusUpdate.Status.State != a2a.StateCompleted {
		t.Fatalf("last event: %+v", last)
	}
	// The step's sequence shows in the tool calls, in order.
	var calls []string
	var text strings.Builder
	for _, ev := range events {
		if u := ev.StatusUpdate; u != nil && u.Status.Message != nil {
			for _, p := range u.Status.Message.Parts {
				var d struct {
					ToolCall *struct{ Name string } `json:"toolCall"`
				}
				if json.Unmarshal(p.Data, &d) == nil && d.ToolCall != nil {
					calls = append(calls, d.ToolCall.Name)
				}
			}
		}
		if u := ev.ArtifactUpdate; u != nil {
			text.WriteString(*u.Artifact.Parts[0].Text)
		}
	}
	if strings.Join(calls, ",") != "brainstorm,compare" || text.Len() == 0 {
		t.Fatalf("calls %v, %d bytes of answer", calls, text.Len())
	}
}

func TestApprovalIsInputRequired(t *testing.T) {
	s := start(t)
	tk := task(t, rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": message("think about tea", nil)}))
	if tk.Status.State != a2a.StateInputRequired || tk.Status.Message == nil {
		t.Fatalf("state %s", tk.Status.State)
	}
	ids := approvalIDs(t, tk, "think")
	if len(ids) != 1 {
		t.Fatalf("approvals %v", ids)
	}
	// A text reply does not answer it; a data part does.
	bad := rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": message("yes", map[string]any{"taskId": tk.ID})})
	if bad.Error == nil || bad.Error.Code != -32602 {
		t.Fatalf("text answer: %+v", bad)
	}
	ans := message("ok", map[string]any{"taskId": tk.ID, "contextId": tk.ContextID})
	ans["parts"] = []any{map[string]any{"data": map[string]any{"approvals": []any{map[string]any{"id": ids[0], "approved": true}}}}}
	done := task(t, rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": ans}))
	if done.ID != tk.ID || done.Status.State != a2a.StateCompleted || answerText(done) == "" {
		t.Fatalf("after the answer: %s %s %q", done.ID, done.Status.State, answerText(done))
	}
	// The same message again is a client's retry: it gets the task, and
	// no turn; another message on the completed task is refused.
	if again := task(t, rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": ans})); again.ID != tk.ID || again.Status.State != a2a.StateCompleted || answerText(again) != answerText(done) {
		t.Fatalf("the answer sent again: %s %s %q", again.ID, again.Status.State, answerText(again))
	}
	ans["messageId"] = "m-ok-again"
	again := rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": ans})
	if again.Error == nil || again.Error.Code != -32004 {
		t.Fatalf("answering a completed task: %+v", again)
	}
	c := rpc(t, s.URL+"/a2a", "", "CancelTask", map[string]any{"id": tk.ID})
	if c.Error == nil || c.Error.Code != -32002 {
		t.Fatalf("cancelling a completed task: %+v", c)
	}
}

// approvalIDs reads the ids of the calls an input-required task waits
// for, each a call of tool.
func approvalIDs(t *testing.T, tk a2a.Task, tool string) []string {
	t.Helper()
	var ids []string
	for _, p := range tk.Status.Message.Parts {
		var d struct {
			Approvals []struct{ ID, ToolName string }
		}
		if json.Unmarshal(p.Data, &d) == nil {
			for _, a := range d.Approvals {
				if a.ToolName != tool {
					t.Fatalf("approval of %q", a.ToolName)
				}
				ids = append(ids, a.ID)
			}
		}
	}
	return ids
}

// events reads the StreamResponses of a JSON-RPC stream whose id is id.
func events(t *testing.T, res *http.Response, id string) []a2a.StreamResponse {
	t.Helper()
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var out []a2a.StreamResponse
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r struct {
			ID     string             `json:"id"`
			Result a2a.StreamResponse `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.ID != id {
			t.Fatalf("frame %s: %v", line, err)
		}
		out = append(out, r.Result)
	}
	return out
}

// A SendMessage with returnImmediately answers the working task at once;
// its turn runs on, and GetTask and SubscribeToTask follow it to its end.
func TestReturnImmediatelyRunsOn(t *testing.T) {
	e, _ := a2a.New(a2a.Config{})
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{e}, Delay: 5 * time.Millisecond})
	tk := task(t, rpc(t, s.URL+"/a2a/explorer", "", "SendMessage", map[string]any{"message": message("explore options for an offsite", nil),
		"configuration": map[string]any{"returnImmediately": true, "historyLength": 0}}))
	if tk.Status.State != a2a.StateWorking || len(tk.History) != 0 || len(tk.Artifacts) != 0 {
		t.Fatalf("answered %s with %d history messages and %d artifacts", tk.Status.State, len(tk.History), len(tk.Artifacts))
	}
	if got := task(t, rpc(t, s.URL+"/a2a", "", "GetTask", map[string]any{"id": tk.ID})); got.Status.State != a2a.StateWorking || len(got.History) != 1 {
		t.Fatalf("GetTask while it runs: %s, %d history messages", got.Status.State, len(got.History))
	}
	evs := events(t, post(t, s.URL+"/a2a", "", `{"jsonrpc":"2.0","id":"sub","method":"SubscribeToTask","params":{"id":"`+tk.ID+`"}}`), "sub")
	if len(evs) < 2 || evs[0].Task == nil || evs[0].Task.ID != tk.ID {
		t.Fatalf("the subscription does not begin with the task: %d events", len(evs))
	}
	if last := evs[len(evs)-1]; last.StatusUpdate == nil || last.StatusUpdate.Status.State != a2a.StateCompleted {
		t.Fatalf("the subscription's last event: %+v", last)
	}
	done := task(t, rpc(t, s.URL+"/a2a", "", "GetTask", map[string]any{"id": tk.ID}))
	if done.Status.State != a2a.StateCompleted || answerText(done) == "" {
		t.Fatalf("GetTask after the turn: %s %q", done.Status.State, answerText(done))
	}
}

// historyLength bounds the history GetTask and SendMessage answer: the
// most recent messages, none for 0, all when absent.
func TestHistoryLength(t *testing.T) {
	s := start(t)
	tk := task(t, rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": message("think about tea", nil)}))
	ans := message("ok", map[string]any{"taskId": tk.ID})
	ans["parts"] = []any{map[string]any{"data": map[string]any{"approvals": []any{map[string]any{"id": approvalIDs(t, tk, "think")[0], "approved": true}}}}}
	done := task(t, rpc(t, s.URL+"/a2a/gatekeeper", "", "SendMessage", map[string]any{"message": ans, "configuration": map[string]any{"historyLength": 1}}))
	if done.Status.State != a2a.StateCompleted || len(done.History) != 1 || done.History[0].MessageID != "m-ok" {
		t.Fatalf("SendMessage with historyLength 1: %s, history %+v", done.Status.State, done.History)
	}
	for _, tc := range []struct {
		params map[string]any
		want   []string
	}{
		{map[string]any{"id": tk.ID}, []string{"m-think about tea", "m-ok"}},
		{map[string]any{"id": tk.ID, "historyLength": 5}, []string{"m-think about tea", "m-ok"}},
		{map[string]any{"id": tk.ID, "historyLength": 1}, []string{"m-ok"}},
		{map[string]any{"id": tk.ID, "historyLength": 0}, nil},
	} {
		got := task(t, rpc(t, s.URL+"/a2a", "", "GetTask", tc.params))
		var ids []string
		for _, m := range got.History {
			ids = append(ids, m.MessageID)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("GetTask %v: history %v, want %v", tc.params, ids, tc.want)
		}
	}
	res, err := http.Get(s.URL + "/a2a/gatekeeper/tasks/" + tk.ID + "?historyLength=1")
	if err != nil {
		t.Fatal(err)
	}
	var got a2a.Task
	json.NewDecoder(res.Body).Decode(&got)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || len(got.History) != 1 {
		t.Fatalf("HTTP+JSON GetTask ?historyLength=1: %d, %d messages", res.StatusCode, len(got.History))
	}
	if res, err = http.Get(s.URL + "/a2a/gatekeeper/tasks/" + tk.ID + "?historyLength=many"); err != nil || res.StatusCode != http.StatusBadRequest {
		t.Fatalf("HTTP+JSON GetTask ?historyLength=many: %v %v", res.StatusCode, err)
	}
	res.Body.Close()
	for method, params := range map[string]map[string]any{
		"GetTask":     {"id": tk.ID, "historyLength": -1},
		"SendMessage": {"message": message("[offline:echo] hi", map[string]any{"metadata": map[string]any{"agent": "plain"}}), "configuration": map[string]any{"historyLength": -1}},
	} {
		if r := rpc(t, s.URL+"/a2a", "", method, params); r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "historyLength") {
			t.Errorf("%s with historyLength -1: %+v", method, r.Error)
		}
	}
}

func TestCancelStopsTheTurn(t *testing.T) {
	e, _ := a2a.New(a2a.Config{})
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{e}, Delay: 20 * time.Millisecond})
	tk := task(t, rpc(t, s.URL+"/a2a/explorer", "", "SendMessage", map[string]any{"message": message("explore a long list", nil), "configuration": map[string]any{"returnImmediately": true}}))
	if tk.Status.State != a2a.StateWorking {
		t.Fatalf("state %s", tk.Status.State)
	}
	c := task(t, rpc(t, s.URL+"/a2a", "", "CancelTask", map[string]any{"id": tk.ID}))
	if c.Status.State != a2a.StateCanceled {
		t.Fatalf("after cancel: %s", c.Status.State)
	}
}

func TestErrorsSayWhatAndWhere(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		name, url, body string
		code            int
		want            string
	}{
		{"parse", "/a2a", `{`, -32700, "not a JSON-RPC"},
		{"batch", "/a2a", `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, -32600, "batches"},
		{"no id", "/a2a", `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}`, -32600, "id must be"},
		{"method", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, -32601, "SendMessage"},
		{"no agent", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, -32602, "message.metadata.agent"},
		{"no text", "/a2a/plain", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"x":1}}]}}}`, -32602, "no text part and no file part"},
		{"http file", "/a2a/plain", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"url":"http://x"}]}}}`, -32602, `message.parts[1]: want an https URL or a data: URL, not "http://x"`},
		{"raw without type", "/a2a/plain", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk="}]}}}`, -32602, "message.parts[0]: a file part with raw bytes needs its media type"},
		{"raw not base64", "/a2a/plain", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"not base64!","mediaType":"text/plain"}]}}}`, -32602, "message.parts[0]: the data of the data: URL is not base64"},
		{"bad context", "/a2a/plain", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","contextId":"a b","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, -32602, "contextId"},
		{"no task", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"0123456789abcdef"}}`, -32001, "no task"},
		{"push host", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"0123456789abcdef","url":"http://elsewhere/hook"}}`, -32001, "no task"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := post(t, s.URL+tc.url, "", tc.body)
			defer res.Body.Close()
			var r rpcReply
			if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
				t.Fatal(err)
			}
			if r.Error == nil || r.Error.Code != tc.code || !strings.Contains(r.Error.Message, tc.want) {
				t.Fatalf("got %+v, want code %d with %q", r.Error, tc.code, tc.want)
			}
		})
	}
}

func TestOwnersKeepTheirTasks(t *testing.T) {
	s := start(t, "key-one", "key-two")
	tk := task(t, rpc(t, s.URL+"/a2a/plain", "key-one", "SendMessage", map[string]any{"message": message("[offline:echo] mine", nil)}))
	if r := rpc(t, s.URL+"/a2a", "key-two", "GetTask", map[string]any{"id": tk.ID}); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("another key's GetTask: %+v", r)
	}
	if r := rpc(t, s.URL+"/a2a", "key-two", "CancelTask", map[string]any{"id": tk.ID}); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("another key's CancelTask: %+v", r)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/a2a/plain/tasks/"+tk.ID, nil)
	req.Header.Set("x-api-key", "key-two")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("another key's REST GET: %d", res.StatusCode)
	}
	req.Header.Set("x-api-key", "key-one")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got a2a.Task
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil || res.StatusCode != 200 || answerText(got) != "mine" {
		t.Fatalf("own REST GET: %d %v %+v", res.StatusCode, err, got)
	}
	if r := post(t, s.URL+"/a2a", "", `{}`); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a key: %d", r.StatusCode)
	}
}

func TestCards(t *testing.T) {
	s := start(t)
	var card a2a.AgentCard
	res, err := http.Get(s.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(res.Body).Decode(&card)
	res.Body.Close()
	if card.SupportedInterfaces[0].URL != s.URL+"/a2a" || len(card.Skills) != s.Agents || !card.Capabilities.Streaming || !card.Capabilities.PushNotifications {
		t.Fatalf("server card: %+v", card)
	}
	res, err = http.Get(s.URL + "/a2a/explorer/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(res.Body).Decode(&card)
	res.Body.Close()
	if card.Name != "Explorer" || len(card.Skills) != 2 || card.Skills[0].ID != "Explore" || len(card.SupportedInterfaces) != 2 {
		t.Fatalf("agent card: %+v", card)
	}
}

func TestListTasks(t *testing.T) {
	s := start(t, "key-one", "key-two")
	var ids []string
	ctxID := "list-context-1"
	for _, text := range []string{"[offline:echo] one", "[offline:echo] two", "[offline:echo] three"} {
		tk := task(t, rpc(t, s.URL+"/a2a/plain", "key-one", "SendMessage", map[string]any{"message": message(text, map[string]any{"contextId": ctxID})}))
		ids = append(ids, tk.ID)
	}
	task(t, rpc(t, s.URL+"/a2a/plain", "key-one", "SendMessage", map[string]any{"message": message("[offline:echo] elsewhere", nil)}))

	type page struct {
		Tasks         []a2a.Task `json:"tasks"`
		NextPageToken string     `json:"nextPageToken"`
		PageSize      int        `json:"pageSize"`
		TotalSize     int        `json:"totalSize"`
	}
	list := func(key string, params map[string]any) page {
		r := rpc(t, s.URL+"/a2a", key, "ListTasks", params)
		if r.Error != nil {
			t.Fatalf("ListTasks %v: %s", params, r.Error.Message)
		}
		var p page
		json.Unmarshal(r.Result, &p)
		return p
	}
	first := list("key-one", map[string]any{"contextId": ctxID, "pageSize": 2})
	if first.TotalSize != 3 || len(first.Tasks) != 2 || first.NextPageToken == "" || first.Tasks[0].ID != ids[2] || first.Tasks[0].Artifacts != nil || len(first.Tasks[0].History) != 0 {
		t.Fatalf("first page: %+v", first)
	}
	second := list("key-one", map[string]any{"contextId": ctxID, "pageSize": 2, "pageToken": first.NextPageToken, "includeArtifacts": true, "historyLength": 1})
	if len(second.Tasks) != 1 || second.NextPageToken != "" || second.Tasks[0].ID != ids[0] || answerText(second.Tasks[0]) != "one" || len(second.Tasks[0].History) != 1 {
		t.Fatalf("second page: %+v", second)
	}
	if all := list("key-one", map[string]any{"status": a2a.StateCompleted}); all.TotalSize != 4 {
		t.Fatalf("completed: %d", all.TotalSize)
	}
	if theirs := list("key-two", map[string]any{}); theirs.TotalSize != 0 {
		t.Fatalf("another key lists %d tasks", theirs.TotalSize)
	}
	for _, bad := range []map[string]any{{"pageSize": 0}, {"pageSize": 101}, {"historyLength": -1}, {"status": "DONE"}, {"pageToken": "xyz"}, {"statusTimestampAfter": "-1"}} {
		if r := rpc(t, s.URL+"/a2a", "key-one", "ListTasks", bad); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("ListTasks %v: %+v", bad, r.Error)
		}
	}
}
