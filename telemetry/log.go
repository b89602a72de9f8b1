package telemetry

import (
	"context"
	"io"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns a logger that writes JSON (format "json") or text (any
// other format) records at level and above to w. It is NewHandler around
// the standard handler: records carry the attributes of their context
// (WithLogAttrs) and the trace and span IDs, and Content attributes show
// chat content only when content is true.
func NewLogger(w io.Writer, format string, level slog.Leveler, content bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(NewHandler(h, content))
}

type logAttrsKey struct{}

// WithLogAttrs returns a context whose log records carry attrs (request ID,
// session ID, agent ...) besides those already there, when logged through
// a NewHandler handler with a *Context method (InfoContext, LogAttrs, ...).
func WithLogAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	if len(attrs) == 0 {
		return ctx
	}
	prev, _ := ctx.Value(logAttrsKey{}).([]slog.Attr)
	// A new slice each time: contexts are shared between goroutines.
	return context.WithValue(ctx, logAttrsKey{}, slices.Concat(prev, attrs))
}

// Content is an attribute for chat content (a message, tool arguments, a
// model's answer). A NewHandler handler with content logging on writes the
// text; otherwise, and through any other handler, only its length is
// written: {"redacted": true, "bytes": N}.
func Content(key, s string) slog.Attr { return slog.Any(key, content(s)) }

type content string

// LogValue is the redacted form, so that a handler that does not know
// about content still keeps it out of the log.
func (c content) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("redacted", true), slog.Int("bytes", len(c)))
}

// NewHandler wraps h: each record gets the attributes of its context
// (WithLogAttrs) and, inside a recording or remote span, trace_id and
// span_id; Content attributes are written in full only when content is
// true. Context attributes follow the handler's groups, like any attribute
// added at Handle time.
func NewHandler(h slog.Handler, content bool) slog.Handler {
	return &handler{inner: h, content: content}
}

type handler struct {
	inner   slog.Handler
	content bool
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	if ctx != nil {
		if attrs, ok := ctx.Value(logAttrsKey{}).([]slog.Attr); ok {
			for _, a := range attrs {
				out.AddAttrs(h.guard(a))
			}
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			out.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.guard(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	guarded := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		guarded[i] = h.guard(a)
	}
	return &handler{inner: h.inner.WithAttrs(guarded), content: h.content}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), content: h.content}
}

// guard replaces Content values, also inside groups, by the text or the
// redacted length.
func (h *handler) guard(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindLogValuer:
		if c, ok := a.Value.Any().(content); ok {
			if h.content {
				return slog.String(a.Key, string(c))
			}
			return slog.Attr{Key: a.Key, Value: c.LogValue()}
		}
	case slog.KindGroup:
		group := a.Value.Group()
		out := make([]slog.Attr, len(group))
		for i, g := range group {
			out[i] = h.guard(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	return a
}
