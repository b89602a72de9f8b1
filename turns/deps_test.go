package turns_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/internal/testenv"
)

// TestNoHTTPFrameworkUnderTheRuntime: the turn runtime, and every package
// of the module it imports, import neither gin nor r3labs/sse: those are
// the HTTP server's and the web chat's (package server), so that a door,
// the MCP server over stdio or a Go program runs turns without them. It
// reads the import graph as the go command sees it (go list -deps), so a
// package added under the runtime is checked without being listed here.
func TestNoHTTPFrameworkUnderTheRuntime(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/agentdock-go/agentdock"
	forbidden := []string{"github.com/gin-gonic/", "github.com/r3labs/"}
	var ours []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if pkg != module && !strings.HasPrefix(pkg, module+"/") {
			continue
		}
		ours = append(ours, strings.TrimPrefix(pkg, module+"/"))
		for _, imp := range strings.Fields(imports) {
			for _, f := range forbidden {
				if strings.HasPrefix(imp, f) {
					t.Errorf("%s, under the turn runtime, imports %s", pkg, imp)
				}
			}
		}
		if strings.HasPrefix(pkg, module+"/server") {
			t.Errorf("the turn runtime depends on %s, an HTTP package", pkg)
		}
	}
	if len(ours) < 2 || ours[len(ours)-1] != "turns" {
		t.Fatalf("go list -deps did not list the runtime last among its module's packages: %v", ours)
	}
	t.Logf("%d packages of the module under the runtime: %s", len(ours), strings.Join(ours, " "))
}
