// The README's commands, run as a newcomer types them from the repository
// root. This file is the only one of its package: the README is the
// module's, not a package's.
package agentdock_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/tools/search/searchtest"
)

// newcomerEnv is the environment of a newcomer's shell: this one without
// the settings that would change what the README promises (a provider key,
// a search service, a store, a config file) and without make's and the
// test run's own (GOWORK=off of make, a parent make's flags).
func newcomerEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasSuffix(k, "_API_KEY"), strings.HasPrefix(k, "LLM_"), strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "ANTHROPIC_"),
			strings.HasPrefix(k, "SEARCH"), strings.HasPrefix(k, "SEARXNG_"), strings.HasPrefix(k, "TAVILY_"), strings.HasPrefix(k, "BRAVE_"),
			strings.HasPrefix(k, "SERPER_"), strings.HasPrefix(k, "WIKIPEDIA_"), strings.HasPrefix(k, "REDIS_"), strings.HasPrefix(k, "OTEL_"),
			strings.HasPrefix(k, "API_KEY"), strings.HasPrefix(k, "MAKE"), strings.HasPrefix(k, "MFLAGS"),
			k == "GOWORK", k == "SESSION_STORE", k == "TEMPLATES_DIR", k == "AGENTDOCK_CONFIG", k == "MCP_SERVERS_FILE", k == "ADDR",
			k == "LOG_FORMAT", k == "LOG_LEVEL", k == "OFFLINE_MODEL_DELAY_MS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestREADMEEmbedding: `go run ./examples/embed`, as the README gives it,
// prints the turn with its tool results from the repository root, and
// the README shows the example's files as they are.
func TestREADMEEmbedding(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs the example")
	}
	doc := readme(t)
	if !strings.Contains(doc, "`go run ./examples/embed`") {
		t.Fatal("the README no longer gives `go run ./examples/embed`")
	}
	for _, f := range []string{"examples/embed/main.go", "examples/embed/travel.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, "\n"+string(b)+"```\n") {
			t.Errorf("the README does not show %s as it is", f)
		}
	}
	cmd := exec.Command("go", "run", "./examples/embed")
	cmd.Env = newcomerEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/embed: %v\n%s", err, out)
	}
	for _, want := range []string{
		"[weather: sunny in Paris]",
		"[packing: sunglasses and a light jacket]",
		"[guide__sights: the old town, the river and the market of Paris]",
		"## Plan a day in Paris",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// lines collects a process's output, and says when a line holds a text.
type lines struct {
	mu   sync.Mutex
	all  strings.Builder
	seen chan struct{}
	want string
}

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.all.WriteString(sc.Text() + "\n")
		if l.want != "" && strings.Contains(sc.Text(), l.want) {
			close(l.seen)
			l.want = ""
		}
		l.mu.Unlock()
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}

// TestREADMEQuickStart: `make run`, with the port the README says to set
// with ADDR, builds and serves the page, and logs what the README's "What
// you should see" shows (search on a fake Wikipedia, never the network).
func TestREADMEQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		testenv.Missing(t, "make is not installed (the README's quick start is `make run`)")
	}
	doc := readme(t)
	for _, want := range []string{"make run     # builds bin/agentdock and serves http://localhost:8080", "`ADDR=:9090 make run`"} {
		if !strings.Contains(doc, want) {
			t.Fatalf("the README no longer says %q", want)
		}
	}
	_, block, ok := strings.Cut(doc, "**What you should see** after `make run`")
	if ok {
		_, block, ok = strings.Cut(block, "```\n")
	}
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal("the README has no block of what `make run` logs")
	}

	wiki := searchtest.NewWikipedia()
	t.Cleanup(wiki.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command("make", "run")
	cmd.Env = newcomerEnv("ADDR="+addr, "WIKIPEDIA_URL="+wiki.URL)
	// make, the build and the server: one process group, stopped together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	out := &lines{seen: make(chan struct{}), want: "msg=serving"}
	go out.read(pr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	t.Cleanup(stop)

	wait := 9 * time.Minute // a first, cold build on a slow machine
	if d, ok := t.Deadline(); ok {
		wait = min(wait, time.Until(d)-time.Minute)
	}
	select {
	case <-out.seen:
	case err := <-exited:
		exited <- err
		t.Fatalf("make run ended (%v) before serving:\n%s", err, out)
	case <-time.After(wait):
		t.Fatalf("make run did not serve within %s:\n%s", wait, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "<title>AgentDock</title>") {
		t.Errorf("GET / answered %d:\n%.300s", res.StatusCode, page)
	}
	stop()

	log := out.String()
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		// What the README elides ("...") varies; the rest must be there,
		// with this test's address and Wikipedia.
		want, _, _ := strings.Cut(line, "...")
		want = strings.NewReplacer("addr=:8080", "addr="+addr, "url=https://en.wikipedia.org", "url="+wiki.URL).Replace(want)
		if !strings.Contains(log, want) {
			t.Errorf("make run's log lacks the README's %q:\n%s", want, log)
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the page did not answer in time")
	}
}
