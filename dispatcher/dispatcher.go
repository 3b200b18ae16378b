// Package dispatcher hands tasks out to exactly one holder at a time: it is
// taskd's claims engine. The engine (package taskd) builds one from its
// config, with the background loops around it (the sweeper, the workers,
// webhook delivery, periodic tasks, the activity history), which live under
// internal/ and use the dispatcher through the few exported methods named
// below.
//
// # Claims
//
// A Dispatcher claims tasks for claimants (an editor, EditorClaimant, or a
// worker slot): it takes candidates from a per-process pool that one store
// read fills for many claims, arbitrates between competing dispatchers with
// a per-task Redis lock (one ObtainAny round trip for the candidates a claim
// tries), and commits the claim with the store's fenced conditional UPDATE.
// MySQL is the source of truth: every later write about the claim is fenced
// there, and the Redis lock is only kept in step with it. If Redis loses its
// keys the worst outcome is a claim the store refuses, never a double commit.
//
// Next returns the claimant's live claim, or claims a new one, waiting up to
// its wait for one on an in-process hub (fed across processes by Redis
// pub/sub with Config.PubSub) rather than polling MySQL per caller; it
// returns ErrNoTask when the wait ends empty. Heartbeat extends the lease,
// Release and Skip give the task back, and Submit commits a result and
// claims the claimant's next task in the same round trip to each store (the
// cycle). A write about a claim the holder no longer has fails with
// tasks.ErrStale and changes nothing. AddTasks adds tasks and wakes
// waiting callers; Requeue, Cancel, their Matching forms, ForceRelease,
// DisableEditor, PauseCategory and ResumeCategory are the operator's
// actions, and those that make tasks claimable wake the callers waiting
// for them.
//
// # Fair share and rate limits
//
// With Config.FairShare, an editor's claims are shared among its
// categories by their weights (Config.Workflows), priority still ordering
// the tasks of each, so that a large category does not starve a small one.
// A category with a rate limit (tasks.Workflow.RateLimit) is claimed at
// most as often as its limit lets through, across every process counting
// in the Redis server of Config.RateLimits. The Config fields say how, and
// what exactly is promised. Without either (the default), a claim takes the
// best task of all its claimant's categories and asks nothing more of the
// stores.
//
// # Counting
//
// Each committed claim and each claim ended (a submit, a release, a
// failure) is one ClaimEvent. Stats and the OpenTelemetry metrics count the
// ClaimEvents; Observe adds an observer of them (the activity history is one).
//
// # For the background loops
//
// The worker runtime claims and completes in batches, each task keeping its
// own lock and fence: NextMany, CompleteMany, HeartbeatMany and ReleaseLock.
// The sweeper repairs the locks (LockKey) and wakes the callers waiting for
// the claims it recycles (Wake). Each loop declares the interface it needs
// and takes the rest from Config.
//
// The Dispatcher's one background job is the relay of wake-ups between
// processes: Start returns once it runs, a second Start an error wrapping
// ErrStarted, a Start after Stop one wrapping ErrStopped; Stop drains within
// its context, like http.Server.Shutdown, and is nil before Start. Claims
// work without Start.
//
// # Errors
//
// Errors that come from an unreachable store, or from a transaction that
// kept losing lock conflicts, wrap ErrUnavailable (the API answers 503 with
// Retry-After); the store's own sentinels (tasks.ErrStale, tasks.ErrNotFound,
// tasks.ErrHoldLimit, …) come back wrapped with the operation. Stats is a
// snapshot of running totals.
//
// The repository's docs/design.md explains the model, and docs/library.md
// shows each piece in use.
package dispatcher

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/internal/lifecycle"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

var (
	// ErrNoTask is returned by Next when nothing is claimable for the
	// claimant before the wait ends.
	ErrNoTask = errors.New("no task available")

	// ErrUnavailable wraps errors that come from a store being unreachable
	// (Redis or MySQL) or a MySQL transaction that kept losing lock conflicts
	// (tasks.ErrBusy); callers should retry later.
	ErrUnavailable = errors.New("store unavailable")
)

