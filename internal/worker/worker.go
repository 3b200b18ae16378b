// Package worker is the engine's worker runtime: a Worker claims tasks
// through the dispatcher for its free slots, runs a Handler on each (a Mux
// routes them by category, with middleware), and completes and renews its
// claims in batches, each task keeping its own lock and fence. The engine
// builds one from taskd.WithHandler; package taskd re-exports the handler
// types.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/backoff"
	"github.com/taskd/taskd/internal/lifecycle"
	"github.com/taskd/taskd/tasks"
)

var (
	// ErrLeaseLost is the cause (wrapped) of a handler's cancelled context when
	// the worker lost the claim: the store refused a heartbeat as stale or at
	// the hold limit, or the lease passed without a successful heartbeat.
	ErrLeaseLost = errors.New("lease lost")

	// ErrCancelled is the cause (wrapped) of a handler's cancelled context when
	// an operator or the embedder cancelled the task it runs (see
	// dispatcher.Dispatcher.Cancel): the task is cancelled for good, nobody
	// runs it again, and whatever the handler returns is dropped. The worker
	// learns of it from the cancel's announcement (Dispatcher.WatchCancels) or
	// at the claim's next renewal, refused with it, whichever comes first. It
	// is tasks.ErrCancelled.
	ErrCancelled = tasks.ErrCancelled

	// ErrWorkerShutdown is the cause of a handler's cancelled context when
	// Stop's drain ended before the handler returned.
	ErrWorkerShutdown = errors.New("worker shut down")
)

// Dispatcher is what a Worker needs of the claims engine;
// *dispatcher.Dispatcher implements it.
type Dispatcher interface {
	// Config gives the lease, the logger and the tracer provider.
	Config() dispatcher.Config
	// NextMany claims up to one task per free slot.
	NextMany(ctx context.Context, holders, categories []string, wait time.Duration) ([]*tasks.Claim, error)
	// CompleteAndClaimMany claims for free slots and, once it has
	// candidates locked, commits the outcomes it is then given in the
	// same transaction; it returns the claims made, and false when it
	// wrote nothing.
	CompleteAndClaimMany(ctx context.Context, outcomes func() ([]dispatcher.Outcome, func(i int, ended *tasks.Ended, err error) (unlock bool)), ending int, holders, categories []string) ([]*tasks.Claim, bool)
	// CompleteMany commits a batch of outcomes and gives back the locks of
	// the claims they ended.
	CompleteMany(ctx context.Context, os []dispatcher.Outcome, done func(i int, ended *tasks.Ended, err error) (unlock bool))
	// HeartbeatMany renews a batch of leases and their locks.
	HeartbeatMany(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error)
	// Release gives a claim back at shutdown.
	Release(ctx context.Context, c dispatcher.Claimant, ref dispatcher.ClaimRef, reason string) error
	// ReleaseLock gives back the lock of a claim the worker lost, or that a
	// handler's transaction ended (CompleteTx).
	ReleaseLock(ctx context.Context, taskID int64, holder string)
	// EndedApart records a claim a handler's transaction ended with a
	// result (CompleteTx), once committed, as CompleteMany records those it
	// ends.
	EndedApart(ctx context.Context, span trace.Span, ended *tasks.Ended)
	// WatchCancels calls fn with each claim a cancel ends, until stopped.
	WatchCancels(fn func(dispatcher.ClaimRef)) (stop func())
	// Wake wakes the claims waiting for the categories of counts: when
	// failed tasks become claimable again, after their backoff.
	Wake(ctx context.Context, counts map[string]int)
}

var _ Dispatcher = (*dispatcher.Dispatcher)(nil)

// Config defaults.
const (
	ConcurrencyDefault     = 4
	WaitDefault            = 30 * time.Second
	ShutdownTimeoutDefault = 30 * time.Second
	// RetryBackoffBaseDefault and RetryBackoffMaxDefault shape the default
	// RetryBackoff: ExponentialRetryBackoff(RetryBackoffBaseDefault,
	// RetryBackoffMaxDefault).
	RetryBackoffBaseDefault = time.Second
	RetryBackoffMaxDefault  = 10 * time.Minute
	// BatchSizeDefault bounds the claims of one round trip and the
	// outcomes of one completion transaction. A transaction's fixed cost
	// (its round trip, statements and commit: about 1.5 ms of MariaDB's CPU)
	// is spread over its members: with 1,000 slots, batches of 500 took
	// MariaDB about 0.16 ms of CPU per job where batches of 100 took 0.18.
	BatchSizeDefault = 500
	// FlushIntervalDefault is how long finished outcomes wait for
	// others to share their transaction while handlers are still running.
	FlushIntervalDefault = 5 * time.Millisecond
	// MaxBacklogDefault bounds the outcomes waiting for their
	// transaction before the worker stops claiming.
	MaxBacklogDefault = 1000
	// MaxSnoozesDefault is how many times a task may snooze (see Snooze).
	MaxSnoozesDefault = 100
)

