package telemetry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/testenv"
)

// spanNamesOf lists the names of spans.
func spanNamesOf[S sdktrace.ReadOnlySpan](spans []S) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	return names
}

// TestQuietSweeps: with the SDK's parent-based sampler and instrumented
// stores, sweeps that find nothing to do record no span at all; a sweep that
// recycles records a trace of its own, rooted at dispatcher.sweep, with a
// dispatcher.sweep.recycle child over the store and Redis calls that
// followed.
func TestQuietSweeps(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	pl := newPipeline(t, p)
	c := pl.editor(t, "news")
	ids := pl.add(t, "news", 2)
	pl.next(t, c, ids[0])
	sw, err := sweeper.New(pl.d, sweeper.Config{Store: pl.store, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}

	before := len(rec.Started())
	for range 5 {
		res, err := sw.Sweep(t.Context())
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if res != (sweeper.Result{}) {
			t.Fatalf("idle sweep = %+v, want nothing done", res)
		}
	}
	if started := rec.Started(); len(started) != before {
		t.Errorf("5 idle sweeps started spans %v, want none", spanNamesOf(started[before:]))
	}

	if _, err := pl.store.DB().ExecContext(t.Context(),
		"UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?", ids[0]); err != nil {
		t.Fatal(err)
	}
	before = len(rec.Ended())
	res, err := sw.Sweep(t.Context())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if res.Recycled != 1 {
		t.Fatalf("sweep = %+v, want 1 recycled", res)
	}
	spans := rec.Ended()[before:]
	var root, recycle sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "dispatcher.sweep":
			root = s
		case "dispatcher.sweep.recycle":
			recycle = s
		}
	}
	if root == nil || recycle == nil {
		t.Fatalf("spans of a recycling sweep: %v, want dispatcher.sweep and dispatcher.sweep.recycle", spanNamesOf(spans))
	}
	if root.Parent().IsValid() {
		t.Errorf("dispatcher.sweep has parent %v, want a root span", root.Parent())
	}
	if recycle.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("dispatcher.sweep.recycle's parent = %v, want dispatcher.sweep", recycle.Parent().SpanID())
	}
	if recycle.StartTime().Before(root.StartTime()) || recycle.EndTime().After(root.EndTime()) {
		t.Errorf("dispatcher.sweep.recycle [%v, %v] outside dispatcher.sweep [%v, %v]",
			recycle.StartTime(), recycle.EndTime(), root.StartTime(), root.EndTime())
	}
	if !hasAttr(root.Attributes(), attribute.Int("taskd.sweep.recycled", 1)) {
		t.Errorf("dispatcher.sweep attributes %v, want taskd.sweep.recycled=1", root.Attributes())
	}
	var children int
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s of the sweep outside its trace", s.Name())
		}
		if s.Parent().SpanID() == recycle.SpanContext().SpanID() {
			children++
		}
	}
	if children == 0 {
		t.Errorf("dispatcher.sweep.recycle has no children among %v, want the lock release and the wake", spanNamesOf(spans))
	}
}

// hasAttr reports whether attrs holds want.
func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}

// TestStoreSpansNeedAParent: the instrumented MySQL and Redis clients make
// no span for a call outside a recording span (opening the pool, a
// connection's dial and HELLO, a query, a command, a pipeline), and make
// children, connection setup included, under one.
func TestStoreSpansNeedAParent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	db, err := telemetry.OpenMySQL(ctx, storetest.NewDatabase(t), p)
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rdb := testenv.Redis(t)
	if err := telemetry.InstrumentRedis(rdb, p); err != nil {
		t.Fatalf("instrument redis: %v", err)
	}
	calls := func(ctx context.Context) {
		t.Helper()
		if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Fatalf("exec: %v", err)
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatalf("ping: %v", err)
		}
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, testenv.Prefix(t)+"a")
			p.Get(ctx, testenv.Prefix(t)+"b")
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("pipeline: %v", err)
		}
	}

	calls(ctx)
	if started := rec.Started(); len(started) != 0 {
		t.Errorf("calls without a parent span started spans %v, want none", spanNamesOf(started))
	}

	// Under a recording span, on fresh connections: every span is a child.
	db.SetMaxIdleConns(0)
	rdb2 := testenv.Redis(t)
	if err := telemetry.InstrumentRedis(rdb2, p); err != nil {
		t.Fatalf("instrument redis: %v", err)
	}
	rdb = rdb2
	pctx, parent := tp.Tracer("test").Start(ctx, "parent")
	calls(pctx)
	parent.End()
	names := map[string]bool{}
	for _, s := range rec.Ended() {
		if s.Name() == "parent" {
			continue
		}
		names[s.Name()] = true
		if s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %s outside the parent's trace", s.Name())
		}
	}
	for _, want := range []string{"sql.connector.connect", "sql.conn.exec", "hello", "ping"} {
		if !names[want] {
			t.Errorf("no span %s under the parent; got %v", want, names)
		}
	}
}

// failingPurge is a sweeper store whose PurgeSkips fails.
type failingPurge struct{ sweeper.Store }

func (failingPurge) PurgeSkips(context.Context, int) (int, error) {
	return 0, errors.New("purge skips: broken")
}

// TestFailedSweepIsTraced: a sweep that did nothing but failed records a
// dispatcher.sweep span with the error.
func TestFailedSweepIsTraced(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	pl := newPipeline(t, p)
	sw, err := sweeper.New(pl.d, sweeper.Config{Store: failingPurge{pl.store}, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Sweep(t.Context()); err == nil {
		t.Fatal("sweep with a failing purge: no error")
	}
	var sweeps []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "dispatcher.sweep" {
			sweeps = append(sweeps, s)
		}
	}
	if len(sweeps) != 1 {
		t.Fatalf("spans %v, want one dispatcher.sweep", spanNamesOf(rec.Ended()))
	}
	if st := sweeps[0].Status(); st.Code != codes.Error || !strings.Contains(st.Description, "broken") {
		t.Errorf("dispatcher.sweep status = %+v, want the error", st)
	}
}
