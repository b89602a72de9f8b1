package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	adchat "github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// The charges agent calls one MCP tool, web__charge, which declares
// nothing about itself and so is not idempotent: a call interrupted by a
// replica's death must never run again.
const chargesTemplate = `{
  "agentId": "charges",
  "name": "Charges",
  "personality": ["You answer briefly."],
  "nodes": ["llm.openai", "web__charge"],
  "nodeConfigurations": {"llm.openai": {"model": "mock-model", "maxTokens": 256}},
  "options": {"maxSteps": 6}
}
`

// chargeCounter counts the runs of each charge (by its order), across the
// MCP servers of all the replicas. A call takes 600 ms; the replica that
// makes the call of an order in kill dies 100 ms into it.
type chargeCounter struct {
	mu   sync.Mutex
	runs map[string]int
	// kill maps an order to the replica whose call of it kills it.
	kill  map[string]string
	procs map[string]*serverProc
}

type chargeArgs struct {
	Order string `json:"order" jsonschema:"the order to charge"`
}

// server is the MCP server of replica name, over streamable HTTP.
func (c *chargeCounter) server(t *testing.T, name string) string {
	srv := sdk.NewServer(&sdk.Implementation{Name: "charges-" + name, Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "charge", Description: "Charges an order (not idempotent)."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in chargeArgs) (*sdk.CallToolResult, any, error) {
			c.mu.Lock()
			c.runs[in.Order]++
			run := c.runs[in.Order]
			victim := c.kill[in.Order] == name
			if victim {
				delete(c.kill, in.Order)
			}
			p := c.procs[name]
			c.mu.Unlock()
			if victim {
				time.AfterFunc(100*time.Millisecond, p.Kill)
			}
			select {
			case <-time.After(600 * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("charged %s (run %d)", in.Order, run)}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestTakenOverTwice: a turn of counted, non-idempotent tool calls runs on
// replica A of three; A is SIGKILLed during one call, the client resumes
// on B, which takes the turn over; B is SIGKILLed during another call, the
// client resumes on C, which takes the turn over again and finishes it.
// Each call ran at most once across the replicas (the test prints the
// counts): a call a death interrupted is reported interrupted, once and
// for all, and never run again by a later takeover. The turn finishes
// stop, the session saves what the client shows, and every call has one
// result. Two shapes: the two calls in two model answers, and three calls
// in one answer with the first and the last interrupted.
func TestTakenOverTwice(t *testing.T) {
	for _, tc := range []struct {
		name string
		// steps are the orders each model answer charges, by how many
		// results the model has read; kill says which replica dies during
		// which order's call.
		steps map[int][]string
		kill  map[string]string
	}{
		{name: "two answers", steps: map[int][]string{0: {"o1"}, 1: {"o2"}}, kill: map[string]string{"o1": "A", "o2": "B"}},
		{name: "one answer", steps: map[int][]string{0: {"o1", "o2", "o3"}}, kill: map[string]string{"o1": "A", "o3": "B"}},
	} {
		t.Run(tc.name, func(t *testing.T) { takenOverTwice(t, tc.steps, tc.kill) })
	}
}

func takenOverTwice(t *testing.T, steps map[int][]string, kill map[string]string) {
	counter := &chargeCounter{runs: map[string]int{}, kill: map[string]string{}, procs: map[string]*serverProc{}}
	for o, r := range kill {
		counter.kill[o] = r
	}
	m := newModel(t, mockllm.WithResponder(func(req mockllm.Request) mockllm.Script {
		results := 0
		for _, msg := range req.Messages {
			results += len(msg.ToolResults)
		}
		var calls []mockllm.ToolCall
		for _, o := range steps[results] {
			calls = append(calls, mockllm.ToolCall{ID: "call_" + o, Name: "web__charge", Arguments: fmt.Sprintf(`{"order":%q}`, o)})
		}
		if calls != nil {
			return mockllm.ToolScript(calls...)
		}
		return mockllm.Script{Text: []string{"All", " orders", " handled."}, InterTokenDelay: 20 * time.Millisecond}
	}), mockllm.WithMaxRecorded(-1))
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "templates", "charges"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "charges", "template.json"), []byte(chargesTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"web": map[string]any{"url": "${MCP_WEB_URL}"}}})
	if err := os.WriteFile(filepath.Join(dir, "mcp.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	rs := redistest.Start(t)
	env := append(modelEnv(m), "SESSION_STORE="+rs.URL(), "HEARTBEAT=250ms", "SESSION_LOCK_TTL=2s",
		"TEMPLATES_DIR="+filepath.Join(dir, "templates"), "MCP_SERVERS_FILE="+filepath.Join(dir, "mcp.json"))
	var order []*serverProc
	for _, name := range []string{"A", "B", "C"} {
		p := startServer(t, append(env, "MCP_WEB_URL="+counter.server(t, name)+"/mcp")...)
		for deadline := time.Now().Add(30 * time.Second); agentServersOf(t, p.URL(), "charges")["web"].State != "ready"; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s: the MCP server is not ready: %+v", name, agentServersOf(t, p.URL(), "charges"))
			}
		}
		counter.mu.Lock()
		counter.procs[name] = p
		counter.mu.Unlock()
		order = append(order, p)
	}

	// The client follows the turn: on A, then on B once A's stream broke,
	// then on C.
	sid := session.NewID()
	d := durableTurn{sid: sid}
	s := tryChatQuiet(t, order[0].URL(), "charges", sid, "charge my orders")
	if s == nil || s.Status != http.StatusOK {
		t.Fatalf("the turn did not start on A: %+v", s)
	}
	d.opened = append(d.opened, opened{url: order[0].URL()})
	next := 1
	for deadline := time.Now().Add(90 * time.Second); ; {
		d.frames = append(d.frames, readFor(s, 20*time.Second)...)
		if requireEndOrEmpty(d.frames) != "" {
			break
		}
		if time.Now().After(deadline) || next == len(order) {
			t.Fatalf("the turn did not end; the client's streams:\n%s", strings.Join(traceOf(d), "\n"))
		}
		last := ""
		for _, f := range d.frames {
			if f.ID != "" {
				last = f.ID
			}
		}
		p := order[next]
		next++
		if s = resumeQuiet(t, p.URL(), sid, last); s == nil || s.Status != http.StatusOK {
			t.Fatalf("resuming on replica %d after %q: %+v", next, last, s)
		}
		d.resumes++
		d.opened = append(d.opened, opened{at: len(d.frames), url: p.URL(), lastID: last})
	}
	end, shown, errs := requireEndOrEmpty(d.frames), answerOf(d.frames), errorTexts(d.frames)

	counter.mu.Lock()
	runs := make([]string, 0, len(counter.runs))
	twice := false
	for o, n := range counter.runs {
		runs = append(runs, fmt.Sprintf("%s ran %d", o, n))
		twice = twice || n > 1
	}
	left := len(counter.kill)
	counter.mu.Unlock()
	sort.Strings(runs)
	t.Logf("replicas killed: %d of 2, stream resumes: %d; charges: %s; the turn ended %q %q", 2-left, d.resumes, strings.Join(runs, ", "), end, errs)
	if left != 0 {
		t.Fatalf("the turn never reached the calls that kill: %d left", left)
	}
	if twice {
		t.Errorf("a charge ran twice: %s", strings.Join(runs, ", "))
	}
	if end != "stop" || len(errs) > 0 {
		t.Fatalf("the turn ended %q %q, want stop; the client's streams:\n%s", end, errs, strings.Join(traceOf(d), "\n"))
	}
	var view sessionView
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		v, status, raw := getSession(t, order[2].URL(), sid)
		if status == http.StatusOK && (v.Turn == nil || !v.Turn.Running) {
			view = v
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session: %d %s", status, raw)
		}
	}
	saved, results, calls := "", map[string]int{}, 0
	for _, msg := range view.Messages {
		if msg.Role == adchat.RoleAssistant {
			saved += msg.Content
			calls += len(msg.ToolCalls)
		}
		if msg.Role == adchat.RoleTool {
			results[msg.ToolCallID]++
		}
	}
	if saved != shown {
		t.Errorf("the session saved %q, the client shows %q", saved, shown)
	}
	want := 0
	for _, os := range steps {
		want += len(os)
	}
	if calls != want || len(results) != want {
		t.Errorf("the history holds %d calls and results for %d, want %d each: %+v", calls, len(results), want, view.Messages)
	}
	for id, n := range results {
		if n != 1 {
			t.Errorf("call %s has %d results in the history", id, n)
		}
	}
}
