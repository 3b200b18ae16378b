package taskd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/activity"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/schedule"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/web"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// Timeouts of the engine's own steps.
const (
	// storeCheckTimeout bounds connecting to each store in New.
	storeCheckTimeout = 10 * time.Second
	// workerFinishMargin is added to Worker.ShutdownTimeout for Stop's wait
	// on the workers: cancelled handlers still give their claims back after
	// the grace.
	workerFinishMargin = 15 * time.Second
	// loopsStopTimeout bounds, once the requests and the workers have
	// drained, Stop's wait for the other background loops together: the
	// activity history's last flush, the sweeper (a running sweep may
	// finish), the scheduler and the webhook deliverer share this one
	// deadline (and Stop's context, whichever ends first).
	loopsStopTimeout = 10 * time.Second
	// telemetryFlushTimeout bounds the flush of the engine's own providers.
	telemetryFlushTimeout = 5 * time.Second
)

var (
	// ErrStarted is returned (wrapped) by Start on a running engine.
	ErrStarted = dispatcher.ErrStarted
	// ErrStopped is returned (wrapped) by Start after Stop.
	ErrStopped = dispatcher.ErrStopped
)

// Engine is taskd in one value: the dispatcher and its wake-up relay, the
// sweeper, the scheduler of periodic tasks (Config.Schedules), the workers
// running the registered handlers, the webhook deliverer, the editor API's
// HTTP handler with its pages, the activity history and the pool metrics, over the stores it opened or was
// given. Build it with New, run it with Start and Stop (or Run). It is safe
// for concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger

	tel     *telemetry.Providers // Shutdown flushes only what the engine built
	db      *sqlx.DB
	ownDB   bool
	replica *sqlx.DB // Config.MySQL.ReplicaDSN's, always the engine's own
	store   *store.Store
	redis   *redisConn
	ownRdb  bool
	d       *dispatcher.Dispatcher
	sweeper *sweeper.Sweeper
	sched   *schedule.Scheduler // nil without Config.Schedules
	worker  *worker.Worker      // nil without handlers
	hooks   *delivery.Deliverer // nil without webhooks
	commits *commitWaiters      // InsertTx's transactions watched
	history *activity.Recorder  // nil without an admin token
	api     *api.Handler        // nil without an admin token
	handler http.Handler
	metrics http.Handler // served on Config.HTTP.MetricsAddr; nil without it

	mu            sync.Mutex
	started       bool
	stopped       bool
	stopRun       context.CancelFunc
	stopObserving func()
	stopHooksObs  func()
	srv           *http.Server
	addr          string
	metricsSrv    *http.Server // on Config.HTTP.MetricsAddr
	metricsAddr   string
	serveErr      chan error
	stopOnce      sync.Once
	stopErr       error

	// The store's storage reading for GET /v1/stats when this process's
	// sweeper has none (see storageReading).
	storageMu sync.Mutex
	storage   *tasks.Storage
	storageAt time.Time
}

// New builds an engine from cfg (zero values take their defaults; see
// Config) and opts. It connects to MySQL and Redis unless WithDB and
// WithRedis pass handles, each check bounded by 10s, and fails naming the
// server when one is unreachable (for Redlock, when fewer than a quorum of
// masters answer). An invalid cfg is an error joining *ConfigError values;
// so is a Worker.Categories entry without a handler.
//
// New starts nothing; stores opened by New are closed by Stop, which may
// be called without Start.
func New(cfg Config, opts ...Option) (*Engine, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(o.db == nil); err != nil {
		return nil, fmt.Errorf("taskd: invalid config: %w", err)
	}
	mux := worker.NewMux()
	mux.Use(o.middleware...)
	for _, cat := range o.order {
		if err := checkHandler(mux, cat, o.handlers[cat]); err != nil {
			return nil, err
		}
	}
	if len(o.order) > 0 {
		for _, c := range cfg.Worker.Categories {
			if !slices.Contains(mux.Categories(), c) {
				return nil, &ConfigError{Key: "worker.categories", Msg: fmt.Sprintf("no handler for %q (handlers: %v)", c, mux.Categories())}
			}
		}
	}

	e := &Engine{cfg: cfg, log: o.log}
	if e.log == nil {
		e.log = cfg.Log.Logger(os.Stderr)
	} else {
		e.log = slog.New(telemetry.LogHandler(e.log.Handler()))
	}
	if err := e.open(&o, mux); err != nil {
		e.close(context.Background())
		return nil, err
	}
	return e, nil
}

