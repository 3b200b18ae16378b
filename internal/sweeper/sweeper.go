// Package sweeper is the engine's sweeper: on a schedule, one process at a
// time recycles expired claims in fenced batches, wakes the callers waiting
// for their categories, reconciles the Redis task locks with the claims in
// MySQL, and purges passed skips.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/lifecycle"
	"github.com/taskd/taskd/internal/schedule"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Config defaults.
const (
	// ScheduleDefault is Config.Schedule when unset: a sweep every ten
	// seconds (the engine's sweep.interval).
	ScheduleDefault = "10s"
	// BatchDefault is Config.Batch when unset.
	BatchDefault = 5000
	// WorkersDefault is Config.Workers when unset.
	WorkersDefault = 2
)

// Config limits.
const (
	// BatchMax is the largest Config.Batch: one batch is recycled, and the
	// live claims are read, one page of it at a time.
	BatchMax = min(tasks.RecycleLimitMax, tasks.LiveLeasesLimitMax)
	// WorkersMax is the largest Config.Workers.
	WorkersMax = 16
)

// lockCleanupTimeout bounds giving back the sweep lock after a sweep.
const lockCleanupTimeout = time.Second

// Dispatcher is what the sweeper needs of the claims engine;
// *dispatcher.Dispatcher implements it.
type Dispatcher interface {
	// Config gives the lease, the key prefix, the logger and the telemetry
	// providers.
	Config() dispatcher.Config
	// LockKey is the Redis key of a task's lock.
	LockKey(taskID int64) string
	// Wake wakes callers waiting for tasks of the categories counted.
	Wake(ctx context.Context, counts map[string]int)
}

// Store is the part of the task store a sweep works on; *store.Store
// implements it.
type Store interface {
	RecycleExpired(ctx context.Context, p tasks.RecycleParams) ([]tasks.Recycled, error)
	PurgeSkips(ctx context.Context, limit int) (int, error)
	FreeKeys(ctx context.Context, limit int) (int, error)
	LiveLeases(ctx context.Context, p tasks.LiveLeasesParams) ([]tasks.LiveLease, error)
	LiveHolders(ctx context.Context, taskIDs []int64) (map[int64]string, error)
}

// Locker takes the sweep lock and repairs task locks; *locker.Client
// implements it.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opt *locker.Options) (*locker.Lock, error)
	Lock(key, token string) *locker.Lock
	ReleaseAll(ctx context.Context, locks []*locker.Lock) (int, error)
}

// GoldEnder cancels the copies of gold tasks nobody may claim any more;
// *store.Store implements it. A store without it has no gold tasks.
type GoldEnder interface {
	EndGoldCopies(ctx context.Context, limit int) (int, error)
}

var (
	_ GoldEnder  = (*store.Store)(nil)
	_ Dispatcher = (*dispatcher.Dispatcher)(nil)
	_ Store      = (*store.Store)(nil)
	_ Locker     = (*locker.Client)(nil)
)

