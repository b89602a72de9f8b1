package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/internal/testenv"
)

// TestTestCommand: `agentdock test` passes the shipped templates'
// transcripts, fails a wrong expectation with the turn, the model call,
// expected and got, and tells unreadable transcripts apart.
func TestTestCommand(t *testing.T) {
	root := testenv.ModuleRoot()
	code, out := run("test", "-q", filepath.Join(root, "templates"))
	if code != 0 || !strings.Contains(out, "7 passed, 0 failed") {
		t.Fatalf("test templates/: exit %d\n%s", code, out)
	}

	code, out = run("test", "testdata/wrong-transcript.json")
	if code != 1 {
		t.Fatalf("a wrong expectation: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"FAIL a wrong expectation, to see the command fail (testdata/wrong-transcript.json)",
		`turn 1 "Critique my plan to learn Go in a week" -> step=EvaluationMode seq=1`,
		"MISMATCH model call 2 of 2: offered: expected [reflect], got [debate]",
		"0 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out = run("test", "testdata/mismatch.json")
	if code != 2 || !strings.Contains(out, "ERROR testdata/mismatch.json: ") {
		t.Fatalf("not a transcript: exit %d, want 2\n%s", code, out)
	}
	if code, _ := run("test"); code != 2 {
		t.Fatalf("test without paths exited %d, want 2 (usage)", code)
	}
	if code, out := run("test", "testdata"); code != 2 || !strings.Contains(out, "no transcripts") {
		t.Fatalf("a directory without tests folders: exit %d\n%s", code, out)
	}
}

// TestTestCommandAgentDock runs the AgentDock templates' transcripts, which
// reference ../shared.
func TestTestCommandAgentDock(t *testing.T) {
	testenv.SharedDir(t)
	code, out := run("test", "-q", filepath.Join(testenv.ModuleRoot(), "transcript", "testdata", "agentdock"))
	if code != 0 || !strings.Contains(out, "3 passed, 0 failed") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestValidateNamesTheStepOfATypedField: a field of the wrong JSON type is
// reported with its step, as other step errors are.
func TestValidateNamesTheStepOfATypedField(t *testing.T) {
	code, out := run("validate", "testdata/typed-field.json")
	want := `testdata/typed-field.json: line 9, column 84: orchestration.steps[1] "EvaluationMode": conditions[0].window: expected int, found a JSON string`
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want 1 and\n  %s\ngot\n%s", code, want, out)
	}
}