// Limits of the worker's own loops.
const (
	// workerErrorBackoffMin and workerErrorBackoffMax bound the pause of a
	// slot after Next failed (a store unreachable), doubling per consecutive
	// error, with equal jitter.
	workerErrorBackoffMin = 100 * time.Millisecond
	workerErrorBackoffMax = 5 * time.Second
	// workerFinishTimeout bounds the store write that ends a claim (submit,
	// fail, release), which runs even while the worker shuts down.
	workerFinishTimeout = 10 * time.Second
	// workerHolderPrefix starts each slot's holder: worker:<ID>:<slot>.
	workerHolderPrefix = "worker:"
	workerMaxHolderLen = 128 // tasks.holder is VARCHAR(128)
	// workerNoResult is the result committed for a task whose handler
	// returned a nil result.
	workerNoResult = `null`
	// workerBatchBytesMax bounds the results of one completion transaction
	// (it holds at least one, whatever its size), well inside MariaDB's
	// default max_allowed_packet of 16 MiB.
	workerBatchBytesMax = 8 << 20
	// workerWriters is how many batches of outcomes a worker has in flight
	// at most with one claim loop (see writers). Two: a batch's transaction
	// spends much of its time waiting (for the commit's fsyncs, for a CPU on
	// a loaded machine), and with many slots one writer fell behind
	// (bench/river, 1,000 workers: busy 95% of the time). The second writes
	// only full batches (BatchSize) while the first is busy, so it never
	// splits what the first would write in one transaction: with 16 slots, a
	// second writer taking any batch halved the jobs/s.
	workerWriters = 2
	// workerBatchesPerClaimLoop is how many batches of slots (BatchSize
	// each) share a claim loop. One loop claims one batch per round trip,
	// so with small batches it left most slots idle (bench/river, 1,000
	// slots, batches of 250: a loop per 250 slots made 10-50% more jobs/s
	// than one loop). Concurrent claims cost the store more per job
	// (20-30% more mysqld CPU: the candidate reads read past the claims in
	// flight, and transactions compete for the same index pages), so a loop
	// per batch did not pay with the default batch of 500 at 1,000 slots
	// (10-15% more store CPU per job, no more jobs/s on 2 cores): a loop per
	// two batches keeps one loop there.
	workerBatchesPerClaimLoop = 2
	// workerClaimGather bounds how long the claim loop waits for more free
	// slots while fewer than half of those one claim may take are free and
	// running handlers will free others (see gather); River's producer
	// fetches at most every 2 ms (FetchCooldown) for the same reason.
	workerClaimGather = 2 * time.Millisecond
)

// Config configures a Worker. Handler is required; the other zero
// fields take defaults (see WithDefaults).
type Config struct {
	// Concurrency is the number of slots: tasks run at most this many at a
	// time, and the worker never holds more claims than free slots allow.
	// Default ConcurrencyDefault.
	Concurrency int

	// Handler runs each claimed task; usually a *Mux. Required.
	Handler Handler

	// Categories the worker claims tasks from. Default: the categories
	// registered on Handler when it is a *Mux; required otherwise.
	// With a *Mux, each listed category must have a handler there
	// (else New's error wraps ErrNoHandler).
	Categories []string

	// ID names the worker; slot i claims as holder "worker:<ID>:<i>", which
	// must fit in 128 characters. Default "<hostname>:<pid>:<6 random
	// characters>", unique per process.
	ID string

	// Wait is how long the worker long-polls for tasks, as Next does, before
	// asking again (capped by the dispatcher's Config.MaxWait). Default
	// WaitDefault.
	Wait time.Duration

	// RetryBackoff returns how long a failed task waits before its next
	// attempt, given the attempts made so far (1 after the first failure).
	// The store decides whether a failed task is retried at all: it is dead
	// once its attempts reach its max_attempts. Default
	// ExponentialRetryBackoff(RetryBackoffBaseDefault, RetryBackoffMaxDefault).
	RetryBackoff func(attempt int) time.Duration

	// ShutdownTimeout is how long Stop lets running handlers finish
	// before it cancels their contexts. Default ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration

	// BatchSize is how many tasks the worker claims in one round trip per
	// store at most (never more than its free slots), and how many outcomes
	// one completion transaction writes at most. A worker runs one claim
	// loop per two batches of slots (Concurrency / (2·BatchSize), at least
	// one), the loops after the first claiming only full batches.
	// 1..tasks.BatchMax; default BatchSizeDefault.
	BatchSize int

	// FlushInterval is how long a finished task's outcome may wait for
	// others to share its transaction, while other handlers are running and
	// fewer than BatchSize outcomes wait. With no handler running, or when a
	// write just ended and outcomes piled up meanwhile, outcomes are written
	// at once. Default FlushIntervalDefault; a negative value writes
	// every outcome as soon as no write is in flight.
	FlushInterval time.Duration

	// MaxBacklog bounds the outcomes waiting to be written: while that many
	// wait, the worker claims nothing new (back-pressure). Default
	// MaxBacklogDefault.
	MaxBacklog int

	// MaxSnoozes is how many times a task may snooze (see Snooze): a snooze
	// of a task that has snoozed MaxSnoozes times makes it dead instead. At
	// least 1; default MaxSnoozesDefault.
	MaxSnoozes int

	// Logger receives the worker's logs. Default: the dispatcher's logger.
	Logger *slog.Logger

	// TxStore, when set, lets handlers complete their tasks in transactions
	// of their own (CompleteTx). Default: none (CompleteTx refuses).
	TxStore TxStore

	// SlotsUntilWritten keeps a slot taken until its task's outcome is
	// written (or dropped), not only until its handler returns: the worker
	// then never holds more tasks assigned in the store than Concurrency,
	// while without it the outcomes waiting to be written add up to
	// MaxBacklog more. A limit in flight (tasks.Workflow.MaxInFlight) equal
	// to the slots needs it, or the tasks waiting for their outcome's write
	// take the room of the next claims, which the store refuses. Default
	// false: a slot claims again as soon as its handler returns.
	SlotsUntilWritten bool
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
// Logger stays nil when unset; New then uses the dispatcher's.
func (c Config) WithDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = ConcurrencyDefault
	}
	if len(c.Categories) == 0 {
		if mux, ok := c.Handler.(*Mux); ok && mux != nil {
			c.Categories = mux.Categories()
		}
	}
	c.Categories = slices.Clone(c.Categories)
	if c.ID == "" {
		c.ID = defaultWorkerID()
	}
	if c.Wait == 0 {
		c.Wait = WaitDefault
	}
	if c.RetryBackoff == nil {
		c.RetryBackoff = ExponentialRetryBackoff(RetryBackoffBaseDefault, RetryBackoffMaxDefault)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if c.BatchSize == 0 {
		c.BatchSize = BatchSizeDefault
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = FlushIntervalDefault
	}
	if c.MaxBacklog == 0 {
		c.MaxBacklog = MaxBacklogDefault
	}
	if c.MaxSnoozes == 0 {
		c.MaxSnoozes = MaxSnoozesDefault
	}
	return c
}

