package llmorch

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

func TestKeepAnswered(t *testing.T) {
	var list []session.Approval
	for i := range MaxAnsweredApprovals + 5 {
		list = append(list, session.Approval{ID: fmt.Sprint("a", i), Status: session.ApprovalApproved, Call: chat.ToolCall{Name: "x", Arguments: json.RawMessage(`{"big":1}`)}})
	}
	list = append(list[:3:3], append([]session.Approval{{ID: "waiting", Status: session.ApprovalPending, Call: chat.ToolCall{Arguments: json.RawMessage(`{"q":1}`)}}}, list[3:]...)...)
	got := KeepAnswered(list)
	if len(got) != MaxAnsweredApprovals+1 {
		t.Fatalf("kept %d, want %d answered and the pending one", len(got), MaxAnsweredApprovals)
	}
	if got[0].ID != "waiting" || string(got[0].Call.Arguments) != `{"q":1}` {
		t.Fatalf("the pending approval was dropped or stripped: %+v", got[0])
	}
	if got[1].ID != "a5" || got[len(got)-1].ID != fmt.Sprint("a", MaxAnsweredApprovals+4) {
		t.Fatalf("not the newest answered kept: %s .. %s", got[1].ID, got[len(got)-1].ID)
	}
	for _, a := range got[1:] {
		if a.Call.Arguments != nil {
			t.Fatalf("an answered approval keeps its arguments: %+v", a)
		}
	}
}

func TestDeniedResult(t *testing.T) {
	call := chat.ToolCall{ID: "c1", Name: "search"}
	r := DeniedResult(call, "too costly")
	if !r.Denied || !r.IsError || !r.NotRun || r.CallID != "c1" || !strings.Contains(r.Content, "declined") || !strings.HasSuffix(r.Content, "too costly") {
		t.Fatalf("DeniedResult = %+v", r)
	}
	if r := DeniedResult(call, ""); strings.Contains(r.Content, "reason") {
		t.Fatalf("without a reason: %q", r.Content)
	}
	if m := ToolMessage(r); m.Role != chat.RoleTool || !m.Denied || !m.IsError || m.ToolCallID != "c1" {
		t.Fatalf("ToolMessage = %+v", m)
	}
}
