package sweeper

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// Retention defaults: River's JobCleaner keeps completed and cancelled jobs
// 24 hours and discarded ones 7 days.
const (
	// RetentionDoneDefault is how long done tasks are kept, with their
	// results and events.
	RetentionDoneDefault = 24 * time.Hour
	// RetentionCancelledDefault is how long cancelled tasks are kept.
	RetentionCancelledDefault = 24 * time.Hour
	// RetentionDeadDefault is how long dead tasks are kept: longer, since an
	// operator may still requeue them.
	RetentionDeadDefault = 7 * 24 * time.Hour
	// RetentionWebhooksDefault is how long delivered and failed webhook
	// deliveries are kept, with their attempts and events.
	RetentionWebhooksDefault = 7 * 24 * time.Hour
	// RetentionBatchDefault is Retention.Batch when unset.
	RetentionBatchDefault = 500
	// RetentionPauseDefault is Retention.Pause when unset.
	RetentionPauseDefault = 20 * time.Millisecond
)

// Retention says how long finished data is kept. A zero duration keeps that
// kind forever (the engine's config resolves its defaults before this).
type Retention struct {
	// Done, Cancelled and Dead are how long tasks of that status are kept
	// after they ended (tasks.done_at), with their results, events and
	// skips.
	Done, Cancelled, Dead time.Duration
	// Webhooks is how long delivered and failed webhook deliveries are kept
	// after they ended, with their attempts and their events.
	Webhooks time.Duration
	// Batch is how many rows one purge transaction deletes at most (tasks
	// or deliveries; their dependent rows come along): 1..store.PurgeLimitMax.
	// Default RetentionBatchDefault.
	Batch int
	// Pause is the time between two purge batches, in which nothing of the
	// purge holds a lock. Default RetentionPauseDefault.
	Pause time.Duration
}

// Purger is the part of the store the purge needs; *store.Store implements
// it.
type Purger interface {
	PurgeTasks(ctx context.Context, status tasks.Status, olderThan time.Duration, limit int) (store.Purged, error)
	PurgeDeliveries(ctx context.Context, olderThan time.Duration, limit int) (store.Purged, error)
}

var _ Purger = (*store.Store)(nil)

// purgeShare is the part of the shortest gap between two sweeps, counted from
// the sweep's start, in which the purge may still be running.
const purgeShare = 0.9

// purge deletes finished data past its retention, kind after kind (done,
// cancelled, dead tasks, webhook deliveries), batch after batch with a Pause
// between, while batches come back full and the sweep has time left. Each
// kind's first batch always runs; a further batch starts only when, taking as
// long as the longest one before it, it and a batch of each kind still to come
// end within purgeShare of the shortest gap between sweeps from the sweep's
// start, so that the next sweep is not skipped and the recycling of expired
// claims keeps its schedule. What is left is purged by the next sweeps. It
// adds the rows purged to res.Purged.
func (s *Sweeper) purge(ctx context.Context, sweepStart time.Time, res *Result) error {
	p, ok := s.store.(Purger)
	r := s.cfg.Retention
	if !ok || r.Done+r.Cancelled+r.Dead+r.Webhooks == 0 {
		return nil
	}
	deadline := sweepStart.Add(time.Duration(float64(s.sched.MinGap()) * purgeShare))
	var longest time.Duration // the longest batch so far, with its pause
	type kind struct {
		keep time.Duration
		run  func() (store.Purged, error)
	}
	kinds := []kind{
		{r.Done, func() (store.Purged, error) { return p.PurgeTasks(ctx, tasks.StatusDone, r.Done, r.Batch) }},
		{r.Cancelled, func() (store.Purged, error) { return p.PurgeTasks(ctx, tasks.StatusCancelled, r.Cancelled, r.Batch) }},
		{r.Dead, func() (store.Purged, error) { return p.PurgeTasks(ctx, tasks.StatusDead, r.Dead, r.Batch) }},
		{r.Webhooks, func() (store.Purged, error) { return p.PurgeDeliveries(ctx, r.Webhooks, r.Batch) }},
	}
	kinds = slices.DeleteFunc(kinds, func(k kind) bool { return k.keep == 0 })
	for i, k := range kinds {
		// Every kind gets a batch at each sweep, so that a backlog of one
		// never starves the others: a kind stops early enough to leave a
		// batch's time to each kind after it.
		after := len(kinds) - 1 - i // kinds still to come
		for {
			began := time.Now()
			got, err := k.run()
			for table, n := range got.Rows {
				res.Purged += n
				s.tel.purged.Add(ctx, n, metric.WithAttributes(attrTable.String(table)))
			}
			if err != nil {
				return fmt.Errorf("purge: %w", err)
			}
			longest = max(longest, time.Since(began)+r.Pause)
			if got.Selected < r.Batch || !time.Now().Add(longest*time.Duration(1+after)).Before(deadline) {
				break
			}
			if err := sleep(ctx, r.Pause); err != nil {
				return nil
			}
		}
	}
	return nil
}