// open sets up telemetry and the stores, and builds the services.
func (e *Engine) open(o *options, mux *worker.Mux) error {
	if err := e.openTelemetry(o); err != nil {
		return err
	}
	if err := e.openStores(o); err != nil {
		return err
	}
	return e.build(mux, len(o.order) > 0)
}

// openTelemetry builds the providers Config.Telemetry describes, except
// those the options pass in, which stay the caller's: the engine's Shutdown
// flushes only what it built.
func (e *Engine) openTelemetry(o *options) error {
	tc := e.cfg.Telemetry.telemetryConfig()
	if o.tracer != nil {
		tc.Traces = telemetry.TracesNone
	}
	if o.meter != nil || o.metricsSet {
		tc.Prometheus = false
	}
	p, err := telemetry.Setup(context.Background(), tc)
	if err != nil {
		return err
	}
	if o.tracer != nil {
		p.TracerProvider = o.tracer
	}
	if o.meter != nil {
		p.MeterProvider = o.meter
	}
	if o.metricsSet {
		p.Metrics = o.metrics
	}
	e.tel = p
	return nil
}

// checkHandler registers h for cat on mux, turning the mux's panics on an
// invalid registration into an error.
func checkHandler(mux *worker.Mux, cat string, h Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("taskd: handler: %v", r)
		}
	}()
	mux.Handle(cat, h)
	return nil
}

// openStores opens MySQL and Redis, or takes the handles of o, and checks
// that they answer.
func (e *Engine) openStores(o *options) error {
	cfg := e.cfg
	ctx, cancel := context.WithTimeout(context.Background(), storeCheckTimeout)
	defer cancel()
	var err error
	if e.db = o.db; e.db == nil {
		if e.db, err = telemetry.OpenMySQL(ctx, cfg.MySQL.DSN, e.tel); err != nil {
			return fmt.Errorf("mysql at %s is unreachable: %w", cfg.MySQL.Server(), err)
		}
		e.ownDB = true
	}
	if dsn := cfg.MySQL.ReplicaDSN; dsn != "" {
		if e.replica, err = telemetry.OpenMySQL(ctx, dsn, e.tel); err != nil {
			return fmt.Errorf("mysql replica at %s is unreachable (leave mysql.replica_dsn empty to run without one): %w", server(dsn), err)
		}
	}
	if e.store, err = store.New(e.db, e.storeConfig()); err != nil {
		return fmt.Errorf("mysql store: %w", err)
	}
	galera, err := e.store.Galera(ctx)
	if err != nil {
		return fmt.Errorf("mysql at %s: %w", cfg.MySQL.Server(), err)
	}
	if galera {
		e.log.InfoContext(ctx, "mysql is a Galera cluster node: causal reads, claims write their editor's row, batches commit apart")
	}
	switch {
	case o.redis != nil:
		e.redis = adoptRedis(o.redis, o.locks, cfg.Redis.Addrs)
	case o.locks != nil:
		return errors.New("taskd: WithLocker needs WithRedis")
	default:
		if e.redis, err = openRedis(cfg.Redis, e.tel); err != nil {
			return err
		}
		e.ownRdb = true
	}
	if e.redis.mode == redisRedlock && o.locks != nil {
		return nil // the caller's locker: its masters are the caller's to check
	}
	down, err := e.redis.reach(ctx)
	if err != nil {
		return err
	}
	for _, err := range down {
		e.log.WarnContext(ctx, "redlock master unreachable; a quorum is up", "err", err)
	}
	if e.replica != nil {
		e.log.InfoContext(ctx, "mysql replica reachable; candidate and stats reads go to it", "replica", server(cfg.MySQL.ReplicaDSN))
	}
	e.log.InfoContext(ctx, "stores reachable", "mysql", cfg.MySQL.Server(),
		"redis", strings.Join(e.redis.addrs, ","), "redis_mode", e.redis.mode)
	return nil
}

