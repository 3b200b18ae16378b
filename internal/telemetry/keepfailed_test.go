package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/tasks"
)

// keepFailedProvider is the tracer provider Setup builds for cfg, exporting
// to an in-memory exporter, and recording every span started.
func keepFailedProvider(t testing.TB, cfg telemetry.Config) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter, *tracetest.SpanRecorder) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	rec := tracetest.NewSpanRecorder()
	tp := telemetry.NewTracerProvider(exp, cfg, sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp, rec
}

// exported flushes tp and returns the names of the spans exp has, sorted.
func exported(t *testing.T, tp *sdktrace.TracerProvider, exp *tracetest.InMemoryExporter) []string {
	t.Helper()
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	names := spanNamesOf(exp.GetSpans().Snapshots())
	slices.Sort(names)
	return names
}

// TestKeepFailed: at ratio 0, a trace is exported whole, its spans marked
// sampled, when one of its spans failed, and not otherwise.
func TestKeepFailed(t *testing.T) {
	t.Parallel()
	remote := func(flags trace.TraceFlags) context.Context {
		return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{7}, SpanID: trace.SpanID{9}, TraceFlags: flags, Remote: true,
		}))
	}
	for _, tc := range []struct {
		name   string
		parent context.Context
		kind   trace.SpanKind
		attrs  []attribute.KeyValue // of the child
		status codes.Code           // of the child
		want   bool
	}{
		{"ok", context.Background(), trace.SpanKindServer, nil, codes.Unset, false},
		{"error", context.Background(), trace.SpanKindServer, nil, codes.Error, true},
		{"refused", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.String("taskd.outcome", "refused")}, codes.Unset, true},
		{"lease lost", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.String("taskd.outcome", "lease_lost")}, codes.Unset, true},
		{"run cancelled by an operator", context.Background(), trace.SpanKindInternal, []attribute.KeyValue{attribute.String("taskd.outcome", "cancelled")}, codes.Unset, false},
		{"none", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.String("taskd.outcome", "none")}, codes.Unset, false},
		{"409", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.Int("http.response.status_code", 409)}, codes.Unset, true},
		{"403", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.Int("http.response.status_code", 403)}, codes.Unset, true},
		{"503", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.Int("http.response.status_code", 503)}, codes.Unset, true},
		{"404", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.Int("http.response.status_code", 404)}, codes.Unset, false},
		{"204", context.Background(), trace.SpanKindServer, []attribute.KeyValue{attribute.Int("http.response.status_code", 204)}, codes.Unset, false},
		// A client's 409 is the server's refusal, not this process's.
		{"client 409", context.Background(), trace.SpanKindClient, []attribute.KeyValue{attribute.Int("http.response.status_code", 409)}, codes.Unset, false},
		// A client span's error is its caller's to judge: Redis's NOSCRIPT
		// before the EVAL that follows, a retried deadlock victim.
		{"client error", context.Background(), trace.SpanKindClient, nil, codes.Error, false},
		{"remote unsampled, error", remote(0), trace.SpanKindServer, nil, codes.Error, true},
		{"remote unsampled, ok", remote(0), trace.SpanKindServer, nil, codes.Unset, false},
		{"remote sampled, ok", remote(trace.FlagsSampled), trace.SpanKindServer, nil, codes.Unset, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp, exp, _ := keepFailedProvider(t, telemetry.Config{SampleRatio: 0, KeepFailed: true})
			tracer := tp.Tracer("test")
			ctx, root := tracer.Start(tc.parent, "root")
			if !root.IsRecording() {
				t.Fatal("root span not recording")
			}
			_, child := tracer.Start(ctx, "child", trace.WithSpanKind(tc.kind), trace.WithAttributes(tc.attrs...))
			child.SetStatus(tc.status, "")
			child.End()
			root.End()
			got := exported(t, tp, exp)
			switch {
			case tc.want && !slices.Equal(got, []string{"child", "root"}):
				t.Errorf("exported %v, want child and root", got)
			case !tc.want && len(got) != 0:
				t.Errorf("exported %v, want nothing", got)
			}
			for _, s := range exp.GetSpans() {
				if !s.SpanContext.IsSampled() {
					t.Errorf("exported span %s not marked sampled", s.Name)
				}
				if s.Name == "child" && s.Parent.SpanID() != root.SpanContext().SpanID() {
					t.Errorf("child's parent %v, want root %v", s.Parent.SpanID(), root.SpanContext().SpanID())
				}
			}
		})
	}
}

