package server

import (
	"slices"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentdock-go/agentdock/telemetry"
)

// traceRequests is the otelgin middleware: a server span and the HTTP
// server metrics per request. Requests to the streaming routes (gin route
// patterns such as "/api/chat/:agentId") get neither, because their span and
// duration would cover the whole stream; their incoming trace context is
// still extracted, so a turn's invoke_agent span joins the caller's trace.
func traceRequests(t *telemetry.Telemetry, streamingRoutes ...string) gin.HandlerFunc {
	if t == nil {
		return func(c *gin.Context) { c.Next() }
	}
	streaming := func(c *gin.Context) bool { return slices.Contains(streamingRoutes, c.FullPath()) }
	prop := t.Propagator()
	traced := otelgin.Middleware(t.ServiceName(),
		otelgin.WithTracerProvider(t.TracerProvider()),
		otelgin.WithMeterProvider(t.MeterProvider()),
		otelgin.WithPropagators(prop),
		otelgin.WithGinFilter(func(c *gin.Context) bool { return !streaming(c) }),
	)
	return func(c *gin.Context) {
		if !streaming(c) {
			traced(c)
			return
		}
		saved := c.Request.Context()
		c.Request = c.Request.WithContext(prop.Extract(saved, propagation.HeaderCarrier(c.Request.Header)))
		defer func() { c.Request = c.Request.WithContext(saved) }()
		c.Next()
	}
}
