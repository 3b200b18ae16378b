package delivery_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// traced is a bundle whose dispatcher, MySQL and Redis clients record spans.
type traced struct {
	*bundle
	rec *tracetest.SpanRecorder
}

func setupTraced(t *testing.T, events ...tasks.WebhookEvent) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	db, err := telemetry.OpenMySQL(t.Context(), storetest.NewDatabase(t), p)
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rdb := testenv.Redis(t)
	if err := telemetry.InstrumentRedis(rdb, p); err != nil {
		t.Fatalf("instrument redis: %v", err)
	}
	b := setup(t, setupOpts{
		Store: store.Config{WebhookEvents: events}, DB: db, Redis: rdb,
		Dispatcher: dispatcher.Config{TracerProvider: tp},
	})
	return &traced{bundle: b, rec: rec}
}

// countingStore counts the deliverer's looks for due deliveries.
type countingStore struct {
	delivery.Store
	polls atomic.Int64
}

func (s *countingStore) DueDeliveries(ctx context.Context, p tasks.DueDeliveriesParams) ([]tasks.Delivery, error) {
	defer s.polls.Add(1)
	return s.Store.DueDeliveries(ctx, p)
}

// start starts a deliverer of hook over st, stopped at the end.
func (b *traced) start(t *testing.T, st delivery.Store, hook delivery.Webhook) {
	t.Helper()
	hook.Secret = hookSecret
	w, err := delivery.New(b.D, delivery.Config{
		Store: st, Locks: b.Locks, Webhooks: []delivery.Webhook{hook}, PollInterval: 10 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stop deliverer: %v", err)
		}
	})
}

// deliverSpans returns the ended webhook.deliver spans.
func (b *traced) deliverSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range b.rec.Ended() {
		if s.Name() == "webhook.deliver" {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestDeliveryIdleIsUntraced: a deliverer polling an empty outbox, its
// store and Redis instrumented, starts no span.
func TestDeliveryIdleIsUntraced(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, tasks.WebhookSubmitted)
	rc := newReceiver(t, func(*http.Request, webhook.Event) int { return http.StatusOK })
	st := &countingStore{Store: b.Store}
	b.start(t, st, delivery.Webhook{Name: "idle", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	testenv.Eventually(t, 20*time.Second, "ten idle polls", func() bool { return st.polls.Load() >= 10 })
	if started := b.rec.Started(); len(started) != 0 {
		names := make([]string, len(started))
		for i, s := range started {
			names[i] = s.Name()
		}
		t.Errorf("idle polls started spans %v, want none", names)
	}
}

// TestDeliveryTraced: one delivery is one trace rooted at webhook.deliver,
// with its attributes, otelhttp's client span and the attempt's record
// under it, and the receiver got the trace's traceparent; an attempt the
// receiver answers 500 has status Error.
func TestDeliveryTraced(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, tasks.WebhookSubmitted)
	var mu sync.Mutex
	var parents []string
	var calls atomic.Int64
	rc := newReceiver(t, func(r *http.Request, _ webhook.Event) int {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		mu.Unlock()
		if calls.Add(1) == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ed := b.Editor(t, "ed", "hooks")
	b.Add(t, "hooks", 0, 1)
	ids := b.submitAll(t, t.Context(), ed, 1)
	before := len(b.rec.Ended())
	b.start(t, b.Store, delivery.Webhook{Name: "sink", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	testenv.Eventually(t, 20*time.Second, "two attempts traced", func() bool { return len(b.deliverSpans()) >= 2 })

	spans := b.deliverSpans()
	failed, ok := spans[0], spans[1]
	for i, s := range []sdktrace.ReadOnlySpan{failed, ok} {
		if s.Parent().IsValid() {
			t.Errorf("webhook.deliver #%d has parent %v, want a root", i+1, s.Parent())
		}
		for key, want := range map[string]attribute.Value{
			"taskd.webhook.name":        attribute.StringValue("sink"),
			"taskd.task.id":             attribute.Int64Value(ids[0]),
			"taskd.event.kind":          attribute.StringValue(string(tasks.WebhookSubmitted)),
			"taskd.webhook.attempt":     attribute.IntValue(i + 1),
			"http.response.status_code": attribute.IntValue([]int{500, 200}[i]),
			"taskd.outcome":             attribute.StringValue([]string{"error", "delivered"}[i]),
		} {
			if got, _ := attrOf(s, key); got != want {
				t.Errorf("webhook.deliver #%d: %s = %v, want %v", i+1, key, got.String(), want.String())
			}
		}
		if _, has := attrOf(s, "taskd.event.id"); !has {
			t.Errorf("webhook.deliver #%d has no taskd.event.id", i+1)
		}
	}
	if st := failed.Status(); st.Code != codes.Error {
		t.Errorf("attempt answered 500: status %+v, want Error", st)
	}
	if st := ok.Status(); st.Code == codes.Error {
		t.Errorf("delivered attempt: status %+v, want no error", st)
	}

	var client, record bool
	for _, s := range b.rec.Ended()[before:] {
		if s.SpanContext().TraceID() != ok.SpanContext().TraceID() || s.Name() == "webhook.deliver" {
			continue
		}
		switch {
		case s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == ok.SpanContext().SpanID() && s.InstrumentationScope().Name != "github.com/XSAM/otelsql":
			if _, isHTTP := attrOf(s, "http.request.method"); isHTTP {
				client = true
			}
		case s.InstrumentationScope().Name == "github.com/XSAM/otelsql":
			record = true
		}
	}
	if !client || !record {
		t.Errorf("the delivery's trace: client span %t, store spans %t; want both", client, record)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "00-" + ok.SpanContext().TraceID().String() + "-"
	if len(parents) < 2 || len(parents[1]) < len(want) || parents[1][:len(want)] != want {
		t.Errorf("the receiver got traceparent %q, want the delivery's trace %s", parents, ok.SpanContext().TraceID())
	}
}
