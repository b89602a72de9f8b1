package scenario

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/tools"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/session"
)

func runFiles(t *testing.T, files []string, store session.Store) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no scenario files found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			engine, err := sc.Engine(template.Config{Provided: tools.BuiltinNames()})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), sc, engine, store)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Failed() {
				var b strings.Builder
				rep.Print(&b)
				t.Errorf("%s\n%s", strings.Join(rep.Mismatches(), "\n"), b.String())
			}
		})
	}
}

// TestSharedScenarios plays the contract's worked examples.
func TestSharedScenarios(t *testing.T) {
	dir := filepath.Join(testenv.SharedDir(t), "spec", "scenarios")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	store := session.NewMemory(session.Config{})
	defer store.Close()
	runFiles(t, files, store)
}

// TestOwnScenarios plays the project's scenarios, one or more per rule of
// the contract, including the lock-in opt-in.
func TestOwnScenarios(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	store := session.NewMemory(session.Config{})
	defer store.Close()
	runFiles(t, files, store)
}

func TestMismatchIsReported(t *testing.T) {
	sc, err := Parse("m.json", []byte(`{"name":"m","tools":["a"],"orchestration":{"steps":[]},
		"events":[{"user":"hi","expect":{"activeStep":"Nope","allowedTools":["b"]}},{"tool":"a","expect":{"rejected":true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	engine, err := sc.Engine(template.Config{Provided: tools.BuiltinNames()})
	if err != nil {
		t.Fatal(err)
	}
	store := session.NewMemory(session.Config{})
	defer store.Close()
	rep, err := Run(context.Background(), sc, engine, store)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Mismatches(), "\n")
	for _, want := range []string{
		`events[0] user "hi": activeStep: expected Nope, got (none)`,
		`events[0] user "hi": allowedTools: expected [b], got [a]`,
		`events[1] tool a: rejected: expected true, got false`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("mismatches do not contain %q:\n%s", want, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"unknown expectation", `{"name":"x","tools":[],"events":[{"user":"a","expect":{"activeStp":"A"}}]}`, `unknown field "activeStp"`},
		{"two kinds in one event", `{"name":"x","tools":[],"events":[{"user":"a","tool":"b","expect":{}}]}`, `events[0]: an event needs exactly one of user, tool, answer and usage`},
		{"syntax", "{\n\"name\": }", `line 2, column 9: malformed JSON`},
		{"no agent", `{"name":"x","events":[]}`, `a scenario needs a template, or tools and an orchestration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.json", []byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "bad.json: ") {
				t.Fatalf("error %v, want it to name bad.json and contain %q", err, tt.want)
			}
		})
	}
}
