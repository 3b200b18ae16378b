package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// childrenOnly wraps tp so that its tracers start a span only under a
// recording span: a store or Redis call outside any traced operation
// (connection housekeeping, an idle poll) makes no trace of its own.
func childrenOnly(tp trace.TracerProvider) trace.TracerProvider {
	return childrenOnlyProvider{tp: tp}
}

type childrenOnlyProvider struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

// Tracer returns tp's tracer of name, starting children only.
func (p childrenOnlyProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childrenOnlyTracer{t: p.tp.Tracer(name, opts...)}
}

type childrenOnlyTracer struct {
	embedded.Tracer
	t trace.Tracer
}

// Start starts a span when ctx carries a recording span; otherwise it returns
// ctx and ctx's span (non-recording), whose methods do nothing.
func (t childrenOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		return ctx, parent
	}
	return t.t.Start(ctx, name, opts...)
}
