package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/tasks"
)

// Pool observer defaults.
const (
	// PoolRefreshDefault is how long ObservePool reuses one tasks.PoolStats when
	// given no interval.
	PoolRefreshDefault = 15 * time.Second
	// PoolStatsTimeout bounds one refresh of the pool statistics.
	PoolStatsTimeout = 5 * time.Second
)

// Metric attribute keys of the pool gauges. Category matches the
// dispatcher's metrics.
const (
	attrCategory   = attribute.Key("taskd.task.category")
	attrStatus     = attribute.Key("taskd.task.status")
	attrClaimState = attribute.Key("taskd.claim.state")
)

// ObservePool registers the pool's gauges on p.MeterProvider:
//
//   - taskd.pool.tasks{taskd.task.status, taskd.task.category}: tasks by
//     status and category (Prometheus: taskd_pool_tasks). A pair that was
//     seen once and has no tasks any more reports 0 rather than vanishing;
//   - taskd.pool.claims{taskd.claim.state}: claims that are "live", and
//     "expired" ones whose lease passed but that no claim or sweep has taken
//     back yet;
//   - taskd.pool.holders: distinct holders with a live claim.
//
// The gauges are read when metrics are collected (a Prometheus scrape).
// stats (typically a *store.Store's PoolStats with the default window) scans an
// index, so its result is reused for every (default PoolRefreshDefault);
// concurrent collections share one call, which gets PoolStatsTimeout. When
// the last call failed the gauges report nothing until the next one
// succeeds, and the error reaches the OpenTelemetry error handler.
//
// stop unregisters the gauges. ObservePool fails when p is nil, every is
// negative, or the meter provider refuses the instruments.
func ObservePool(p *Providers, stats func(ctx context.Context) (*tasks.PoolStats, error), every time.Duration) (stop func(), err error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("observe pool: %w", errNilProviders)
	case stats == nil:
		return nil, errors.New("observe pool: nil stats function")
	case every < 0:
		return nil, fmt.Errorf("observe pool: refresh interval must not be negative, got %v", every)
	case every == 0:
		every = PoolRefreshDefault
	}
	if !metering(p.MeterProvider) {
		return func() {}, nil
	}
	o := newPoolObserver(stats, every, time.Now)
	reg, err := o.register(p.MeterProvider.Meter(instrumentationName))
	if err != nil {
		return nil, fmt.Errorf("observe pool: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// catStatus is one series of taskd.pool.tasks.
type catStatus struct {
	category string
	status   tasks.Status
}

// poolObserver caches the pool statistics for the gauges' callback, and
// remembers every category and status it has reported.
type poolObserver struct {
	stats *cached[*tasks.PoolStats]

	mu   sync.Mutex
	seen map[catStatus]bool
}

func newPoolObserver(stats func(ctx context.Context) (*tasks.PoolStats, error), every time.Duration, now func() time.Time) *poolObserver {
	return &poolObserver{
		stats: &cached[*tasks.PoolStats]{fetch: stats, every: every, timeout: PoolStatsTimeout, now: now},
		seen:  map[catStatus]bool{},
	}
}

// register creates the gauges on m and the callback that observes them.
func (o *poolObserver) register(m metric.Meter) (metric.Registration, error) {
	taskGauge, err1 := m.Int64ObservableGauge("taskd.pool.tasks",
		metric.WithDescription("Tasks in the pool, by status and category."), metric.WithUnit("{task}"))
	claimGauge, err2 := m.Int64ObservableGauge("taskd.pool.claims",
		metric.WithDescription("Claims by state: live, or expired and not yet taken back."), metric.WithUnit("{claim}"))
	holderGauge, err3 := m.Int64ObservableGauge("taskd.pool.holders",
		metric.WithDescription("Distinct holders with a live claim."), metric.WithUnit("{holder}"))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("instruments: %w", err)
	}
	return m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		st, series, err := o.get(ctx)
		if err != nil {
			return err
		}
		for _, s := range series {
			obs.ObserveInt64(taskGauge, s.n, metric.WithAttributes(
				attrStatus.String(string(s.status)), attrCategory.String(s.category)))
		}
		obs.ObserveInt64(claimGauge, st.Live, metric.WithAttributes(attrClaimState.String("live")))
		obs.ObserveInt64(claimGauge, st.Expired, metric.WithAttributes(attrClaimState.String("expired")))
		obs.ObserveInt64(holderGauge, st.Holders)
		return nil
	}, taskGauge, claimGauge, holderGauge)
}

// poolSeries is one observation of taskd.pool.tasks.
type poolSeries struct {
	catStatus
	n int64
}

// get returns the cached statistics, calling stats first when they are
// older than every, and the task counts to observe: the current ones and a
// zero for every pair seen before that has none now.
func (o *poolObserver) get(ctx context.Context) (*tasks.PoolStats, []poolSeries, error) {
	last, err := o.stats.get(ctx)
	if err == nil && last == nil {
		err = errors.New("no statistics")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pool stats: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	series := make([]poolSeries, 0, len(o.seen)+len(last.ByCategory))
	current := make(map[catStatus]bool, len(last.ByCategory))
	for _, c := range last.ByCategory {
		k := catStatus{c.Category, c.Status}
		current[k] = true
		o.seen[k] = true
		series = append(series, poolSeries{k, c.Count})
	}
	for k := range o.seen {
		if !current[k] {
			series = append(series, poolSeries{k, 0})
		}
	}
	return last, series, nil
}
