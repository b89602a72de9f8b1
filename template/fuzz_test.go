package template

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentdock-go/agentdock/orchestration"
)

// FuzzLoad feeds arbitrary bytes to the template loader: it must never
// panic, must return an agent or an error diagnostic, and a loaded agent
// must survive a few events.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"agentId":"a","name":"A","nodes":["llm.openai","think"],"orchestration":{"steps":[{"name":"S","conditions":[{"type":"message_regex","value":"x+"}],"sequence":["think",["think"]]}]}}`))
	f.Add([]byte(`{"agentId":"a","name":"A","personality":"p","orchestration":{"stepScope":"turn","steps":[{"name":"D","isDefault":true}]}}`))
	f.Add([]byte(`{"agentId":`))
	f.Add([]byte(`[]`))
	if paths, _ := filepath.Glob("../../shared/fixtures/agentdock-templates/*/template.json"); len(paths) > 0 {
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agent, ds := Load("fuzz.json", data, Config{Provided: []string{"think", "search"}})
		if agent == nil {
			if !ds.HasErrors() {
				t.Fatal("no agent and no error")
			}
			return
		}
		e := agent.Engine
		s, _ := e.Apply(orchestration.State{}, orchestration.UserMessage("hello"))
		for _, tool := range agent.Template.Tools() {
			s, _ = e.Apply(s, orchestration.ToolUsed(tool))
		}
		_ = e.Snapshot(s)
		if _, err := agent.Template.MarshalJSON(); err != nil {
			t.Fatalf("a loaded template does not marshal: %v", err)
		}
	})
}
