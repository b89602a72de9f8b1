package main

import (
	"context"
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
