package telemetry

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
)

// HTTPClient returns a copy of base whose transport makes a client span per
// request (otelhttp), for provider.Config.HTTPClient: each attempt to reach
// a model becomes a child of the chat span. With tracing off, or a nil
// Telemetry, base is returned unchanged. A nil base, or one without a
// Transport, uses http.DefaultTransport: pass the transport whose timeouts
// you want.
func (t *Telemetry) HTTPClient(base *http.Client) *http.Client {
	if !t.Tracing() {
		return base
	}
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	c.Transport = t.WrapTransport(c.Transport)
	return c
}

// WrapTransport wraps rt (nil: http.DefaultTransport) in otelhttp's
// transport, for code that takes a transport hook rather than a client. With
// tracing off it returns rt unchanged.
func (t *Telemetry) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if !t.Tracing() {
		return rt
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithMeterProvider(t.mp),
		otelhttp.WithPropagators(t.prop),
	)
}

// GinMiddleware returns the otelgin middleware: a server span and the HTTP
// server metrics per request. Requests to the streaming routes (gin route
// patterns such as "/api/chat/:agentId") get neither, because their span and
// duration would cover the whole stream; their incoming trace context is
// still extracted, so a turn's invoke_agent span joins the caller's trace.
func (t *Telemetry) GinMiddleware(streamingRoutes ...string) gin.HandlerFunc {
	if t == nil {
		return func(c *gin.Context) { c.Next() }
	}
	streaming := func(c *gin.Context) bool { return slices.Contains(streamingRoutes, c.FullPath()) }
	traced := otelgin.Middleware(t.service,
		otelgin.WithTracerProvider(t.tp),
		otelgin.WithMeterProvider(t.mp),
		otelgin.WithPropagators(t.prop),
		otelgin.WithGinFilter(func(c *gin.Context) bool { return !streaming(c) }),
	)
	return func(c *gin.Context) {
		if !streaming(c) {
			traced(c)
			return
		}
		saved := c.Request.Context()
		c.Request = c.Request.WithContext(t.prop.Extract(saved, propagation.HeaderCarrier(c.Request.Header)))
		defer func() { c.Request = c.Request.WithContext(saved) }()
		c.Next()
	}
}

// InstrumentRedis adds a client span per Redis command (and pipeline) to
// rdb, children of the current span. Commands are recorded without their
// arguments (WithDBStatement(false)): session values hold chat content. With
// tracing off it does nothing, so commands pay no tracing cost.
func (t *Telemetry) InstrumentRedis(rdb redis.UniversalClient) error {
	if !t.Tracing() {
		return nil
	}
	if err := redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(t.tp),
		redisotel.WithDBStatement(false),
		// The caller is always session/redis.go; finding it costs a
		// stack walk per command.
		redisotel.WithCallerEnabled(false),
	); err != nil {
		return fmt.Errorf("telemetry: instrumenting redis: %w", err)
	}
	return nil
}
