package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Agreement gauges: how often and over what they are measured.
const (
	// AgreementRefreshDefault is how long ObserveAgreement reuses one
	// measurement when given no interval: each reads up to
	// tasks.AgreementLimitDefault results per category.
	AgreementRefreshDefault = 5 * time.Minute
	// AgreementTimeout bounds one measurement of every category.
	AgreementTimeout = 30 * time.Second
)

// attrMetric names the metric of an alpha (nominal or interval).
var attrMetric = attribute.Key("taskd.agreement.metric")

// AgreementAlpha is one category's Krippendorff's alpha with one metric.
type AgreementAlpha struct {
	Category string
	// Metric is "nominal" or "interval".
	Metric string
	Value  float64
}

// ObserveAgreement registers the gauge taskd.agreement.alpha (Prometheus:
// taskd_agreement_alpha{taskd_task_category, taskd_agreement_metric}):
// Krippendorff's alpha of the editors' results over each category's overlap
// groups, as measure (typically the engine's, over the last 7 days) returns it.
// An alpha that is undefined (no group with two values, no variation) is left
// out by measure and so absent. measure is called at most once per every
// (default AgreementRefreshDefault) by this process, concurrent collections
// sharing the call, which gets AgreementTimeout; when it failed, the gauge
// reports nothing until the next call succeeds, and the error reaches the
// OpenTelemetry error handler.
//
// stop unregisters the gauge. ObserveAgreement fails when p or measure is nil,
// every is negative, or the meter provider refuses the instrument.
func ObserveAgreement(p *Providers, measure func(ctx context.Context) ([]AgreementAlpha, error), every time.Duration) (stop func(), err error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("observe agreement: %w", errNilProviders)
	case measure == nil:
		return nil, errors.New("observe agreement: nil measure function")
	case every < 0:
		return nil, fmt.Errorf("observe agreement: refresh interval must not be negative, got %v", every)
	case every == 0:
		every = AgreementRefreshDefault
	}
	if !metering(p.MeterProvider) {
		return func() {}, nil
	}
	c := &cached[[]AgreementAlpha]{fetch: measure, every: every, timeout: AgreementTimeout, now: time.Now}
	reg, err := registerAgreement(p.MeterProvider.Meter(instrumentationName), c)
	if err != nil {
		return nil, fmt.Errorf("observe agreement: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// registerAgreement creates the gauge on m and the callback that observes c.
func registerAgreement(m metric.Meter, c *cached[[]AgreementAlpha]) (metric.Registration, error) {
	alpha, err := m.Float64ObservableGauge("taskd.agreement.alpha",
		metric.WithDescription("Krippendorff's alpha of the editors' results over the category's overlap groups (1 perfect agreement, 0 chance, below 0 systematic disagreement); absent while undefined."))
	if err != nil {
		return nil, fmt.Errorf("instruments: %w", err)
	}
	return m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		as, err := c.get(ctx)
		if err != nil {
			return fmt.Errorf("agreement: %w", err)
		}
		for _, a := range as {
			obs.ObserveFloat64(alpha, a.Value, metric.WithAttributes(attrCategory.String(a.Category), attrMetric.String(a.Metric)))
		}
		return nil
	}, alpha)
}