// Config configures a Sweeper. Store and Locks are required; the other
// fields may be left zero.
type Config struct {
	// Store is the task store, the dispatcher's. Required.
	Store Store
	// Locks is the dispatcher's locker. Required.
	Locks Locker

	// Schedule is when Start sweeps, in any form schedule.Parse accepts: a
	// duration ("10s", short for "@every 10s"), a descriptor ("@every 1m",
	// "@hourly") or a cron expression with optional seconds ("*/30 * * * *
	// *", "0 */5 * * * *"). An abandoned claim is back in the pool within
	// the dispatcher's lease plus the schedule's Period. Default
	// ScheduleDefault.
	Schedule string

	// Batch is how many expired claims one store transaction recycles, and
	// how many live claims are read per page: 1..BatchMax. Default
	// BatchDefault.
	Batch int

	// Workers is how many store transactions recycle batches at the same
	// time while a backlog drains; SKIP LOCKED keeps them on distinct rows.
	// 1..WorkersMax. Default WorkersDefault.
	Workers int

	// Redis, when set, is the Redis server or Cluster the dispatcher's locks
	// live on; each sweep then also scans it for task locks that belong to
	// no live claim and removes them. Every master of a *redis.ClusterClient
	// (anything with ForEachMaster) is scanned. Leave it nil for Redlock:
	// a scan of one master would see only part of the picture. Without it,
	// locks of recycled claims are still removed, and others expire with
	// their time to live, which is at most the lease.
	Redis redis.UniversalClient

	// Retention is how long finished data is kept; each sweep purges what
	// is older, under the sweep lock, when Store also implements Purger.
	// Zero durations keep their kind forever: the zero Retention purges
	// nothing.
	Retention Retention

	// Logger receives the sweeper's logs. Default the dispatcher's logger.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults,
// except Logger, which New sets to the dispatcher's.
func (c Config) WithDefaults() Config {
	if c.Schedule == "" {
		c.Schedule = ScheduleDefault
	}
	if c.Batch == 0 {
		c.Batch = BatchDefault
	}
	if c.Workers == 0 {
		c.Workers = WorkersDefault
	}
	if c.Retention.Batch == 0 {
		c.Retention.Batch = RetentionBatchDefault
	}
	if c.Retention.Pause == 0 {
		c.Retention.Pause = RetentionPauseDefault
	}
	return c
}

func (c Config) validate() error {
	if _, err := schedule.Parse(c.Schedule); err != nil {
		return err
	}
	switch {
	case c.Store == nil:
		return errors.New("store is required")
	case c.Locks == nil:
		return errors.New("locks is required")
	case c.Batch < 1 || c.Batch > BatchMax:
		return fmt.Errorf("sweep batch must be 1..%d, got %d", BatchMax, c.Batch)
	case c.Workers < 1 || c.Workers > WorkersMax:
		return fmt.Errorf("sweep workers must be 1..%d, got %d", WorkersMax, c.Workers)
	case c.Retention.Batch < 1 || c.Retention.Batch > store.PurgeLimitMax:
		return fmt.Errorf("retention batch must be 1..%d, got %d", store.PurgeLimitMax, c.Retention.Batch)
	case min(c.Retention.Done, c.Retention.Cancelled, c.Retention.Dead, c.Retention.Webhooks, c.Retention.Pause) < 0:
		return errors.New("retention durations must not be negative")
	}
	return nil
}

// Result is what one sweep did.
type Result struct {
	// Recycled counts expired claims returned to the pool.
	Recycled int
	// LocksRestored counts live claims whose Redis lock was missing and was
	// created again with the holder's token and the lease's remaining time.
	LocksRestored int
	// LocksConflicting counts live claims whose lock is held by another
	// token; such a lock is left alone (the store's fence keeps the claim
	// safe). With Config.Redis the scan has removed it first, unless
	// it was obtained moments ago.
	LocksConflicting int
	// LocksRemoved counts task locks removed because they belonged to no
	// live claim: those of the claims just recycled (asked for only when the
	// lease passed within a lease: older ones have expired), and, with
	// Config.Redis, those the scan found.
	LocksRemoved int
	// SkipsPurged counts editors' skip records that had passed and were
	// deleted (at most Batch a sweep).
	SkipsPurged int
	// KeysFreed counts task keys held for a period (tasks.KeyHoldFor) whose
	// period had passed and which were freed (at most Batch a sweep).
	KeysFreed int
	// GoldCopiesEnded counts copies of gold tasks left pending by a claim
	// that ended without a submit, which nobody may claim again, and which
	// were cancelled so that retention purges them (at most Batch a sweep).
	GoldCopiesEnded int
	// Purged counts the rows retention deleted, in all tables (the metric
	// taskd.retention.purged_rows counts them by table).
	Purged int64
	// Skipped is set when another sweep held the sweep lock; nothing was
	// done.
	Skipped bool
}

func (r Result) didSomething() bool {
	return r.Recycled+r.LocksRestored+r.LocksConflicting+r.LocksRemoved+r.SkipsPurged+r.KeysFreed+r.GoldCopiesEnded+int(r.Purged) > 0
}

// Sweeper recycles expired claims and reconciles the Redis locks with the
// claims in the store, on its Schedule once started. Only one sweep runs at a
// time across all processes sharing the key prefix: each takes a Redis lock
// on the sweep whose time to live (9/10 of the shortest gap between sweeps)
// lets a crashed sweeper's lock go before the next sweep is due; it is kept alive while the
// sweep runs. Losing it mid-sweep is harmless: every step is fenced in the
// store or a compare-and-delete in Redis, so sweeps may overlap safely.
//
// Liveness does not depend on the sweeper (a claim may take over an expired
// claim directly); it returns abandoned tasks to the pool, wakes callers
// waiting for them, and repairs Redis after it lost keys.
type Sweeper struct {
	d      Dispatcher
	store  Store
	locks  Locker
	cfg    Config
	sched  schedule.Cron
	log    *slog.Logger
	lease  time.Duration
	prefix string
	tel    *instruments
	// storage is the last reading of readStorage.
	storage atomic.Pointer[Storage]

	life   lifecycle.State
	cron   *cron.Cron         // set by Start
	cancel context.CancelFunc // ends the context of the scheduled sweeps
}

// New returns a Sweeper of d's claims, with d's lease, key prefix and
// telemetry providers.
func New(d Dispatcher, cfg Config) (*Sweeper, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new sweeper: %w", err)
	}
	sched, _ := schedule.Parse(cfg.Schedule) // checked by validate
	dc := d.Config()
	if cfg.Logger == nil {
		cfg.Logger = dc.Logger
	}
	tel, err := newInstruments(dc.TracerProvider, dc.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("new sweeper: %w", err)
	}
	s := &Sweeper{d: d, store: cfg.Store, locks: cfg.Locks, cfg: cfg, sched: sched, log: cfg.Logger,
		lease: dc.Lease, prefix: dc.KeyPrefix, tel: tel}
	if _, err := tel.meter.RegisterCallback(s.observeStorage, tel.tableBytes, tel.tableRows, tel.oldestAge); err != nil {
		return nil, fmt.Errorf("new sweeper: storage gauges: %w", err)
	}
	return s, nil
}

