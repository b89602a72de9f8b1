package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentdock-go/agentdock/telemetry"
)

// TestNilTelemetry: a nil Telemetry is usable everywhere.
func TestNilTelemetry(t *testing.T) {
	var tel *telemetry.Telemetry
	ctx := context.Background()
	ctx2, turn := tel.StartTurn(ctx, telemetry.TurnInfo{})
	turn.Observe(chatDone)
	turn.End()
	turn.Reject(io.EOF)
	_, c := tel.StartChat(ctx2, telemetry.ChatInfo{})
	c.Observe(chatDone, nil)
	c.End()
	_, tl := tel.StartTool(ctx, telemetry.ToolInfo{})
	tl.End(telemetry.ToolEnd{})
	tel.RecordTransition(ctx, "a", "x", "y", telemetry.CauseTool)
	tel.TrackStream(ctx, "chat")()
	tel.RecordStoreError(ctx, "get", "unavailable")
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if tel.HTTPClient(nil) != nil {
		t.Fatal("nil Telemetry instrumented something")
	}
	w := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("nil MetricsHandler answered %d", w.Code)
	}
}
