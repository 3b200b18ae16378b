package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/tasks"
)

// instrumentationName names the dispatcher's tracer and meter.
const instrumentationName = "github.com/taskd/taskd/dispatcher"

// Span attribute keys. Task, editor and holder ids go on spans only, never
// on metrics, where they would explode cardinality.
const (
	attrTaskID     = attribute.Key("taskd.task.id")
	attrCategory   = attribute.Key("taskd.task.category")
	attrStage      = attribute.Key("taskd.task.stage")
	attrFence      = attribute.Key("taskd.fence")
	attrEditorID   = attribute.Key("taskd.editor.id")
	attrHolder     = attribute.Key("taskd.holder")
	attrCandidates = attribute.Key("taskd.candidates")
	attrTried      = attribute.Key("taskd.candidates.tried")
	attrConflicts  = attribute.Key("taskd.lock.conflicts")
	attrRefused    = attribute.Key("taskd.claims.refused")
	attrWaitMS     = attribute.Key("taskd.wait_ms")
	attrOutcome    = attribute.Key("taskd.outcome")
	attrOperation  = attribute.Key("taskd.operation")
)

// ClaimLatencyBounds are the bucket bounds of claim latencies, declared
// once: the taskd.claim.duration histogram's, and the activity history's
// (GET /v1/stats/history), so that the quantiles of one and the other
// agree.
var ClaimLatencyBounds = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
}

// QueueWaitBounds are the bucket bounds, in seconds, of the taskd.queue.wait
// histogram: from a task claimed at once to one that waited a day.
var QueueWaitBounds = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}

// telemetry holds the dispatcher's tracer and metric instruments.
type telemetry struct {
	tracer trace.Tracer

	assignments   metric.Int64Counter
	conflicts     metric.Int64Counter
	refusedClaims metric.Int64Counter
	staleWrites   metric.Int64Counter
	claimLatency  metric.Float64Histogram
	queueWait     metric.Float64Histogram
	holdTime      metric.Float64Histogram
	expired       metric.Int64Counter
	rateLimited   metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) (*telemetry, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &telemetry{tracer: tp.Tracer(instrumentationName)}
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{count}"))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string, buckets ...float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	t.assignments = counter("taskd.assignments", "Claims committed, by category.")
	t.conflicts = counter("taskd.lock.conflicts", "Candidates found locked by a competitor in Redis.")
	t.refusedClaims = counter("taskd.claims.refused", "Claims the store refused after the Redis lock was obtained.")
	t.staleWrites = counter("taskd.writes.stale", "Heartbeats, submits and releases refused as stale, by operation.")
	t.expired = counter("taskd.leases.expired", "Leases that passed without a submit or release: taken over by a claim or recycled by the sweeper, by category.")
	t.rateLimited = counter("taskd.rate_limited", "Claims refused by their category's rate limit, by category.")
	claimBuckets := make([]float64, len(ClaimLatencyBounds))
	for i, b := range ClaimLatencyBounds {
		claimBuckets[i] = b.Seconds()
	}
	t.claimLatency = seconds("taskd.claim.duration", "Time to find and commit a claim, by outcome.", claimBuckets...)
	t.queueWait = seconds("taskd.queue.wait", "Time from a task becoming claimable (insert or run_after, release, recycle, requeue, send back, retry backoff end, lease end of a claim taken over) to its claim, on the database clock, by category.",
		QueueWaitBounds...)
	t.holdTime = seconds("taskd.hold.duration", "Time from claim to submit or release, by category and operation (submit or release).",
		1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metric instruments: %w", err)
	}
	return t, nil
}

// endSpan records err on span, unless err is an expected outcome, and ends
// it.
func endSpan(span trace.Span, err error) {
	switch {
	case err == nil, errors.Is(err, ErrNoTask):
	case errors.Is(err, tasks.ErrStale), errors.Is(err, tasks.ErrHoldLimit):
		span.SetAttributes(attrOutcome.String("refused"))
	default:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// claimerAttrs describes a claimant on a span.
func claimerAttrs(c Claimant) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attrHolder.String(c.Holder)}
	if c.EditorID != 0 {
		attrs = append(attrs, attrEditorID.Int64(c.EditorID))
	}
	return attrs
}

// claimAttrs describes a claim on a span.
func claimAttrs(c *tasks.Claim) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrTaskID.Int64(c.Task.ID), attrCategory.String(c.Task.Category), attrFence.Int64(c.Fence),
	}
}

// traceParent returns the W3C traceparent of the span in ctx, to be stored
// with a claim so that the span of the write that ends it can link back.
func traceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// claimLink links to the claim span recorded in traceparent, if any.
func claimLink(traceparent string) []trace.Link {
	if traceparent == "" {
		return nil
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: sc, Attributes: []attribute.KeyValue{attrOperation.String("claim")}}}
}

// sinceSeconds is the time since start in seconds, for histograms.
func sinceSeconds(start time.Time) float64 { return time.Since(start).Seconds() }
