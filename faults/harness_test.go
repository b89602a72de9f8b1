package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/tools/search/searchtest"
)

// serverBin is the agentdock binary TestMain built (or found in
// AGENTDOCK_BIN) for every test.
var serverBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// wikipedia is what the servers' search asks when a test gives it no
// other service: a local fake, never the network.
var wikipedia *searchtest.Wikipedia

func runMain(m *testing.M) int {
	wikipedia = searchtest.NewWikipedia()
	defer wikipedia.Close()
	// AGENTDOCK_BIN runs the tests against a binary built elsewhere (as the
	// e2e tests do), e.g. `make build`'s.
	if bin := os.Getenv("AGENTDOCK_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "faults: AGENTDOCK_BIN:", err)
			return 1
		}
		serverBin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "agentdock-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	serverBin = filepath.Join(dir, "agentdock")
	cmd := exec.Command("go", "build", "-o", serverBin, "./cmd/server")
	cmd.Dir = testenv.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: go build ./cmd/server: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// slow skips t unless AGENTDOCK_SLOW_FAULTS=1 (`make faults`). The slow
// variants are not a missing component, so they skip in CI too.
func slow(t testing.TB) {
	t.Helper()
	if os.Getenv("AGENTDOCK_SLOW_FAULTS") != "1" {
		t.Skip("slow fault variant: set AGENTDOCK_SLOW_FAULTS=1 (make faults)")
	}
}

// agentID is the agent of the faults template.
const agentID = "faults"

// faultsTemplate is a plain agent with the think tool and no orchestration
// steps: the tests break the runtime's path (model, store, streams), not a
// template's conditions.
const faultsTemplate = `{
  "version": "1.0",
  "agentId": "faults",
  "name": "Faults",
  "description": "The fault tests' agent: answers through the mock model, with the think tool.",
  "personality": ["You answer briefly."],
  "nodes": ["llm.openai", "think"],
  "nodeConfigurations": {"llm.openai": {"model": "mock-model", "temperature": 0.2, "maxTokens": 256}},
  "options": {"maxSteps": 4}
}
`

// writeTemplate writes the faults template into a new directory for
// TEMPLATES_DIR.
func writeTemplate(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, agentID), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, agentID, "template.json"), []byte(faultsTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// newModel starts a mock model server for the test; scripts are queued
// with Enqueue, and the default answers when the queue is empty.
func newModel(t testing.TB, opts ...mockllm.Option) *mockllm.Server {
	t.Helper()
	m := mockllm.New(opts...)
	t.Cleanup(m.Close)
	return m
}

// modelEnv points the server's openai provider at m.
func modelEnv(m *mockllm.Server) []string {
	return []string{"LLM_PROVIDER=openai", "LLM_BASE_URL=" + m.URL() + "/v1", "OPENAI_API_KEY=faults-test-key"}
}

// serverProc is one `agentdock serve` child process.
type serverProc struct {
	t       testing.TB
	cmd     *exec.Cmd
	addr    string
	logPath string
	exited  chan struct{}
	exitErr error
}

// startServer runs `agentdock serve` on a free loopback port with
// LOG_LEVEL=debug, its log in a file (shown when the test fails), the
// faults template in TEMPLATES_DIR and the memory store, then env (later
// entries win, so env may replace any of these, e.g. SESSION_STORE).
// It waits for /healthz. Calling it twice with the same env gives two
// replicas. Cleanup sends SIGTERM, then SIGKILL after five seconds.
func startServer(t testing.TB, env ...string) *serverProc {
	t.Helper()
	tdir := writeTemplate(t)
	for attempt := 1; ; attempt++ {
		p, err := tryStartServer(t, tdir, env)
		if err == nil {
			return p
		}
		// Another process can take the port between the probe and the
		// server's bind: try again on a new one.
		if attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			continue
		}
		t.Fatal(err)
	}
}

