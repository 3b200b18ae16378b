package taskd

import (
	"log/slog"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/locker"
)

// Option sets what a Config cannot hold: handlers, a logger, open handles.
type Option func(*options)

type options struct {
	handlers   map[string]Handler
	order      []string
	middleware []MiddlewareFunc
	log        *slog.Logger
	db         *sqlx.DB
	redis      redis.UniversalClient
	locks      *locker.Client
	tel        *telemetry.Providers
}

// WithHandler registers h to run the tasks of category; h returns each
// task's result (see Handler). With at least one handler the
// engine runs workers (Config.Worker); without, it only serves. New fails
// for an invalid category. Registering a category again replaces its
// handler.
func WithHandler(category string, h Handler) Option {
	return func(o *options) {
		if o.handlers == nil {
			o.handlers = map[string]Handler{}
		}
		if _, ok := o.handlers[category]; !ok {
			o.order = append(o.order, category)
		}
		o.handlers[category] = h
	}
}

// WithLogger sets the engine's logger. Default: a logger writing to stderr
// as Config.Log says.
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithDB makes the engine use db, a handle from tasks.Open or
// telemetry.OpenMySQL, instead of opening Config.MySQL.DSN. The handle stays
// the caller's: Stop does not close it.
func WithDB(db *sqlx.DB) Option {
	return func(o *options) { o.db = db }
}

// WithRedis makes the engine use client (a single server, or a
// *redis.ClusterClient) for its locks, wake-ups and sweeps instead of
// connecting as Config.Redis says. The client stays the caller's: Stop does
// not close it.
func WithRedis(client redis.UniversalClient) Option {
	return func(o *options) { o.redis = client }
}

// WithLocker makes the engine take its per-task locks with locks (for
// example a Redlock client from locker.NewRedlock) instead of a locker over
// the Redis client. It needs WithRedis too, for wake-ups between processes;
// the sweeper then scans no Redis for orphaned locks, which expire with
// their time to live.
func WithLocker(locks *locker.Client) Option {
	return func(o *options) { o.locks = locks }
}

// WithTelemetry makes the engine report to p instead of the providers
// Config.Telemetry describes. The providers stay the caller's: Stop does
// not shut them down.
func WithTelemetry(p *telemetry.Providers) Option {
	return func(o *options) { o.tel = p }
}