// TestKeepFailedLocalRoots: a trace is decided when its last local root
// ends (two requests of one remote trace), and a span of a kept trace that
// ends after its root is exported too.
func TestKeepFailedLocalRoots(t *testing.T) {
	t.Parallel()
	tp, exp, _ := keepFailedProvider(t, telemetry.Config{SampleRatio: 0, KeepFailed: true})
	tracer := tp.Tracer("test")
	parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}, Remote: true,
	}))
	_, first := tracer.Start(parent, "first")
	ctx, second := tracer.Start(parent, "second")
	_, late := tracer.Start(ctx, "late")
	first.End()
	second.SetStatus(codes.Error, "broken")
	if got := exported(t, tp, exp); len(got) != 0 {
		t.Fatalf("exported %v before the last local root ended, want nothing", got)
	}
	second.End()
	if got := exported(t, tp, exp); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("exported %v, want first and second", got)
	}
	late.End()
	if got := exported(t, tp, exp); !slices.Equal(got, []string{"first", "late", "second"}) {
		t.Errorf("exported %v, want the late child too", got)
	}
}

// TestKeepFailedSampler: sampled roots and children of sampled parents are
// exported at once; a child of an unsampled span context that records
// nothing (a quiet context) is not recorded; without KeepFailed, unsampled
// spans are not recorded at all.
func TestKeepFailedSampler(t *testing.T) {
	t.Parallel()
	tp, exp, _ := keepFailedProvider(t, telemetry.Config{SampleRatio: 1, KeepFailed: true})
	_, s := tp.Tracer("test").Start(t.Context(), "sampled")
	if !s.SpanContext().IsSampled() {
		t.Error("root not sampled at ratio 1")
	}
	s.End()
	if got := exported(t, tp, exp); !slices.Equal(got, []string{"sampled"}) {
		t.Errorf("exported %v, want the sampled root", got)
	}

	tp, _, _ = keepFailedProvider(t, telemetry.Config{SampleRatio: 0, KeepFailed: true})
	quiet := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{5}, SpanID: trace.SpanID{6},
	}))
	if _, s := tp.Tracer("test").Start(quiet, "quiet"); s.IsRecording() {
		t.Error("a child of a non-recording unsampled local parent is recording")
	}

	tp, _, _ = keepFailedProvider(t, telemetry.Config{SampleRatio: 0})
	if _, s := tp.Tracer("test").Start(t.Context(), "off"); s.IsRecording() {
		t.Error("without KeepFailed, an unsampled root is recording")
	}
}