// Config returns the sweeper's configuration with defaults applied.
func (s *Sweeper) Config() Config { return s.cfg }

// Schedule returns when the sweeper sweeps once started.
func (s *Sweeper) Schedule() schedule.Cron { return s.sched }

// lockTTL is the time to live of the sweep lock: 9/10 of the shortest gap
// between two sweeps, so that a crashed sweeper's lock goes before the next
// sweep is due.
func (s *Sweeper) lockTTL() time.Duration { return s.sched.MinGap() * 9 / 10 }

// Start sweeps on the Schedule in the background, the first time at its
// next activation, until Stop, and returns. A sweep still running when the next is
// due makes that one skip. The sweeps' context derives from ctx, so it
// carries its values; cancelling ctx cancels a running sweep, and later
// sweeps return at once, until Stop.
//
// Start returns an error wrapping dispatcher.ErrStarted when the sweeper is
// running and dispatcher.ErrStopped after Stop.
func (s *Sweeper) Start(ctx context.Context) error {
	return s.life.Start("sweeper", func() {
		ctx, cancel := context.WithCancel(ctx)
		logger := schedule.CronLogger(s.log, "sweeper")
		c := cron.New(cron.WithLogger(logger), cron.WithChain(cron.SkipIfStillRunning(logger)))
		c.Schedule(s.sched, cron.FuncJob(func() {
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.ErrorContext(ctx, "sweep", "err", err)
			}
		}))
		c.Start()
		s.cron, s.cancel = c, cancel
	})
}

// Stop ends the schedule and waits for a running sweep to finish. When ctx
// ends first, it cancels that sweep and returns an error wrapping ctx's
// cause without waiting further. Stop before Start returns nil, and so does
// a second Stop once no sweep runs.
func (s *Sweeper) Stop(ctx context.Context) error {
	if !s.life.Stop() {
		return nil
	}
	defer s.cancel()
	select {
	case <-s.cron.Stop().Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop sweeper: %w", context.Cause(ctx))
	}
}