// validate checks what the engine's Config does not configure: the handler,
// the categories it handles, the wait and the ID. The values of the keys of
// taskd.Config.Worker (concurrency, categories, shutdown timeout, batch
// size, backlog) are the engine's to check, once, before New.
func (c Config) validate() error {
	switch {
	case c.Handler == nil:
		return errors.New("handler is required")
	case len(c.Categories) == 0:
		return errors.New("categories are required (none given, and the handler registers none)")
	case c.Wait < 0:
		return fmt.Errorf("wait must not be negative, got %v", c.Wait)
	case !utf8.ValidString(c.ID):
		return errors.New("id must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(workerHolder(c.ID, c.Concurrency-1)); n > workerMaxHolderLen {
		return fmt.Errorf("id too long: holder %q is %d characters, at most %d", workerHolder(c.ID, c.Concurrency-1), n, workerMaxHolderLen)
	}
	mux, _ := c.Handler.(*Mux)
	var handled []string
	if mux != nil {
		handled = mux.Categories()
	}
	for _, cat := range c.Categories {
		if mux != nil && !slices.Contains(handled, cat) {
			return fmt.Errorf("category %q: %w", cat, ErrNoHandler)
		}
	}
	return nil
}

// claimLoops returns how many claim loops a worker of c runs: one per
// workerBatchesPerClaimLoop batches of slots (BatchSize each), at least one.
// They share the free slots. The first claims as soon as slots are free (see
// gather); the others claim only full batches (BatchSize slots at once),
// while the first is busy with its round trips, so that they never split
// what the first would claim in one transaction.
func claimLoops(c Config) int {
	per := workerBatchesPerClaimLoop * c.BatchSize
	return max(1, (c.Concurrency+per-1)/per)
}

// writers returns how many batches of outcomes a worker of c writes at once
// at most: workerWriters with one claim loop, and one more per further
// loop, so that the writes keep up with the claims (the writers after the
// first, like the claim loops after the first, take only full batches).
func writers(c Config) int {
	return workerWriters + claimLoops(c) - 1
}

// workerHolder is the holder of a worker's slot.
func workerHolder(id string, slot int) string {
	return workerHolderPrefix + id + ":" + strconv.Itoa(slot)
}

// defaultWorkerID returns "<hostname>:<pid>:<6 random characters>".
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	if utf8.RuneCountInString(host) > 64 {
		host = string([]rune(host)[:64])
	}
	return host + ":" + strconv.Itoa(os.Getpid()) + ":" + rand.Text()[:6]
}

// ExponentialRetryBackoff returns a RetryBackoff that waits base·2^(attempt-1),
// capped at max, with equal jitter: a duration drawn uniformly from [d/2, d).
func ExponentialRetryBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		return backoff.EqualJitter(backoff.Exponential(base, max, attempt))
	}
}

