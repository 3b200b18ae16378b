package telemetry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func TestObserveStores(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var pings atomic.Int64
	var redisDown atomic.Bool
	stop, err := ObserveStores(&Providers{MeterProvider: mp}, []StoreCheck{
		{Name: "mysql", Check: func(context.Context) error { pings.Add(1); return nil }},
		{Name: "redis", Check: func(context.Context) error {
			pings.Add(1)
			if redisDown.Load() {
				return errors.New("connection refused")
			}
			return nil
		}},
		{Name: "hung", Check: func(ctx context.Context) error {
			pings.Add(1)
			<-ctx.Done() // answers only when its time is up
			return ctx.Err()
		}},
	}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	checkPoints(t, collect(t, reader), map[string]int64{
		"taskd.store.up{taskd.store=mysql}": 1,
		"taskd.store.up{taskd.store=redis}": 1,
		"taskd.store.up{taskd.store=hung}":  0,
	})
	// Within the refresh interval the last round is reused.
	redisDown.Store(true)
	collect(t, reader)
	if n := pings.Load(); n != 3 {
		t.Errorf("%d pings for two collections within the refresh interval, want 3", n)
	}
	stop()
	if got := collect(t, reader); len(got) != 0 {
		t.Errorf("after stop: %v", got)
	}
}

func TestObserveStoresRechecks(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var down atomic.Bool
	stop, err := ObserveStores(&Providers{MeterProvider: mp}, []StoreCheck{
		{Name: "redis", Check: func(context.Context) error {
			if down.Load() {
				return errors.New("connection refused")
			}
			return nil
		}},
	}, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	checkPoints(t, collect(t, reader), map[string]int64{"taskd.store.up{taskd.store=redis}": 1})
	down.Store(true)
	checkPoints(t, collect(t, reader), map[string]int64{"taskd.store.up{taskd.store=redis}": 0})
}
