package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that every record logged with a context carrying a
// valid span context (a traced request or task) gets the attributes
// trace_id and span_id, as hex strings; other records pass unchanged. The
// two attributes are added at the top level of the record even when the
// logger was given groups with WithGroup. Wrapping an already wrapped handler
// returns it as is.
func LogHandler(h slog.Handler) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		return lh
	}
	return &logHandler{next: h, plain: h}
}

// logHandler is LogHandler's slog.Handler. Groups and attributes given to
// WithGroup and WithAttrs are kept here, not passed to next, so that the
// trace attributes can be put ahead of them at the top level.
type logHandler struct {
	next  slog.Handler // without this logger's groups and attributes
	steps []step       // WithGroup and WithAttrs calls, in order
	plain slog.Handler // next with steps applied, for records without a span
}

// step is one WithGroup (group != "") or WithAttrs call.
type step struct {
	group string
	attrs []slog.Attr
}

// Enabled reports whether the wrapped handler handles records at level.
func (h *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds trace_id and span_id when ctx carries a valid span context,
// then applies the logger's groups and attributes and passes r on.
func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return h.plain.Handle(ctx, r)
	}
	next := h.next.WithAttrs([]slog.Attr{
		slog.String("trace_id", sc.TraceID().String()),
		slog.String("span_id", sc.SpanID().String()),
	})
	return h.with(next).Handle(ctx, r)
}

// with returns next with h's groups and attributes applied.
func (h *logHandler) with(next slog.Handler) slog.Handler {
	for _, s := range h.steps {
		if s.group != "" {
			next = next.WithGroup(s.group)
		} else {
			next = next.WithAttrs(s.attrs)
		}
	}
	return next
}

// WithAttrs returns a handler that adds attrs to every record, under the
// groups given so far.
func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.add(step{attrs: attrs})
}

// WithGroup returns a handler that puts the record's attributes, and those
// of later WithAttrs calls, under name.
func (h *logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.add(step{group: name})
}

// add returns a copy of h with s appended to its steps.
func (h *logHandler) add(s step) *logHandler {
	c := &logHandler{next: h.next, steps: append(h.steps[:len(h.steps):len(h.steps)], s)}
	c.plain = c.with(c.next)
	return c
}
