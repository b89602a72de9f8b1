// Package testenv finds the things tests need from outside the module: the
// shared specification beside the project, and programs such as
// redis-server. Locally a test without them is skipped with a one-line
// reason; in CI (CI=true) it fails instead, because there a skip would hide
// a missing install step.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
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
