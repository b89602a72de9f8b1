package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/tools"
)

// TestServeLogsTemplateWarnings: at start, serve logs every warning of
// every template it loads, a misspelt key's with the key meant.
func TestServeLogsTemplateWarnings(t *testing.T) {
	var buf bytes.Buffer
	loaded, err := loadAgents("testdata/warned", tools.BuiltinNames(), nil, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range loaded {
		found = found || a.ID() == "typo"
	}
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
