package telemetry

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
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