func tryStartServer(t testing.TB, tdir string, extra []string) (*serverProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(t.TempDir(), "server.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"ADDR=" + addr,
		"LOG_LEVEL=debug",
		"LOG_FORMAT=json",
		"TEMPLATES_DIR=" + tdir,
		"SESSION_STORE=memory://",
		"WIKIPEDIA_URL=" + wikipedia.URL,
		"OTEL_TRACES_EXPORTER=none",
		"OTEL_METRICS_EXPORTER=none",
		"OTEL_LOGS_EXPORTER=none",
		// Stop waits 5 s for the exit: a turn still running with the
		// memory store is waited for 1.5 s, then cancelled.
		"SHUTDOWN_TIMEOUT=3s",
	}
	cmd := exec.Command(serverBin, "serve")
	cmd.Env = append(env, extra...) // exec keeps the last of duplicate keys
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", serverBin, err)
	}
	p := &serverProc{t: t, cmd: cmd, addr: addr, logPath: logPath, exited: make(chan struct{})}
	go func() { p.exitErr = cmd.Wait(); lf.Close(); close(p.exited) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("log of the server on %s (its last 60 lines):\n%s", p.addr, logTail(p.Log(), 60))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !p.Alive() {
			return nil, fmt.Errorf("agentdock serve exited during start-up (%v):\n%s", p.exitErr, p.Log())
		}
		res, err := http.Get(p.URL() + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("agentdock serve on %s did not answer /healthz within 30s:\n%s", addr, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234.
func (p *serverProc) URL() string { return "http://" + p.addr }

// Alive reports whether the process still runs.
func (p *serverProc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill ends the process with SIGKILL (a crash: nothing is flushed) and
// waits for it.
func (p *serverProc) Kill() {
	if !p.Alive() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends SIGTERM (graceful shutdown) and waits; after five seconds it
// kills the process and fails the test, since a drain must end well within
// that with the tests' short turns.
func (p *serverProc) Stop() {
	if !p.Alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("agentdock serve on %s did not exit within 5s of SIGTERM; killed it", p.addr)
	}
}

// Log returns the server's log so far.
func (p *serverProc) Log() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(b)
}

// logTail is the last n lines of log, without go-redis's dial retries,
// which drown everything else while Redis is down.
func logTail(log string, n int) string {
	var lines []string
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "failed to dial after") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// frame is one SSE event of a turn stream.
type frame struct {
	ID   string
	Data string
	// At is when the client read the frame's end.
	At time.Time
}

// Type is the frame's "type" field ("[DONE]" for the last frame, "" when
// the data is not a JSON object).
func (f frame) Type() string {
	if f.Data == "[DONE]" {
		return f.Data
	}
	var v struct{ Type string }
	if json.Unmarshal([]byte(f.Data), &v) != nil {
		return ""
	}
	return v.Type
}

// Field returns a top-level string field of the frame's JSON ("" when
// absent).
func (f frame) Field(name string) string {
	var v map[string]any
	if json.Unmarshal([]byte(f.Data), &v) != nil {
		return ""
	}
	s, _ := v[name].(string)
	return s
}

// stream is a client's view of one SSE answer; a goroutine reads it into
// frames, so that Next can wait with a timeout.
type stream struct {
	t      testing.TB
	Status int
	Header http.Header
	// Body is the whole answer of a non-200 response (a JSON error).
	Body string

	res    *http.Response
	frames chan frame
	// err is why reading stopped (io.EOF at a clean end); set before
	// frames is closed.
	err  error
	once sync.Once
}

// chat posts a plain turn {"message","sessionId"} to /api/chat/:agentId and
// fails the test unless the answer is a 200 stream.
func chat(t testing.TB, base, agent, sessionID, message string) *stream {
	t.Helper()
	s := tryChat(t, base, agent, sessionID, message)
	if s.Status != http.StatusOK {
		t.Fatalf("POST /api/chat/%s: %d %s", agent, s.Status, s.Body)
	}
	return s
}

// tryChat is chat without the status check: a non-200 answer has Status
// and Body set and no frames.
func tryChat(t testing.TB, base, agent, sessionID, message string) *stream {
	t.Helper()
	return tryChatBusy(t, base, agent, sessionID, message, "")
}

// tryChatBusy is tryChat with a busy policy ("": the server's default).
func tryChatBusy(t testing.TB, base, agent, sessionID, message, busy string) *stream {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"message": message, "sessionId": sessionID, "busy": busy})
	req, err := http.NewRequest(http.MethodPost, base+"/api/chat/"+agent, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return open(t, req)
}

// resume opens GET /api/sessions/:id/stream, with Last-Event-ID when
// lastEventID is not empty. A 204 has Status 204 and no frames.
func resume(t testing.TB, base, sessionID, lastEventID string) *stream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/sessions/"+sessionID+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return open(t, req)
}

func open(t testing.TB, req *http.Request) *stream {
	t.Helper()
	// No client timeout: streams last as long as their turn; Next bounds
	// each wait instead.
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	return newStream(t, res)
}

// newStream reads res's frames when it is an event stream, else keeps its
// body for the test to read.
func newStream(t testing.TB, res *http.Response) *stream {
	s := &stream{t: t, Status: res.StatusCode, Header: res.Header, res: res, frames: make(chan frame, 1<<16)}
	t.Cleanup(s.Close)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		s.Body = string(b)
		s.err = io.EOF
		close(s.frames)
		return s
	}
	go s.read()
	return s
}

