package telemetry

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Limits of the traces Config.KeepFailed holds back until they end.
const (
	// KeepFailedMaxSpans is how many spans of one unsampled trace are held
	// until its local root ends; further spans of that trace are dropped
	// (and counted), and the trace is exported without them if it failed.
	KeepFailedMaxSpans = 128
	// KeepFailedMaxTraces is how many unsampled traces are held at once; a
	// trace started while that many are open is not held (and counted), so
	// that it is not exported even if it fails. A long poll holds its trace
	// for as long as it waits.
	KeepFailedMaxTraces = 4096
	// keepFailedMaxAge is the age past which an open trace is given up
	// when the table is full: longer than any request (a long poll waits at
	// most 15 minutes), so only a local root that never ended is that old.
	keepFailedMaxAge = 30 * time.Minute
	// keepFailedRecent is how many kept traces are remembered, so that a
	// span of theirs that ends after their local root is exported too.
	keepFailedRecent = 256
)

// NewTracerProvider returns the tracer provider Setup builds for cfg's
// sampling (SampleRatio, KeepFailed), exporting to exp in batches; opts are
// applied after, so that a resource or span limits may be added. Setup's
// Providers.Shutdown shuts it down; a caller of NewTracerProvider shuts it
// down itself, which flushes and stops exp.
func NewTracerProvider(exp sdktrace.SpanExporter, cfg Config, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	ratio := sdktrace.TraceIDRatioBased(cfg.SampleRatio)
	if !cfg.KeepFailed {
		opts = append([]sdktrace.TracerProviderOption{
			sdktrace.WithSampler(sdktrace.ParentBased(ratio)),
			sdktrace.WithBatcher(exp),
		}, opts...)
		return sdktrace.NewTracerProvider(opts...)
	}
	opts = append([]sdktrace.TracerProviderOption{
		sdktrace.WithSampler(keepFailedSampler{ratio: ratio}),
		sdktrace.WithSpanProcessor(newKeepFailedProcessor(sdktrace.NewBatchSpanProcessor(exp), KeepFailedMaxSpans, KeepFailedMaxTraces)),
	}, opts...)
	return sdktrace.NewTracerProvider(opts...)
}

// keepFailedSampler samples as ParentBased(ratio) does, except that the
// spans it does not sample are recorded all the same (RecordOnly), for
// keepFailedProcessor to decide once their trace has ended:
//
//   - a root span: the ratio decides; not chosen, it is recorded;
//   - under a sampled parent, local or remote: sampled;
//   - under a remote parent that was not sampled: recorded, so that a
//     request that fails is kept even when its caller did not sample it
//     (the backend then shows this process's part of the trace alone);
//   - under a local parent that was not sampled: recorded when the parent
//     is recording (a trace held back), dropped when it is not (a span
//     context made to silence the calls under it).
type keepFailedSampler struct{ ratio sdktrace.Sampler }

// ShouldSample decides for the span p describes.
func (s keepFailedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	switch {
	case !psc.IsValid():
		res := s.ratio.ShouldSample(p)
		if res.Decision == sdktrace.Drop {
			res.Decision = sdktrace.RecordOnly
		}
		return res
	case psc.IsSampled():
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: psc.TraceState()}
	case psc.IsRemote(), trace.SpanFromContext(p.ParentContext).IsRecording():
		return sdktrace.SamplingResult{Decision: sdktrace.RecordOnly, Tracestate: psc.TraceState()}
	default:
		return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: psc.TraceState()}
	}
}

// Description names the sampler.
func (s keepFailedSampler) Description() string {
	return fmt.Sprintf("KeepFailed{%s}", s.ratio.Description())
}

// keepFailedProcessor passes sampled spans on to next, and holds the ended
// spans of each unsampled trace (recorded by keepFailedSampler) until the
// trace's local roots (its spans whose parent is invalid or remote) have
// all ended. The trace is then passed on to next, marked sampled, if any of
// its spans failed (see failed), and dropped otherwise. At most maxTraces
// traces of at most maxSpans spans are held; what does not fit is dropped
// and counted.
type keepFailedProcessor struct {
	next      sdktrace.SpanProcessor
	maxSpans  int
	maxTraces int

	mu     sync.Mutex
	traces map[trace.TraceID]*heldTrace
	recent [keepFailedRecent]trace.TraceID // kept traces, a ring
	nextID int                             // the ring's next slot

	droppedSpans  atomic.Int64 // spans over maxSpans
	droppedTraces atomic.Int64 // traces over maxTraces
}

// heldTrace is an unsampled trace whose local roots have not all ended.
type heldTrace struct {
	start  time.Time
	roots  int // local roots started and not ended
	spans  []sdktrace.ReadOnlySpan
	failed bool
}

func newKeepFailedProcessor(next sdktrace.SpanProcessor, maxSpans, maxTraces int) *keepFailedProcessor {
	return &keepFailedProcessor{next: next, maxSpans: maxSpans, maxTraces: maxTraces,
		traces: map[trace.TraceID]*heldTrace{}}
}

// localRoot reports whether a span with parent is the root of its trace in
// this process.
func localRoot(parent trace.SpanContext) bool { return !parent.IsValid() || parent.IsRemote() }

// OnStart opens the held trace of an unsampled local root.
func (p *keepFailedProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	p.next.OnStart(ctx, s)
	sc := s.SpanContext()
	if sc.IsSampled() || !localRoot(s.Parent()) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.traces[sc.TraceID()]; t != nil {
		t.roots++
		return
	}
	if len(p.traces) >= p.maxTraces && !p.evictStale(time.Now()) {
		p.dropped(&p.droppedTraces, "traces held at once", p.maxTraces)
		return
	}
	p.traces[sc.TraceID()] = &heldTrace{start: time.Now(), roots: 1}
}

