package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Run outcomes, the taskd.outcome attribute of taskd.worker.runs.
const (
	RunDone      = "done"       // the result was committed
	RunRetried   = "retried"    // the failure was committed; the task runs again after its backoff
	RunDead      = "dead"       // the failure was committed; no attempts left, or SkipRetry (or a snooze past the limit)
	RunSnoozed   = "snoozed"    // the snooze was committed; the task runs again after its delay, the attempt not counted
	RunLeaseLost = "lease_lost" // the claim was lost while running (its lease passed, or it was taken over or force released), or its outcome refused as stale
	RunCancelled = "cancelled"  // an operator's cancel of the task ended the claim while it ran; its outcome was dropped or refused
	RunReleased  = "released"   // the worker's shutdown stopped the run; its claim was given back
	RunError     = "error"      // the outcome's write failed; the lease will pass
)

// RunDurationBounds are the bucket bounds, in seconds, of the
// taskd.worker.run.duration histogram.
var RunDurationBounds = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600}

// ClaimBatchBounds are the bucket bounds of the taskd.worker.claim.batch
// histogram: tasks one claim round trip took.
var ClaimBatchBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500}

// meter is a Worker's metrics, observed at the few points the worker's
// logic reports to it:
//
//   - taskd.worker.runs{taskd.task.category, taskd.outcome}: runs ended, by
//     outcome (RunDone, RunRetried, RunSnoozed, RunDead, RunLeaseLost,
//     RunCancelled, RunReleased, RunError); Prometheus taskd_worker_runs_total;
//   - taskd.worker.run.duration{taskd.task.category}: the handler's run
//     time, measured under the run's span (its exemplar); Prometheus
//     taskd_worker_run_duration_seconds;
//   - taskd.worker.claim.batch: tasks per claim round trip that took any;
//     Prometheus taskd_worker_claim_batch;
//   - taskd.worker.running: the process's handlers running now (tasks in
//     flight); Prometheus taskd_worker_running;
//   - taskd.worker.slots.free: its slots with no handler running
//     (Concurrency less the running handlers); Prometheus
//     taskd_worker_slots_free;
//   - taskd.worker.backlog: outcomes waiting for their transaction (the
//     claim loop stops claiming at MaxBacklog); Prometheus
//     taskd_worker_backlog.
//
// The gauges are read when metrics are collected. With no meter provider
// (the dispatcher's is nil) it uses OpenTelemetry's global one, a no-op
// unless the embedder set one.
type meter struct {
	runs    metric.Int64Counter
	runTime metric.Float64Histogram
	batch   metric.Int64Histogram

	m                       metric.Meter
	slots, running, backlog metric.Int64ObservableGauge
	reg                     metric.Registration

	// attrs holds the attribute options of runs and runTime by runAttrs:
	// made once per category and outcome, not per run.
	attrs sync.Map
}

// runAttrs keys meter.attrs; outcome "" is runTime's.
type runAttrs struct{ category, outcome string }

// opt returns the attribute option of a category and outcome ("" for
// runTime's, by category alone).
func (m *meter) opt(category, outcome string) metric.MeasurementOption {
	k := runAttrs{category, outcome}
	if o, ok := m.attrs.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	kvs := []attribute.KeyValue{attrCategory.String(category)}
	if outcome != "" {
		kvs = append(kvs, attrOutcome.String(outcome))
	}
	o, _ := m.attrs.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kvs...)))
	return o.(metric.MeasurementOption)
}

// newMeter creates the instruments on mp; register starts observing a
// Worker's gauges.
func newMeter(mp metric.MeterProvider) (*meter, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	var mt meter
	var errs [6]error
	mt.runs, errs[0] = m.Int64Counter("taskd.worker.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Worker runs ended, by category and outcome: done, retried, snoozed, dead, lease_lost, cancelled (by an operator's cancel of the task), released (by shutdown) or error (the outcome's write failed)."))
	mt.runTime, errs[1] = m.Float64Histogram("taskd.worker.run.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a worker's handler ran, by category."), metric.WithExplicitBucketBoundaries(RunDurationBounds...))
	mt.batch, errs[2] = m.Int64Histogram("taskd.worker.claim.batch", metric.WithUnit("{task}"),
		metric.WithDescription("Tasks a worker claimed in one round trip, when it claimed any."), metric.WithExplicitBucketBoundaries(ClaimBatchBounds...))
	slots, err3 := m.Int64ObservableGauge("taskd.worker.slots.free", metric.WithUnit("{slot}"),
		metric.WithDescription("The process's worker slots with no handler running."))
	running, err4 := m.Int64ObservableGauge("taskd.worker.running", metric.WithUnit("{run}"),
		metric.WithDescription("Handlers the process's worker runs now."))
	backlog, err5 := m.Int64ObservableGauge("taskd.worker.backlog", metric.WithUnit("{outcome}"),
		metric.WithDescription("Outcomes the process's worker has waiting for their transaction."))
	errs[3], errs[4], errs[5] = err3, err4, err5
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("metric instruments: %w", err)
	}
	mt.m, mt.slots, mt.running, mt.backlog = m, slots, running, backlog
	return &mt, nil
}

// register observes w's gauges from now on, until close.
func (m *meter) register(w *Worker) error {
	reg, err := m.m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		running := w.running.Load()
		o.ObserveInt64(m.slots, int64(w.cfg.Concurrency)-running)
		o.ObserveInt64(m.running, running)
		o.ObserveInt64(m.backlog, int64(w.out.len()))
		return nil
	}, m.slots, m.running, m.backlog)
	if err != nil {
		return fmt.Errorf("metric callback: %w", err)
	}
	m.reg = reg
	return nil
}

// claimed observes a claim round trip that took n tasks.
func (m *meter) claimed(ctx context.Context, n int) {
	if n > 0 {
		m.batch.Record(ctx, int64(n))
	}
}

// ran observes a handler's run time; ctx carries the run's span.
func (m *meter) ran(ctx context.Context, category string, d time.Duration) {
	m.runTime.Record(ctx, d.Seconds(), m.opt(category, ""))
}

// ended observes the end of a run with outcome (a Run constant).
func (m *meter) ended(ctx context.Context, category, outcome string) {
	m.runs.Add(ctx, 1, m.opt(category, outcome))
}

// close stops observing the gauges.
func (m *meter) close() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
}
