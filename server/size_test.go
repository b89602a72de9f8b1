package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds the package's own code (its non-test .go files): the
// HTTP API and the web chat's stream. What grows past it is a concern of
// its own, which belongs in a package of its own, as the turn runtime
// (package turns) and every door (server/openai, server/a2a...) are.
const maxLines = 5000

// TestPackageSize: the package's non-test .go files total at most
// maxLines lines.
func TestPackageSize(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += bytes.Count(b, []byte("\n"))
	}
	if total > maxLines {
		t.Errorf("package server's non-test files hold %d lines, over %d: move a concern into a package of its own", total, maxLines)
	}
	t.Logf("package server: %d lines in its non-test files (at most %d)", total, maxLines)
}
