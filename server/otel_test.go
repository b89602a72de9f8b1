package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/gin-gonic/gin"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceRequests: ordinary routes get a server span; streaming routes
// get none but still join the caller's trace.
func TestTraceRequests(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tel, err := telemetry.New(telemetry.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.Use(traceRequests(tel, "/api/chat/:agentId"))
	var streamCtx trace.SpanContext
	e.GET("/api/agents", func(c *gin.Context) { c.String(200, "[]") })
	e.POST("/api/chat/:agentId", func(c *gin.Context) {
		streamCtx = trace.SpanContextFromContext(c.Request.Context())
		c.String(200, "data: {}\n\n")
	})
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, path := range []string{"/api/agents", "/api/chat/planner"} {
		method := "GET"
		if strings.HasPrefix(path, "/api/chat") {
			method = "POST"
		}
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("traceparent", caller)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("%s: %d", path, w.Code)
		}
	}
	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 1 || names[0] != "GET /api/agents" {
		t.Fatalf("server spans %q, want only GET /api/agents", names)
	}
	if streamCtx.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !streamCtx.IsRemote() {
		t.Fatalf("the streaming route's context %v does not carry the caller's trace", streamCtx)
	}
}
