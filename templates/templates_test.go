package templates_test

import (
	"io/fs"
	"os"
	"path"
	"testing"

	"github.com/agentdock-go/agentdock/template"
	"github.com/agentdock-go/agentdock/templates"
	"github.com/agentdock-go/agentdock/tools"
)

// TestEmbedsTemplatesOnly: the binary carries each shipped template.json and
// nothing else: the transcripts in templates/*/tests are for `agentdock
// test`, not for serving.
func TestEmbedsTemplatesOnly(t *testing.T) {
	var files []string
	err := fs.WalkDir(templates.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("embedded %v, want the four template.json files", files)
	}
	for _, f := range files {
		if path.Base(f) != "template.json" {
			t.Errorf("embedded %s, which is not a template", f)
		}
	}
	// Beside them on disk are the tests folders, which loading skips.
	if _, err := os.Stat("cognitive-reasoner/tests"); err != nil {
		t.Fatalf("the shipped templates have no tests folder: %v", err)
	}
	for _, fsys := range []fs.FS{templates.FS(), os.DirFS(".")} {
		results, err := template.LoadFS(fsys, ".", template.Config{Provided: tools.BuiltinNames()})
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 4 {
			t.Fatalf("loaded %d templates, want 4", len(results))
		}
		for _, r := range results {
			if r.Loaded == nil || len(r.Diagnostics) > 0 {
				t.Errorf("%s: %v", r.File, r.Diagnostics)
			}
		}
	}
}