// Store is the task store the dispatcher works on; *store.Store implements it.
type Store interface {
	Insert(ctx context.Context, ts []tasks.NewTask) ([]tasks.Inserted, error)
	GetTask(ctx context.Context, id int64) (*tasks.Task, error)
	Candidates(ctx context.Context, p tasks.CandidatesParams) ([]tasks.Candidate, error)
	Claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error)
	ClaimBatch(ctx context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error)
	HeartbeatBatch(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error)
	Complete(ctx context.Context, os []tasks.Outcome) ([]tasks.Completed, error)
	CompleteAndClaim(ctx context.Context, os []tasks.Outcome, ps []tasks.ClaimParams) ([]tasks.Completed, []tasks.ClaimResult, error)
	HeldByEditor(ctx context.Context, editorID int64) (*tasks.Claim, error)
	EditorClaims(ctx context.Context, editorID int64) (*tasks.EditorClaims, error)
	Heartbeat(ctx context.Context, p tasks.HeartbeatParams) (time.Time, error)
	Submit(ctx context.Context, p tasks.SubmitParams) (*tasks.Ended, error)
	SubmitAndClaim(ctx context.Context, s tasks.SubmitParams, c tasks.ClaimParams) (*tasks.Handover, error)
	Release(ctx context.Context, p tasks.ReleaseParams) (*tasks.Ended, error)
	ForceRelease(ctx context.Context, taskID int64) (*tasks.Ended, error)
	Requeue(ctx context.Context, p tasks.ChangeParams) (*tasks.Changed, error)
	Cancel(ctx context.Context, p tasks.ChangeParams) (*tasks.Changed, error)
	RequeueMatching(ctx context.Context, p tasks.BulkParams) (*tasks.BulkResult, error)
	CancelMatching(ctx context.Context, p tasks.BulkParams) (*tasks.BulkResult, error)
	PauseCategory(ctx context.Context, category string) (tasks.PausedCategory, bool, error)
	ResumeCategory(ctx context.Context, category string) (bool, error)
	DisableEditor(ctx context.Context, editorID int64) ([]tasks.Revoked, error)
	Fail(ctx context.Context, p tasks.FailParams) (*tasks.Ended, error)
	RecycleExpired(ctx context.Context, p tasks.RecycleParams) ([]tasks.Recycled, error)
	PurgeSkips(ctx context.Context, limit int) (int, error)
	LiveLeases(ctx context.Context, p tasks.LiveLeasesParams) ([]tasks.LiveLease, error)
	LiveHolders(ctx context.Context, taskIDs []int64) (map[int64]string, error)
	SendBacks(ctx context.Context, taskID int64) (category string, n int, err error)
}

// Locker takes per-task locks; *locker.Client implements it.
type Locker interface {
	Obtain(ctx context.Context, key string, ttl time.Duration, opt *locker.Options) (*locker.Lock, error)
	ObtainAny(ctx context.Context, keys []string, ttl time.Duration, opt *locker.Options) (*locker.Lock, error)
	ObtainEach(ctx context.Context, each []locker.Each) ([]*locker.Lock, error)
	Lock(key, token string) *locker.Lock
	ReleaseAll(ctx context.Context, locks []*locker.Lock) (int, error)
}

var _ Locker = (*locker.Client)(nil)

// Config defaults.
const (
	LeaseDefault        = 30 * time.Second
	BatchDefault        = 64
	KeyPrefixDefault    = "taskd:"
	PollIntervalDefault = 5 * time.Second
	MaxWaitDefault      = time.Minute
)

// claimAttempts bounds how many times one claim takes candidates when every
// candidate it took was taken by a competitor.
const claimAttempts = 8

// claimPick is how many candidates one attempt takes and tries with one
// ObtainAny: more than one, so that a candidate another process holds costs
// no extra round trip.
const claimPick = 2

