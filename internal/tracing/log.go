package tracing

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of a line written inside a traced call.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// NewLogHandler returns the process's slog handler on w: JSON lines when
// json is set, slog's text lines otherwise, with trace_id and span_id on
// every line logged with a context whose span is valid (slog's *Context
// methods).
func NewLogHandler(w io.Writer, json bool) slog.Handler {
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, nil)
	} else {
		h = slog.NewTextHandler(w, nil)
	}
	return &logHandler{h}
}

// logHandler adds the trace and span IDs of the record's context.
type logHandler struct{ inner slog.Handler }

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{h.inner.WithAttrs(as)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.inner.WithGroup(name)}
}
