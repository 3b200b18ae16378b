package taskd

import (
	"log/slog"
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

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

	tracer     trace.TracerProvider // nil: Config.Telemetry's
	meter      metric.MeterProvider // nil: Config.Telemetry's
	metrics    http.Handler         // GET /metrics, when metricsSet
	metricsSet bool
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
// as Config.Log says. Either way, the engine adds trace_id and span_id to the
// lines it logs inside a traced request or task (telemetry.LogHandler).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithDB makes the engine use db, a handle from OpenMySQL (which sets the
// connection options taskd needs), instead of opening Config.MySQL.DSN. The
// handle stays the caller's: Stop does not close it.
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

// WithTracerProvider makes the engine create its spans (claims and
// submits, each HTTP request, each MySQL and Redis call) with tp instead of
// the tracer provider Config.Telemetry describes, whose Traces, Endpoint,
// Insecure, ServiceName and SampleRatio are then not read. tp stays the
// caller's: Stop does not shut it down or flush it.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}

// WithMeterProvider makes the engine record its metrics (claims, the pool by
// category and status, the stores' health, HTTP requests, webhook
// deliveries) with mp instead of the Prometheus exporter
// Config.Telemetry.Prometheus turns on, which is then not read: GET /metrics
// is served only with WithMetricsHandler. mp stays the caller's: Stop does
// not shut it down.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meter = mp }
}

// WithMetricsHandler makes the engine serve h at GET /metrics (behind
// Config.HTTP.MetricsToken when set, and on Config.HTTP.MetricsAddr when
// set), typically promhttp.HandlerFor over the registry that an
// OpenTelemetry Prometheus exporter of the WithMeterProvider provider
// writes to. A nil h serves no /metrics. With this option,
// Config.Telemetry.Prometheus is not read.
func WithMetricsHandler(h http.Handler) Option {
	return func(o *options) { o.metrics, o.metricsSet = h, true }
}
