package taskd

import (
	"context"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/activity"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/schedule"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/web"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// This file is the one place where the engine's Config becomes the options
// value of each part. Every function is a plain mapping of keys to fields:
// Config.WithDefaults has applied the defaults (each part's own XxxDefault
// constants) and Config.validate has checked the values, both in New, so
// nothing here defaults or checks. What no key configures (the stores, the
// locker, the providers, the logger) comes from the engine's handles.

// telemetryConfig is the telemetry of Config.Telemetry. The taskd command
// builds its providers through the engine as well, so that this is the only
// mapping of TelemetryConfig.
func (c TelemetryConfig) telemetryConfig() telemetry.Config {
	return telemetry.Config{
		Traces:      c.Traces,
		Endpoint:    c.Endpoint,
		Insecure:    c.Insecure,
		ServiceName: c.ServiceName,
		SampleRatio: valueOr(c.SampleRatio, SampleRatioDefault),
		KeepFailed:  valueOr(c.KeepFailed, KeepFailedDefault),
		Prometheus:  c.Prometheus,
	}
}

// valueOr is *p, or def when p is nil: a pointer key's value, unset or not.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// clientOptions are the options of the client of one Redis server (a
// single server, or one Redlock master) at addr.
func (r RedisConfig) clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:     addr,
		Username: r.Username,
		Password: r.Password,
		DB:       r.DB,
		// Per-call deadlines must reach the socket; one dial retry, not
		// five with backoff, so a dead node costs little of a lease.
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		DialTimeout:           r.DialTimeout,
		ReadTimeout:           r.ReadTimeout,
		WriteTimeout:          r.WriteTimeout,
	}
}

// clusterOptions are the options of the client of a Redis Cluster.
func (r RedisConfig) clusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                 r.Addrs,
		Username:              r.Username,
		Password:              r.Password,
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		DialTimeout:           r.DialTimeout,
		ReadTimeout:           r.ReadTimeout,
		WriteTimeout:          r.WriteTimeout,
	}
}

// redlockOptions are the options of a locker over Redlock masters.
func (r RedisConfig) redlockOptions() *locker.RedlockOptions {
	return &locker.RedlockOptions{NodeTimeout: r.NodeTimeout}
}

// storeConfig is the MySQL store's: the claim rules of Config.Dispatch, the
// replica, the webhook events some webhook subscribes to, and the categories'
// workflows.
func (e *Engine) storeConfig() store.Config {
	d := e.cfg.Dispatch
	return store.Config{
		SkipFor:         d.SkipFor,
		ReleaseCooldown: d.ReleaseCooldown,
		MaxHold:         d.MaxHold,
		GroupCommit:     d.GroupCommit,
		Replica:         e.replica,
		WebhookEvents:   e.cfg.webhookEvents(),
		Workflows:       e.cfg.workflows(),
	}
}

// The dispatcher offers hedged re-offers (tasks.Hedge) only over a store
// that implements them: the MySQL store does.
var _ dispatcher.HedgeStore = (*store.Store)(nil)

// dispatcherConfig is the dispatcher's: Config.Dispatch, the key prefix,
// the longest long poll and the categories' workflows. Rate limits are
// counted where wake-ups go: the server, the Cluster, or the first Redlock
// master.
func (e *Engine) dispatcherConfig() dispatcher.Config {
	d := e.cfg.Dispatch
	return dispatcher.Config{
		Lease:          d.LeaseTTL,
		Batch:          d.Batch,
		KeyPrefix:      e.cfg.Redis.KeyPrefix,
		PollInterval:   d.PollInterval,
		MaxWait:        e.cfg.HTTP.MaxWait,
		Workflows:      e.cfg.workflows(),
		FairShare:      d.FairShare,
		RateLimits:     e.redis.pubSub(),
		PubSub:         e.redis.pubSub(),
		Logger:         e.log,
		TracerProvider: e.tel.TracerProvider,
		MeterProvider:  e.tel.MeterProvider,
	}
}

// deref is *d, 0 for nil.
func deref(d *time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return *d
}

// sweeperConfig is the sweeper's: Config.Sweep and Config.Retention.
func (e *Engine) sweeperConfig() sweeper.Config {
	s := e.cfg.Sweep
	return sweeper.Config{
		Store:    e.store,
		Locks:    e.redis.locks,
		Schedule: s.Schedule,
		Batch:    s.Batch,
		Workers:  s.Workers,
		Retention: sweeper.Retention{
			Done:      deref(e.cfg.Retention.Done),
			Cancelled: deref(e.cfg.Retention.Cancelled),
			Dead:      deref(e.cfg.Retention.Dead),
			Webhooks:  deref(e.cfg.Retention.Webhooks),
			Batch:     e.cfg.Retention.Batch,
		},
		Redis:  e.redis.sweepClient(),
		Logger: e.log,
	}
}

// scheduleConfig is the scheduler's: Config.Schedules. Its error, a payload
// that is not JSON, was reported by validate.
func (e *Engine) scheduleConfig() (schedule.Config, error) {
	ps := make([]schedule.Periodic, len(e.cfg.Schedules))
	for i, sc := range e.cfg.Schedules {
		var err error
		if ps[i], err = sc.periodic(); err != nil {
			return schedule.Config{}, err
		}
	}
	return schedule.Config{Schedules: ps, Logger: e.log, TracerProvider: e.tel.TracerProvider}, nil
}