// Sweep runs one sweep now, unless another is running anywhere (the result
// is then Skipped): it recycles expired claims in batches of Batch and wakes
// callers waiting for their categories, removes the locks of those claims,
// with Config.Redis removes every other task lock that belongs to no
// live claim, makes sure each live claim's lock exists with the holder's
// token, and deletes up to Batch skip records that have passed. On error the result counts what was done before it.
//
// A sweep is traced (a dispatcher.sweep span and its children) only when it
// does something or fails, unless ctx carries a recording span, under which
// it is always traced. Until it finds work, it runs under ctx without a span
// of its own, so that its store and Redis calls make no spans (the engine's
// instrumentation records them only under a recording span: see package
// telemetry). Once it finds expired claims, the dispatcher.sweep span
// starts, dated from the sweep's start, with a dispatcher.sweep.recycle
// child, and the rest of the sweep is traced under them. Work found by the
// later steps (locks, skips) or an error is recorded in a dispatcher.sweep
// span made when the sweep ends.
func (s *Sweeper) Sweep(ctx context.Context) (res Result, err error) {
	tr := s.newSweepTrace(ctx)
	ctx = tr.ctx
	start := tr.start
	defer func() {
		outcome := "done"
		switch {
		case err != nil:
			outcome = "error"
		case res.Skipped:
			outcome = "skipped"
		}
		if err != nil || res.didSomething() {
			tr.begin()
		}
		// Under the sweep's span, when it has one, so that the measurement
		// carries its trace as an exemplar.
		s.tel.sweepTime.Record(context.WithoutCancel(tr.ctx), sinceSeconds(start), metric.WithAttributes(attrOutcome.String(outcome)))
		if tr.span == nil {
			return
		}
		tr.span.SetAttributes(attribute.Bool("taskd.sweep.skipped", res.Skipped),
			attribute.Int("taskd.sweep.recycled", res.Recycled),
			attribute.Int("taskd.sweep.locks_restored", res.LocksRestored),
			attribute.Int("taskd.sweep.locks_conflicting", res.LocksConflicting),
			attribute.Int("taskd.sweep.locks_removed", res.LocksRemoved),
			attribute.Int("taskd.sweep.skips_purged", res.SkipsPurged),
			attribute.Int("taskd.sweep.keys_freed", res.KeysFreed),
			attribute.Int("taskd.sweep.gold_copies_ended", res.GoldCopiesEnded),
			attribute.Int64("taskd.sweep.purged", res.Purged))
		endSpan(tr.span, err)
	}()
	ttl := s.lockTTL()
	lock, err := s.locks.Obtain(ctx, s.prefix+"sweep", ttl, nil)
	if errors.Is(err, locker.ErrNotObtained) && ctx.Err() == nil {
		s.log.DebugContext(ctx, "sweep skipped: another sweep is running")
		return Result{Skipped: true}, nil
	}
	if err != nil {
		return Result{}, dispatcher.Unavailable(fmt.Errorf("sweep: obtain sweep lock: %w", err))
	}
	_, stop := lock.KeepAlive(ctx, ttl)
	defer func() {
		stop()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockCleanupTimeout)
		defer cancel()
		if err := lock.Release(ctx); err != nil && !errors.Is(err, locker.ErrNotHeld) {
			s.log.WarnContext(ctx, "release sweep lock", "err", err)
		}
	}()

	workStart := time.Now()
	err = s.recycle(tr, &res)
	if err == nil && s.cfg.Redis != nil {
		// Before restoring: a lock of another token on a live claim is
		// removed here, so that the live claim's own is restored below.
		err = s.removeOrphanLocks(tr.ctx, &res)
	}
	if err == nil {
		err = s.restoreLocks(tr.ctx, &res)
	}
	if err == nil {
		// Skips that passed hide nothing any more; without this the table
		// only grows.
		res.SkipsPurged, err = s.store.PurgeSkips(tr.ctx, s.cfg.Batch)
	}
	if err == nil {
		// Keys held for a period that has passed are free for new tasks.
		res.KeysFreed, err = s.store.FreeKeys(tr.ctx, s.cfg.Batch)
	}
	if g, ok := s.store.(GoldEnder); ok && err == nil {
		// Before the purge, which takes them at their cancelled
		// retention.
		res.GoldCopiesEnded, err = g.EndGoldCopies(tr.ctx, s.cfg.Batch)
	}
	if err == nil {
		err = s.purge(tr.ctx, start, &res)
	}
	if err == nil {
		if serr := s.readStorage(tr.ctx); serr != nil && tr.ctx.Err() == nil {
			s.log.WarnContext(tr.ctx, "read table sizes", "err", serr)
		}
	}
	if res.didSomething() {
		s.log.InfoContext(tr.begin(), "sweep", "recycled", res.Recycled, "locks_restored", res.LocksRestored,
			"locks_conflicting", res.LocksConflicting, "locks_removed", res.LocksRemoved,
			"skips_purged", res.SkipsPurged, "keys_freed", res.KeysFreed, "gold_copies_ended", res.GoldCopiesEnded,
			"purged", res.Purged, "duration", time.Since(workStart))
	}
	if err != nil {
		return res, dispatcher.Unavailable(fmt.Errorf("sweep: %w", err))
	}
	return res, nil
}

