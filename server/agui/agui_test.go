package agui_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/server/agui"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/edgetest"
)

type event map[string]any

func run(t *testing.T, s *edgetest.Server, key, agentID, body string) (int, []event) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/agui/"+agentID, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []event
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
	}
	return res.StatusCode, out
}

func types(evs []event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev["type"].(string))
	}
	return out
}

// wellFormed checks what AG-UI's verifier checks of a run: it starts with
// RUN_STARTED and ends with RUN_FINISHED or RUN_ERROR, text messages, tool
// calls and steps open and close in pairs, and nothing is left open.
func wellFormed(t *testing.T, evs []event) {
	t.Helper()
	ty := types(evs)
	if len(ty) < 2 || ty[0] != "RUN_STARTED" || (ty[len(ty)-1] != "RUN_FINISHED" && ty[len(ty)-1] != "RUN_ERROR") {
		t.Fatalf("run bounds: %v", ty)
	}
	open := map[string]bool{}
	for _, ev := range evs {
		key := func(field string) string { return field + ":" + ev[field].(string) }
		switch ev["type"] {
		case "TEXT_MESSAGE_START":
			open[key("messageId")] = true
		case "TEXT_MESSAGE_CONTENT":
			if !open[key("messageId")] || ev["delta"] == "" {
				t.Fatalf("content outside its message or empty: %v", ev)
			}
		case "TEXT_MESSAGE_END":
			delete(open, key("messageId"))
		case "TOOL_CALL_START":
			open[key("toolCallId")] = true
		case "TOOL_CALL_END":
			delete(open, key("toolCallId"))
		case "STEP_STARTED":
			open[key("stepName")] = true
		case "STEP_FINISHED":
			delete(open, key("stepName"))
		}
	}
	if len(open) > 0 {
		t.Fatalf("left open: %v in %v", open, ty)
	}
}

func TestRunWithToolsAndState(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{agui.New()}})
	status, evs := run(t, s, "", "explorer", `{"threadId":"thread-0001","runId":"r1","messages":[{"id":"u1","role":"user","content":"explore venues"}],"tools":[],"context":[],"state":{}}`)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	wellFormed(t, evs)
	var calls []string
	snapshots := 0
	for _, ev := range evs {
		switch ev["type"] {
		case "TOOL_CALL_START":
			calls = append(calls, ev["toolCallName"].(string))
		case "STATE_SNAPSHOT":
			snapshots++
			if ev["snapshot"].(map[string]any)["orchestration"].(map[string]any)["activeStep"] != "Explore" {
				t.Fatalf("snapshot %v", ev)
			}
		}
	}
	if strings.Join(calls, ",") != "brainstorm,compare" || snapshots == 0 {
		t.Fatalf("calls %v, %d snapshots", calls, snapshots)
	}
	if last := evs[len(evs)-1]; last["outcome"].(map[string]any)["type"] != "success" || last["runId"] != "r1" {
		t.Fatalf("end %v", last)
	}
}

func TestApprovalIsAnInterrupt(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{agui.New()}, Keys: []string{"key-one", "key-two"}})
	_, evs := run(t, s, "key-one", "gatekeeper", `{"threadId":"thread-0002","runId":"r1","messages":[{"id":"u1","role":"user","content":"think about tea"}]}`)
	wellFormed(t, evs)
	out := evs[len(evs)-1]["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("outcome %v", out)
	}
	in := out["interrupts"].([]any)[0].(map[string]any)
	id := in["id"].(string)
	// Another key's thread of the same id is another session: nothing to
	// resume there.
	status, _ := run(t, s, "key-two", "gatekeeper", `{"threadId":"thread-0002","runId":"r2","messages":[],"resume":[{"interruptId":"`+id+`","status":"resolved","payload":{"approved":true}}]}`)
	if status != http.StatusNotFound {
		t.Fatalf("another key's resume: %d", status)
	}
	status, _ = run(t, s, "key-one", "gatekeeper", `{"threadId":"thread-0002","runId":"r2","messages":[],"resume":[{"interruptId":"`+id+`","status":"resolved"}]}`)
	if status != http.StatusBadRequest {
		t.Fatalf("a resume without a payload: %d", status)
	}
	_, evs = run(t, s, "key-one", "gatekeeper", `{"threadId":"thread-0002","runId":"r2","messages":[],"resume":[{"interruptId":"`+id+`","status":"resolved","payload":{"approved":true}}]}`)
	wellFormed(t, evs)
	results := 0
	for _, ev := range evs {
		if ev["type"] == "TOOL_CALL_RESULT" && ev["toolCallId"] == in["toolCallId"] {
			results++
		}
	}
	if results != 1 || evs[len(evs)-1]["outcome"].(map[string]any)["type"] != "success" {
		t.Fatalf("after the approval: %v", types(evs))
	}
}

func TestBadInput(t *testing.T) {
	s := edgetest.Start(t, edgetest.Options{Doors: []door.Door{agui.New()}})
	for _, tc := range []struct {
		agent, body string
		status      int
	}{
		{"nobody", `{"threadId":"thread-0003","runId":"r","messages":[{"role":"user","content":"hi"}]}`, 404},
		{"plain", `{"threadId":"x","runId":"r","messages":[{"role":"user","content":"hi"}]}`, 400},
		{"plain", `{"threadId":"thread-0003","messages":[{"role":"user","content":"hi"}]}`, 400},
		{"plain", `{"threadId":"thread-0003","runId":"r","messages":[{"role":"assistant","content":"hi"}]}`, 400},
		{"plain", `{"threadId":"thread-0003","runId":"r","messages":[],"resume":[{"interruptId":"a","status":"maybe"}]}`, 400},
		{"plain", `not json`, 400},
	} {
		if status, _ := run(t, s, "", tc.agent, tc.body); status != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.agent, tc.body, status, tc.status)
		}
	}
}
