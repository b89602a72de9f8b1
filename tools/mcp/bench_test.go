package mcp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// BenchmarkMCPCall measures what the runtime adds to one MCP tool call:
// each iteration calls the everything server's echo tool directly with the
// SDK (a ClientSession of its own) and then through a Toolbox (argument
// validation against the MCP schema, the registry's timeout goroutine and
// log record, routing, result rendering), back to back, so that both see
// the same machine noise. It reports the p50 and p99 of each and the added
// cost (runtime minus direct, per pair). stdio runs two instances of the
// server (a stdio server has one client); http runs one, which both
// clients share.
//
//	go test -run '^$' -bench MCPCall -benchtime 3000x -count 5 ./tools/mcp/
func BenchmarkMCPCall(b *testing.B) {
	b.Run("stdio", func(b *testing.B) {
		srv := everythingServer(b)
		direct := directSession(b, &sdk.CommandTransport{Command: exec.Command(srv.Command, srv.Args...)})
		benchCalls(b, direct, srv)
	})
	b.Run("http", func(b *testing.B) {
		url, _ := startEverythingHTTP(b)
		direct := directSession(b, &sdk.StreamableClientTransport{Endpoint: url})
		benchCalls(b, direct, mcpconfig.Server{URL: url})
	})
}

func directSession(b *testing.B, t sdk.Transport) *sdk.ClientSession {
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
	cs, err := c.Connect(context.Background(), t, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func benchCalls(b *testing.B, direct *sdk.ClientSession, srv mcpconfig.Server) {
	m := NewManager(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})), PingInterval: -1})
	if err := m.Add("", mcpconfig.Servers{"e": srv}); err != nil {
		b.Fatal(err)
	}
	m.Start(context.Background())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.WaitStarted(ctx); err != nil {
		b.Fatal(err)
	}
	ts := m.Toolbox(builtin(b), "bench", nil)
	args := json.RawMessage(`{"message":"benchmark"}`)
	call := chat.ToolCall{ID: "b", Name: "e__echo", Arguments: args}
	// Warm both paths (connections, JIT of the server).
	for range 50 {
		if res := ts.Execute(ctx, call); res.IsError {
			b.Fatalf("runtime call: %+v", res)
		}
		if _, err := direct.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
	d := make([]time.Duration, 0, b.N)
	r := make([]time.Duration, 0, b.N)
	added := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := direct.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args})
		t1 := time.Now()
		out := ts.Execute(ctx, call)
		t2 := time.Now()
		if err != nil || res.IsError || out.IsError {
			b.Fatalf("call %d: %v %+v %+v", i, err, res, out)
		}
		d, r = append(d, t1.Sub(t0)), append(r, t2.Sub(t1))
		added = append(added, t2.Sub(t1)-t1.Sub(t0))
	}
	b.StopTimer()
	us := func(v time.Duration) float64 { return float64(v) / float64(time.Microsecond) }
	b.ReportMetric(us(pct(d, 50)), "direct-p50-µs")
	b.ReportMetric(us(pct(d, 99)), "direct-p99-µs")
	b.ReportMetric(us(pct(r, 50)), "runtime-p50-µs")
	b.ReportMetric(us(pct(r, 99)), "runtime-p99-µs")
	b.ReportMetric(us(pct(added, 50)), "added-p50-µs")
	b.ReportMetric(us(pct(added, 99)), "added-p99-µs")
}

func pct(v []time.Duration, p int) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