// build makes the parts, in this order, each from the options value parts.go
// builds for it out of the engine's Config (defaulted and validated once, by
// New) and its handles: the dispatcher, the sweeper, the scheduler (with
// Config.Schedules), the worker (with handlers), the webhook deliverer (with
// Config.Webhooks), then with Config.AdminToken the activity history, the
// API and the pages. openTelemetry and openStores do the same for the
// providers, the store and Redis.
func (e *Engine) build(mux *worker.Mux, work bool) error {
	var err error
	if e.d, err = dispatcher.New(e.store, e.redis.locks, e.dispatcherConfig()); err != nil {
		return err
	}
	e.commits = newCommitWaiters(e.cfg.Dispatch.InsertTxWaiters, e.store, e.d.Wake, e.log)
	if e.sweeper, err = sweeper.New(e.d, e.sweeperConfig()); err != nil {
		return err
	}
	if len(e.cfg.Schedules) > 0 {
		sc, err := e.scheduleConfig()
		if err != nil {
			return err
		}
		if e.sched, err = schedule.New(e.d, sc); err != nil {
			return err
		}
	}
	if work {
		if e.worker, err = worker.New(e.d, e.workerConfig(mux)); err != nil {
			return err
		}
	}
	if len(e.cfg.Webhooks) > 0 {
		if e.hooks, err = delivery.New(e.d, e.deliveryConfig()); err != nil {
			return err
		}
	}
	// Metrics on the API's listener are guarded by the API, which counts
	// wrong metrics tokens with the other wrong tokens; elsewhere by
	// MetricsHandler alone.
	metrics := e.tel.Metrics
	if metrics != nil && e.cfg.HTTP.MetricsAddr != "" && e.cfg.HTTP.Addr != "" {
		e.metrics, metrics = healthHandler(api.MetricsHandler(metrics, e.cfg.HTTP.MetricsToken)), nil
	}
	if e.cfg.AdminToken == "" {
		if metrics != nil {
			metrics = api.MetricsHandler(metrics, e.cfg.HTTP.MetricsToken)
		}
		e.handler = healthHandler(metrics)
		return nil
	}
	if e.history, err = activity.New(e.d, e.activityConfig()); err != nil {
		return err
	}
	if e.api, err = api.New(e.apiConfig(metrics)); err != nil {
		return err
	}
	pages, err := web.New(e.webConfig())
	if err != nil {
		return err
	}
	e.handler = telemetry.HTTPHandler(pages, e.tel)
	return nil
}

// healthHandler is the Handler of an engine without the editor API: GET
// /healthz, and GET /metrics when metrics is set.
func healthHandler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

// HTTPHandler returns the engine's HTTP handler: with Config.AdminToken, the
// editor API (docs/api.md), the editor's workspace at / and the ops
// console at /ops (sessions in Redis), GET /healthz, GET /readyz and, with
// Prometheus on, GET /metrics (unless Config.HTTP.MetricsAddr gives it a
// listener of its own; Config.HTTP.MetricsToken guards it), in a server span per request when tracing is
// on; without an admin token, only GET /healthz and GET /metrics. Mount it
// in a server of your own, or set Config.HTTP.Addr and let Start serve it.
// Stop drains it wherever it is mounted: long polls end at once, answered
// 204, new requests are answered 503, and requests in flight may finish.
func (e *Engine) HTTPHandler() http.Handler { return e.handler }

// MetricsAddr returns the address GET /metrics is served on once started
// with Config.HTTP.MetricsAddr and Config.HTTP.Addr set (port 0 resolved),
// or "".
func (e *Engine) MetricsAddr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.metricsAddr
}

// Addr returns the address the engine listens on once started with
// Config.HTTP.Addr set (port 0 resolved), or "".
func (e *Engine) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addr
}

