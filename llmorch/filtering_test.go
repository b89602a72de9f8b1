package llmorch_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// withFiltering is the orchestrated template with options.toolFiltering
// set to mode ("" leaves it out).
func withFiltering(mode string) string {
	if mode == "" {
		return orchestrated
	}
	return strings.Replace(orchestrated, `"options": {"maxSteps": 3}`, `"options": {"maxSteps": 3, "toolFiltering": "`+mode+`"}`, 1)
}

// TestToolFiltering plays one turn whose offer changes at every call: the
// default step (all four tools), a transition to After (reflect only), a
// refused call of a tool After does not offer, and the final answer (no
// tools). In stable mode every request carries the same tools and system
// prompt, byte for byte, and names the offered ones apart; in filter mode
// the tools sent are exactly the offered ones. In both, the note after the
// history says where the session is, and the call outside the offer is
// refused as the orchestration words it.
func TestToolFiltering(t *testing.T) {
	all := []string{"think", "reflect", "critique", "debate"}
	offers := [][]string{all, {"reflect"}, {"reflect"}, {}}
	tests := []struct {
		name      string
		template  string
		restricts bool
		stable    bool
	}{
		{"stable chosen", withFiltering("stable"), false, true},
		{"filter chosen", withFiltering("filter"), true, false},
		{"default, a model that restricts", withFiltering(""), true, true},
		{"default, a model that does not", withFiltering(""), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &scripted{replies: [][]string{{"think"}, {"debate"}, {"reflect"}, {"reflect"}}, restricts: tt.restricts}
			f, _ := newService(t, tt.template, llmorch.ServiceConfig{Model: model})
			evs := collect(f.svc.StreamWithOrchestration(context.Background(), f.start(t, "hello")))
			if len(model.reqs) != 4 {
				t.Fatalf("%d model calls, want 3 and the final answer", len(model.reqs))
			}
			first, _ := json.Marshal(model.reqs[0].Tools)
			for i, req := range model.reqs {
				if got := offeredNames(req); !slices.Equal(got, offers[i]) && !(len(got) == 0 && len(offers[i]) == 0) {
					t.Errorf("call %d: offered %v, want %v", i+1, got, offers[i])
				}
				if req.System != model.reqs[0].System {
					t.Errorf("call %d: the system prompt changed", i+1)
				}
				var names []string
				for _, s := range req.Tools {
					names = append(names, s.Name)
				}
				if tt.stable {
					if tools, _ := json.Marshal(req.Tools); string(tools) != string(first) {
						t.Errorf("call %d: tools %v differ from the first call's", i+1, names)
					}
					if !slices.Equal(names, all) || req.Offered == nil || !slices.Equal(req.Offered, offers[i]) && len(offers[i]) > 0 {
						t.Errorf("call %d: tools %v offered %v, want all four tools with the offer %v named apart", i+1, names, req.Offered, offers[i])
					}
				} else if req.Offered != nil || !slices.Equal(names, offers[i]) && len(offers[i]) > 0 || len(offers[i]) == 0 && len(names) > 0 {
					t.Errorf("call %d: tools %v offered %v, want only the offered %v", i+1, names, req.Offered, offers[i])
				}
			}
			if n := model.reqs[1].Note; !strings.Contains(n, "Active step: After") || !strings.Contains(n, "Tools you may use now: reflect") {
				t.Errorf("the second call's note does not say where the session is:\n%s", n)
			}
			if n := model.reqs[3].Note; !strings.Contains(n, "answer now, without tools") {
				t.Errorf("the final call's note does not ask for an answer:\n%s", n)
			}
			var refused *chat.ToolResult
			for _, ev := range evs {
				if ev.Kind == chat.KindToolResult && ev.ToolResult.Name == "debate" {
					refused = ev.ToolResult
				}
			}
			if refused == nil || !refused.NotRun || !strings.Contains(refused.Content, `Refused: tool "debate" is not available in step "After"`) {
				t.Fatalf("the call outside the offer: %+v", refused)
			}
			sess, _ := f.store.Get(context.Background(), f.id)
			if !sess.State.RecentlyUsedTools.Equal("think", "reflect") {
				t.Errorf("tools recorded %v, want think and reflect (debate refused, the final call's reflect refused)", sess.State.RecentlyUsedTools)
			}
		})
	}
}
