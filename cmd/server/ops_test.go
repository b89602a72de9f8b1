package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/telemetry/otelsetup"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// handedOut are the addresses freeAddr returned: the kernel offers a
// closed port again, so two calls in a row could name one port (a test's
// unreachable model and its server).
var handedOut sync.Map

// freeAddr returns a loopback address with a port that was free a moment
// ago, and that it has not returned before.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("the kernel offered only loopback ports handed out before")
	return ""
}

func waitHealthy(t *testing.T, base string, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := alive(); err != nil {
			t.Fatalf("the server stopped before answering: %v", err)
		}
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server did not become healthy")
}

// TestProviderKeyNeverLeaks: a provider key planted in the environment,
// echoed back by the model server in its error body (as OpenAI does for a
// wrong key), or unusable because the provider's port is closed, reaches
// neither the HTTP answers (chat stream, OpenAI endpoint, session), nor the
// logs (at debug level), nor the exported spans, nor the config printout.
func TestProviderKeyNeverLeaks(t *testing.T) {
	const key = "sk-planted-4f1c9a7e2b6d4e0c8a1f3b5d7e9c2a4f"
	echo := mockllm.New(mockllm.WithDefault(mockllm.Script{Status: http.StatusUnauthorized,
		ErrorMessage: "Incorrect API key provided: " + key + ". You can find your API key at https://platform.example/account/api-keys."}))
	t.Cleanup(echo.Close)
	closed := "http://" + freeAddr(t) + "/v1"

	for _, tc := range []struct{ name, baseURL string }{
		{"model echoes the key", echo.URL() + "/v1"},
		{"model unreachable", closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearConfigEnv(t)
			t.Setenv("LLM_PROVIDER", "openai")
			t.Setenv("OPENAI_API_KEY", key)
			t.Setenv("OPENAI_BASE_URL", tc.baseURL)
			t.Setenv("LOG_CONTENT", "true") // even with content logging on
			t.Setenv("OTEL_TRACES_EXPORTER", "console")
			t.Setenv("OTEL_METRICS_EXPORTER", "none")
			addr := freeAddr(t)
			t.Setenv("ADDR", addr)

			var logs, spans syncBuffer
			cfg, err := loadServeConfig(nil, testConfigEnv(t), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tel, err := otelsetup.Setup(t.Context(), otelsetup.Config{Console: &spans})
			if err != nil {
				t.Fatal(err)
			}
			log := telemetry.NewLogger(&logs, "json", slog.LevelDebug, tel.CaptureContent())
			log.LogAttrs(t.Context(), slog.LevelInfo, "configuration", cfg.attrs(os.LookupEnv, os.Environ())...)
			ctx, stop := context.WithCancel(t.Context())
			served := make(chan error, 1)
			go func() { served <- serve(ctx, cfg, tel, log) }()
			base := "http://" + addr
			waitHealthy(t, base, func() error {
				select {
				case err := <-served:
					return fmt.Errorf("serve returned %v", err)
				default:
					return nil
				}
			})

			var answers strings.Builder
			post := func(path, body string) *http.Response {
				res, err := http.Post(base+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				fmt.Fprintf(&answers, "%s %d %v\n%s\n", path, res.StatusCode, res.Header, b)
				return res
			}
			res := post("/api/chat/planner", `{"message":"plan a trip","sessionId":"leak-session-1"}`)
			if !strings.Contains(answers.String(), `"type":"error"`) {
				t.Fatalf("the turn did not fail as planned:\n%s", answers.String())
			}
			post("/v1/chat/completions", `{"model":"planner","messages":[{"role":"user","content":"hi"}]}`)
			post("/v1/chat/completions", `{"model":"planner","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			g, err := http.Get(base + "/api/sessions/" + res.Header.Get("X-Session-Id"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(g.Body)
			g.Body.Close()
			answers.Write(b)

			stop()
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			_ = tel.Shutdown(context.Background())
			for what, text := range map[string]string{"HTTP answers": answers.String(), "logs": logs.String(), "spans": spans.String()} {
				if strings.Contains(text, key) || strings.Contains(text, key[10:]) {
					t.Errorf("the provider key is in the %s:\n%s", what, text)
				}
			}
			// The check means something only if the failure was recorded
			// where the key could have leaked: the model call's span has
			// the error status (the agent does not log model failures).
			if !strings.Contains(spans.String(), `"Name":"chat `) || !strings.Contains(spans.String(), `"Code":"Error"`) {
				t.Errorf("no model call span was exported:\n%s", spans.String())
			}
			if !strings.Contains(logs.String(), "OPENAI_API_KEY") {
				t.Errorf("the configuration record lacks OPENAI_API_KEY:\n%s", logs.String())
			}
		})
	}
}

// offlineServe is the environment of a test's `agentdock serve` on addr:
// the memory store, the offline model, no keys and no config file whatever
// the machine's environment says, JSON logs.
func offlineServe(addr string) []string {
	return []string{"ADDR=" + addr, "SESSION_STORE=memory://", "OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "LLM_BASE_URL=",
		"OPENAI_BASE_URL=", "LLM_PROVIDER=", "API_KEYS=", "API_KEYS_FILE=", "AGENTDOCK_CONFIG=", "LOG_FORMAT=json"}
}

// buildBinary builds agentdock into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentdock")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(testenv.ModuleRoot(), "cmd", "server")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSIGTERMDrainsStreams: SIGTERM during a streaming turn with the
// memory store waits for the turn; one that would outlast SHUTDOWN_TIMEOUT
// is cancelled before it, and its stream ends with the server_shutdown
// error, finish and [DONE]; the process exits 0 within SHUTDOWN_TIMEOUT,
// flushing its logs.
func TestSIGTERMDrainsStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	// The turn's words come a second apart: it cannot end by itself
	// before its cancellation, half the drain in.
	const drain = 4 * time.Second
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append(os.Environ(), offlineServe(addr)...), "OFFLINE_MODEL_DELAY_MS=1000", "SHUTDOWN_TIMEOUT="+drain.String())
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once the process is gone; exitErr is Wait's result.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	base := "http://" + addr
	waitHealthy(t, base, func() error {
		select {
		case <-exited:
			return fmt.Errorf("exited: %v\n%s", exitErr, stderr.String())
		default:
			return nil
		}
	})

	res, err := http.Post(base+"/api/chat/cognitive-reasoner", "application/json", strings.NewReader(`{"message":"think this through at length","sessionId":"sigterm-session"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var frames []string
	next := func() bool {
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				frames = append(frames, d)
				return true
			}
		}
		return false
	}
	// The turn is under way: a text delta has arrived.
	for next() && !strings.Contains(frames[len(frames)-1], `"text-delta"`) {
	}
	if len(frames) == 0 || !strings.Contains(frames[len(frames)-1], `"text-delta"`) {
		t.Fatalf("the turn did not start streaming: %q", frames)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for next() {
	}
	n := len(frames)
	if n < 3 || !strings.Contains(frames[n-3], "server_shutdown") || !strings.Contains(frames[n-2], `"type":"finish"`) || frames[n-1] != "[DONE]" {
		t.Fatalf("the stream did not end with server_shutdown, finish, [DONE]: %q", frames[max(0, n-4):])
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("exit: %v\n%s", exitErr, stderr.String())
		}
	case <-time.After(drain + 5*time.Second):
		t.Fatalf("the process did not exit within the drain time\n%s", stderr.String())
	}
	took := time.Since(sent)
	if took >= drain {
		t.Errorf("shutdown took %v, not within SHUTDOWN_TIMEOUT %v", took, drain)
	}
	logs := stderr.String()
	for _, want := range []string{`"msg":"shutting down`, `"msg":"configuration"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
	// The partial answer was saved: the session has the assistant's text
	// (checked through the log's absence of errors, as the process is gone).
	for line := range strings.Lines(logs) {
		var rec struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			t.Errorf("error logged during shutdown: %s", line)
		}
	}
}
