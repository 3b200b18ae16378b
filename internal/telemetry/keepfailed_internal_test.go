package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestKeepFailedCaps: a failed trace is exported with at most maxSpans of
// its spans, and a trace started while maxTraces are held is not held (nor
// exported, though it fails); both are counted.
func TestKeepFailedCaps(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	kf := newKeepFailedProcessor(sdktrace.NewSimpleSpanProcessor(exp), 3, 2)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(keepFailedSampler{ratio: sdktrace.NeverSample()}),
		sdktrace.WithSpanProcessor(kf))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("test")

	ctx, root := tracer.Start(t.Context(), "root")
	for range 5 {
		_, s := tracer.Start(ctx, "child")
		s.End()
	}
	root.SetStatus(codes.Error, "broken")
	root.End()
	if n := len(exp.GetSpans()); n != 3 {
		t.Errorf("exported %d spans of a failed trace of 6, want 3", n)
	}
	if n := kf.droppedSpans.Load(); n != 3 {
		t.Errorf("dropped spans = %d, want 3", n)
	}
	exp.Reset()

	_, a := tracer.Start(t.Context(), "a")
	_, b := tracer.Start(t.Context(), "b")
	_, c := tracer.Start(t.Context(), "c")
	c.SetStatus(codes.Error, "broken")
	c.End()
	if n := kf.droppedTraces.Load(); n != 1 {
		t.Errorf("dropped traces = %d, want 1", n)
	}
	if got := len(exp.GetSpans()); got != 0 {
		t.Errorf("a trace over the cap exported %d spans, want none", got)
	}
	a.End()
	b.End()
	kf.mu.Lock()
	held := len(kf.traces)
	kf.mu.Unlock()
	if held != 0 {
		t.Errorf("%d traces held after every root ended, want none", held)
	}
	_, d := tracer.Start(t.Context(), "d")
	d.SetStatus(codes.Error, "broken")
	d.End()
	if got := spanNames(exp.GetSpans()); len(got) != 1 || got[0] != "d" {
		t.Errorf("exported %v once the table had room, want d", got)
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}
