package a2a

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

// TestAskedAgents: the work of an agent that a tool call asked is the
// task's progress (a status update with a progress data part), and a call
// that agent holds for approval is listed with the agent, its own tool
// and input, under the task agent's call.
func TestAskedAgents(t *testing.T) {
	k := newTracker(Task{ID: "t1", ContextID: "c1"})
	ev := chat.Event{Kind: chat.KindToolProgress, Progress: &chat.Progress{CallID: "call_1", Name: "ask_probe", Agent: "probe",
		Event: &chat.Event{Kind: chat.KindTextDelta, Text: "Tea."}}}
	out := k.add(ev)
	if len(out) != 1 || out[0].StatusUpdate == nil || out[0].StatusUpdate.Status.State != StateWorking {
		t.Fatalf("progress: %+v", out)
	}
	b, _ := json.Marshal(out[0].StatusUpdate.Status.Message.Parts)
	if !strings.Contains(string(b), `"progress":{"callId":"call_1","name":"ask_probe","agent":"probe","event":{"type":"text-delta","text":"Tea."}}`) {
		t.Fatalf("the progress part: %s", b)
	}
	parent := chat.ToolCall{ID: "call_1", Name: "ask_probe", Arguments: json.RawMessage(`{"message":"x"}`)}
	child := chat.ToolCall{ID: "c9", Name: "search", Arguments: json.RawMessage(`{"q":"tea"}`)}
	k.add(chat.Event{Kind: chat.KindApproval, ToolCall: &parent, Approval: &chat.Approval{ID: "approval-1", ToolCallID: "call_1", Agent: "probe", Call: &child}})
	out = k.add(chat.Event{Kind: chat.KindDone, FinishReason: chat.FinishApproval})
	last := out[len(out)-1].StatusUpdate
	b, _ = json.Marshal(last.Status.Message.Parts)
	if last.Status.State != StateInputRequired || !strings.Contains(string(b), `{"approvals":[{"id":"approval-1","toolCallId":"call_1","toolName":"search","input":{"q":"tea"},"agent":"probe"}]}`) {
		t.Fatalf("the input required: %s %s", last.Status.State, b)
	}
}
