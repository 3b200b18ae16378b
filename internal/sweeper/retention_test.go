package sweeper_test

import (
	"context"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/tasks"
)

// purgeGate holds every PurgeTasks call until the test opens the gate, so
// that a sweep can be caught purging.
type purgeGate struct {
	*store.Store
	entered chan struct{}
	open    chan struct{}
}

func (g *purgeGate) PurgeTasks(ctx context.Context, st tasks.Status, keep time.Duration, limit int) (store.Purged, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.open:
		return g.Store.PurgeTasks(ctx, st, keep, limit)
	case <-ctx.Done():
		return store.Purged{}, context.Cause(ctx)
	}
}

// purgedRows sums taskd.retention.purged_rows by table.
func purgedRows(t *testing.T, r sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "taskd.retention.purged_rows" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				table, _ := p.Attributes.Value("taskd.table")
				out[table.AsString()] += p.Value
			}
		}
	}
	return out
}

// Two replicas sweep with retention on: the one holding the sweep lock
// purges, in batches, and counts the rows by table; the other skips. A
// pending task and a task done within the retention stay.
func TestSweepPurgesOnOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	old := b.Add(t, "news", 0, 3)
	recent := b.Add(t, "news", 0, 1)[0]
	pending := b.Add(t, "news", 0, 1)[0]
	for _, id := range old {
		b.DB.MustExecContext(ctx, `UPDATE tasks SET status = 'done', done_at = NOW(3) - INTERVAL 1 HOUR WHERE id = ?`, id)
	}
	b.DB.MustExecContext(ctx, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE id = ?`, recent)

	reader := sdkmetric.NewManualReader()
	d1, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{KeyPrefix: b.Prefix,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	keep := sweeper.Retention{Done: time.Minute, Batch: 2, Pause: time.Millisecond}
	gate := &purgeGate{Store: b.Store, entered: make(chan struct{}, 1), open: make(chan struct{})}
	s1, err := sweeper.New(d1, sweeper.Config{Store: gate, Locks: b.Locks, Schedule: "1m", Retention: keep})
	if err != nil {
		t.Fatal(err)
	}
	s2 := b.newSweeper(t, sweeper.Config{Schedule: "1m", Retention: keep})

	done := make(chan sweeper.Result, 1)
	go func() {
		res, err := s1.Sweep(ctx)
		if err != nil {
			t.Errorf("replica 1 sweep: %v", err)
		}
		done <- res
	}()
	awaitSweepValue(t, gate.entered, 10*time.Second, "replica 1 purging")
	if res := sweepOnce(t, s2); res != (sweeper.Result{Skipped: true}) {
		t.Errorf("replica 2 swept while replica 1 was purging: %+v", res)
	}
	var n int
	if err := b.DB.GetContext(ctx, &n, `SELECT COUNT(*) FROM tasks`); err != nil || n != 5 {
		t.Errorf("tasks while replica 1 waits = %d (%v), want all 5", n, err)
	}
	close(gate.open)
	if res := awaitSweepValue(t, done, 10*time.Second, "replica 1 sweep"); res != (sweeper.Result{Purged: 3}) {
		t.Errorf("replica 1 sweep = %+v, want 3 rows purged", res)
	}
	var left []int64
	if err := b.DB.SelectContext(ctx, &left, `SELECT id FROM tasks ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != recent || left[1] != pending {
		t.Errorf("tasks left %v, want %d (done within the retention) and %d (pending)", left, recent, pending)
	}
	if got := purgedRows(t, reader); len(got) != 1 || got["tasks"] != 3 {
		t.Errorf("taskd.retention.purged_rows = %v, want tasks 3", got)
	}

	// The sweep read the storage gauges: every purged table's size, and the
	// age of the oldest done task kept (the recent one), none for statuses
	// with no task.
	g := gauges(t, reader)
	for _, table := range []string{"tasks", "task_results", "task_events", "task_skips", "claim_time", "webhook_outbox", "webhook_deliveries", "webhook_attempts"} {
		if v, ok := g["taskd.store.table.size{"+table+"}"]; !ok || v <= 0 {
			t.Errorf("taskd.store.table.size{%s} = %v (reported %v), want above 0", table, v, ok)
		}
		if _, ok := g["taskd.store.table.rows{"+table+"}"]; !ok {
			t.Errorf("taskd.store.table.rows{%s} not reported", table)
		}
	}
	if v, ok := g["taskd.retention.oldest.age{done}"]; !ok || v < 0 || v > 60 {
		t.Errorf("taskd.retention.oldest.age{done} = %v (reported %v), want the recent task's age", v, ok)
	}
	if _, ok := g["taskd.retention.oldest.age{dead}"]; ok {
		t.Error("taskd.retention.oldest.age{dead} reported with no dead task")
	}
	if st, ok := s1.Storage(); !ok || len(st.Tables) != 8 {
		t.Errorf("storage = %+v, %v; want 8 tables", st, ok)
	}
	if _, ok := s2.Storage(); ok {
		t.Error("the replica that skipped has a storage reading")
	}
}

