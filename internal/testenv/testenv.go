// Package testenv finds the things tests need from outside the module: the
// shared specification beside the project, and programs such as
// redis-server. Locally a test without them is skipped with a one-line
// reason; in CI (CI=true) it fails instead, because there a skip would hide
// a missing install step.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/agentdock-go/agentdock/internal/proc"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips t with reason, or fails it in CI.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required in CI: %s", reason)
	}
	t.Skip(reason)
}

// ModuleRoot returns the module's root directory.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// SharedDir returns the shared specification directory (../shared from the
// module root), or skips/fails t when it is not there.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(ModuleRoot(), "..", "shared")
	if _, err := os.Stat(filepath.Join(dir, "spec", "orchestration.md")); err != nil {
		Missing(t, "../shared (the shared specification) is not beside the project")
	}
	return dir
}

// Node returns the path of node, or skips/fails t when it is not
// installed. The hostile MCP servers of the tests
// (tools/mcp/testdata/hostile) need nothing else.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed (the MCP tests run MCP servers written for node)")
	}
	return node
}

// HostileMCPServer returns node and the arguments that run the hostile MCP
// server of the tests (tools/mcp/testdata/hostile/server.js) with args.
func HostileMCPServer(t testing.TB, args ...string) (node string, argv []string) {
	t.Helper()
	return Node(t), append([]string{filepath.Join(ModuleRoot(), "tools", "mcp", "testdata", "hostile", "server.js")}, args...)
}

// MCPServers returns node and the node_modules directory of the real MCP
// servers the MCP tests run (tools/mcp/testdata/servers, installed by
// `make test` with npm ci), or skips/fails t when either is missing.
func MCPServers(t testing.TB) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed (the MCP tests run MCP servers from npm)")
	}
	modules = filepath.Join(ModuleRoot(), "tools", "mcp", "testdata", "servers", "node_modules")
	for _, pkg := range []string{"server-everything", "server-filesystem"} {
		if _, err := os.Stat(filepath.Join(modules, "@modelcontextprotocol", pkg, "dist", "index.js")); err != nil {
			Missing(t, "the MCP servers from npm are not installed: run `npm ci` in tools/mcp/testdata/servers (make test does)")
		}
	}
	return node, modules
}

// Process is a live process as /proc shows it.
type Process = proc.Process

// Processes lists the live processes (zombies left out), for the tests
// that check a child process was started or ended. It skips t where there
// is no /proc to read (not Linux).
func Processes(t testing.TB) []Process {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("processes are read from /proc")
	}
	ps, err := proc.List(true)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