// workerConfig is the workers': Config.Worker, running the handlers of mux.
func (e *Engine) workerConfig(mux *worker.Mux) worker.Config {
	w := e.cfg.Worker
	return worker.Config{
		Concurrency:     w.Concurrency,
		Handler:         mux,
		Categories:      w.Categories,
		ShutdownTimeout: w.ShutdownTimeout,
		BatchSize:       w.BatchSize,
		FlushInterval:   w.FlushInterval,
		MaxBacklog:      w.MaxBacklog,
		MaxSnoozes:      w.MaxSnoozes,
		Logger:          e.log,
		TxStore:         e.store,
		// A limit in flight counts the tasks whose outcome waits to be
		// written: with one, a slot waits for that write.
		SlotsUntilWritten: e.cfg.limited(),
	}
}

// deliveryConfig is the webhook deliverer's: Config.Webhooks and
// Config.WebhookDelivery.
func (e *Engine) deliveryConfig() delivery.Config {
	hooks := make([]delivery.Webhook, len(e.cfg.Webhooks))
	for i, w := range e.cfg.Webhooks {
		evs := make([]tasks.WebhookEvent, len(w.Events))
		for j, ev := range w.Events {
			evs[j] = tasks.WebhookEvent(ev)
		}
		hooks[i] = delivery.Webhook{
			Name:        w.Name,
			URL:         w.URL,
			Events:      evs,
			Secret:      w.Secret,
			Timeout:     w.Timeout,
			Concurrency: w.Concurrency,
			MaxAttempts: w.MaxAttempts,
			MaxAge:      w.MaxAge,
		}
	}
	wd := e.cfg.WebhookDelivery
	return delivery.Config{
		Store:        e.store,
		Locks:        e.redis.locks,
		Webhooks:     hooks,
		PollInterval: wd.PollInterval,
		LeaseTTL:     wd.LeaseTTL,
		Batch:        wd.Batch,
		BackoffBase:  wd.BackoffBase,
		BackoffMax:   wd.BackoffMax,
		Logger:       e.log,
	}
}

// activityConfig is the activity history's; no key configures it.
func (e *Engine) activityConfig() activity.Config {
	return activity.Config{Redis: e.redis.pubSub(), Logger: e.log}
}

// apiConfig is the editor API's: Config.HTTP and Config.AdminToken, serving
// metrics at GET /metrics when set.
func (e *Engine) apiConfig(metrics http.Handler) api.Config {
	h := e.cfg.HTTP
	var backlog func(context.Context) (*tasks.WebhookBacklog, error)
	if e.hooks != nil {
		backlog = e.store.WebhookBacklog
	}
	return api.Config{
		Dispatcher: e.d,
		Store:      apiStore{e},
		AdminToken: e.cfg.AdminToken,
		Checks: []api.Check{
			{Name: "mysql", Check: e.db.PingContext},
			{Name: "redis", Check: e.redis.check},
		},
		Metrics:           metrics,
		MetricsToken:      h.MetricsToken,
		TrustedProxies:    trustedProxies(h.TrustedProxies),
		MaxWait:           h.MaxWait,
		Gold:              e.cfg.goldRules(),
		RequestTimeout:    h.RequestTimeout,
		EditorCacheTTL:    h.EditorCacheTTL,
		WebhookBacklog:    backlog,
		Storage:           e.storageReading,
		History:           e.history,
		Sessions:          web.NewEditorSessions(e.redis.pubSub(), e.cfg.Redis.KeyPrefix),
		MaxPollsPerEditor: h.MaxPollsPerEditor,
		Redis:             e.redis.pubSub(),
		KeyPrefix:         e.cfg.Redis.KeyPrefix,
		HeartbeatEvery:    e.cfg.Dispatch.LeaseTTL / 3,
		AuthFailures:      h.AuthFailures,
		AuthFailureWindow: h.AuthFailureWindow,
		MeterProvider:     e.tel.MeterProvider,
		Logger:            e.log,
	}
}

// webConfig is the pages': Config.HTTP's sessions, in front of the API.
func (e *Engine) webConfig() web.Config {
	h := e.cfg.HTTP
	return web.Config{
		API:             e.api,
		Redis:           e.redis.pubSub(),
		KeyPrefix:       e.cfg.Redis.KeyPrefix,
		SessionIdle:     h.SessionIdle,
		SessionLifetime: h.SessionLifetime,
		SecureCookie:    h.SecureCookie,
		TraceURL:        e.cfg.Telemetry.TraceURL,
		Logger:          e.log,
	}
}

// storageReading is the storage GET /v1/stats reports: this process's
// sweeper's last reading when it sweeps, else the store's, read at most once
// every sweeper.StorageEvery (information_schema is not read per request).
func (e *Engine) storageReading(ctx context.Context) (*tasks.Storage, error) {
	if e.sweeper != nil {
		if st, ok := e.sweeper.Storage(); ok {
			return &st.Storage, nil
		}
	}
	e.storageMu.Lock()
	defer e.storageMu.Unlock()
	if e.storage != nil && time.Since(e.storageAt) < sweeper.StorageEvery {
		return e.storage, nil
	}
	st, err := e.store.Storage(ctx)
	if err != nil {
		return nil, err
	}
	e.storage, e.storageAt = st, time.Now()
	return st, nil
}