// Config configures a Dispatcher. The zero value is valid.
type Config struct {
	// Lease is how long a claim lives without a heartbeat; the Redis lock of
	// a claim has the same time to live. Default LeaseDefault.
	Lease time.Duration

	// Batch is how many candidates of a category one read fetches. The
	// claims of this process share them, each taking distinct ones, so one
	// read serves up to Batch claims. Default BatchDefault.
	Batch int

	// KeyPrefix starts every Redis key the dispatcher uses. Default
	// KeyPrefixDefault.
	KeyPrefix string

	// PollInterval is how often long-polling callers look again when no
	// wake-up came (tasks can become claimable by time alone: a retry's
	// backoff passing): every PollInterval (spread), the oldest idle caller
	// of each category looks, one for the whole process, and a look that
	// finds something wakes more. Default PollIntervalDefault.
	PollInterval time.Duration

	// MaxWait caps the wait of a long-polling Next. Default MaxWaitDefault.
	MaxWait time.Duration

	// PubSub, when set, carries wake-ups for long-polling callers between
	// processes over Redis pub/sub; Start must then run the relay. Without it, only
	// tasks added or released through this Dispatcher wake its callers
	// before their poll interval.
	PubSub redis.UniversalClient

	// Workflows are the categories' workflows, by category; the dispatcher
	// reads their Weight (under FairShare) and RateLimit. A category not
	// listed has the zero Workflow: weight 1, no rate limit. Default none.
	Workflows map[string]tasks.Workflow

	// FairShare shares each editor's claims among its categories by their
	// weights (Workflows), by stride scheduling: a claim in a category moves
	// its pass on by 1/weight, and the editor's next claim goes to the
	// category with the lowest pass among those that have a claimable task,
	// the best task of it (highest priority, then earliest due, then
	// oldest). A category only counts the claims made in it; one that ran
	// dry comes back level with the others, not ahead by the claims it
	// missed, so no category starves another while it has tasks. The shares
	// are kept per process, per editor, and forgotten after ten minutes
	// without a claim: with an editor's requests spread over several
	// processes, each keeps them over the claims it serves, and so the whole
	// keeps them too. Workers' claims (NextMany) are not shared. Default
	// false: an editor gets the best task of all its categories.
	FairShare bool

	// RateLimits is the Redis server the categories' rate limits
	// (Workflows' RateLimit) are counted in, shared by every process that
	// claims from them; New returns an error when a category has a rate
	// limit and RateLimits is nil. A limit of L claims a minute spaces
	// claims 60s/L apart on average (rounded up to the microsecond), with a
	// burst of B = ceil(L/60) (a second's worth, at least 1) after an idle
	// time: in any window of length W, at most B + floor(W*L/60s) claims of
	// the category are made, by the Redis server's clock (GCRA, in one Lua
	// script on one key per category, Config.KeyPrefix + "rate:" + the
	// category, so it works on a Cluster). Editors' claims and workers'
	// batches (which take as many claims as the limit lets them) count
	// alike; a claim the lock or the store then refuses still counts. The
	// limit is taken just before a claim's candidates are locked, and only
	// for categories that have one: the others cost nothing more. When the
	// limit has nothing left, the category is closed in this process until
	// its next claim (claims there leave it out without asking Redis), and
	// then one caller long-polling for it is woken. Redis unreachable: the
	// claim fails with ErrUnavailable, like any Redis failure. A rate limit
	// is not a safety property: with Redlock, count in one master (the
	// engine uses the first; while it is down, claims of limited
	// categories fail with ErrUnavailable and the others go on); a key lost
	// with its server (restart, failover, eviction) gives the category a
	// full burst again. Default nil.
	RateLimits redis.Scripter

	// Logger receives the dispatcher's logs. Default slog.Default().
	Logger *slog.Logger

	// TracerProvider and MeterProvider receive the dispatcher's spans and
	// metrics. Default: the global providers (no-ops unless set).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Lease == 0 {
		c.Lease = LeaseDefault
	}
	if c.Batch == 0 {
		c.Batch = BatchDefault
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = KeyPrefixDefault
	}
	if c.PollInterval == 0 {
		c.PollInterval = PollIntervalDefault
	}
	if c.MaxWait == 0 {
		c.MaxWait = MaxWaitDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Lease < 100*time.Millisecond:
		return fmt.Errorf("lease must be at least 100ms, got %v", c.Lease)
	case c.Batch < 1 || c.Batch > tasks.CandidatesLimitMax:
		return fmt.Errorf("batch must be 1..%d, got %d", tasks.CandidatesLimitMax, c.Batch)
	case c.PollInterval < 10*time.Millisecond:
		return fmt.Errorf("poll interval must be at least 10ms, got %v", c.PollInterval)
	case c.MaxWait < 0:
		return fmt.Errorf("max wait must not be negative, got %v", c.MaxWait)
	}
	for cat, w := range c.Workflows {
		if err := w.Check(); err != nil {
			return fmt.Errorf("workflow of category %q: %w", cat, err)
		}
		if w.RateLimit > 0 && c.RateLimits == nil {
			return fmt.Errorf("category %q has a rate limit, and no Redis to count it in (RateLimits)", cat)
		}
	}
	return nil
}

