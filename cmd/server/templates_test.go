package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/agent"
)

// TestServeLogsTemplateWarnings: at start, serve logs every warning of
// every template it loads, a misspelt key's with the key meant.
func TestServeLogsTemplateWarnings(t *testing.T) {
	var buf bytes.Buffer
	agents, err := loadAgents(t.Context(), "testdata/warned", agent.Options{}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, found := agents.Get("typo")
	if !found {
		t.Fatalf("the template with warnings was not loaded:\n%s", buf.String())
	}
	for _, want := range []string{
		`personalty: unknown key; did you mean \"personality\"?`,
		`options.maxStep: unknown key; did you mean \"maxSteps\"?`,
	} {
		if !strings.Contains(buf.String(), "template warning") || !strings.Contains(buf.String(), want) {
			t.Errorf("the start-up log lacks %s:\n%s", want, buf.String())
		}
	}
}

// TestServeLoadsAsLoad: serve loads its agents through agent.Load, with
// its rules: a node that misspells a tool is an error naming the file,
// the field and the tool meant, and its template is skipped while the
// others are served (a template asking it goes too); a node naming a tool
// this runtime lacks is a warning, and its agent is served without it; a
// template whose agentId a shipped one has replaces it. validate says the
// same of each.
func TestServeLoadsAsLoad(t *testing.T) {
	dir := t.TempDir()
	for id, src := range map[string]string{
		"slip":    `{"agentId": "slip", "name": "Slip", "nodes": ["llm.openai", "thnik"]}`,
		"asker":   `{"agentId": "asker", "name": "Asker", "nodes": ["llm.openai", "ask_slip"], "agents": {"ask_slip": {"agent": "slip"}}}`,
		"lacking": `{"agentId": "lacking", "name": "Lacking", "nodes": ["llm.openai", "think", "pubmed_search"]}`,
		"planner": `{"agentId": "planner", "name": "My Planner", "nodes": ["llm.openai", "search"]}`,
	} {
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, "template.json"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf syncBuffer
	agents, err := loadAgents(t.Context(), dir, agent.Options{}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range agents.List() {
		ids = append(ids, a.ID())
	}
	slices.Sort(ids)
	if want := []string{"cognitive-reasoner", "lacking", "planner", "research-assistant", "research-lead"}; !slices.Equal(ids, want) {
		t.Errorf("agents %v, want %v", ids, want)
	}
	if p, _ := agents.Get("planner"); p.Template().Name != "My Planner" {
		t.Errorf("the shipped planner was not replaced")
	}
	logs := buf.String()
	for _, want := range []string{
		`level=ERROR msg="template error" problem="` + filepath.Join(dir, "slip", "template.json") + `: nodes[1]: tool \"thnik\" is not provided; did you mean \"think\"?`,
		`level=ERROR msg="template skipped" file=` + filepath.Join(dir, "slip", "template.json"),
		`level=ERROR msg="template error" problem="` + filepath.Join(dir, "asker", "template.json") + `: agents.ask_slip.agent: no agent \"slip\" is loaded`,
		`level=WARN msg="template warning" problem="` + filepath.Join(dir, "lacking", "template.json") + `: nodes[2]: tool \"pubmed_search\" is not provided by this runtime; it will not be offered to the model"`,
		`msg="template replaces a shipped one" agent=planner`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the start-up log lacks %s:\n%s", want, logs)
		}
	}
	code, out := run("validate", "--no-mcp", filepath.Join(dir, "slip"), filepath.Join(dir, "lacking"))
	if code != 1 || !strings.Contains(out, `error: `+filepath.Join(dir, "slip", "template.json")+`: nodes[1]: tool "thnik" is not provided; did you mean "think"?`) ||
		!strings.Contains(out, `warning: `+filepath.Join(dir, "lacking", "template.json")+`: nodes[2]: tool "pubmed_search" is not provided by this runtime`) {
		t.Errorf("validate: exit %d\n%s", code, out)
	}
}
