package agent_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLibraryDependencies keeps the library light. An embedder that runs
// agents in memory links none of the server's heavy dependencies (gin,
// go-redis, Prometheus, the OTLP exporters and gRPC), nor does one that
// runs their turns on the turn runtime (turns) or serves them over a door
// of its own (server/door, server/a2a, server/agui, server/mcpserver,
// server/openai: the MCP server over stdio runs on the runtime alone, and
// no door links r3labs/sse, the web chat's writer), and one that serves
// the HTTP API links gin but still no Redis or exporters. Those live in
// packages of their own (session/redisstore, turnlog/redislog,
// responses/redisstore, telemetry/otelsetup), wired in cmd/server.
func TestLibraryDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	backends := []string{"github.com/redis/go-redis/", "github.com/prometheus/", "go.opentelemetry.io/otel/exporters/", "google.golang.org/grpc"}
	for _, tt := range []struct {
		packages  []string
		forbidden []string
	}{
		{[]string{"./", "../session", "../tools", "../template", "../orchestration", "../llmorch", "../llmorch/offline", "../llmorch/provider", "../examples/inmemory"},
			append([]string{"github.com/gin-gonic/"}, backends...)},
		{[]string{"../turns", "../server/door", "../server/a2a", "../server/agui", "../server/mcpserver", "../server/openai"},
			append([]string{"github.com/gin-gonic/", "github.com/r3labs/"}, backends...)},
		{[]string{"../server", "../examples/mount"}, backends},
	} {
		out, err := exec.Command(goTool, append([]string{"list", "-deps"}, tt.packages...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/agentdock-go/agentdock/server" && !slices.Contains(tt.packages, "../server") && !slices.Contains(tt.packages, "../examples/mount") {
				t.Errorf("%s depend on the HTTP server", strings.Join(tt.packages, " "))
			}
			for _, f := range tt.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depend on %s", strings.Join(tt.packages, " "), dep)
				}
			}
		}
	}
}