// evictStale drops the held traces older than keepFailedMaxAge and reports
// whether it dropped any. p.mu is held.
func (p *keepFailedProcessor) evictStale(now time.Time) bool {
	var evicted bool
	for id, t := range p.traces {
		if now.Sub(t.start) > keepFailedMaxAge {
			delete(p.traces, id)
			p.droppedTraces.Add(1)
			evicted = true
		}
	}
	return evicted
}

// OnEnd passes s on if sampled; otherwise holds it with its trace and, when
// s is the trace's last local root to end, passes the trace on if it failed.
func (p *keepFailedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	if sc.IsSampled() {
		p.next.OnEnd(s)
		return
	}
	id := sc.TraceID()
	isFailed := failed(s)
	p.mu.Lock()
	t := p.traces[id]
	if t == nil {
		// Not held: over maxTraces, or a span that ended after its trace's
		// local roots, passed on if the trace was kept.
		kept := p.keptRecently(id)
		p.mu.Unlock()
		if kept {
			p.next.OnEnd(sampledSpan{s})
		}
		return
	}
	if len(t.spans) < p.maxSpans {
		t.spans = append(t.spans, s)
	} else {
		p.dropped(&p.droppedSpans, "spans held per trace", p.maxSpans)
	}
	t.failed = t.failed || isFailed
	if !localRoot(s.Parent()) {
		p.mu.Unlock()
		return
	}
	if t.roots--; t.roots > 0 {
		p.mu.Unlock()
		return
	}
	delete(p.traces, id)
	if t.failed {
		p.recent[p.nextID] = id
		p.nextID = (p.nextID + 1) % len(p.recent)
	}
	p.mu.Unlock()
	if t.failed {
		for _, s := range t.spans {
			p.next.OnEnd(sampledSpan{s})
		}
	}
}

// keptRecently reports whether the trace id was kept lately. p.mu is held.
func (p *keepFailedProcessor) keptRecently(id trace.TraceID) bool {
	for _, k := range p.recent {
		if k == id {
			return true
		}
	}
	return false
}

// dropped counts a span or trace dropped over a limit, and reports the
// first and every 1024th to the OpenTelemetry error handler.
func (p *keepFailedProcessor) dropped(n *atomic.Int64, what string, limit int) {
	if c := n.Add(1); c%1024 == 1 {
		otel.Handle(fmt.Errorf("keep failed traces: over %d %s: %d dropped so far", limit, what, c))
	}
}

// Shutdown drops the traces still held and shuts next down.
func (p *keepFailedProcessor) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	clear(p.traces)
	p.mu.Unlock()
	if err := p.next.Shutdown(ctx); err != nil {
		return fmt.Errorf("keep failed traces: %w", err)
	}
	return nil
}

// ForceFlush flushes next; traces still open stay held.
func (p *keepFailedProcessor) ForceFlush(ctx context.Context) error {
	if err := p.next.ForceFlush(ctx); err != nil {
		return fmt.Errorf("keep failed traces: %w", err)
	}
	return nil
}

// Outcomes of the dispatcher's and the worker's spans (the taskd.outcome
// attribute) that make a trace worth keeping: a write refused as stale or
// over the hold limit (the API's 409), a claim that failed, a claim whose
// submit failed, a task run whose lease was lost. A run an operator's cancel
// ended (cancelled) is not one: the cancel was asked for, and its trace is
// the cancel's request's.
var failedOutcomes = map[string]bool{"refused": true, "error": true, "submit_failed": true, "lease_lost": true}

// failed reports whether s makes its trace worth keeping: its status is
// Error; or its taskd.outcome is refused, error, submit_failed or
// lease_lost; or it is an HTTP server span that answered 5xx, or 4xx other
// than 404 (a refusal: 401, 403, 409, 422, 429...; a 404 is a lookup that
// found nothing).
//
// A client span (a Redis command, an SQL statement, an outgoing HTTP request)
// never does by itself: its error is the operation's above it to judge. A
// Redis EVALSHA answered NOSCRIPT and then run as EVAL, or a deadlock
// victim's transaction run again, is an operation that went well; one that
// failed says so on its own span.
func failed(s sdktrace.ReadOnlySpan) bool {
	if s.SpanKind() == trace.SpanKindClient {
		return false
	}
	if s.Status().Code == codes.Error {
		return true
	}
	server := s.SpanKind() == trace.SpanKindServer
	for _, kv := range s.Attributes() {
		switch {
		case kv.Key == "taskd.outcome":
			if failedOutcomes[kv.Value.AsString()] {
				return true
			}
		case server && kv.Key == semconv.HTTPResponseStatusCodeKey:
			if code := kv.Value.AsInt64(); code >= 500 || (code >= 400 && code != 404) {
				return true
			}
		}
	}
	return false
}

// sampledSpan is an ended span of an unsampled trace that was kept: it says
// it was sampled, so that the batch span processor, which exports sampled
// spans only, exports it.
type sampledSpan struct{ sdktrace.ReadOnlySpan }

// SpanContext is the span's, marked sampled.
func (s sampledSpan) SpanContext() trace.SpanContext {
	sc := s.ReadOnlySpan.SpanContext()
	return sc.WithTraceFlags(sc.TraceFlags().WithSampled(true))
}