// recycle returns expired claims to the pool, a batch per store
// transaction, until a batch comes back short. When the first batch is
// full, a backlog is draining, and Workers loops share it. For each batch it
// removes the claims' locks, if Redis still has them, and then wakes callers
// waiting for the categories, so that they find the tasks claimable.
//
// The first batch runs under tr's context; when it finds expired claims, the
// sweep's trace begins with a dispatcher.sweep.recycle span, dated from the
// start of the step, under which the rest of the step runs.
func (s *Sweeper) recycle(tr *sweepTrace, res *Result) (err error) {
	var mu sync.Mutex
	add := func(recycled, removed int) {
		mu.Lock()
		defer mu.Unlock()
		res.Recycled += recycled
		res.LocksRemoved += removed
	}
	ctx := tr.ctx
	stepStart := time.Now()
	var span trace.Span
	defer func() {
		if span != nil {
			span.SetAttributes(attribute.Int("taskd.sweep.recycled", res.Recycled),
				attribute.Int("taskd.sweep.locks_removed", res.LocksRemoved))
			endSpan(span, err)
		}
	}()
	found := func() context.Context {
		ctx, span = s.tel.tracer.Start(tr.begin(), "dispatcher.sweep.recycle", trace.WithTimestamp(stepStart))
		return ctx
	}
	if full, err := s.recycleBatch(ctx, add, found); !full || err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, s.cfg.Workers)
	for w := range s.cfg.Workers {
		wg.Go(func() {
			for {
				full, err := s.recycleBatch(ctx, add, nil)
				if !full || err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// recycleBatch recycles one batch, reports it to add, and says whether it
// was full.
//
// It removes the locks of the batch's claims in one round trip, except those
// of claims whose lease passed more than a lease ago: a lock is set with at
// most the time its lease has left (see Heartbeat and restoreLocks), so such
// a lock is gone unless the request that set it was held up for longer than a
// lease. A backlog's old claims then cost Redis nothing. A lock left behind
// that way would only keep its task from being claimed until it expires.
//
// When the batch is not empty and found is not nil, the rest of the batch
// runs under the context found returns.
func (s *Sweeper) recycleBatch(ctx context.Context, add func(recycled, removed int), found func() context.Context) (full bool, err error) {
	rs, err := s.store.RecycleExpired(ctx, tasks.RecycleParams{Limit: s.cfg.Batch})
	if err != nil {
		return false, fmt.Errorf("recycle: %w", err)
	}
	if len(rs) > 0 && found != nil {
		ctx = found()
	}
	counts := make(map[string]int)
	var locks []*locker.Lock
	for _, r := range rs {
		counts[r.Category]++
		if r.ExpiredFor <= s.lease {
			locks = append(locks, s.locks.Lock(s.d.LockKey(r.ID), r.Holder))
		}
	}
	removed, err := s.locks.ReleaseAll(ctx, locks)
	add(len(rs), removed)
	if err != nil {
		return false, fmt.Errorf("recycle: %w", err)
	}
	for cat, n := range counts {
		s.tel.recycled.Add(ctx, int64(n), metric.WithAttributes(attrCategory.String(cat)))
		s.tel.expired.Add(ctx, int64(n), metric.WithAttributes(attrCategory.String(cat)))
	}
	s.d.Wake(ctx, counts)
	return len(rs) == s.cfg.Batch, nil
}

// releaseLock deletes the lock key if it holds token, and reports whether it
// did.
func (s *Sweeper) releaseLock(ctx context.Context, key, token string) (bool, error) {
	err := s.locks.Lock(key, token).Release(ctx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, locker.ErrNotHeld):
		return false, nil
	}
	return false, fmt.Errorf("release lock %q: %w", key, err)
}

// restoreLocks makes sure each live claim's lock exists with its holder's
// token: a missing one is created with the time the lease has left (by the
// database clock), so it never outlives the lease. One round trip per live
// claim, and for a page with missing locks one more query to the store.
func (s *Sweeper) restoreLocks(ctx context.Context, res *Result) error {
	var after int64
	for {
		// Taken before the read, so deadlines err on the early side.
		readAt := time.Now()
		page, err := s.store.LiveLeases(ctx, tasks.LiveLeasesParams{AfterID: after, Limit: s.cfg.Batch})
		if err != nil {
			return fmt.Errorf("restore locks: %w", err)
		}
		var restored []tasks.LiveLease
		for _, c := range page {
			after = c.ID
			ok, err := s.restoreLock(ctx, c, readAt.Add(c.Remaining), res)
			if err != nil {
				return fmt.Errorf("restore locks: task %d: %w", c.ID, err)
			}
			if ok {
				restored = append(restored, c)
			}
		}
		if err := s.confirmRestored(ctx, restored, res); err != nil {
			return err
		}
		if len(page) < s.cfg.Batch {
			return nil
		}
	}
}

// restoreLock creates c's lock if it is missing, and reports whether it did.
// It counts the lock as restored, or as conflicting when another token holds
// it.
func (s *Sweeper) restoreLock(ctx context.Context, c tasks.LiveLease, deadline time.Time, res *Result) (bool, error) {
	key := s.d.LockKey(c.ID)
	held, err := s.locks.Lock(key, c.Holder).TTL(ctx)
	if err != nil {
		return false, err
	}
	ttl := time.Until(deadline)
	if held > 0 || ttl < locker.MinTTL {
		return false, nil // in place, or the lease is about to pass anyway
	}
	// With the holder's token obtaining is reentrant: it also covers a key
	// that appeared since the check with the holder's token.
	_, err = s.locks.Obtain(ctx, key, ttl, &locker.Options{Token: c.Holder})
	switch {
	case err == nil:
		res.LocksRestored++
		return true, nil
	case errors.Is(err, locker.ErrNotObtained) && ctx.Err() == nil:
		res.LocksConflicting++
		s.log.WarnContext(ctx, "live claim's lock is held by another token", "task_id", c.ID, "fence", c.Fence)
		return false, nil
	}
	return false, err
}

// confirmRestored checks that the claims whose locks were just restored are
// still live, and removes the locks of the others (they no longer count as
// restored): a claim that ended (released, say) after the page was
// read already had its lock released by its holder, and the one restored
// for it would keep the task from being claimed until the lease passed. A
// claim that ends after this check has its lock released by its holder.
func (s *Sweeper) confirmRestored(ctx context.Context, restored []tasks.LiveLease, res *Result) error {
	if len(restored) == 0 {
		return nil
	}
	ids := make([]int64, len(restored))
	for i, c := range restored {
		ids[i] = c.ID
	}
	holders, err := s.store.LiveHolders(ctx, ids)
	if err != nil {
		return fmt.Errorf("confirm restored locks: %w", err)
	}
	for _, c := range restored {
		if holders[c.ID] == c.Holder {
			continue
		}
		res.LocksRestored--
		if _, err := s.releaseLock(ctx, s.d.LockKey(c.ID), c.Holder); err != nil {
			return fmt.Errorf("confirm restored locks: %w", err)
		}
	}
	return nil
}

// scanCount is the COUNT hint of each SCAN call.
const scanCount = 1000

// masterScanner is implemented by *redis.ClusterClient and wrappers that
// embed one.
type masterScanner interface {
	ForEachMaster(ctx context.Context, fn func(ctx context.Context, client *redis.Client) error) error
}

// removeOrphanLocks scans Config.Redis (every master of a Cluster)
// for task locks and removes those that belong to no live claim.
func (s *Sweeper) removeOrphanLocks(ctx context.Context, res *Result) error {
	var removed atomic.Int64 // Cluster masters are scanned concurrently
	scan := func(ctx context.Context, rdb redis.Cmdable) error {
		n, err := s.scanOrphanLocks(ctx, rdb)
		removed.Add(int64(n))
		return err
	}
	var err error
	if cc, ok := s.cfg.Redis.(masterScanner); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, s.cfg.Redis)
	}
	res.LocksRemoved += int(removed.Load())
	if err != nil {
		return fmt.Errorf("remove orphan locks: %w", err)
	}
	return nil
}

// scanOrphanLocks walks one server's task lock keys with SCAN, a page of
// about scanCount keys at a time, and returns how many it removed.
func (s *Sweeper) scanOrphanLocks(ctx context.Context, rdb redis.Cmdable) (int, error) {
	match := escapeGlob(s.prefix) + "task:*"
	var cursor uint64
	removed := 0
	for {
		keys, next, err := rdb.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return removed, fmt.Errorf("scan %q: %w", match, err)
		}
		n, err := s.removeOrphans(ctx, rdb, keys)
		removed += n
		if err != nil || next == 0 {
			return removed, err
		}
		cursor = next
	}
}