// Totals are running totals of a Worker.
type Totals struct {
	// Processed counts tasks whose handler returned nil and whose result the
	// store committed, and those whose handler's transaction committed the
	// result (CompleteTx).
	Processed int64
	// Failed counts handler errors and panics the store recorded (the task
	// was then retried later, or dead), and snoozes past the limit (dead).
	Failed int64
	// Snoozed counts snoozes the store recorded (the task runs again later,
	// its attempt not counted).
	Snoozed int64
	// LeaseLost counts claims the worker lost while running them: the
	// watchdog cancelled the handler, or the store refused the outcome as
	// stale (a cancel's aside).
	LeaseLost int64
	// Cancelled counts claims an operator's cancel of the task ended while
	// the worker ran them (the handler's cause ErrCancelled, or the outcome
	// refused as cancelled): their outcomes were dropped. Neither failures
	// nor lost leases.
	Cancelled int64
	// Released counts claims given back at shutdown.
	Released int64
	// Running is the number of handlers running now.
	Running int64
}

// Worker runs handlers on tasks it claims through a Dispatcher, in
// Concurrency slots, each running one handler at a time. It works in
// batches, one round trip per store for many tasks:
//
//   - Claim many: while slots are free, it claims up to one task per free
//     slot (at most BatchSize) at once: one script takes the candidates'
//     Redis locks, each under its slot's holder, and one fenced batch claims
//     them in MySQL (one commit). Nothing claimable: it long-polls, as Next
//     does.
//   - Complete many: a handler's outcome (its result as JSON when it
//     returned a nil error; a snooze, run again later without spending the
//     attempt, when the error is Snooze's; else a failure, retried after
//     RetryBackoff or dead when no attempts are left or the error wraps
//     SkipRetry) goes to
//     a completer that writes up to BatchSize outcomes per transaction, each
//     fenced on its own claim, then gives their locks back in one script. A
//     stale member is refused alone; the others commit. A claim made while
//     outcomes wait carries them: one transaction completes them and makes
//     the claims, the outcomes acknowledged after its COMMIT (when it fails,
//     they are written alone and the claim is made after).
//   - Renew many: one loop renews the leases of every claim the worker
//     holds, each about every Lease/3, one statement and one script per
//     round. A lost lease (refused as stale, at the hold limit, or passed
//     while renewals failed) cancels exactly that handler's context with a
//     cause wrapping ErrLeaseLost.
//
// A slot is free again when its handler returns; its outcome counts (Totals)
// once its transaction committed. While MaxBacklog outcomes wait, the worker
// claims nothing new.
//
// Handlers run at least once per task, not exactly once: a claim lost while
// its handler runs (ctx cancelled with ErrLeaseLost), a process killed
// between a handler's return and the commit of its outcome's batch, or a
// commit that cannot reach the store all let another claim run the task
// again once the lease passed. The store's fencing guarantees only that one
// claim's outcome is committed.
//
// It reports its runs by category and outcome, their run time, its claim
// batches, running handlers, free slots and backlog as metrics on the
// dispatcher's meter provider (see meter), while started.
//
// Start it once, stop it with Stop. It is safe for concurrent use.
type Worker struct {
	d      Dispatcher
	cfg    Config
	log    *slog.Logger
	lease  time.Duration // the dispatcher's
	tracer trace.Tracer

	life         lifecycle.State
	stopClaiming context.CancelFunc      // ends the claiming loop
	stopHandlers context.CancelCauseFunc // cancels running handlers
	handlersCtx  context.Context         // parent of the handlers' contexts
	done         chan struct{}           // closed when everything has returned

	slots *slotSet
	// gatherFor is how long the claim loop waits for slots to free together
	// (workerClaimGather; tests change it before Start).
	gatherFor time.Duration
	// apart, when set (by tests), keeps the claims from carrying outcomes:
	// the writers alone write them.
	apart bool
	// backPressured, when set (by tests), is called each time the claim
	// loop stops claiming because the completer is behind.
	backPressured func()
	handlers      sync.WaitGroup
	leases        *leaseKeeper
	out           *completer
	meter         *meter
	retries       *retryWaker

	processed, failed, snoozed, leaseLost, cancelled, released, running atomic.Int64
	// unsettled counts the runs whose outcome is not with the completer yet:
	// while there are any, more outcomes are coming.
	unsettled atomic.Int64
	// carrying says the first claim loop will carry the outcomes waiting
	// soon, with SlotsUntilWritten: they then wait for it (up to
	// FlushInterval) rather than take a transaction of their own.
	carrying atomic.Bool
}