// Start starts the engine and returns: it listens on Config.HTTP.Addr (and
// Config.HTTP.MetricsAddr) when set, starts the metrics of the pool, the
// stores and the webhooks, then the dispatcher's wake-up relay, the
// sweeper, the scheduler (with Config.Schedules), the workers (with
// handlers), the webhook deliverer (with webhooks) and the activity history
// (with the API), and last serves HTTP on its listeners. They run until
// Stop, whatever becomes of ctx after Start returns; ctx gives them its
// values.
//
// First, Start checks that the database's schema is the one this binary
// was built for (three reads, bounded by 10s), and
// starts nothing when it is not: a database never migrated, or migrated
// by an older taskd, is an error wrapping ErrSchemaBehind that says
// to run `taskd migrate` or Migrate; one migrated by a newer taskd
// wraps ErrSchemaAhead, and one whose applied migrations differ
// from the binary's ErrSchemaEdited.
//
// Start returns an error wrapping ErrStarted on a running engine and
// ErrStopped after Stop, and the listener's error when it cannot listen.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.stopped:
		return fmt.Errorf("start engine: %w", ErrStopped)
	case e.started:
		return fmt.Errorf("start engine: %w", ErrStarted)
	}
	if err := e.checkSchema(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	if err := e.applyInstructions(ctx); err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	var ln, metricsLn net.Listener
	if e.cfg.HTTP.Addr != "" {
		var err error
		if ln, err = net.Listen("tcp", e.cfg.HTTP.Addr); err != nil {
			return fmt.Errorf("listen on %s: %w", e.cfg.HTTP.Addr, err)
		}
	}
	if e.metrics != nil {
		var err error
		if metricsLn, err = net.Listen("tcp", e.cfg.HTTP.MetricsAddr); err != nil {
			if ln != nil {
				_ = ln.Close()
			}
			return fmt.Errorf("listen on %s (http.metrics_addr): %w", e.cfg.HTTP.MetricsAddr, err)
		}
		defer func() {
			if !e.started {
				_ = metricsLn.Close()
			}
		}()
	}
	stopPool, err := telemetry.ObservePool(e.tel, func(ctx context.Context) (*tasks.PoolStats, error) {
		return e.store.PoolStats(ctx, 0)
	}, 0)
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return err
	}
	stopStores, err := telemetry.ObserveStores(e.tel, []telemetry.StoreCheck{
		{Name: "mysql", Check: e.db.PingContext},
		{Name: "redis", Check: e.redis.check},
	}, 0)
	if err != nil {
		stopPool()
		if ln != nil {
			_ = ln.Close()
		}
		return err
	}
	stopQueues, err := telemetry.ObserveQueues(e.tel, e.store.QueueStats, 0)
	if err != nil {
		stopPool()
		stopStores()
		if ln != nil {
			_ = ln.Close()
		}
		return err
	}
	// Agreement is measured only where some category asks for several
	// results: a deployment without overlap reads nothing for it.
	stopAgreement := func() {}
	if len(e.cfg.overlapCategories()) > 0 {
		if stopAgreement, err = telemetry.ObserveAgreement(e.tel, e.measureAgreement, 0); err != nil {
			stopPool()
			stopStores()
			stopQueues()
			if ln != nil {
				_ = ln.Close()
			}
			return err
		}
	}
	// Gold accuracy likewise, only where some category has a gold rule.
	stopGold := func() {}
	if len(e.cfg.goldRules()) > 0 {
		if stopGold, err = telemetry.ObserveGold(e.tel, e.measureGold, 0); err != nil {
			stopPool()
			stopStores()
			stopQueues()
			stopAgreement()
			if ln != nil {
				_ = ln.Close()
			}
			return err
		}
	}
	stopObserving := func() { stopPool(); stopStores(); stopQueues(); stopAgreement(); stopGold() }
	stopHooksObs := func() {}
	if e.hooks != nil {
		names := make([]string, len(e.cfg.Webhooks))
		for i, w := range e.cfg.Webhooks {
			names[i] = w.Name
		}
		if stopHooksObs, err = telemetry.ObserveWebhooks(e.tel, names, e.store.WebhookBacklog, 0); err != nil {
			stopObserving()
			if ln != nil {
				_ = ln.Close()
			}
			return err
		}
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	e.started, e.stopRun, e.stopObserving, e.stopHooksObs = true, stopRun, stopObserving, stopHooksObs
	// A fresh engine's services cannot refuse to start.
	_ = e.d.Start(runCtx)
	_ = e.sweeper.Start(runCtx)
	if e.sched != nil {
		_ = e.sched.Start(runCtx)
	}
	if e.worker != nil {
		_ = e.worker.Start(runCtx)
	}
	if e.hooks != nil {
		_ = e.hooks.Start(runCtx)
	}
	if e.history != nil {
		_ = e.history.Start(runCtx)
	}
	if ln != nil {
		e.serveErr = make(chan error, 2) // the API's listener, the metrics'
		e.srv = &http.Server{
			Handler:           e.handler,
			ReadHeaderTimeout: e.cfg.HTTP.ReadHeaderTimeout,
			ReadTimeout:       e.cfg.HTTP.ReadTimeout,
			WriteTimeout:      e.cfg.HTTP.WriteTimeout,
			IdleTimeout:       e.cfg.HTTP.IdleTimeout,
			ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		}
		srv, serveErr := e.srv, e.serveErr
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		}()
		e.addr = ln.Addr().String()
		if metricsLn != nil {
			e.metricsSrv = &http.Server{
				Handler:           e.metrics,
				ReadHeaderTimeout: e.cfg.HTTP.ReadHeaderTimeout,
				ReadTimeout:       e.cfg.HTTP.ReadTimeout,
				WriteTimeout:      e.cfg.HTTP.WriteTimeout,
				IdleTimeout:       e.cfg.HTTP.IdleTimeout,
				ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
			}
			msrv := e.metricsSrv
			go func() {
				if err := msrv.Serve(metricsLn); !errors.Is(err, http.ErrServerClosed) {
					serveErr <- err
				}
			}()
			e.metricsAddr = metricsLn.Addr().String()
		}
		e.log.InfoContext(ctx, "serving", "addr", e.addr, "metrics_addr", e.metricsAddr, "sweep_interval", e.cfg.Sweep.Schedule,
			"sweep_period", e.sweeper.Schedule().Period(), "lease_ttl", e.cfg.Dispatch.LeaseTTL, "workers", e.worker != nil, "api", e.api != nil)
	}
	return nil
}