// read parses SSE events: "id:" and "data:" lines, a blank line ends an
// event, comment lines (": heartbeat") are skipped.
func (s *stream) read() {
	defer close(s.frames)
	r := bufio.NewReaderSize(s.res.Body, 64<<10)
	var f frame
	var hasData bool
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				s.err = io.EOF
			} else if err == io.EOF {
				s.err = fmt.Errorf("stream ended inside a line: %q", line)
			} else {
				s.err = err
			}
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if hasData {
				f.At = time.Now()
				s.frames <- f
			}
			f, hasData = frame{}, false
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			f.ID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
			if hasData {
				f.Data += "\n" + d
			} else {
				f.Data = d
			}
			hasData = true
		}
	}
}

// errStreamEnd is Next's error at the end of the stream.
var errStreamEnd = errors.New("end of stream")

// Next returns the next frame, errStreamEnd (wrapping the reader's error
// when the stream broke) at the end, or an error after timeout.
func (s *stream) Next(timeout time.Duration) (frame, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case f, ok := <-s.frames:
		if !ok {
			if s.err == io.EOF {
				return frame{}, errStreamEnd
			}
			return frame{}, fmt.Errorf("%w: %v", errStreamEnd, s.err)
		}
		return f, nil
	case <-timer.C:
		return frame{}, fmt.Errorf("no frame within %v", timeout)
	}
}

// Until reads frames until one of type typ arrives and returns every frame
// read, that one last; it fails the test at the end of the stream or when
// no frame came within timeout.
func (s *stream) Until(typ string, timeout time.Duration) []frame {
	s.t.Helper()
	var out []frame
	for {
		f, err := s.Next(timeout)
		if err != nil {
			s.t.Fatalf("waiting for a %q frame: %v; frames so far: %s", typ, err, dataOf(out))
		}
		out = append(out, f)
		if f.Type() == typ {
			return out
		}
	}
}

// All reads every remaining frame until the stream ends. It fails the test
// when a gap between frames exceeds timeout, or when the stream broke
// (not a clean EOF).
func (s *stream) All(timeout time.Duration) []frame {
	s.t.Helper()
	var out []frame
	for {
		f, err := s.Next(timeout)
		if errors.Is(err, errStreamEnd) {
			if s.err != io.EOF {
				s.t.Errorf("the stream broke: %v; frames: %s", s.err, dataOf(out))
			}
			return out
		}
		if err != nil {
			s.t.Fatalf("%v; frames so far: %s", err, dataOf(out))
		}
		out = append(out, f)
	}
}

// Close drops the connection.
func (s *stream) Close() {
	s.once.Do(func() { s.res.Body.Close() })
}

// dataOf lists the frames' data, for failure messages.
func dataOf(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		b.WriteString("\n  ")
		if len(f.Data) > 200 {
			b.WriteString(f.Data[:200] + "...")
		} else {
			b.WriteString(f.Data)
		}
	}
	return b.String()
}