// New returns a Worker that claims through d. It returns an error for
// an invalid cfg.
func New(d Dispatcher, cfg Config) (*Worker, error) {
	if d == nil {
		return nil, errors.New("new worker: nil dispatcher")
	}
	cfg = cfg.WithDefaults()
	dc := d.Config()
	if cfg.Logger == nil {
		cfg.Logger = dc.Logger
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	tp := dc.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	w := &Worker{
		d:      d,
		cfg:    cfg,
		log:    cfg.Logger.With("worker_id", cfg.ID),
		lease:  dc.Lease,
		tracer: tp.Tracer(instrumentationName),
		done:   make(chan struct{}),

		gatherFor: workerClaimGather,
	}
	w.slots = newSlotSet(cfg.Concurrency, cfg.BatchSize)
	w.leases = newLeaseKeeper(w)
	w.out = newCompleter(w)
	w.retries = newRetryWaker(d.Wake)
	var err error
	if w.meter, err = newMeter(dc.MeterProvider); err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	return w, nil
}

// Config returns the worker's configuration with defaults applied.
func (w *Worker) Config() Config {
	cfg := w.cfg
	cfg.Categories = slices.Clone(cfg.Categories)
	return cfg
}

// Totals returns the worker's running totals.
func (w *Worker) Totals() Totals {
	return Totals{
		Processed: w.processed.Load(),
		Failed:    w.failed.Load(),
		Snoozed:   w.snoozed.Load(),
		LeaseLost: w.leaseLost.Load(),
		Cancelled: w.cancelled.Load(),
		Released:  w.released.Load(),
		Running:   w.running.Load(),
	}
}

// Start starts the worker and returns. Handlers' contexts derive from ctx, so
// they carry its values; cancelling ctx stops the worker at once, like a
// Stop whose drain has ended (claiming stops, handlers are cancelled and
// their claims released). Call Stop in either case to wait for the worker.
//
// Start returns an error wrapping dispatcher.ErrStarted when the worker is
// running and dispatcher.ErrStopped after Stop.
func (w *Worker) Start(ctx context.Context) error {
	var merr error
	err := w.life.Start("worker", func() {
		merr = w.meter.register(w)
		claimCtx, stopClaiming := context.WithCancel(ctx)
		w.stopClaiming = stopClaiming
		w.handlersCtx, w.stopHandlers = context.WithCancelCause(ctx)
		// The renewals and the writes go on while the handlers wind down, so
		// that their claims can still be completed or released.
		bg := context.WithoutCancel(ctx)
		unwatch := w.d.WatchCancels(w.leases.cancelled)
		go w.leases.run(bg)
		w.out.start()
		go func() {
			var loops sync.WaitGroup
			for i := range claimLoops(w.cfg) {
				loops.Go(func() { w.claimLoop(claimCtx, i > 0) })
			}
			loops.Wait()
			w.handlers.Wait()
			w.out.close()
			unwatch()
			w.leases.close()
			w.meter.close()
			w.retries.stop()
			close(w.done)
		}()
	})
	if err != nil {
		return err
	}
	if merr != nil {
		// The worker runs without its gauges.
		w.log.WarnContext(ctx, "worker metrics", "err", merr)
	}
	w.log.InfoContext(ctx, "worker started", "concurrency", w.cfg.Concurrency, "categories", w.cfg.Categories,
		"batch_size", w.cfg.BatchSize)
	return nil
}

// Stop stops the worker gracefully, like http.Server.Shutdown: it stops
// claiming at once, then waits for running handlers to return until
// ShutdownTimeout passes or ctx ends. Handlers still running then have their
// contexts cancelled with cause ErrWorkerShutdown; once each returns, its
// claim is given back to the pool with the store's Release (reason
// "shutdown"), so another worker can take the task at once. A shutdown is not
// a failure, but the claim has counted as an attempt. Outcomes of handlers
// that returned are written before Stop returns.
//
// Stop returns nil when everything has returned, or an error wrapping ctx's
// if ctx ends first; the cancelled handlers then still release their claims
// as they return. Stop before Start returns nil; after Stop, Start returns an
// error wrapping dispatcher.ErrStopped. Stop may be called more than once; each call
// waits for the worker.
func (w *Worker) Stop(ctx context.Context) error {
	if !w.life.Stop() {
		return nil
	}
	w.stopClaiming()
	// Once everything has returned this cancels nothing any more, but it
	// frees the context.
	defer w.stopHandlers(ErrWorkerShutdown)

	drain := time.NewTimer(w.cfg.ShutdownTimeout)
	defer drain.Stop()
	select {
	case <-w.done:
		return nil
	case <-drain.C:
		w.log.InfoContext(ctx, "shutdown timeout passed; cancelling handlers", "running", w.running.Load())
	case <-ctx.Done():
	}
	w.stopHandlers(ErrWorkerShutdown)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		select {
		case <-w.done:
			return nil
		default:
			return fmt.Errorf("stop worker: %w", ctx.Err())
		}
	}
}

