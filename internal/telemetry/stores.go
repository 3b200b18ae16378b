package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Store health defaults.
const (
	// StoresRefreshDefault is how long ObserveStores reuses one round of
	// checks when asked for none.
	StoresRefreshDefault = 5 * time.Second
	// StoreCheckTimeout bounds one check: a store that answers later counts
	// as down.
	StoreCheckTimeout = 2 * time.Second
)

// attrStore names the store a series is about ("mysql", "redis").
var attrStore = attribute.Key("taskd.store")

// StoreCheck is a check of one store: nil when it answers.
type StoreCheck struct {
	// Name is the store's name, the value of the series' taskd.store label.
	Name string
	// Check pings the store; its context ends after StoreCheckTimeout.
	Check func(ctx context.Context) error
}

// ObserveStores registers the gauge taskd.store.up: 1 for each store whose
// check passes, 0 for one that fails or does not answer in time. The checks
// run concurrently when metrics are collected, at most once per every (0
// means StoresRefreshDefault), so a scrape never waits on a hung store for
// longer than StoreCheckTimeout. stop unregisters the gauge. Without a meter
// provider it does nothing.
func ObserveStores(p *Providers, checks []StoreCheck, every time.Duration) (stop func(), err error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("observe stores: %w", errNilProviders)
	case len(checks) == 0:
		return nil, errors.New("observe stores: no checks")
	case every < 0:
		return nil, fmt.Errorf("observe stores: refresh interval must not be negative, got %v", every)
	case every == 0:
		every = StoresRefreshDefault
	}
	if !metering(p.MeterProvider) {
		return func() {}, nil
	}
	health := &cached[map[string]bool]{every: every, timeout: StoreCheckTimeout, fetch: func(ctx context.Context) (map[string]bool, error) {
		return checkStores(ctx, checks), nil
	}}
	m := p.MeterProvider.Meter(instrumentationName)
	up, err := m.Int64ObservableGauge("taskd.store.up",
		metric.WithDescription("1 when the store answers a ping within the check timeout, else 0, by store."))
	if err != nil {
		return nil, fmt.Errorf("observe stores: %w", err)
	}
	reg, err := m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		states, _ := health.get(ctx)
		for name, ok := range states {
			v := int64(0)
			if ok {
				v = 1
			}
			obs.ObserveInt64(up, v, metric.WithAttributes(attrStore.String(name)))
		}
		return nil
	}, up)
	if err != nil {
		return nil, fmt.Errorf("observe stores: %w", err)
	}
	return func() { _ = reg.Unregister() }, nil
}

// checkStores runs the checks concurrently and reports which passed; ctx
// bounds them all.
func checkStores(ctx context.Context, checks []StoreCheck) map[string]bool {
	results := make([]bool, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { results[i] = c.Check(ctx) == nil })
	}
	wg.Wait()
	up := make(map[string]bool, len(checks))
	for i, c := range checks {
		up[c.Name] = results[i]
	}
	return up
}
