package dispatcher

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
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/internal/backoff"
	"github.com/taskd/taskd/internal/lease"
	"github.com/taskd/taskd/tasks"
)

var (
	// ErrLeaseLost is the cause (wrapped) of a handler's cancelled context when
	// the worker lost the claim: the store refused a heartbeat as stale or at
	// the hold limit, or the lease passed without a successful heartbeat.
	ErrLeaseLost = errors.New("lease lost")

	// ErrWorkerShutdown is the cause of a handler's cancelled context when
	// Stop's drain ended before the handler returned.
	ErrWorkerShutdown = errors.New("worker shut down")
)

// WorkerConfig defaults.
const (
	WorkerConcurrencyDefault     = 4
	WorkerWaitDefault            = 30 * time.Second
	WorkerShutdownTimeoutDefault = 30 * time.Second
	// RetryBackoffBaseDefault and RetryBackoffMaxDefault shape the default
	// RetryBackoff: ExponentialRetryBackoff(RetryBackoffBaseDefault,
	// RetryBackoffMaxDefault).
	RetryBackoffBaseDefault = time.Second
	RetryBackoffMaxDefault  = 10 * time.Minute
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
)

// WorkerConfig configures a Worker. Handler is required; the other zero
// fields take defaults (see WithDefaults).
type WorkerConfig struct {
	// Concurrency is the number of slots: tasks run at most this many at a
	// time, each slot claiming its own. Default WorkerConcurrencyDefault.
	Concurrency int

	// Handler runs each claimed task; usually a *ServeMux. Required.
	Handler Handler

	// Categories the worker claims tasks from. Default: the categories
	// registered on Handler when it is a *ServeMux; required otherwise.
	// With a *ServeMux, each listed category must have a handler there
	// (else NewWorker's error wraps ErrNoHandler).
	Categories []string

	// ID names the worker; slot i claims as holder "worker:<ID>:<i>", which
	// must fit in 128 characters. Default "<hostname>:<pid>:<6 random
	// characters>", unique per process.
	ID string

	// Wait is how long one slot long-polls Next for a task before asking
	// again (capped by the dispatcher's Config.MaxWait). Default
	// WorkerWaitDefault.
	Wait time.Duration

	// RetryBackoff returns how long a failed task waits before its next
	// attempt, given the attempts made so far (1 after the first failure).
	// The store decides whether a failed task is retried at all: it is dead
	// once its attempts reach its max_attempts. Default
	// ExponentialRetryBackoff(RetryBackoffBaseDefault, RetryBackoffMaxDefault).
	RetryBackoff func(attempt int) time.Duration

	// ShutdownTimeout is how long Stop lets running handlers finish
	// before it cancels their contexts. Default WorkerShutdownTimeoutDefault.
	ShutdownTimeout time.Duration

	// Logger receives the worker's logs. Default: the dispatcher's logger.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
// Logger stays nil when unset; NewWorker then uses the dispatcher's.
func (c WorkerConfig) WithDefaults() WorkerConfig {
	if c.Concurrency == 0 {
		c.Concurrency = WorkerConcurrencyDefault
	}
	if len(c.Categories) == 0 {
		if mux, ok := c.Handler.(*ServeMux); ok && mux != nil {
			c.Categories = mux.Categories()
		}
	}
	c.Categories = slices.Clone(c.Categories)
	if c.ID == "" {
		c.ID = defaultWorkerID()
	}
	if c.Wait == 0 {
		c.Wait = WorkerWaitDefault
	}
	if c.RetryBackoff == nil {
		c.RetryBackoff = ExponentialRetryBackoff(RetryBackoffBaseDefault, RetryBackoffMaxDefault)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = WorkerShutdownTimeoutDefault
	}
	return c
}

func (c WorkerConfig) validate() error {
	switch {
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency must be at least 1, got %d", c.Concurrency)
	case c.Handler == nil:
		return errors.New("handler is required")
	case len(c.Categories) == 0:
		return errors.New("categories are required (none given, and the handler registers none)")
	case len(c.Categories) > tasks.MaxCategories:
		return fmt.Errorf("at most %d categories, got %d", tasks.MaxCategories, len(c.Categories))
	case c.Wait < 0:
		return fmt.Errorf("wait must not be negative, got %v", c.Wait)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("shutdown timeout must not be negative, got %v", c.ShutdownTimeout)
	case !utf8.ValidString(c.ID):
		return errors.New("id must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(workerHolder(c.ID, c.Concurrency-1)); n > workerMaxHolderLen {
		return fmt.Errorf("id too long: holder %q is %d characters, at most %d", workerHolder(c.ID, c.Concurrency-1), n, workerMaxHolderLen)
	}
	mux, _ := c.Handler.(*ServeMux)
	var handled []string
	if mux != nil {
		handled = mux.Categories()
	}
	for _, cat := range c.Categories {
		if n := utf8.RuneCountInString(cat); n < 1 || n > tasks.MaxCategoryLen || !utf8.ValidString(cat) || strings.TrimSpace(cat) != cat {
			return fmt.Errorf("invalid category %q: 1..%d characters, no leading or trailing spaces", cat, tasks.MaxCategoryLen)
		}
		if mux != nil && !slices.Contains(handled, cat) {
			return fmt.Errorf("category %q: %w", cat, ErrNoHandler)
		}
	}
	return nil
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

// WorkerStats are running totals of a Worker.
type WorkerStats struct {
	// Processed counts tasks whose handler returned nil and whose result the
	// store committed.
	Processed int64
	// Failed counts handler errors and panics the store recorded (the task
	// was then retried later, or dead).
	Failed int64
	// LeaseLost counts claims the worker lost while running them: the
	// watchdog cancelled the handler, or the store refused the outcome as
	// stale.
	LeaseLost int64
	// Released counts claims given back at shutdown.
	Released int64
	// Running is the number of handlers running now.
	Running int64
}

// Worker runs handlers on tasks it claims through a Dispatcher, in
// Concurrency slots. Each slot holds at most one claim: it claims with Next
// (long-polling), runs the handler while a watchdog renews the lease every
// Lease/3, and ends the claim with the store's Submit of the result the
// handler returned, as JSON (handler returned a nil error), or Fail (handler
// returned an error or panicked; the store retries it after RetryBackoff or makes it
// dead when no attempts are left).
//
// Handlers run at least once per task, not exactly once: a claim lost while
// its handler runs (ctx cancelled with ErrLeaseLost), a process killed, or a
// commit that cannot reach the store all let another claim run the task
// again. The store's fencing guarantees only that one claim's outcome is
// committed.
//
// Start it once, stop it with Stop. It is safe for concurrent use.
type Worker struct {
	d   *Dispatcher
	cfg WorkerConfig
	log *slog.Logger

	life         startStop
	stopClaiming context.CancelFunc      // ends the slots' Next calls
	stopHandlers context.CancelCauseFunc // cancels running handlers
	handlersCtx  context.Context         // parent of the handlers' contexts
	slots        sync.WaitGroup
	done         chan struct{} // closed when every slot has returned

	processed, failed, leaseLost, released, running atomic.Int64
}

// NewWorker returns a Worker that claims through d. It returns an error for
// an invalid cfg.
func NewWorker(d *Dispatcher, cfg WorkerConfig) (*Worker, error) {
	if d == nil {
		return nil, errors.New("new worker: nil dispatcher")
	}
	cfg = cfg.WithDefaults()
	if cfg.Logger == nil {
		cfg.Logger = d.log
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new worker: %w", err)
	}
	return &Worker{
		d:    d,
		cfg:  cfg,
		log:  cfg.Logger.With("worker_id", cfg.ID),
		done: make(chan struct{}),
	}, nil
}

// Config returns the worker's configuration with defaults applied.
func (w *Worker) Config() WorkerConfig {
	cfg := w.cfg
	cfg.Categories = slices.Clone(cfg.Categories)
	return cfg
}

// Stats returns the worker's running totals.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{
		Processed: w.processed.Load(),
		Failed:    w.failed.Load(),
		LeaseLost: w.leaseLost.Load(),
		Released:  w.released.Load(),
		Running:   w.running.Load(),
	}
}

// Start starts the slots and returns. Handlers' contexts derive from ctx, so
// they carry its values; cancelling ctx stops the worker at once, like a
// Stop whose drain has ended (claiming stops, handlers are cancelled and
// their claims released). Call Stop in either case to wait for the slots.
//
// Start returns an error wrapping ErrStarted when the worker is running and
// ErrStopped after Stop.
func (w *Worker) Start(ctx context.Context) error {
	err := w.life.start("worker", func() {
		claimCtx, stopClaiming := context.WithCancel(ctx)
		w.stopClaiming = stopClaiming
		w.handlersCtx, w.stopHandlers = context.WithCancelCause(ctx)
		for i := range w.cfg.Concurrency {
			w.slots.Add(1)
			go w.runSlot(claimCtx, i)
		}
		go func() {
			w.slots.Wait()
			close(w.done)
		}()
	})
	if err != nil {
		return err
	}
	w.log.InfoContext(ctx, "worker started", "concurrency", w.cfg.Concurrency, "categories", w.cfg.Categories)
	return nil
}

// Stop stops the worker gracefully, like http.Server.Shutdown: it stops
// claiming at once, then waits for running handlers to return until
// ShutdownTimeout passes or ctx ends. Handlers still running then have their
// contexts cancelled with cause ErrWorkerShutdown; once each returns, its
// claim is given back to the pool with the store's Release (reason
// "shutdown"), so another worker can take the task at once. A shutdown is not
// a failure, but the claim has counted as an attempt.
//
// Stop returns nil when every slot has returned, or an error wrapping ctx's
// if ctx ends first; the cancelled handlers then still release their claims
// as they return. Stop before Start returns nil; after Stop, Start returns an
// error wrapping ErrStopped. Stop may be called more than once; each call
// waits for the slots.
func (w *Worker) Stop(ctx context.Context) error {
	if !w.life.stop() {
		return nil
	}
	w.stopClaiming()
	// Once every slot has returned this cancels nothing any more, but it
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

// runSlot claims and runs tasks until ctx ends.
func (w *Worker) runSlot(ctx context.Context, slot int) {
	defer w.slots.Done()
	c := Claimant{Holder: workerHolder(w.cfg.ID, slot), Categories: w.cfg.Categories}
	log := w.log.With("slot", slot)
	errs := 0             // consecutive errors from Next
	var next *tasks.Claim // claimed by the submit of the last task
	for ctx.Err() == nil {
		claim, err := next, error(nil)
		if claim == nil {
			claim, err = w.d.Next(ctx, c, w.cfg.Wait)
		}
		switch {
		case err == nil:
			errs = 0
			if ctx.Err() != nil {
				// Claimed just as the worker stopped claiming: give it back.
				w.release(c, claim, log)
				return
			}
			next = w.process(ctx, c, claim, log)
		case errors.Is(err, ErrNoTask):
			errs = 0
		case ctx.Err() != nil:
			return
		default:
			errs++
			pause := backoff.EqualJitter(backoff.Exponential(workerErrorBackoffMin, workerErrorBackoffMax, errs))
			log.WarnContext(ctx, "claim task", "err", err, "retry_in", pause)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// process runs the handler on a claim under a watchdog, then ends the claim
// according to the handler's outcome. A task done is submitted together with
// the claim of the slot's next task, unless ctx, the slot's, has ended; that
// claim is returned.
func (w *Worker) process(ctx context.Context, c Claimant, claim *tasks.Claim, log *slog.Logger) *tasks.Claim {
	ref := ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
	log = log.With("task_id", ref.TaskID, "fence", ref.Fence, "category", claim.Task.Category, "attempt", claim.Task.Attempts)

	// The run is a trace of its own, linked to the span that made the claim.
	rctx, span := w.d.tel.tracer.Start(w.handlersCtx, "worker.run",
		trace.WithNewRoot(), trace.WithLinks(claimLink(claim.Task.TraceContext)...),
		trace.WithAttributes(claimAttrs(claim)...),
		trace.WithAttributes(attrHolder.String(c.Holder), attribute.Int("taskd.attempt", claim.Task.Attempts)))
	var handlerErr error
	defer func() { endSpan(span, handlerErr) }()

	hctx, cancel := context.WithCancelCause(rctx)
	defer cancel(nil)
	// The watchdog keeps renewing while a cancelled handler winds down, so
	// that its claim can still be released or committed.
	wctx, stopWatchdog := context.WithCancel(context.WithoutCancel(rctx))
	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		w.watchdog(wctx, c, ref, claim.LeaseExpiresAt, cancel, log)
	}()

	task := claim.Task // the handler's copy
	w.running.Add(1)
	res, err := w.call(hctx, &task, log)
	handlerErr = err
	w.running.Add(-1)
	stopping := w.handlersCtx.Err() != nil
	stopWatchdog()
	<-watchdogDone

	if cause := context.Cause(hctx); errors.Is(cause, ErrLeaseLost) {
		// The store would refuse anything about this claim now.
		w.leaseLost.Add(1)
		log.WarnContext(hctx, "lease lost; outcome dropped", "cause", cause, "handler_err", err)
		span.SetAttributes(attrOutcome.String("lease_lost"))
		w.d.releaseLock(hctx, ref.TaskID, c.Holder)
		return nil
	}

	claimNext := ctx.Err() == nil && !stopping
	ctx, cancelFinish := context.WithTimeout(context.WithoutCancel(rctx), workerFinishTimeout)
	defer cancelFinish()
	if err == nil {
		var result json.RawMessage
		var next *tasks.Claim
		if result, err = resultJSON(res); err != nil {
			// Running the handler again would produce the same result.
			err = fmt.Errorf("handler result: %w: %w", err, SkipRetry)
		} else if next, err = w.submit(ctx, c, ref, result, claimNext); err == nil {
			w.processed.Add(1)
			log.DebugContext(ctx, "task done")
			return next
		} else if !errors.Is(err, tasks.ErrInvalid) {
			w.finished(ctx, c, ref, "submit", err, log)
			return nil
		} else {
			// The store refused the result itself (not JSON, too deep, too
			// big, invalid UTF-8): running the handler again would produce
			// it again.
			err = fmt.Errorf("handler result refused: %w: %w", err, SkipRetry)
		}
	}
	switch {
	case stopping:
		log.InfoContext(ctx, "handler stopped by shutdown", "err", err)
		w.release(c, claim, log)
	default:
		backoff := max(w.cfg.RetryBackoff(claim.Task.Attempts), 0)
		ended, ferr := w.d.fail(ctx, c, ref, err, backoff, errors.Is(err, SkipRetry))
		if w.finished(ctx, c, ref, "fail", ferr, log) {
			w.failed.Add(1)
			status := ended.Status
			if status == tasks.StatusDead && errors.Is(err, SkipRetry) {
				log.WarnContext(ctx, "task failed; not retried: SkipRetry", "status", status, "err", err)
			} else if status == tasks.StatusDead {
				log.WarnContext(ctx, "task failed; no attempts left", "status", status, "err", err)
			} else {
				log.WarnContext(ctx, "task failed; will retry", "status", status, "retry_in", backoff, "err", err)
			}
		}
	}
	return nil
}

// submit commits a handler's result for claim ref. With claimNext it claims
// the slot's next task in the same round trips, as an editor's submit does
// (Dispatcher.Submit), and returns that claim, or nil when there is none.
func (w *Worker) submit(ctx context.Context, c Claimant, ref ClaimRef, result json.RawMessage, claimNext bool) (*tasks.Claim, error) {
	if !claimNext {
		return nil, w.d.commit(ctx, c, ref, result)
	}
	return w.d.Submit(ctx, c, ref, result)
}

// finished handles the answer to a write that ends a claim (the dispatcher
// already freed the lock of an accepted one), and reports whether it was
// accepted.
func (w *Worker) finished(ctx context.Context, c Claimant, ref ClaimRef, op string, err error, log *slog.Logger) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, tasks.ErrStale):
		// The lease passed or the claim was revoked after the last heartbeat.
		w.leaseLost.Add(1)
		log.WarnContext(ctx, op+" refused: lease lost", "err", err)
		w.d.releaseLock(ctx, ref.TaskID, c.Holder)
	default:
		// The claim stays until its lease passes; then the task is claimed
		// again (the sweeper or the next claim takes it over).
		log.ErrorContext(ctx, op+" task", "err", Unavailable(err))
	}
	return false
}

// release gives a claim back to the pool because the worker is stopping.
func (w *Worker) release(c Claimant, claim *tasks.Claim, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.handlersCtx), workerFinishTimeout)
	defer cancel()
	ref := ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
	err := w.d.Release(ctx, c, ref, "shutdown")
	switch {
	case err == nil:
		w.released.Add(1)
	case errors.Is(err, tasks.ErrStale):
		w.leaseLost.Add(1)
		log.WarnContext(ctx, "release at shutdown refused: lease lost", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		w.d.releaseLock(ctx, ref.TaskID, c.Holder)
	default:
		log.ErrorContext(ctx, "release task at shutdown", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
	}
}

// call runs the handler, turning a panic into an error.
func (w *Worker) call(ctx context.Context, t *tasks.Task, log *slog.Logger) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.ErrorContext(ctx, "handler panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
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

// watchdog renews the claim's lease every Lease/3 until ctx ends. When the
// store refuses a heartbeat (stale, or at the hold limit), or the lease
// deadline passes without a successful one, it cancels the handler with a
// cause wrapping ErrLeaseLost and returns. Transient errors are retried
// sooner.
//
// Deadlines come from the database clock and are compared with the local
// one: this assumes the clocks agree (same host, or NTP). A local clock
// running behind only delays the cancellation; the store's fencing still
// refuses the stale holder's writes.
func (w *Worker) watchdog(ctx context.Context, c Claimant, ref ClaimRef, deadline time.Time, lost context.CancelCauseFunc, log *slog.Logger) {
	interval := w.d.cfg.Lease / 3
	err := lease.Keep(ctx, lease.Renewal{
		Until: deadline,
		Every: interval,
		Retry: max(interval/4, 10*time.Millisecond),
		Renew: func(hctx context.Context) (time.Time, error) {
			expires, err := w.d.Heartbeat(hctx, c, ref)
			if err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "heartbeat", "err", err)
			}
			return expires, err
		},
		Lost: func(err error) bool {
			return errors.Is(err, tasks.ErrStale) || errors.Is(err, tasks.ErrHoldLimit)
		},
	})
	if err != nil {
		lost(fmt.Errorf("%w: heartbeat task %d: %w", ErrLeaseLost, ref.TaskID, err))
	}
}