// foundLock is a task lock found by the scan.
type foundLock struct {
	key    string
	taskID int64
	token  string
	ttl    time.Duration // negative: no time to live
}

// removeOrphans removes those of keys that belong to no live claim: their
// token is not the holder of a live claim on the task. It reads the keys'
// tokens and times to live in one pipeline, then the claims from the store,
// and deletes each orphan by compare-and-delete, so a key taken again
// meanwhile is left alone.
//
// A lock obtained moments ago (its time to live within a second, or half the
// lease, of the full lease) is spared: its claim may not be committed yet.
// A holder that claims the same task again between the reads and the delete
// loses its new lock; the next sweep (or its heartbeat) restores it, and its
// claim is safe in the store meanwhile.
func (s *Sweeper) removeOrphans(ctx context.Context, rdb redis.Cmdable, keys []string) (int, error) {
	found, err := s.readLocks(ctx, rdb, keys)
	if err != nil || len(found) == 0 {
		return 0, err
	}
	ids := make([]int64, len(found))
	for i, l := range found {
		ids[i] = l.taskID
	}
	holders := make(map[int64]string, len(ids))
	for chunk := range slices.Chunk(ids, tasks.LiveLeasesLimitMax) {
		hs, err := s.store.LiveHolders(ctx, chunk)
		if err != nil {
			return 0, err
		}
		for id, h := range hs {
			holders[id] = h
		}
	}

	lease := s.lease
	young := min(time.Second, lease/2)
	removed := 0
	for _, l := range found {
		if h, live := holders[l.taskID]; live && h == l.token {
			continue
		}
		if l.ttl > lease-young && l.ttl <= lease {
			continue
		}
		ok, err := s.releaseLock(ctx, l.key, l.token)
		if err != nil {
			return removed, err
		}
		if ok {
			removed++
		}
	}
	return removed, nil
}