// Claimant is who a claim is for: an editor, or a worker slot.
type Claimant struct {
	// Holder identifies the claimant in the store and is the token of its
	// Redis locks: tasks.EditorHolder(id) for editors, a unique worker id for
	// worker slots. A holder has at most one claim at a time.
	Holder string
	// EditorID is the editor's id, or 0 for a worker.
	EditorID int64
	// Categories the claimant takes tasks from, tasks sent back to it
	// included: a caller may leave some of an editor's out (the API does, for
	// a category whose instructions the editor has not confirmed).
	Categories []string
	// Capacity is how many claims an editor may hold at once: Next makes a
	// new claim while it holds fewer, and answers the oldest it holds once it
	// holds as many. 0 means 1. The store keeps the editor's capacity
	// whatever this says; this saves a refused claim, and picks the store's
	// check (tasks.ClaimParams.Capacity).
	Capacity int
	// Stages limits an editor to some stages of some of its categories (see
	// tasks.Editor.Stages): its candidates are read from those stages alone.
	// The store checks the limits of the editor it has, whatever this says.
	Stages map[string][]string
}

// EditorClaimant returns the Claimant of an editor.
func EditorClaimant(e *tasks.Editor) Claimant {
	return Claimant{Holder: e.Holder(), EditorID: e.ID, Categories: e.Categories, Capacity: e.Capacity, Stages: e.Stages}
}

// Stats are running totals of what this process's Dispatcher did, for tests,
// stats and metrics: a snapshot, taken by Dispatcher.Stats. The pool's own
// counts, shared by every process, are tasks.PoolStats.
type Stats struct {
	// Assignments counts claims committed.
	Assignments int64
	// Submits counts results committed: editors' submits and workers'
	// handlers that returned a result.
	Submits int64
	// Conflicts counts candidates found locked by a competitor in Redis.
	Conflicts int64
	// RefusedClaims counts claims the store refused after the Redis lock was
	// obtained (the candidate changed since it was read, or Redis had lost a
	// lock).
	RefusedClaims int64
	// RefusedWrites counts heartbeats, submits and releases refused as stale.
	RefusedWrites int64
	// CandidateReads counts reads of a category's claimable tasks from the
	// store (the replica's, when it has one): the candidate pool's refills.
	CandidateReads int64
	// RateLimited counts claims a category's rate limit refused (see
	// Config.RateLimits); those a category closed in this process left out
	// are not counted.
	RateLimited int64
	// Waiting is not a total but the number of callers of this process
	// long-polling in Next (or a worker's NextMany) right now.
	Waiting int
}

// counters are the running totals behind Stats.
type counters struct {
	assignments, submits, conflicts, refusedClaims, refusedWrites, candidateReads, rateLimited atomic.Int64
}

// Dispatcher assigns tasks. It is safe for concurrent use.
type Dispatcher struct {
	store  Store
	locks  Locker
	cfg    Config
	log    *slog.Logger
	hub    *hub
	notify *notifier
	tel    *telemetry

	cands  *candidatePool
	fair   *fairShare   // nil unless Config.FairShare
	limits *rateLimiter // nil without rate limits
	skips  *skipMemory
	stats  counters
	obs    observers

	life      lifecycle.State
	stopRelay context.CancelFunc // ends the relay of a started dispatcher
	relayDone chan struct{}      // closed when the relay has returned

	// asides are the give-backs run aside from their requests (see
	// claimOne), which Stop waits for.
	asides asides
}

