package worker

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// instrumentationName names the worker's tracer: the dispatcher's, whose
// spans these were.
const instrumentationName = "github.com/taskd/taskd/dispatcher"

// Span attribute keys, the dispatcher's. Task and holder ids go on spans
// only, never on metrics.
const (
	attrTaskID    = attribute.Key("taskd.task.id")
	attrCategory  = attribute.Key("taskd.task.category")
	attrFence     = attribute.Key("taskd.fence")
	attrHolder    = attribute.Key("taskd.holder")
	attrOutcome   = attribute.Key("taskd.outcome")
	attrOperation = attribute.Key("taskd.operation")
)

// endSpan records err on span, unless err is an expected outcome, and ends
// it.
func endSpan(span trace.Span, err error) {
	switch {
	case err == nil, errors.Is(err, dispatcher.ErrNoTask):
	case errors.Is(err, tasks.ErrStale), errors.Is(err, tasks.ErrHoldLimit):
		span.SetAttributes(attrOutcome.String("refused"))
	default:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// claimAttrs describes a claim on a span.
func claimAttrs(c *tasks.Claim) []attribute.KeyValue {
	return []attribute.KeyValue{
		attrTaskID.Int64(c.Task.ID), attrCategory.String(c.Task.Category), attrFence.Int64(c.Fence),
	}
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
