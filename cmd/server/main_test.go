package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/session/redistest"
)

func run(args ...string) (int, string) {
	var out bytes.Buffer
	code := dispatch(context.Background(), args, &out, &out)
	return code, out.String()
}

// TestValidateFixtures: AgentDock's own templates load, with the warnings
// the contract asks for.
func TestValidateFixtures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.SharedDir(t), "fixtures", "agentdock-templates", "*", "template.json"))
	code, out := run(append([]string{"validate"}, files...)...)
	if code != 0 {
		t.Fatalf("validate exited %d:\n%s", code, out)
	}
	for _, want := range []string{
		// Steps that can never activate.
		`orchestrated-agent/template.json: orchestration.steps[1] "Research Sequence": conditions: a step without conditions that is not the default can never activate`,
		`orchestrated-agent/template.json: orchestration.steps[6] "Comparison Mode": conditions: a step without conditions`,
		// Identically conditioned steps.
		`dr-house/template.json: orchestration.steps[3] "Web Search Mode": conditions: this step can never win: the earlier step orchestration.steps[1] "Basic Medical Research" has identical conditions`,
		`dr-house/template.json: orchestration.steps[4] "Deep Research Mode": conditions: this step can never win: the earlier step orchestration.steps[2] "Complex Medical Investigation" has identical conditions`,
		// Tools the runtime does not provide, and the sequence positions
		// that need them, which no call can pass.
		`dr-house/template.json: nodes[3]: tool "pubmed_search" is not provided by this runtime`,
		`dr-house/template.json: orchestration.steps[1] "Basic Medical Research": sequence[1]: no tool of position 2 (pubmed_search) is provided by this runtime, so the sequence cannot pass it`,
		"cognitive-reasoner/template.json: ok (0 errors, 0 warnings)",
		"3 templates: 0 errors, 16 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q\n%s", want, out)
		}
	}
}

// TestValidateMisspeltKeys: a misspelt key inside a step is an error
// (exit 1) naming its path and the key meant; one at the top level is a
// warning with the key meant.
func TestValidateMisspeltKeys(t *testing.T) {
	code, out := run("validate", "testdata/misspelt.json")
	if code != 1 {
		t.Fatalf("validate exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		`error: testdata/misspelt.json: orchestration.steps[1].availableTool: unknown key; did you mean "availableTools"? (step "Research")`,
		`warning: testdata/misspelt.json: personalty: unknown key; did you mean "personality"?`,
		"testdata/misspelt.json: INVALID (1 errors, 1 warnings)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q\n%s", want, out)
		}
	}
}

// TestValidateMisspeltFeature: a misspelt key that would drop a whole
// feature (here the orchestration and the approvals) is an error, exit 1,
// naming the key meant; the template would otherwise load with neither.
func TestValidateMisspeltFeature(t *testing.T) {
	code, out := run("validate", "testdata/orchestraton.json")
	if code != 1 {
		t.Fatalf("validate exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		`error: testdata/orchestraton.json: orchestraton: unknown key; did you mean "orchestration"?`,
		`error: testdata/orchestraton.json: options.requireAproval: unknown key; did you mean "requireApproval"?`,
		"testdata/orchestraton.json: INVALID (2 errors, 0 warnings)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q\n%s", want, out)
		}
	}
}

func TestValidateShippedTemplates(t *testing.T) {
	code, out := run("validate", filepath.Join(testenv.ModuleRoot(), "templates"))
	if code != 0 || !strings.Contains(out, "4 templates: 0 errors, 0 warnings") {
		t.Fatalf("validate templates/ exited %d:\n%s", code, out)
	}
}

func TestValidateErrorsExitOne(t *testing.T) {
	code, out := run("validate", "testdata/mismatch.json")
	if code != 1 || !strings.Contains(out, "agentId: required") {
		t.Fatalf("a file that is no template: exit %d\n%s", code, out)
	}
	if code, _ := run("validate"); code != 2 {
		t.Fatalf("validate without paths exited %d, want 2 (usage)", code)
	}
}

func TestSimulateExitCodes(t *testing.T) {
	own, _ := filepath.Glob(filepath.Join(testenv.ModuleRoot(), "scenario", "testdata", "*.json"))
	if code, out := run(append([]string{"simulate", "-q"}, own...)...); code != 0 {
		t.Fatalf("own scenarios: exit %d\n%s", code, out)
	}
	code, out := run("simulate", "testdata/mismatch.json")
	if code != 1 || !strings.Contains(out, "MISMATCH allowedTools: expected [a], got [b]") {
		t.Fatalf("mismatch: exit %d, want 1 with expected vs got\n%s", code, out)
	}
	code, out = run("simulate", "testdata/bad-template-ref.json")
	if code != 2 || !strings.Contains(out, "does-not-exist.json") {
		t.Fatalf("unreadable template: exit %d, want 2\n%s", code, out)
	}
	if code, out := run("simulate", "testdata/no-such-file.json"); code != 2 {
		t.Fatalf("missing scenario: exit %d, want 2\n%s", code, out)
	}
	if code, out := run("simulate", "--store", "bogus://x", "testdata/mismatch.json"); code != 2 {
		t.Fatalf("bad store URL: exit %d, want 2\n%s", code, out)
	}
}

