package a2a_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
	"github.com/agentdock-go/agentdock/session"
)

// A turn the chat API started is the task <sessionId>.<turnId>: GetTask
// reads it while it runs and after, CancelTask stops it, and another
// owner, an unknown turn or a message on it find no task.
func TestAnyTurnIsATask(t *testing.T) {
	e, _ := a2a.New(a2a.Config{})
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{e}, Delay: 20 * time.Millisecond, Keys: []string{"key-one", "key-two"}})
	sid := session.NewID()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/chat/explorer", strings.NewReader(`{"sessionId":"`+sid+`","message":"explore a long list of options"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "key-one")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/chat: %v %v", res.StatusCode, err)
	}
	defer res.Body.Close()
	id := sid + "." + res.Header.Get("X-Turn-Id")
	got := task(t, rpc(t, s.URL+"/a2a", "key-one", "GetTask", map[string]any{"id": id}))
	if got.ID != id || got.ContextID != sid || got.Status.State != a2a.StateWorking || got.Metadata["turnId"] != res.Header.Get("X-Turn-Id") || got.Metadata["agent"] != "explorer" {
		t.Fatalf("GetTask while the turn runs: %+v", got)
	}
	if r := rpc(t, s.URL+"/a2a", "key-two", "GetTask", map[string]any{"id": id}); r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("another key's GetTask: %+v", r.Error)
	}
	c := task(t, rpc(t, s.URL+"/a2a", "key-one", "CancelTask", map[string]any{"id": id}))
	if c.Status.State != a2a.StateCanceled {
		t.Fatalf("CancelTask: %s", c.Status.State)
	}
	if again := task(t, rpc(t, s.URL+"/a2a", "key-one", "GetTask", map[string]any{"id": id})); again.Status.State != a2a.StateCanceled {
		t.Fatalf("GetTask after the cancel: %s", again.Status.State)
	}
	for method, params := range map[string]map[string]any{
		"GetTask":         {"id": sid + "." + session.NewID()},
		"SubscribeToTask": {"id": sid + "." + session.NewID()},
		"SendMessage":     {"message": message("more", map[string]any{"taskId": id})},
	} {
		if r := rpc(t, s.URL+"/a2a/explorer", "key-one", method, params); r.Error == nil || r.Error.Code != -32001 {
			t.Errorf("%s: %+v", method, r.Error)
		}
	}
	if r := rpc(t, s.URL+"/a2a", "key-one", "CancelTask", map[string]any{"id": id}); r.Error == nil || r.Error.Code != -32002 {
		t.Fatalf("cancelling the ended turn: %+v", r.Error)
	}
}

// A streaming message sent again while its task runs gets the task and
// follows it to its end; no second turn runs.
func TestStreamSentAgainFollowsTheTask(t *testing.T) {
	e, _ := a2a.New(a2a.Config{})
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{e}, Delay: 5 * time.Millisecond})
	sid := session.NewID()
	body := `{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":{"messageId":"msg-1","contextId":"` + sid + `","role":"ROLE_USER","parts":[{"text":"explore options for an offsite"}]}}}`
	first := post(t, s.URL+"/a2a/explorer", "", body)
	second := events(t, post(t, s.URL+"/a2a/explorer", "", body), "s")
	firstEvents := events(t, first, "s")
	if len(second) < 2 || second[0].Task == nil || firstEvents[0].Task == nil || second[0].Task.ID != firstEvents[0].Task.ID {
		t.Fatalf("the second stream is not the first's task: %d events", len(second))
	}
	if last := second[len(second)-1]; last.StatusUpdate == nil || last.StatusUpdate.Status.State != a2a.StateCompleted {
		t.Fatalf("the second stream's last event: %+v", last)
	}
	sess, err := s.Runtime().Session(t.Context(), "", sid)
	if err != nil || sess.State.UserMessages != 1 {
		t.Fatalf("session: %v, %d user messages", err, sess.State.UserMessages)
	}
	// Another message under the same ID is refused.
	r := rpc(t, s.URL+"/a2a/explorer", "", "SendMessage", map[string]any{"message": map[string]any{"messageId": "msg-1", "contextId": sid, "role": "ROLE_USER", "parts": []any{map[string]any{"text": "something else"}}}})
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "other parts") {
		t.Fatalf("the messageId again with other parts: %+v", r.Error)
	}
}