// readLocks reads the tokens and times to live of task lock keys in one
// pipeline. Keys that are not task locks, or are gone, are left out.
func (s *Sweeper) readLocks(ctx context.Context, rdb redis.Cmdable, keys []string) ([]foundLock, error) {
	found := make([]foundLock, 0, len(keys))
	for _, key := range keys {
		if id, ok := s.taskIDOf(key); ok {
			found = append(found, foundLock{key: key, taskID: id})
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	gets := make([]*redis.StringCmd, len(found))
	ttls := make([]*redis.DurationCmd, len(found))
	// The pipeline's error is that of its first failed command, and a key
	// deleted since the scan fails GET with redis.Nil: look at each.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, l := range found {
			gets[i] = p.Get(ctx, l.key)
			ttls[i] = p.PTTL(ctx, l.key)
		}
		return nil
	})
	out := found[:0]
	for i, l := range found {
		token, err := gets[i].Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read lock %q: %w", l.key, err)
		}
		ttl, err := ttls[i].Result()
		if err != nil {
			return nil, fmt.Errorf("read lock %q: %w", l.key, err)
		}
		if ttl == -2 { // PTTL's "no such key": gone since the GET
			continue
		}
		l.token, l.ttl = token, ttl
		out = append(out, l)
	}
	return out, nil
}

// taskIDOf parses a task lock key, as Dispatcher.LockKey builds it.
func (s *Sweeper) taskIDOf(key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+"task:{")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, "}")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	return id, err == nil && id > 0
}

