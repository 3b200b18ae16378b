package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/tasks"
)

// QueueRefreshDefault is how long ObserveQueues reuses one answer when given
// no interval.
const QueueRefreshDefault = 5 * time.Second

// ObserveQueues registers the gauges operators and autoscalers (KEDA, an HPA)
// scale workers on, per category (taskd.task.category):
//
//   - taskd.oldest_claimable.age: how long the category's oldest claimable
//     task has been claimable (Prometheus:
//     taskd_oldest_claimable_age_seconds), 0 when none is;
//   - taskd.overdue.tasks: its claimable tasks past their due_at
//     (Prometheus: taskd_overdue_tasks).
//
// A category that was reported once and has no pending task any more (or was
// paused) reports 0 rather than vanishing, so that a scaler reads 0, not an
// absent series. The gauges are read when metrics are collected; stats
// (typically a *store.Store's QueueStats, two reads of indexes costing a few
// entries per category) is called at most once per every (default
// QueueRefreshDefault) by this process, and concurrent collections share one
// call, which gets PoolStatsTimeout: N replicas scraped every 15 s cost the
// database N such reads per 15 s. When the last call failed the gauges report
// nothing until the next one succeeds, and the error reaches the
// OpenTelemetry error handler.
//
// stop unregisters the gauges. ObserveQueues fails when p is nil, stats is
// nil, every is negative, or the meter provider refuses the instruments.
func ObserveQueues(p *Providers, stats func(ctx context.Context) ([]tasks.QueueStat, error), every time.Duration) (stop func(), err error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("observe queues: %w", errNilProviders)
	case stats == nil:
		return nil, errors.New("observe queues: nil stats function")
	case every < 0:
		return nil, fmt.Errorf("observe queues: refresh interval must not be negative, got %v", every)
	case every == 0:
		every = QueueRefreshDefault
	}
	if !metering(p.MeterProvider) {
		return func() {}, nil
	}
	o := &queueObserver{
		stats: &cached[[]tasks.QueueStat]{fetch: stats, every: every, timeout: PoolStatsTimeout, now: time.Now},
		seen:  map[string]bool{},
	}
	reg, err := o.register(p.MeterProvider.Meter(instrumentationName))
	if err != nil {
		return nil, fmt.Errorf("observe queues: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// queueObserver caches the queue statistics for the gauges' callback, and
// remembers every category it has reported.
type queueObserver struct {
	stats *cached[[]tasks.QueueStat]

	mu   sync.Mutex
	seen map[string]bool
}

// register creates the gauges on m and the callback that observes them.
func (o *queueObserver) register(m metric.Meter) (metric.Registration, error) {
	age, err1 := m.Float64ObservableGauge("taskd.oldest_claimable.age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest claimable task of the category has been claimable (since its insert or run_after, release, recycle, requeue, send back or retry backoff end); 0 when none is."))
	overdue, err2 := m.Int64ObservableGauge("taskd.overdue.tasks", metric.WithUnit("{task}"),
		metric.WithDescription("Claimable tasks of the category past their due_at."))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("instruments: %w", err)
	}
	return m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		qs, err := o.stats.get(ctx)
		if err != nil {
			return fmt.Errorf("queue stats: %w", err)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		current := make(map[string]bool, len(qs))
		for _, q := range qs {
			current[q.Category] = true
			o.seen[q.Category] = true
			cat := metric.WithAttributes(attrCategory.String(q.Category))
			obs.ObserveFloat64(age, q.OldestClaimable.Seconds(), cat)
			obs.ObserveInt64(overdue, q.Overdue, cat)
		}
		for c := range o.seen {
			if !current[c] {
				cat := metric.WithAttributes(attrCategory.String(c))
				obs.ObserveFloat64(age, 0, cat)
				obs.ObserveInt64(overdue, 0, cat)
			}
		}
		return nil
	}, age, overdue)
}