// New returns a Dispatcher over store and locks.
func New(store Store, locks Locker, cfg Config) (*Dispatcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	tel, err := newTelemetry(cfg.TracerProvider, cfg.MeterProvider)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	d := &Dispatcher{store: store, locks: locks, cfg: cfg, log: cfg.Logger, tel: tel, skips: newSkipMemory()}
	d.cands = newCandidatePool(cfg.Batch, func(ctx context.Context, queue string, limit, ending int) ([]tasks.Candidate, error) {
		d.stats.candidateReads.Add(1)
		cat, stage := queueParts(queue)
		return store.Candidates(ctx, tasks.CandidatesParams{Categories: []string{cat}, Stage: stage, Limit: limit, Ending: ending})
	})
	d.cands.readPrimary = func(ctx context.Context, queue string, limit, ending int) ([]tasks.Candidate, error) {
		d.stats.candidateReads.Add(1)
		cat, stage := queueParts(queue)
		return store.Candidates(ctx, tasks.CandidatesParams{Categories: []string{cat}, Stage: stage, Limit: limit, Primary: true, Ending: ending})
	}
	d.Observe(d.stats.observe)
	d.Observe(d.tel.observe)
	d.hub = newHub(d.cands.invalidate)
	d.hub.every = cfg.PollInterval
	if cfg.FairShare {
		d.fair = newFairShare(cfg.Workflows)
	}
	d.limits = newRateLimiter(cfg.RateLimits, cfg.KeyPrefix, cfg.Workflows, func(cat string) { d.hub.give(cat, 1) })
	d.notify = &notifier{hub: d.hub, pubsub: cfg.PubSub, channel: cfg.KeyPrefix + "wake", log: cfg.Logger}
	return d, nil
}

// Config returns the dispatcher's configuration with defaults applied.
func (d *Dispatcher) Config() Config { return d.cfg }

// Stats returns a snapshot of the dispatcher's running totals.
func (d *Dispatcher) Stats() Stats {
	return Stats{
		Assignments:    d.stats.assignments.Load(),
		Submits:        d.stats.submits.Load(),
		Conflicts:      d.stats.conflicts.Load(),
		RefusedClaims:  d.stats.refusedClaims.Load(),
		RefusedWrites:  d.stats.refusedWrites.Load(),
		CandidateReads: d.stats.candidateReads.Load(),
		RateLimited:    d.stats.rateLimited.Load(),
		Waiting:        d.hub.waiting(),
	}
}

// Start starts the relay of wake-ups between processes over Config.PubSub,
// in the background, and returns; without PubSub there is nothing to run
// and claims work without Start. The relay's context derives from ctx:
// cancelling ctx ends it as Stop does.
//
// Start returns an error wrapping ErrStarted when the dispatcher is running
// and ErrStopped after Stop.
func (d *Dispatcher) Start(ctx context.Context) error {
	return d.life.Start("dispatcher", func() {
		ctx, cancel := context.WithCancel(ctx)
		d.stopRelay, d.relayDone = cancel, make(chan struct{})
		go func() {
			defer close(d.relayDone)
			if d.cfg.PubSub != nil {
				d.notify.run(ctx)
			}
		}()
	})
}

// Stop ends the relay and waits for it to return, and for the give-backs
// of claims made for requests that ended (each bounded by 5 s) to end, or
// for ctx to end, whose error it then returns: so the stores can be closed
// once it returns. Claims keep working after Stop (long polls fall back on
// their poll interval; a give-back then runs in its request). Stop before
// Start waits for the give-backs only; so does a second Stop once the relay
// has returned.
func (d *Dispatcher) Stop(ctx context.Context) error {
	if d.life.Stop() {
		d.stopRelay()
		select {
		case <-d.relayDone:
		case <-ctx.Done():
			return fmt.Errorf("stop dispatcher: %w", context.Cause(ctx))
		}
	}
	if err := d.asides.stop(ctx); err != nil {
		return fmt.Errorf("stop dispatcher: give-backs: %w", err)
	}
	return nil
}

// asides runs work aside from the request that asked for it, until stop:
// then it runs nothing more aside and waits for what it runs.
type asides struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	stopped bool
}

// run runs f in a goroutine of its own, or returns false, running nothing,
// once stop was called: the caller then runs f itself.
func (a *asides) run(f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
	return true
}

