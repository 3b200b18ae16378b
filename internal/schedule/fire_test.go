package schedule

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	os.Exit(m.Run())
}

// failingAdder fails every insert.
type failingAdder struct{}

func (failingAdder) AddTasks(context.Context, []tasks.NewTask) ([]tasks.Inserted, error) {
	return nil, errors.New("insert: broken")
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestFireTraced: a tick that adds its task records one schedule.fire span,
// with no other span, its store and Redis instrumented; the same tick fired
// by a second replica, which finds the task there, records nothing; a tick
// whose insert fails records a schedule.fire span with status Error.
func TestFireTraced(t *testing.T) {
	t.Parallel()
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
	b := dispatchtest.New(t, dispatchtest.Options{DB: db, Redis: rdb, Dispatcher: dispatcher.Config{TracerProvider: tp}})
	digest := Periodic{Name: "digest", Spec: "@hourly", Task: tasks.NewTask{Category: "digests", Title: "Digest"}}
	cfg := Config{Schedules: []Periodic{digest}, TracerProvider: tp}
	replicas := make([]*Scheduler, 2)
	for i := range replicas {
		if replicas[i], err = New(b.D, cfg); err != nil {
			t.Fatal(err)
		}
	}
	tick := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)

	replicas[0].fire(t.Context(), digest, tick)
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != "schedule.fire" {
		t.Fatalf("a tick that added its task recorded %v, want one schedule.fire", spanNames(ended))
	}
	fire := ended[0]
	var id int64
	if err := db.GetContext(t.Context(), &id, "SELECT id FROM tasks WHERE task_key = ?", Key("digest", tick)); err != nil {
		t.Fatalf("the tick's task: %v", err)
	}
	for key, want := range map[attribute.Key]attribute.Value{
		attrSchedule: attribute.StringValue("digest"),
		attrTick:     attribute.StringValue("2026-11-28T03:00:00Z"),
		attrInserted: attribute.IntValue(1),
		attrTaskID:   attribute.Int64Value(id),
	} {
		if got := attrOf(fire, key); got != want {
			t.Errorf("schedule.fire %s = %v, want %v", key, got.String(), want.String())
		}
	}
	if fire.Parent().IsValid() || fire.Status().Code == codes.Error {
		t.Errorf("schedule.fire: parent %v, status %+v; want a root without error", fire.Parent(), fire.Status())
	}

	replicas[1].fire(t.Context(), digest, tick)
	if started := rec.Started(); len(started) != 1 {
		t.Errorf("the second replica's tick, which added nothing, started spans %v", spanNames(started[1:]))
	}

	broken, err := New(failingAdder{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	broken.fire(t.Context(), digest, tick.Add(time.Hour))
	ended = rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("a failed tick recorded %v, want a second schedule.fire", spanNames(ended))
	}
	if st := ended[1].Status(); st.Code != codes.Error || !strings.Contains(st.Description, "broken") {
		t.Errorf("failed schedule.fire status %+v, want the error", st)
	}
	if got := attrOf(ended[1], attrInserted); got != attribute.IntValue(0) {
		t.Errorf("failed schedule.fire inserted = %v, want 0", got.String())
	}
}

func spanNames[S sdktrace.ReadOnlySpan](spans []S) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	return names
}
