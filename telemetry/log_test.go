package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/telemetry"
)

// TestLogger: records carry the context's attributes and the trace IDs;
// Content is written in full only when content logging is on, also inside
// groups and logger attributes, and is redacted by any other handler.
func TestLogger(t *testing.T) {
	const secret = "my bank password is hunter2"
	rec := setupRecorded(t, false)
	for _, tc := range []struct {
		name    string
		content bool
	}{{"redacted", false}, {"content", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := telemetry.NewLogger(&buf, "json", slog.LevelInfo, tc.content)
			ctx := telemetry.WithLogAttrs(context.Background(), slog.String("request_id", "r-1"))
			ctx = telemetry.WithLogAttrs(ctx, slog.String("session", "s-1"))
			ctx, turn := rec.tel.StartTurn(ctx, telemetry.TurnInfo{AgentID: "planner"})
			defer turn.End()
			log.With(telemetry.Content("prompt", secret)).InfoContext(ctx, "turn",
				telemetry.Content("message", secret), slog.Group("tool", telemetry.Content("arguments", secret)))
			log.DebugContext(ctx, "below the level", telemetry.Content("message", secret))

			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("%d records, want 1:\n%s", len(lines), buf.String())
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
				t.Fatal(err)
			}
			sc := spanContext(ctx)
			if rec["request_id"] != "r-1" || rec["session"] != "s-1" || rec["trace_id"] != sc.TraceID().String() || rec["span_id"] != sc.SpanID().String() {
				t.Errorf("record lacks the context attributes or trace IDs: %s", lines[0])
			}
			if got := strings.Count(lines[0], secret); tc.content && got != 3 || !tc.content && got != 0 {
				t.Errorf("content %v: the secret appears %d times: %s", tc.content, got, lines[0])
			}
			if !tc.content {
				want := map[string]any{"redacted": true, "bytes": float64(len(secret))}
				for _, v := range []any{rec["message"], rec["prompt"], rec["tool"].(map[string]any)["arguments"]} {
					m, _ := v.(map[string]any)
					if m["redacted"] != want["redacted"] || m["bytes"] != want["bytes"] {
						t.Errorf("redacted form %v, want %v", v, want)
					}
				}
			}
		})
	}
	// A plain handler, which knows nothing of Content, redacts too.
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", telemetry.Content("message", secret))
	if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), "message.redacted=true") {
		t.Errorf("plain handler wrote %q", buf.String())
	}
	// Text format.
	buf.Reset()
	telemetry.NewLogger(&buf, "text", slog.LevelInfo, false).InfoContext(telemetry.WithLogAttrs(context.Background(), slog.String("agent", "planner")), "hello")
	if !strings.Contains(buf.String(), "agent=planner") || strings.HasPrefix(buf.String(), "{") {
		t.Errorf("text record %q", buf.String())
	}
}
