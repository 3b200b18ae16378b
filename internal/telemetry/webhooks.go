package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/tasks"
)

// WebhookRefreshDefault is how long ObserveWebhooks reuses one backlog when
// given no interval.
const WebhookRefreshDefault = 15 * time.Second

const (
	attrWebhook       = attribute.Key("taskd.webhook.name")
	attrDeliveryState = attribute.Key("taskd.delivery.state")
)

// ObserveWebhooks registers the webhook backlog's gauges on p.MeterProvider:
//
//   - taskd.webhook.backlog: events still to be delivered, to any webhook:
//     new events not fanned out yet plus pending deliveries (Prometheus:
//     taskd_webhook_backlog);
//   - taskd.webhook.deliveries{taskd.webhook.name, taskd.delivery.state}:
//     deliveries that are "pending" or "failed", by webhook. Each webhook in
//     names reports both states, 0 when it has none.
//
// backlog (typically a *store.Store's WebhookBacklog) is called when metrics
// are collected, at most once every (default WebhookRefreshDefault), with
// PoolStatsTimeout. stop unregisters the gauges.
func ObserveWebhooks(p *Providers, names []string, backlog func(ctx context.Context) (*tasks.WebhookBacklog, error), every time.Duration) (stop func(), err error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("observe webhooks: %w", errNilProviders)
	case backlog == nil:
		return nil, errors.New("observe webhooks: nil backlog function")
	case every < 0:
		return nil, fmt.Errorf("observe webhooks: refresh interval must not be negative, got %v", every)
	case every == 0:
		every = WebhookRefreshDefault
	}
	if !metering(p.MeterProvider) {
		return func() {}, nil
	}
	m := p.MeterProvider.Meter(instrumentationName)
	total, err1 := m.Int64ObservableGauge("taskd.webhook.backlog",
		metric.WithDescription("Webhook events still to be delivered: new events plus pending deliveries."), metric.WithUnit("{event}"))
	byHook, err2 := m.Int64ObservableGauge("taskd.webhook.deliveries",
		metric.WithDescription("Webhook deliveries that are pending or failed, by webhook."), metric.WithUnit("{delivery}"))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("observe webhooks: instruments: %w", err)
	}
	bl := &cached[*tasks.WebhookBacklog]{fetch: backlog, every: every, timeout: PoolStatsTimeout}
	reg, err := m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		last, err := bl.get(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("webhook backlog: %w", err)
		case last == nil:
			return errors.New("webhook backlog: none")
		}
		obs.ObserveInt64(total, last.PendingTotal())
		for _, n := range names {
			obs.ObserveInt64(byHook, last.Pending[n], metric.WithAttributes(attrWebhook.String(n), attrDeliveryState.String("pending")))
			obs.ObserveInt64(byHook, last.Failed[n], metric.WithAttributes(attrWebhook.String(n), attrDeliveryState.String("failed")))
		}
		return nil
	}, total, byHook)
	if err != nil {
		return nil, fmt.Errorf("observe webhooks: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}