// requireEnd checks that frames end a turn properly: exactly one finish
// frame, then [DONE] as the last frame, and returns the finish reason.
func requireEnd(t testing.TB, frames []frame) string {
	t.Helper()
	n := len(frames)
	if n < 2 || frames[n-1].Data != "[DONE]" || frames[n-2].Type() != "finish" {
		t.Fatalf("the stream did not end with finish, [DONE]: %s", dataOf(frames[max(0, n-5):]))
	}
	finishes := 0
	for _, f := range frames {
		if f.Type() == "finish" {
			finishes++
		}
	}
	if finishes != 1 {
		t.Fatalf("%d finish frames, want 1: %s", finishes, dataOf(frames))
	}
	if frames[0].Type() != "start" {
		t.Errorf("the first frame is %s, want start", frames[0].Data)
	}
	return frames[n-2].Field("finishReason")
}

// errorTexts returns the errorText of the stream's error frames.
func errorTexts(frames []frame) []string {
	var out []string
	for _, f := range frames {
		if f.Type() == "error" {
			out = append(out, f.Field("errorText"))
		}
	}
	return out
}

// limitsOf returns the names of the budgets the turn reached (data-limit
// frames).
func limitsOf(frames []frame) []string {
	var out []string
	for _, f := range frames {
		if f.Type() == "data-limit" {
			var v struct{ Data struct{ Name string } }
			if json.Unmarshal([]byte(f.Data), &v) == nil {
				out = append(out, v.Data.Name)
			}
		}
	}
	return out
}

// textOf joins the text deltas.
func textOf(frames []frame) string {
	var b strings.Builder
	for _, f := range frames {
		if f.Type() == "text-delta" {
			b.WriteString(f.Field("delta"))
		}
	}
	return b.String()
}

// sessionView is GET /api/sessions/:id.
type sessionView struct {
	ID       string              `json:"id"`
	Agent    string              `json:"agent"`
	State    orchestration.State `json:"state"`
	Messages []adchat.Message    `json:"messages"`
	Turn     *struct {
		ID          string `json:"id"`
		Running     bool   `json:"running"`
		LastEventID string `json:"lastEventId"`
	} `json:"turn"`
}

// getSession reads a session; status is the HTTP status (the view is
// decoded only for 200) and raw the body.
func getSession(t testing.TB, base, id string) (view sessionView, status int, raw string) {
	t.Helper()
	res, err := http.Get(base + "/api/sessions/" + id)
	if err != nil {
		t.Fatalf("GET /api/sessions/%s: %v", id, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET /api/sessions/%s: %v", id, err)
	}
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &view); err != nil {
			t.Fatalf("GET /api/sessions/%s: the session does not parse: %v\n%s", id, err, b)
		}
	}
	return view, res.StatusCode, string(b)
}

// checkHistory reports what makes a history inconsistent: an assistant
// tool call without a tool message answering it, a tool message answering
// no earlier call, a tool message answering a call twice.
func checkHistory(msgs []adchat.Message) []string {
	var probs []string
	open := map[string]int{} // call ID -> index of the assistant message
	answered := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case adchat.RoleAssistant:
			for id := range open {
				probs = append(probs, fmt.Sprintf("message %d: tool call %s (message %d) has no result before the next assistant message", i, id, open[id]))
				delete(open, id)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = i
			}
		case adchat.RoleTool:
			switch {
			case answered[m.ToolCallID]:
				probs = append(probs, fmt.Sprintf("message %d answers tool call %s twice", i, m.ToolCallID))
			case func() bool { _, ok := open[m.ToolCallID]; return !ok }():
				probs = append(probs, fmt.Sprintf("message %d answers tool call %s, which no assistant message made", i, m.ToolCallID))
			}
			delete(open, m.ToolCallID)
			answered[m.ToolCallID] = true
		default:
			for id := range open {
				probs = append(probs, fmt.Sprintf("message %d (%s): tool call %s (message %d) has no result", i, m.Role, id, open[id]))
				delete(open, id)
			}
		}
	}
	for id, i := range open {
		probs = append(probs, fmt.Sprintf("tool call %s (message %d) has no result at the end of the history", id, i))
	}
	return probs
}