// claimLoop claims tasks for free slots and starts their handlers until ctx
// ends. Several run at once (claimLoops), each taking the slots it claims
// for off the shared set; an extra loop (not the first) claims only for
// BatchSize slots at once.
func (w *Worker) claimLoop(ctx context.Context, extra bool) {
	free := w.slots
	atLeast, freed := 1, free.freed
	if extra {
		atLeast, freed = w.cfg.BatchSize, free.full
	}
	errs := 0 // consecutive errors from claiming
	// With SlotsUntilWritten, the first loop claims for the slots of the
	// outcomes waiting too: it carries them (see completer.carry).
	carries := w.cfg.SlotsUntilWritten && !extra && !w.apart
	found := false // the last claim found tasks
	if carries {
		w.carrying.Store(true)
		defer w.carrying.Store(false)
	}
	for ctx.Err() == nil {
		if w.out.full() {
			// Back-pressure: the completer is behind.
			if w.backPressured != nil {
				w.backPressured()
			}
			// The outcomes do not wait for a loop that waits for them.
			w.carrying.Store(false)
			select {
			case <-ctx.Done():
			case <-w.out.space:
				// The other loops waiting for space are woken in turn.
				if !w.out.full() {
					signal(w.out.space)
				}
			}
			w.carrying.Store(carries)
			continue
		}
		if !extra {
			w.gather(ctx)
		}
		slots := free.take(w.cfg.BatchSize, atLeast)
		var carried []*outcome
		if carries {
			var more []int
			carried, more = w.out.carry(w.cfg.BatchSize - len(slots))
			slots = append(slots, more...)
		}
		if len(slots) == 0 {
			select {
			case <-ctx.Done():
			case <-freed:
			}
			continue
		}
		// While the loop is in the store, outcomes wait for it only when
		// its last claim found tasks: it is back soon to carry them (a
		// claim on an empty pool waits for tasks).
		w.carrying.Store(carries && found)
		holders := make([]string, len(slots))
		slotOf := make(map[string]int, len(slots))
		for i, s := range slots {
			holders[i] = workerHolder(w.cfg.ID, s)
			slotOf[holders[i]] = s
		}
		var claims []*tasks.Claim
		var err error
		if len(carried) > 0 {
			claims = w.out.writeCarrying(carried, holders, w.cfg.Categories)
		} else if !w.apart && w.out.len() > 0 {
			// Outcomes wait: the claim carries them, one transaction for
			// both; claimed nothing, it claims apart.
			claims = w.out.writeClaiming(holders, w.cfg.Categories)
		}
		if len(claims) == 0 {
			claims, err = w.d.NextMany(ctx, holders, w.cfg.Categories, w.cfg.Wait)
		}
		found = len(claims) > 0
		w.carrying.Store(carries)
		w.meter.claimed(ctx, len(claims))
		for _, c := range claims {
			s := slotOf[c.Task.Holder]
			delete(slotOf, c.Task.Holder)
			if ctx.Err() != nil {
				// Claimed just as the worker stopped claiming: give it back.
				w.release(w.handlersCtx, c, w.log.With("slot", s))
				free.put(s)
				continue
			}
			w.handlers.Add(1)
			w.unsettled.Add(1)
			go w.run(c, s)
		}
		for _, s := range slotOf {
			free.put(s)
		}
		switch {
		case err == nil, errors.Is(err, dispatcher.ErrNoTask):
			errs = 0
		case ctx.Err() != nil:
			return
		default:
			errs++
			pause := backoff.EqualJitter(backoff.Exponential(workerErrorBackoffMin, workerErrorBackoffMax, errs))
			w.log.WarnContext(ctx, "claim tasks", "err", err, "retry_in", pause)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// outcome is a finished handler's claim on its way to the store.
type outcome struct {
	slot   int // taken until the outcome is written, with SlotsUntilWritten
	claim  *tasks.Claim
	ref    dispatcher.ClaimRef
	holder string
	log    *runLog
	span   trace.Span
	ctx    context.Context // the run's, for logs and spans
	// handlerErr is what the handler returned, for its span: nil for a
	// snooze, no error of the run.
	handlerErr error
	// result is the result to commit, or nil for a snooze (snooze set: the
	// task runs again after backoff) or a failure: err, after backoff, dead
	// when skipRetry (or no attempts left).
	result    json.RawMessage
	snooze    bool
	err       error
	backoff   time.Duration
	skipRetry bool
	queuedAt  time.Time
}

// run runs the handler on a claim in slot, while the lease keeper renews the
// claim, and hands the outcome to the completer.
func (w *Worker) run(claim *tasks.Claim, slot int) {
	defer w.handlers.Done()
	// queued says the outcome went to the completer, which frees the slot
	// once it is written (SlotsUntilWritten).
	queued := false
	holder := claim.Task.Holder
	ref := dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
	log := &runLog{base: w.log, claim: claim, slot: slot}

	// The run is a trace of its own, linked to the span that made the claim.
	rctx, span := w.tracer.Start(w.handlersCtx, "worker.run",
		trace.WithNewRoot(), trace.WithLinks(claimLink(claim.Task.TraceContext)...),
		trace.WithAttributes(claimAttrs(claim)...),
		trace.WithAttributes(attrHolder.String(holder), attribute.Int("taskd.attempt", claim.Task.Attempts)))

	hctx, cancel := context.WithCancelCause(rctx)
	defer cancel(nil)
	txr, hctx := w.txRunOf(hctx, ref, holder)
	w.leases.add(ref, holder, claim.LeaseExpiresAt, cancel)

	task := claim.Task // the handler's copy
	w.running.Add(1)
	started := time.Now()
	res, err := w.call(hctx, &task, log)
	w.meter.ran(rctx, claim.Task.Category, time.Since(started))
	w.running.Add(-1)
	stopping := w.handlersCtx.Err() != nil
	// From here on a lost lease cancels nothing: the outcome decides.
	lost := !w.leases.seal(ref)
	if w.cfg.SlotsUntilWritten {
		defer func() {
			if !queued {
				w.slots.put(slot)
			}
		}()
	} else {
		w.slots.put(slot)
	}
	if txr != nil && w.committedInTx(rctx, txr, &claim.Task, log, span, err) {
		// The handler's transaction committed the outcome (CompleteTx).
		return
	}

	if cause := context.Cause(hctx); lost || errors.Is(cause, ErrLeaseLost) || errors.Is(cause, ErrCancelled) {
		// The store would refuse anything about this claim now.
		w.out.settled(nil)
		w.leases.remove(ref)
		if errors.Is(cause, ErrCancelled) {
			w.cancelled.Add(1)
			w.meter.ended(rctx, claim.Task.Category, RunCancelled)
			log.get().InfoContext(hctx, "task cancelled; outcome dropped", "cause", cause, "handler_err", err)
			span.SetAttributes(attrOutcome.String(RunCancelled))
		} else {
			w.leaseLost.Add(1)
			w.meter.ended(rctx, claim.Task.Category, RunLeaseLost)
			log.get().WarnContext(hctx, "lease lost; outcome dropped", "cause", cause, "handler_err", err)
			span.SetAttributes(attrOutcome.String(RunLeaseLost))
		}
		endSpan(span, err)
		w.d.ReleaseLock(hctx, ref.TaskID, holder)
		return
	}

	o := &outcome{slot: slot, claim: claim, ref: ref, holder: holder, log: log, span: span, ctx: rctx, handlerErr: err}
	var snooze *SnoozeError
	if err != nil && errors.As(err, &snooze) {
		// Recorded even while the worker stops: the handler asked for it,
		// the shutdown did not cause it. It is no error of the run's span.
		o.snooze, o.backoff, o.handlerErr = true, snoozeFor(snooze.Duration), nil
		queued = true
		w.out.settled(o)
		return
	}
	if err == nil {
		var result json.RawMessage
		if result, err = resultJSON(res); err != nil {
			// Running the handler again would produce the same result.
			err = fmt.Errorf("handler result: %w: %w", err, SkipRetry)
		} else if cerr := tasks.CheckResult(result); cerr != nil {
			// The store would refuse the result itself (not JSON, too deep,
			// too big, invalid UTF-8): running the handler again would
			// produce it again.
			err = fmt.Errorf("handler result refused: %w: %w", cerr, SkipRetry)
		} else {
			o.result = result
		}
	}
	if err != nil {
		if stopping {
			log.get().InfoContext(rctx, "handler stopped by shutdown", "err", err)
			w.out.settled(nil)
			w.release(rctx, claim, log.get())
			endSpan(span, o.handlerErr)
			return
		}
		o.err = err
		o.backoff = max(w.cfg.RetryBackoff(claim.Task.Attempts), 0)
		o.skipRetry = errors.Is(err, SkipRetry)
	}
	queued = true
	w.out.settled(o)
}

// runLog is a run's logger: the worker's with the run's slot, task, fence,
// category and attempt. It is made when the run first logs: most runs log
// nothing, and building the attributes of each cost the worker more CPU than
// the rest of its logging. A run uses it from one goroutine at a time (the
// run's, then the completer's once the outcome is queued).
type runLog struct {
	base  *slog.Logger
	claim *tasks.Claim
	slot  int
	l     *slog.Logger
}

// get returns the run's logger.
func (r *runLog) get() *slog.Logger {
	if r.l == nil {
		c := r.claim
		r.l = r.base.With("slot", r.slot, "task_id", c.Task.ID, "fence", c.Fence, "category", c.Task.Category, "attempt", c.Task.Attempts)
	}
	return r.l
}

// release gives a claim back to the pool because the worker is stopping,
// under ctx's values (the run's span, when it ran) but not its cancellation.
func (w *Worker) release(ctx context.Context, claim *tasks.Claim, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workerFinishTimeout)
	defer cancel()
	ref := dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
	c := dispatcher.Claimant{Holder: claim.Task.Holder, Categories: w.cfg.Categories}
	err := w.d.Release(ctx, c, ref, "shutdown")
	w.leases.remove(ref)
	switch {
	case err == nil:
		w.released.Add(1)
		w.meter.ended(ctx, claim.Task.Category, RunReleased)
	case errors.Is(err, tasks.ErrCancelled):
		w.cancelled.Add(1)
		w.meter.ended(ctx, claim.Task.Category, RunCancelled)
		log.InfoContext(ctx, "release at shutdown refused: task cancelled", "task_id", ref.TaskID, "fence", ref.Fence)
		w.d.ReleaseLock(ctx, ref.TaskID, c.Holder)
	case errors.Is(err, tasks.ErrStale):
		w.leaseLost.Add(1)
		w.meter.ended(ctx, claim.Task.Category, RunLeaseLost)
		log.WarnContext(ctx, "release at shutdown refused: lease lost", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		w.d.ReleaseLock(ctx, ref.TaskID, c.Holder)
	default:
		w.meter.ended(ctx, claim.Task.Category, RunError)
		log.ErrorContext(ctx, "release task at shutdown", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
	}
}

// completed handles the store's answer about an outcome: ended when its
// transaction committed, err when it did not. It reports whether the claim's
// lock is to be given back.
// The dispatcher (CompleteMany) has counted the answer and linked the run's
// span to the claim's.
func (w *Worker) completed(o *outcome, ended *tasks.Ended, err error) bool {
	op := "submit"
	switch {
	case o.snooze:
		op = "snooze"
	case o.result == nil:
		op = "fail"
	}
	defer w.leases.remove(o.ref)
	if w.cfg.SlotsUntilWritten && o.slot != noSlot {
		defer w.slots.put(o.slot)
	}
	defer func() { endSpan(o.span, o.handlerErr) }()
	log := o.log
	cat := o.claim.Task.Category
	switch {
	case err == nil && o.result != nil:
		w.processed.Add(1)
		w.meter.ended(o.ctx, cat, RunDone)
		if w.log.Enabled(o.ctx, slog.LevelDebug) {
			log.get().DebugContext(o.ctx, "task done")
		}
		o.span.SetAttributes(attrOutcome.String(string(ended.Status)))
		return true
	case err == nil && o.snooze:
		outcome := RunSnoozed
		if ended.Status == tasks.StatusDead {
			outcome = RunDead
			w.failed.Add(1)
			w.meter.ended(o.ctx, cat, RunDead)
			log.get().WarnContext(o.ctx, "task snoozed past its limit; dead", "status", ended.Status, "max_snoozes", w.cfg.MaxSnoozes)
		} else {
			// As for a retry: the store wrote run_after = its instant + the
			// delay, when this worker wakes the category's claims.
			w.snoozed.Add(1)
			w.meter.ended(o.ctx, cat, RunSnoozed)
			w.retries.after(ended.Category, o.backoff)
			if w.log.Enabled(o.ctx, slog.LevelDebug) {
				log.get().DebugContext(o.ctx, "task snoozed", "run_in", o.backoff, "run_at", ended.EndedAt.Add(o.backoff).UTC())
			}
		}
		o.span.SetAttributes(attrOutcome.String(outcome))
		return true
	case err == nil:
		w.failed.Add(1)
		status := ended.Status
		if status == tasks.StatusDead {
			w.meter.ended(o.ctx, cat, RunDead)
		} else {
			w.meter.ended(o.ctx, cat, RunRetried)
		}
		if status == tasks.StatusDead && o.skipRetry {
			log.get().WarnContext(o.ctx, "task failed; not retried: SkipRetry", "status", status, "err", o.err)
		} else if status == tasks.StatusDead {
			log.get().WarnContext(o.ctx, "task failed; no attempts left", "status", status, "err", o.err)
		} else {
			// The store wrote run_after = its instant + the backoff (to the
			// millisecond): the time the retry is claimable, when this
			// worker wakes the category's claims (see retryWaker).
			backoff := o.backoff.Truncate(time.Millisecond)
			w.retries.after(ended.Category, backoff)
			log.get().WarnContext(o.ctx, "task failed; will retry", "status", status, "retry_in", backoff,
				"retry_at", ended.EndedAt.Add(backoff).UTC(), "err", o.err)
		}
		o.span.SetAttributes(attrOutcome.String(string(status)))
		return true
	case errors.Is(err, tasks.ErrCancelled):
		// A cancel ended the claim after the last renewal, its announcement
		// not heard before the handler returned.
		w.cancelled.Add(1)
		w.meter.ended(o.ctx, cat, RunCancelled)
		log.get().InfoContext(o.ctx, op+" refused: task cancelled", "err", err)
		o.span.SetAttributes(attrOutcome.String(RunCancelled))
		return true
	case errors.Is(err, tasks.ErrStale):
		// The lease passed or the claim was revoked after the last renewal.
		w.leaseLost.Add(1)
		w.meter.ended(o.ctx, cat, RunLeaseLost)
		log.get().WarnContext(o.ctx, op+" refused: lease lost", "err", err)
		o.span.SetAttributes(attrOutcome.String(RunLeaseLost))
		return true
	default:
		// The claim stays until its lease passes; then the task is claimed
		// again (the sweeper or the next claim takes it over).
		w.meter.ended(o.ctx, cat, RunError)
		log.get().ErrorContext(o.ctx, op+" task", "err", err)
		o.span.SetAttributes(attrOutcome.String("error"))
		return false
	}
}

// call runs the handler, turning a panic into an error.
func (w *Worker) call(ctx context.Context, t *tasks.Task, log *runLog) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.get().ErrorContext(ctx, "handler panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return w.cfg.Handler.ProcessTask(ctx, t)
}

// resultJSON encodes a handler's result: a json.RawMessage (or []byte) as
// is, nil or an empty message as JSON null, anything else with
// json.Marshal.
func resultJSON(res any) (json.RawMessage, error) {
	var raw []byte
	switch r := res.(type) {
	case nil:
	case json.RawMessage:
		raw = r
	case []byte:
		raw = r
	default:
		var err error
		if raw, err = json.Marshal(r); err != nil {
			return nil, err
		}
	}
	if len(raw) == 0 {
		return json.RawMessage(workerNoResult), nil
	}
	return raw, nil
}
