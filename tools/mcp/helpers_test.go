package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/tools"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// everythingServer returns the stdio configuration of the reference
// "everything" server from npm.
func everythingServer(t testing.TB) mcpconfig.Server {
	node, modules := testenv.MCPServers(t)
	return mcpconfig.Server{Command: node, Args: []string{filepath.Join(modules, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}}
}

// filesystemServer returns the stdio configuration of the filesystem server
// from npm, serving dir.
func filesystemServer(t testing.TB, dir string) mcpconfig.Server {
	node, modules := testenv.MCPServers(t)
	return mcpconfig.Server{Command: node, Args: []string{filepath.Join(modules, "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), dir}}
}

// startEverythingHTTP runs the everything server over streamable HTTP on a
// free loopback port and returns its endpoint and process.
func startEverythingHTTP(t testing.TB) (string, *exec.Cmd) {
	node, modules := testenv.MCPServers(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, filepath.Join(modules, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	out := &logBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("the everything server exited: %s", out)
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("the everything server did not listen on %d: %s", port, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logBuffer collects log records for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newManager starts a manager with servers under scope "" and closes it at
// the end of the test. Backoffs are short so that restarts are quick.
func newManager(t *testing.T, servers mcpconfig.Servers, tune ...func(*Config)) (*Manager, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg := Config{
		Logger:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		StartTimeout: 20 * time.Second,
	}
	for _, f := range tune {
		f(&cfg)
	}
	m := NewManager(cfg)
	if err := m.Add("", servers); err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", logs)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	return m, logs
}

func builtin(t testing.TB) *tools.Registry {
	r, err := tools.NewRegistry(tools.CognitiveTools()...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// waitFor polls cond until it holds or 20 seconds passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func call(ts *Toolbox, name, args string) chat.ToolResult {
	return ts.Execute(context.Background(), chat.ToolCall{ID: "c1", Name: name, Arguments: json.RawMessage(args)})
}

func statusOf(m *Manager, name string) Status {
	for _, st := range m.Status() {
		if st.Name == name {
			return st
		}
	}
	return Status{}
}

// groupPIDs lists the processes of a process group.
func groupPIDs(t *testing.T, pgid int) []int {
	t.Helper()
	var pids []int
	for _, p := range testenv.Processes(t) {
		if p.PGID == pgid {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