// stop makes run refuse, and waits for what it ran to end, or for ctx to
// end, whose cause it then returns.
func (a *asides) stop(ctx context.Context) error {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// lockKey is the Redis key of a task's lock. The id is a hash tag, so on a
// Cluster each task's lock has a slot of its own choosing.
func (d *Dispatcher) lockKey(taskID int64) string {
	return d.cfg.KeyPrefix + "task:{" + strconv.FormatInt(taskID, 10) + "}"
}

// LockKey returns the Redis key of a task's lock: Config.KeyPrefix +
// "task:{" + the id + "}", the id a hash tag so that on a Cluster each
// task's lock has a slot of its own choosing. The sweeper, which repairs
// the locks, and the workers, which hold them, build their keys with it.
func (d *Dispatcher) LockKey(taskID int64) string { return d.lockKey(taskID) }

// Wake tells callers waiting in Next (in every process, with Config.PubSub)
// that counts[category] tasks of each category became claimable, as
// AddTasks does for the tasks it adds: for the sweeper, which returns
// expired claims to the pool.
func (d *Dispatcher) Wake(ctx context.Context, counts map[string]int) { d.notify.notify(ctx, counts) }

// AddTasks inserts tasks into the pool as store.Store.Insert does, and
// wakes callers waiting for the tasks it made. It returns, in input order,
// each task's id and whether it was made: a task whose key another task holds
// is not made, and its entry holds that task's id. Errors wrap
// ErrUnavailable when the store is unreachable, and tasks.ErrInvalid for a
// task the store refuses (then nothing is added).
func (d *Dispatcher) AddTasks(ctx context.Context, ts []tasks.NewTask) ([]tasks.Inserted, error) {
	ins, err := d.store.Insert(ctx, ts)
	if err != nil {
		return nil, Unavailable(err)
	}
	counts := make(map[string]int)
	for i, t := range ts {
		if ins[i].Created {
			counts[t.Category]++
		}
	}
	if len(counts) > 0 {
		d.notify.notify(ctx, counts)
	}
	return ins, nil
}

// lockCleanupTimeout bounds giving back a lock after the store committed.
const lockCleanupTimeout = time.Second

// releaseLock gives back a claim's Redis lock. It runs after the store
// committed, so it does not stop when the caller's context ends. The store
// has the last word on claims, so a lock that is already gone is no error;
// other failures are logged, and the lock's time to live frees it.
func (d *Dispatcher) releaseLock(ctx context.Context, taskID int64, holder string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockCleanupTimeout)
	defer cancel()
	err := d.locks.Lock(d.lockKey(taskID), holder).Release(ctx)
	if err != nil && !errors.Is(err, locker.ErrNotHeld) {
		d.log.WarnContext(ctx, "release task lock", "task_id", taskID, "err", err)
	}
}

// Unavailable marks err with ErrUnavailable when it comes from a store that
// could not be reached (MySQL or Redis) or from a MySQL transaction that kept
// losing lock conflicts (tasks.ErrBusy), and returns other errors unchanged.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// MySQL server errors that say the server cannot serve at all now.
const (
	// erWsrepNotReady is a Galera node's answer outside the cluster's primary
	// component, or while it joins: "WSREP has not yet prepared node for
	// application use".
	erWsrepNotReady = 1047
	// erServerShutdown: the server is shutting down.
	erServerShutdown = 1053
	// erLockWaitTimeout: a lock wait timed out; and on Galera, a causal read
	// (wsrep_sync_wait) whose wait for the cluster was cut short, as when its
	// node leaves the primary component. Busy, not broken: try again.
	erLockWaitTimeout = 1205
)

// unreachable reports whether err means a store could not be reached or could
// not serve the request now, as opposed to a refused or invalid request.
func unreachable(err error) bool {
	var netErr net.Error
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && (myErr.Number == erWsrepNotReady || myErr.Number == erServerShutdown ||
		myErr.Number == erLockWaitTimeout) {
		return true
	}
	return errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, tasks.ErrBusy) ||
		errors.Is(err, redis.ErrPoolTimeout) || redis.HasErrorPrefix(err, "LOADING") ||
		redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "MASTERDOWN")
}

var (
	// ErrStarted is returned (wrapped) by Start on a service that is already
	// running: the Dispatcher's relay, or a background loop of the engine.
	ErrStarted = lifecycle.ErrStarted

	// ErrStopped is returned (wrapped) by Start after Stop: a stopped service
	// does not start again; build a new one.
	ErrStopped = lifecycle.ErrStopped
)