// gauges reads the storage gauges as "name{attribute value}".
func gauges(t *testing.T, r sdkmetric.Reader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value("taskd.table")
					out[m.Name+"{"+v.AsString()+"}"] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					v, _ := p.Attributes.Value("taskd.task.status")
					out[m.Name+"{"+v.AsString()+"}"] = p.Value
				}
			}
		}
	}
	return out
}

func TestNewSweeperRefusesBadRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, r := range []sweeper.Retention{{Batch: -1}, {Batch: store.PurgeLimitMax + 1}, {Done: -time.Second}, {Webhooks: -1}} {
		if _, err := sweeper.New(b.D, sweeper.Config{Store: b.Store, Locks: b.Locks, Retention: r}); err == nil {
			t.Errorf("new sweeper with retention %+v: no error", r)
		}
	}
}

// The oldest finished task's age is read at every sweep, the tables' sizes at
// most every StorageEvery: a task that ended after the first sweep shows at
// the next one, not a minute later.
func TestSweepReadsOldestFinishedAtEverySweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.Add(t, "news", 0, 1)[0]
	s := b.newSweeper(t, sweeper.Config{Schedule: "1m", Retention: sweeper.Retention{Done: time.Hour, Batch: 10, Pause: time.Millisecond}})

	sweepOnce(t, s)
	first, ok := s.Storage()
	if !ok {
		t.Fatal("no storage reading after a sweep")
	}
	if _, ok := first.Oldest[tasks.StatusDone]; ok {
		t.Fatalf("oldest done task reported with none done: %v", first.Oldest)
	}

	b.DB.MustExecContext(ctx, `UPDATE tasks SET status = 'done', done_at = NOW(3) - INTERVAL 5 SECOND WHERE id = ?`, id)
	sweepOnce(t, s)
	second, ok := s.Storage()
	if !ok {
		t.Fatal("no storage reading after the second sweep")
	}
	if age, ok := second.Oldest[tasks.StatusDone]; !ok || age < 5*time.Second || age > time.Minute {
		t.Errorf("oldest done task's age at the next sweep = %v (reported %v), want about 5s", age, ok)
	}
	if !second.TablesAt.Equal(first.TablesAt) {
		t.Errorf("tables' sizes read again %v after the first reading, want at most every %v", second.TablesAt.Sub(first.TablesAt), sweeper.StorageEvery)
	}
}

// slowPurger answers every PurgeTasks with a full batch after a pause, as a
// backlog would, and counts the calls by status.
type slowPurger struct {
	*store.Store
	took    time.Duration
	mu      sync.Mutex
	batches map[tasks.Status]int
}

func (p *slowPurger) PurgeTasks(ctx context.Context, st tasks.Status, _ time.Duration, limit int) (store.Purged, error) {
	p.mu.Lock()
	p.batches[st]++
	p.mu.Unlock()
	select {
	case <-ctx.Done():
		return store.Purged{}, ctx.Err()
	case <-time.After(p.took):
	}
	return store.Purged{Rows: map[string]int64{"tasks": int64(limit)}, Selected: limit}, nil
}

// With a backlog of every kind, a sweep purges until the next sweep is nearly
// due, not for half the gap, and ends before it: on a 4s schedule with
// batches of 400ms it purges past 3s and ends under 4s, so that no sweep is
// skipped, with a batch of each kind, so that the done tasks' backlog starves
// none of the others.
func TestSweepPurgesUntilTheNextSweepIsNearlyDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := &slowPurger{Store: b.Store, took: 400 * time.Millisecond, batches: map[tasks.Status]int{}}
	s, err := sweeper.New(b.D, sweeper.Config{Store: p, Locks: b.Locks, Schedule: "4s",
		Retention: sweeper.Retention{Done: time.Hour, Cancelled: time.Hour, Dead: time.Hour, Batch: 10, Pause: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := sweepOnce(t, s)
	took := time.Since(start)
	p.mu.Lock()
	defer p.mu.Unlock()
	if took < 3*time.Second || took >= 4*time.Second {
		t.Errorf("sweep took %v (batches %v), want from 3s (past half the 4s gap) to under 4s (before the next sweep)", took, p.batches)
	}
	n := 0
	for _, st := range []tasks.Status{tasks.StatusDone, tasks.StatusCancelled, tasks.StatusDead} {
		if p.batches[st] == 0 {
			t.Errorf("no batch of %s tasks: %v", st, p.batches)
		}
		n += p.batches[st]
	}
	if res.Purged != int64(10*n) {
		t.Errorf("purged %d rows in %d batches of 10", res.Purged, n)
	}
}