// sleep waits d or until ctx ends, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attrTable names a table in the purge's metrics.
const attrTable = attribute.Key("taskd.table")

// StorageEvery is how often a sweep reads the tables' sizes, at most:
// information_schema is not read at every sweep. The oldest finished tasks'
// ages, an index read each, are read at every sweep.
const StorageEvery = time.Minute

// storageStale is how old a reading may be and still be reported: a replica
// that stopped sweeping stops reporting.
const storageStale = 5 * StorageEvery

// Sizer reads what the storage gauges report; *store.Store implements it.
type Sizer interface {
	TableSizes(ctx context.Context) ([]tasks.TableSize, error)
	OldestFinished(ctx context.Context) (map[tasks.Status]time.Duration, error)
}

var _ Sizer = (*store.Store)(nil)

// Storage is one reading of the storage the finished data takes.
type Storage struct {
	// At is when it was read: the oldest finished tasks' ages (Oldest).
	At time.Time
	// TablesAt is when the tables' sizes (Tables) were read, at most
	// StorageEvery before At.
	TablesAt time.Time
	tasks.Storage
}

// Storage returns the last reading of the storage this sweeper made, and
// false when it made none in the last few minutes (another replica sweeps).
func (s *Sweeper) Storage() (Storage, bool) {
	r := s.storage.Load()
	if r == nil || time.Since(r.At) > storageStale {
		return Storage{}, false
	}
	return *r, true
}

// readStorage reads the oldest finished tasks' ages, and the tables' sizes
// unless it read them less than StorageEvery ago.
func (s *Sweeper) readStorage(ctx context.Context) error {
	sz, ok := s.store.(Sizer)
	if !ok {
		return nil
	}
	next := Storage{At: time.Now()}
	if r := s.storage.Load(); r != nil && next.At.Sub(r.TablesAt) < StorageEvery {
		next.TablesAt, next.Tables = r.TablesAt, r.Tables
	} else {
		tables, err := sz.TableSizes(ctx)
		if err != nil {
			return err
		}
		next.TablesAt, next.Tables = next.At, tables
	}
	oldest, err := sz.OldestFinished(ctx)
	if err != nil {
		return err
	}
	next.Oldest = oldest
	s.storage.Store(&next)
	return nil
}

// observeStorage reports the last reading, when recent, on the storage
// gauges.
func (s *Sweeper) observeStorage(_ context.Context, obs metric.Observer) error {
	r, ok := s.Storage()
	if !ok {
		return nil
	}
	for _, t := range r.Tables {
		table := metric.WithAttributes(attrTable.String(t.Name))
		obs.ObserveInt64(s.tel.tableBytes, t.Bytes, table)
		obs.ObserveInt64(s.tel.tableRows, t.Rows, table)
	}
	since := time.Since(r.At)
	for st, age := range r.Oldest {
		obs.ObserveFloat64(s.tel.oldestAge, (age + since).Seconds(), metric.WithAttributes(attrStatus.String(string(st))))
	}
	return nil
}

// attrStatus names a task status in the storage gauges.
const attrStatus = attribute.Key("taskd.task.status")