// checkSchema fails unless the database is at the binary's schema version,
// saying what to run.
func (e *Engine) checkSchema(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	st, err := migrate.ReadStatus(ctx, e.db)
	if err != nil {
		return err
	}
	err = st.Current()
	if errors.Is(err, migrate.ErrSchemaBehind) {
		return fmt.Errorf("%w. Migrate it first: run 'taskd migrate' with this mysql.dsn "+
			"(or TASKD_MYSQL_DSN), or from Go call Engine.Migrate before Start", err)
	}
	return err
}

// Run starts the engine, runs it until ctx ends or its listener fails, and
// stops it (with a fresh context: the configured timeouts bound the drain).
// It returns the error of Start (after closing the stores), of the
// listener, or of Stop.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.Start(ctx); err != nil {
		return errors.Join(err, e.Stop(context.Background()))
	}
	var failed error
	select {
	case <-ctx.Done():
		e.log.Info("shutting down", "cause", context.Cause(ctx), "shutdown_timeout", e.cfg.HTTP.ShutdownTimeout)
	case err := <-e.serveErr: // nil channel without a listener: never ready
		failed = fmt.Errorf("serve: %w", err)
		e.log.Error("server failed; shutting down", "err", err)
	}
	return errors.Join(failed, e.Stop(context.Background()))
}

// Stop stops the engine in one order, like http.Server.Shutdown:
//
//  0. The waiters on transactions of InsertTx stop at once, with or
//     without Start: such a transaction that commits later is found by
//     the poll (Dispatch.PollInterval) of the processes still running.
//  1. At once and side by side: the HTTP side and the workers. The API
//     answers its long polls 204 and new requests 503, wherever HTTPHandler is
//     mounted; the listeners (the API's and the metrics') stop accepting;
//     requests in flight may finish, for up to HTTP.ShutdownTimeout. The
//     workers stop claiming and give running handlers
//     Worker.ShutdownTimeout of grace, then cancel them and return their
//     tasks to the pool (Stop waits up to that grace plus 15s for it).
//  2. Once both are done, within one 10s deadline shared by all four: the
//     activity history writes its last counts, the sweeper stops (a
//     running sweep may finish), then the scheduler, then the webhook
//     deliverer (posts in flight are cancelled; their deliveries stay
//     pending for the next deliverer).
//  3. The pool's, the stores' and the webhooks' metrics stop, then the
//     dispatcher's wake-up relay, and the give-backs of claims made for
//     requests that ended first are waited for (each bounded by 5s).
//  4. The stores the engine opened are closed, and the telemetry it made
//     is flushed (for up to 5s, even when ctx has ended).
//
// ctx bounds steps 1 to 3: when it ends, what is still draining is cut off.
// Stop returns an error when the workers did not finish in time; requests
// cut off at the timeout are only logged. Stop before Start closes the
// stores; a second Stop returns the first one's result.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	started := e.started
	e.stopped = true
	e.mu.Unlock()
	e.stopOnce.Do(func() {
		if e.commits != nil {
			e.commits.stop()
		}
		if started {
			e.stopErr = e.drain(ctx)
		}
		e.close(ctx)
		if started {
			e.log.Info("stopped")
		}
	})
	return e.stopErr
}

