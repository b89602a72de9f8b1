package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServeApprovals: the Go SDK's client runs `agentdock mcp serve`
// over stdio and calls the planner, whose web searches wait for the
// user's approval, on the offline model: in 2025-11-25 the server asks
// with elicitation/create, in 2026-07-28 with an input-required result
// that the client answers by calling again; either way the person is
// asked once and the call ends with the whole answer.
func TestMCPServeApprovals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cmd := exec.Command(bin, "mcp", "serve")
			cmd.Env = append(append(os.Environ(), offlineServe("127.0.0.1:0")...), "OFFLINE_MODEL_DELAY_MS=1", "HOME="+t.TempDir())
			var questions []string
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					questions = append(questions, r.Params.Message)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approved": true}}, nil
				},
			})
			cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult(); got != nil && got.ProtocolVersion != version {
				t.Fatalf("negotiated %s", got.ProtocolVersion)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "planner", Arguments: map[string]any{"message": "search the web for offsite venue prices"}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := res.StructuredContent.(map[string]any)
			if len(questions) != 1 || !strings.Contains(questions[0], "search") {
				t.Fatalf("asked %q; want one question about the search", questions)
			}
			answer, _ := out["answer"].(string)
			if res.IsError || out["finishReason"] != "stop" || !strings.Contains(answer, "Search results from Wikipedia") {
				t.Fatalf("after the approval: error %v, %v, %q; want stop and the search's answer", res.IsError, out["finishReason"], answer)
			}
		})
	}
}

// TestMCPServeAgentProgress: a client that sends a progress token and
// calls the research lead over `agentdock mcp serve` hears the Research
// Assistant it asks, as progress notes of the lead's call.
func TestMCPServeAgentProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	cmd := exec.Command(bin, "mcp", "serve")
	cmd.Env = append(append(os.Environ(), offlineServe("127.0.0.1:0")...), "OFFLINE_MODEL_DELAY_MS=0", "HOME="+t.TempDir())
	var mu sync.Mutex
	var notes []string
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			notes = append(notes, r.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "research-lead", Arguments: map[string]any{"message": "Fact-check: the Great Wall of China is visible from the Moon"}}
	params.SetProgressToken("lead-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("the call: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"calling ask_researcher", "research-assistant: calling search", "research-assistant is answering"} {
		if !slices.Contains(notes, want) {
			t.Errorf("no progress note %q among %q", want, notes)
		}
	}
}

// TestMCPServeHostileStdin: `agentdock mcp serve` initializes while another
// process holds ADDR's port (it listens on nothing: no TCP socket of the
// process listens), answers each line of stdin that is no JSON-RPC
// message with a JSON-RPC error (a parse error for what is not JSON, an
// invalid request for JSON that is no message, a line over the limit
// skipped), says nothing to notifications with wrong params, and goes on:
// a tools/list after them is answered.
func TestMCPServeHostileStdin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cmd := exec.Command(bin, "mcp", "serve")
	cmd.Env = append(append(os.Environ(), offlineServe(held.Addr().String())...), "HOME="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	lines := bufio.NewReaderSize(stdout, 1<<20)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("writing %.40q: %v (the server exited?)\n%s", s, err, stderr.String())
		}
	}
	type reply struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	next := func() reply {
		t.Helper()
		line, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading stdout: %v (the server exited?)\n%s", err, stderr.String())
		}
		var r reply
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		return r
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := next(); r.Error != nil || r.ID != float64(1) || len(r.Result) == 0 {
		t.Fatalf("initialize: %+v\n%s", r, stderr.String())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if ports := listeningPorts(t, cmd.Process.Pid); len(ports) > 0 {
		t.Fatalf("mcp serve listens on TCP ports %v", ports)
	}

	hostile := []struct {
		name, line string
		code       int // 0: no answer (a notification)
	}{
		{"invalid JSON", `{"jsonrpc": "2.0", "id": 3, "method": "tools/list"`, -32700},
		{"a line over the limit", `{"jsonrpc":"2.0","id":4,"method":"x","params":{"pad":"` + strings.Repeat("x", 17<<20) + `"}}`, -32600},
		{"binary", "\x00\x01\xfe\xff\x1b[2J", -32700},
		{"an array", `[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, -32600},
		{"a bare string", `"tools/list"`, -32600},
		{"no version", `{"id":6,"method":"ping"}`, -32600},
		{"a notification with wrong params", `{"jsonrpc":"2.0","method":"notifications/initialized","params":"wrong"}`, 0},
		{"a cancellation of nothing", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[]}}`, 0},
	}
	for _, h := range hostile {
		send(h.line)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var codes []int
	for {
		r := next()
		if r.ID == float64(2) {
			var list struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(r.Result, &list); err != nil || len(list.Tools) == 0 {
				t.Fatalf("tools/list after the hostile lines: %+v (%v)", r, err)
			}
			break
		}
		if r.Error == nil || r.Error.Message == "" {
			t.Fatalf("a reply that is not an error: %+v", r)
		}
		codes = append(codes, r.Error.Code)
	}
	var want []int
	for _, h := range hostile {
		if h.code != 0 {
			want = append(want, h.code)
		}
	}
	if !slices.Equal(codes, want) {
		t.Fatalf("error codes %v, want %v (%d hostile lines)", codes, want, len(hostile))
	}
}

// listeningPorts returns the TCP ports the process pid listens on, from
// its socket descriptors and the kernel's socket tables (Linux; the test
// skips elsewhere).
func listeningPorts(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot read the process's descriptors (%v): needs Linux's /proc", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []string
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, row := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(row)
			// local_address st ... inode: f[1], f[3], f[9]; 0A is LISTEN.
			if len(f) > 9 && f[3] == "0A" && inodes[f[9]] {
				ports = append(ports, f[1])
			}
		}
	}
	return ports
}
