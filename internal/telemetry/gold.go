package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// GoldRefreshDefault is how long ObserveGold reuses one measurement when
// given no interval.
const GoldRefreshDefault = 5 * time.Minute

// GoldTimeout bounds one measurement of every category.
const GoldTimeout = 30 * time.Second

// GoldAccuracy is the share of one category's gold answers that were correct.
type GoldAccuracy struct {
	Category string
	// Value is correct answers / answers, 0..1.
	Value float64
}

// ObserveGold registers the gauge taskd.gold.accuracy (Prometheus:
// taskd_gold_accuracy{taskd_task_category}): the share of the editors' gold
// answers that were correct, per category, as measure (typically the
// engine's, over the last 7 days) returns it; a category without answers is
// left out by measure and so absent. Per category only: an editor's accuracy
// is in the API, not in a label. measure is called at most once per every
// (default GoldRefreshDefault) by this process, concurrent collections
// sharing the call, which gets GoldTimeout; when it failed, the gauge
// reports nothing until the next call succeeds, and the error reaches the
// OpenTelemetry error handler.
//
// stop unregisters the gauge. ObserveGold fails when p or measure is nil,
// every is negative, or the meter provider refuses the instrument.
func ObserveGold(p *Providers, measure func(ctx context.Context) ([]GoldAccuracy, error), every time.Duration) (stop func(), err error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("observe gold: %w", errNilProviders)
	case measure == nil:
		return nil, errors.New("observe gold: nil measure function")
	case every < 0:
		return nil, fmt.Errorf("observe gold: refresh interval must not be negative, got %v", every)
	case every == 0:
		every = GoldRefreshDefault
	}
	if !metering(p.MeterProvider) {
		return func() {}, nil
	}
	c := &cached[[]GoldAccuracy]{fetch: measure, every: every, timeout: GoldTimeout, now: time.Now}
	reg, err := registerGold(p.MeterProvider.Meter(instrumentationName), c)
	if err != nil {
		return nil, fmt.Errorf("observe gold: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// registerGold creates the gauge on m and the callback that observes c.
func registerGold(m metric.Meter, c *cached[[]GoldAccuracy]) (metric.Registration, error) {
	acc, err := m.Float64ObservableGauge("taskd.gold.accuracy",
		metric.WithDescription("Share of the editors' gold answers of the category that were correct (0..1); absent without answers."))
	if err != nil {
		return nil, fmt.Errorf("instruments: %w", err)
	}
	return m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		as, err := c.get(ctx)
		if err != nil {
			return fmt.Errorf("gold: %w", err)
		}
		for _, a := range as {
			obs.ObserveFloat64(acc, a.Value, metric.WithAttributes(attrCategory.String(a.Category)))
		}
		return nil
	}, acc)
}