// TestQuietSweepsKeepFailed: with KeepFailed at ratio 0, idle sweeps start
// no span at all, and a failing sweep is exported.
func TestQuietSweepsKeepFailed(t *testing.T) {
	t.Parallel()
	tp, exp, rec := keepFailedProvider(t, telemetry.Config{SampleRatio: 0, KeepFailed: true})
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	pl := newPipeline(t, p)
	sw, err := sweeper.New(pl.d, sweeper.Config{Store: pl.store, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if res, err := sw.Sweep(t.Context()); err != nil || res != (sweeper.Result{}) {
			t.Fatalf("idle sweep = %+v, %v; want nothing done", res, err)
		}
	}
	if started := rec.Started(); len(started) != 0 {
		t.Errorf("5 idle sweeps started spans %v, want none", spanNamesOf(started))
	}
	if got := exported(t, tp, exp); len(got) != 0 {
		t.Errorf("idle sweeps exported %v, want nothing", got)
	}

	sw, err = sweeper.New(pl.d, sweeper.Config{Store: failingPurge{pl.store}, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Sweep(t.Context()); err == nil {
		t.Fatal("sweep with a failing purge: no error")
	}
	if got := exported(t, tp, exp); !slices.Contains(got, "dispatcher.sweep") {
		t.Errorf("failing sweep exported %v, want dispatcher.sweep", got)
	}
}

// claimTree starts the spans of a typical claim: a server span and three
// children.
func claimTree(tracer trace.Tracer, fail bool) {
	ctx, server := tracer.Start(context.Background(), "POST /v1/assignments/next", trace.WithSpanKind(trace.SpanKindServer))
	cctx, next := tracer.Start(ctx, "dispatcher.next")
	_, claim := tracer.Start(cctx, "dispatcher.claim", trace.WithAttributes(attribute.String("taskd.outcome", "claimed")))
	_, sql := tracer.Start(cctx, "sql.conn.exec", trace.WithSpanKind(trace.SpanKindClient))
	sql.End()
	if fail {
		claim.RecordError(errors.New("broken"))
		claim.SetStatus(codes.Error, "broken")
	}
	claim.End()
	next.End()
	server.SetAttributes(attribute.Int("http.response.status_code", 200))
	server.End()
}

// BenchmarkClaimTrace measures the spans of a typical claim (a server span
// and three children) at ratio 0.01, with and without KeepFailed.
func BenchmarkClaimTrace(b *testing.B) {
	for _, keep := range []bool{false, true} {
		name := "keep_failed=false"
		if keep {
			name = "keep_failed=true"
		}
		b.Run(name, func(b *testing.B) {
			exp := tracetest.NewInMemoryExporter()
			tp := telemetry.NewTracerProvider(exp, telemetry.Config{SampleRatio: 0.01, KeepFailed: keep})
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			tracer := tp.Tracer("bench")
			b.ReportAllocs()
			for b.Loop() {
				claimTree(tracer, false)
			}
		})
	}
}

// TestKeepFailedOTLP: through Setup and an OTLP/HTTP receiver, at ratio 0
// with KeepFailed, a submit the store refused as stale reaches the receiver
// with the store's spans under it, and the claim that succeeded does not.
func TestKeepFailedOTLP(t *testing.T) {
	t.Parallel()
	endpoint, sink := startHTTPReceiver(t)
	p, err := telemetry.Setup(t.Context(), telemetry.Config{
		Traces: telemetry.TracesOTLPHTTP, Endpoint: endpoint, SampleRatio: 0, KeepFailed: true,
	})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	pl := newPipeline(t, p)
	c := pl.editor(t, "news")
	ids := pl.add(t, "news", 1)
	claim := pl.next(t, c, ids[0])
	_, err = pl.d.Submit(t.Context(), c, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence + 1}, json.RawMessage(`{}`))
	if !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("submit with a wrong fence: %v, want tasks.ErrStale", err)
	}
	shutdown(t, p)

	spans := sink.all()
	var submit *receivedSpan
	for i, s := range spans {
		if s.Name == "dispatcher.submit" {
			submit = &spans[i]
		}
	}
	if submit == nil {
		t.Fatalf("the receiver got %v, want the refused dispatcher.submit", spanNames(spans))
	}
	var children int
	for _, s := range spans {
		if s.traceID() != submit.traceID() {
			t.Errorf("span %s of another trace exported", s.Name)
		}
		if s.parentID() == submit.spanID() {
			children++
		}
		if s.Flags&uint32(trace.FlagsSampled) == 0 {
			t.Errorf("span %s exported with flags %#x, want sampled", s.Name, s.Flags)
		}
	}
	if children == 0 {
		t.Errorf("the refused submit came without its children: %v", spanNames(spans))
	}
}