// escapeGlob quotes the characters that are special in a Redis MATCH
// pattern, so that a key prefix matches only itself.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// instrumentationName names the sweeper's tracer and meter: the
// dispatcher's, so that taskd.leases.expired, which claims that take over an
// expired lease count too, stays one instrument.
const instrumentationName = "github.com/taskd/taskd/dispatcher"

// instruments are the sweeper's tracer and metric instruments.
type instruments struct {
	tracer    trace.Tracer
	recycled  metric.Int64Counter
	expired   metric.Int64Counter
	sweepTime metric.Float64Histogram
	purged    metric.Int64Counter
	// The storage gauges, observed by Sweeper.observeStorage.
	tableBytes metric.Int64ObservableGauge
	tableRows  metric.Int64ObservableGauge
	oldestAge  metric.Float64ObservableGauge
	meter      metric.Meter
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) (*instruments, error) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &instruments{tracer: tp.Tracer(instrumentationName)}
	var err1, err2, err3, err4, err5, err6, err7 error
	t.meter = m
	t.recycled, err1 = m.Int64Counter("taskd.claims.recycled", metric.WithUnit("{count}"),
		metric.WithDescription("Expired claims returned to the pool by the sweeper."))
	t.expired, err2 = m.Int64Counter("taskd.leases.expired", metric.WithUnit("{count}"),
		metric.WithDescription("Leases that passed without a submit or release: taken over by a claim or recycled by the sweeper, by category."))
	t.sweepTime, err3 = m.Float64Histogram("taskd.sweep.duration", metric.WithUnit("s"),
		metric.WithDescription("Time one sweep took, by outcome: done, skipped (another replica held the sweep lock) or error."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	t.purged, err4 = m.Int64Counter("taskd.retention.purged_rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows of finished data deleted by retention, by table."))
	t.tableBytes, err5 = m.Int64ObservableGauge("taskd.store.table.size", metric.WithUnit("By"),
		metric.WithDescription("Size on disk of each table retention purges (data and indexes, from information_schema), read by the sweeping process at most once a minute."))
	t.tableRows, err6 = m.Int64ObservableGauge("taskd.store.table.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Estimated rows of each table retention purges (information_schema), read by the sweeping process at most once a minute."))
	t.oldestAge, err7 = m.Float64ObservableGauge("taskd.retention.oldest.age", metric.WithUnit("s"),
		metric.WithDescription("How long ago the oldest finished task kept ended, by status: at most the retention plus the sweep interval while the purge keeps up."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		return nil, fmt.Errorf("metric instruments: %w", err)
	}
	return t, nil
}

// Span and metric attribute keys, the dispatcher's.
const (
	attrCategory = attribute.Key("taskd.task.category")
	attrOutcome  = attribute.Key("taskd.outcome")
)

// sweepTrace is the trace of one sweep, begun only once the sweep has done
// something or failed (see Sweep).
type sweepTrace struct {
	tracer trace.Tracer
	parent context.Context // the caller's context
	start  time.Time
	ctx    context.Context // the context to work under: the caller's until begun
	span   trace.Span      // the dispatcher.sweep span; nil until begun
}

// newSweepTrace returns the trace of a sweep starting now under ctx: begun
// at once when ctx carries a recording span, else once there is something
// to record.
func (s *Sweeper) newSweepTrace(ctx context.Context) *sweepTrace {
	tr := &sweepTrace{tracer: s.tel.tracer, parent: ctx, ctx: ctx, start: time.Now()}
	if trace.SpanFromContext(ctx).IsRecording() {
		tr.begin()
	}
	return tr
}

// begin starts the dispatcher.sweep span, dated from the sweep's start, unless
// started already, and returns the context to work under from then on.
func (tr *sweepTrace) begin() context.Context {
	if tr.span == nil {
		tr.ctx, tr.span = tr.tracer.Start(tr.parent, "dispatcher.sweep", trace.WithTimestamp(tr.start))
	}
	return tr.ctx
}

// endSpan records err on span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// sinceSeconds is the time since start in seconds, for histograms.
func sinceSeconds(start time.Time) float64 { return time.Since(start).Seconds() }