func TestUnknownCommand(t *testing.T) {
	if code, out := run("frobnicate"); code != 2 || !strings.Contains(out, `unknown command "frobnicate"`) {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestSimulateAgainstRedis: the contract's scenarios pass against a real
// redis-server, and the sessions they leave expire with the configured TTL.
func TestSimulateAgainstRedis(t *testing.T) {
	scenarios, _ := filepath.Glob(filepath.Join(testenv.SharedDir(t), "spec", "scenarios", "*.json"))
	srv := redistest.Start(t)
	t.Setenv("SESSION_TTL_SECONDS", "3600")
	if code, out := run(append([]string{"simulate", "-q", "--store", srv.URL()}, scenarios...)...); code != 0 {
		t.Fatalf("simulate against redis exited %d:\n%s", code, out)
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	keys, err := client.Keys(ctx, "orchestration-state:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < len(scenarios) {
		t.Fatalf("%d keys left for %d scenarios: %v", len(keys), len(scenarios), keys)
	}
	for _, k := range keys {
		ttl, err := client.TTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 3590*time.Second || ttl > 3600*time.Second {
			t.Errorf("%s has TTL %v, want about 3600s", k, ttl)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if code, out := run("healthcheck", "--addr", addr); code != 0 {
		t.Fatalf("healthy server: exit %d\n%s", code, out)
	}
	status = http.StatusServiceUnavailable
	if code, out := run("healthcheck", "--addr", addr); code != 1 || !strings.Contains(out, "503") {
		t.Fatalf("unhealthy server: exit %d\n%s", code, out)
	}
	srv.Close()
	if code, _ := run("healthcheck", "--addr", addr); code != 1 {
		t.Fatalf("no server: exit %d, want 1", code)
	}
}

// TestHelpListsCommands: every way of asking for help lists every command
// and exits 0; a command's own -h gives its flags.
func TestHelpListsCommands(t *testing.T) {
	for _, arg := range []string{"help", "-h", "-help", "--help"} {
		code, out := run(arg)
		if code != 0 {
			t.Errorf("agentdock %s exited %d", arg, code)
		}
		for _, c := range commands() {
			if !strings.Contains(out, "\n  "+c.name+" ") {
				t.Errorf("agentdock %s does not list %s:\n%s", arg, c.name, out)
			}
		}
		if strings.Contains(out, "Usage of serve") {
			t.Errorf("agentdock %s printed serve's flags:\n%s", arg, out)
		}
	}
	if code, out := run("serve", "--help"); code != 0 || !strings.Contains(out, "-addr") {
		t.Errorf("serve --help exited %d:\n%s", code, out)
	}
}

// TestEveryCommandHelp: `agentdock COMMAND -h` (and --help) exits 0 for
// every command and subcommand, and its usage names the command.
func TestEveryCommandHelp(t *testing.T) {
	names := map[string]string{"mcp": "agentdock mcp list", "mcp list": "Usage of mcp list", "mcp serve": "Usage of mcp serve",
		"serve": "Usage of serve", "healthcheck": "Usage of healthcheck", "validate": "usage: agentdock validate",
		"simulate": "usage: agentdock simulate", "test": "agentdock test", "mockllm": "agentdock mockllm"}
	for _, c := range commands() {
		if _, ok := names[c.name]; !ok {
			t.Errorf("command %s has no expected usage here", c.name)
		}
	}
	for cmd, want := range names {
		for _, flag := range []string{"-h", "--help"} {
			code, out := run(append(strings.Fields(cmd), flag)...)
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("agentdock %s %s exited %d, want 0 and %q:\n%s", cmd, flag, code, want, out)
			}
		}
	}
	if code, out := run("mcp", "serve", "-h"); strings.Contains(out, "Usage of serve") {
		t.Errorf("mcp serve -h (exit %d) calls itself serve:\n%s", code, out)
	}
}

// TestServeBusyAddress: a taken address is reported, with what to do,
// before anything says it serves.
func TestServeBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, out := run("serve", "--addr", ln.Addr().String())
	if code != 1 || !strings.Contains(out, "address already in use") || !strings.Contains(out, "--addr") || strings.Contains(out, "msg=serving") {
		t.Fatalf("serve on a busy address exited %d:\n%s", code, out)
	}
}
