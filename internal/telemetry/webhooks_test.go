package telemetry

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/taskd/taskd/tasks"
)

func TestObserveWebhooks(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	calls := 0
	bl := &tasks.WebhookBacklog{New: 2, Pending: map[string]int64{"a": 5}, Failed: map[string]int64{"b": 1}}
	stop, err := ObserveWebhooks(&Providers{MeterProvider: mp}, []string{"a", "b"}, func(context.Context) (*tasks.WebhookBacklog, error) {
		calls++
		return bl, nil
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkPoints(t, collect(t, reader), map[string]int64{
		"taskd.webhook.backlog{}": 7,
		"taskd.webhook.deliveries{taskd.delivery.state=pending,taskd.webhook.name=a}": 5,
		"taskd.webhook.deliveries{taskd.delivery.state=failed,taskd.webhook.name=a}":  0,
		"taskd.webhook.deliveries{taskd.delivery.state=pending,taskd.webhook.name=b}": 0,
		"taskd.webhook.deliveries{taskd.delivery.state=failed,taskd.webhook.name=b}":  1,
	})
	collect(t, reader)
	if calls != 1 {
		t.Errorf("%d backlog reads for two collections within the refresh interval, want 1", calls)
	}
	stop()
	if got := collect(t, reader); len(got) != 0 {
		t.Errorf("after stop: %v", got)
	}
}