// drain stops what Start started, in Stop's order.
func (e *Engine) drain(ctx context.Context) error {
	var workerErr error
	var workers sync.WaitGroup
	if e.worker != nil {
		workers.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, e.cfg.Worker.ShutdownTimeout+workerFinishMargin)
			defer cancel()
			if err := e.worker.Stop(wctx); err != nil {
				workerErr = fmt.Errorf("worker shutdown: %w", err)
				e.log.Error("stop workers", "err", err)
			}
			st := e.worker.Totals()
			e.log.Info("worker stopped", "processed", st.Processed, "failed", st.Failed, "snoozed", st.Snoozed,
				"lease_lost", st.LeaseLost, "cancelled", st.Cancelled, "released", st.Released)
		})
	}

	hctx, cancel := context.WithTimeout(ctx, e.cfg.HTTP.ShutdownTimeout)
	defer cancel()
	var apiDrained chan error
	if e.api != nil {
		// Before the server's shutdown, which waits for the long polls.
		apiDrained = make(chan error, 1)
		go func() { apiDrained <- e.api.Shutdown(hctx) }()
	}
	if e.srv != nil {
		if err := e.srv.Shutdown(hctx); err != nil {
			e.log.Warn("requests still running at the shutdown timeout were cut off", "err", err)
			_ = e.srv.Close()
		}
	}
	if e.metricsSrv != nil {
		if err := e.metricsSrv.Shutdown(hctx); err != nil {
			_ = e.metricsSrv.Close()
		}
	}
	if apiDrained != nil {
		if err := <-apiDrained; err != nil && e.srv == nil {
			e.log.Warn("requests still running at the shutdown timeout", "err", err)
		}
	}
	workers.Wait()

	sctx, cancelLoops := context.WithTimeout(ctx, loopsStopTimeout)
	defer cancelLoops()
	if e.history != nil {
		// After the requests and the workers: their last counts are flushed.
		if err := e.history.Stop(sctx); err != nil {
			e.log.Warn("stop activity history", "err", err)
		}
	}
	if err := e.sweeper.Stop(sctx); err != nil {
		e.log.Warn("stop sweeper", "err", err)
	}
	if e.sched != nil {
		if err := e.sched.Stop(sctx); err != nil {
			e.log.Warn("stop scheduler", "err", err)
		}
	}
	if e.hooks != nil {
		// Requests in flight are cancelled; their deliveries stay pending.
		if err := e.hooks.Stop(sctx); err != nil {
			e.log.Warn("stop webhook deliverer", "err", err)
		}
	}
	e.stopObserving()
	e.stopHooksObs()
	if err := e.d.Stop(ctx); err != nil {
		e.log.Warn("stop dispatcher", "err", err)
	}
	e.stopRun()
	return workerErr
}

// close closes what the engine opened, logging failures.
func (e *Engine) close(ctx context.Context) {
	if e.redis != nil && e.ownRdb {
		if err := e.redis.Close(); err != nil {
			e.log.WarnContext(ctx, "close redis", "err", err)
		}
	}
	if e.db != nil && e.ownDB {
		if err := e.db.Close(); err != nil {
			e.log.WarnContext(ctx, "close mysql", "err", err)
		}
	}
	if e.replica != nil {
		if err := e.replica.Close(); err != nil {
			e.log.WarnContext(ctx, "close mysql replica", "err", err)
		}
	}
	if e.tel != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), telemetryFlushTimeout)
		defer cancel()
		if err := e.tel.Shutdown(ctx); err != nil {
			e.log.WarnContext(ctx, "flush telemetry", "err", err)
		}
	}
}
