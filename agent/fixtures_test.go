package agent_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"
)

// TestAgentDockFixturesRunUnchanged: AgentDock's own templates load as they
// are and complete a turn with the offline model; tools this runtime lacks
// are reported and never offered.
func TestAgentDockFixturesRunUnchanged(t *testing.T) {
	dir := filepath.Join(testenv.SharedDir(t), "fixtures", "agentdock-templates")
	results, err := template.LoadPath(dir, template.Config{Provided: tools.BuiltinNames()})
	if err != nil {
		t.Fatal(err)
	}
	var loaded []*template.Loaded
	for _, r := range results {
		if r.Loaded == nil {
			t.Fatalf("%s: %v", r.File, r.Diagnostics.Err())
		}
		loaded = append(loaded, r.Loaded)
	}
	if len(loaded) != 3 {
		t.Fatalf("loaded %d fixtures, want 3", len(loaded))
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	agents := newAgents(t, store, offlineModels, loaded)
	for _, n := range agents.List() {
		t.Run(n.ID(), func(t *testing.T) {
			prompt := n.Template().ChatSettings.ChatPrompts[0]
			evs := turn(t, n, session.NewID(), prompt)
			for _, ev := range evs {
				switch ev.Kind {
				case chat.KindError:
					t.Fatalf("error event: %+v", ev.Error)
				case chat.KindOrchestration:
					for _, tool := range ev.Orchestration.OfferedTools {
						if !slices.Contains(tools.BuiltinNames(), tool) {
							t.Fatalf("offered %q, which this runtime does not provide", tool)
						}
					}
				}
			}
			if done := evs[len(evs)-1]; done.FinishReason != chat.FinishStop {
				t.Fatalf("finished with %q", done.FinishReason)
			}
			if strings.TrimSpace(text(evs)) == "" {
				t.Fatal("no answer")
			}
		})
	}
}
