package agent_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryDependencies keeps the library light: an embedder that runs
// agents in memory links none of the server's heavy dependencies (gin,
// go-redis, Prometheus, the OTLP exporters and gRPC). They live in
// packages of their own (server, session/redisstore, turnlog/redislog,
// telemetry/otelsetup), wired in cmd/server.
func TestLibraryDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	light := []string{"./", "../session", "../tools", "../template", "../orchestration", "../llmorch", "../llmorch/offline", "../llmorch/provider", "../examples/inmemory"}
	out, err := exec.Command(goTool, append([]string{"list", "-deps"}, light...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	heavy := []string{"github.com/gin-gonic/", "github.com/redis/go-redis/", "github.com/prometheus/", "go.opentelemetry.io/otel/exporters/", "google.golang.org/grpc"}
	for _, dep := range strings.Fields(string(out)) {
		for _, h := range heavy {
			if strings.HasPrefix(dep, h) {
				t.Errorf("the library (%s) depends on %s", strings.Join(light, " "), dep)
			}
		}
	}
}
