// Package taskd hands out tasks to exactly one holder at a time: a pool of
// tasks in MySQL or MariaDB, claimed by worker processes running Go handlers
// and by editors (people) over HTTP. A per-task Redis lock keeps competing
// claims apart cheaply; a fence in MySQL, a number every claim increases and
// every later write about the claim must match, keeps a holder that lost its
// claim from changing the task.
//
// This package is what a Go program needs to embed taskd: the Engine, its
// Config and Options, the handler and task types. The taskd command (`taskd
// serve`, `taskd work`, `taskd dev`) runs the same Engine.
//
// # The engine
//
// An Engine is taskd in one value: over the stores it opened or was given, it
// runs the dispatcher (claims, leases, wake-ups between processes), the
// sweeper that recycles expired claims, the periodic tasks of
// Config.Schedules, the workers running the registered handlers, the webhook
// deliverer of Config.Webhooks, and, with Config.AdminToken, the editor API,
// its pages and the activity history.
//
// New builds it from a Config and Options, connects to MySQL and Redis (or
// takes the handles WithDB and WithRedis pass) and starts nothing:
//
//	e, err := taskd.New(taskd.Config{
//		MySQL: taskd.MySQLConfig{DSN: "taskd:secret@tcp(127.0.0.1:3306)/taskd"},
//		Redis: taskd.RedisConfig{Addrs: []string{"127.0.0.1:6379"}},
//	}, taskd.WithJobHandler(resize))
//
// # Config
//
// Config is config.yaml as Go values, with the same sections and keys (the
// yaml tags). A zero field takes the key's default, which its comment states,
// as a key left out of the file does: Config.WithDefaults applies them, and
// New calls it. Two keys are the exceptions, because they open something an
// embedding program may not want: an empty HTTP.Addr is no listener, and a
// false Telemetry.Prometheus serves no metrics (config.yaml's values are
// HTTPAddrDefault and PrometheusDefault). Telemetry.SampleRatio and
// Telemetry.KeepFailed are pointers, nil when unset, so that their zero can
// be said: Telemetry: taskd.TelemetryConfig{Traces: "stdout"} exports every
// trace (SampleRatioDefault, KeepFailedDefault), and SampleRatio: new(0.0)
// samples no new one. Only MySQL.DSN has no default, unless WithDB passes a
// handle.
//
// New validates the result once, with Config.Validate: a bad key is a
// *ConfigError naming it as the file does ("http.max_wait: must be at most
// 15m0s"), several are joined with errors.Join.
//
// # Options
//
// Options carry what a file cannot:
//   - WithJobHandler and WithHandler register handlers (below), and
//     WithMiddleware wraps them all;
//   - WithLogger sets the *slog.Logger (default: stderr, as Config.Log says);
//   - WithDB, WithRedis and WithLocker pass a MySQL handle, a Redis client
//     and a Redlock or Cluster locker the caller opened and keeps owning;
//   - WithTracerProvider, WithMeterProvider and WithMetricsHandler pass
//     OpenTelemetry providers and the GET /metrics handler, instead of the
//     ones Config.Telemetry describes; they stay the caller's too.
//
// # Handlers
//
// With at least one handler registered, the engine runs workers
// (Config.Worker): each claims tasks of the handlers' categories, runs its
// handler with a context that ends when the claim's lease is lost (cause
// ErrLeaseLost), the task is cancelled (cause ErrCancelled: see
// Engine.CancelTask) or the engine stops, renews the lease meanwhile, and commits
// the outcome. A handler returns the task's result, committed as JSON, or an
// error, which retries the task after a backoff until its attempts run out;
// an error wrapping SkipRetry makes it dead at once, and Snooze(d) runs it
// again after d without spending an attempt (at most
// Config.Worker.MaxSnoozes times).
//
// A typed handler receives the payload decoded into its own type. The type
// implements Args, whose Category names the category its tasks go to:
//
//	type Resize struct {
//		Image string `json:"image"`
//		Width int    `json:"width"`
//	}
//
//	func (Resize) Category() string { return "resize" }
//
//	func resize(ctx context.Context, job *taskd.Job[Resize]) (any, error) {
//		// job.Args is the decoded payload; job.Task the task's id, title,
//		// attempts and raw payload.
//		return map[string]int{"width": job.Args.Width}, nil
//	}
//
// WithJobHandler(resize) registers it; a payload that does not decode into
// the type makes the task dead at once, with the decode error. WithHandler
// registers an untyped Handler for a category, which reads the
// raw JSON payload instead.
//
// Handlers run at least once per task, not exactly once: a handler whose
// lease ran out may still be running when another claim runs the task again.
// Make them idempotent; only one claim's outcome is ever committed.
//
// # Adding tasks
//
// Engine.Insert adds one task from a value of an Args type, its payload the
// value's JSON, and wakes the workers and editors waiting for its category;
// InsertMany adds several in one statement, all or none. InsertOpts set the
// title, priority, attempts, a time to run after, a due time, and a unique
// Key: inserting a task whose key another task holds adds nothing and returns
// that task's id; KeyHold says how long a task holds its key (as long as it is
// kept, only while it is live, or for a period after it ended). Inserting needs
// New, not Start.
//
// Engine.InsertTx and InsertManyTx insert in the caller's own transaction (a
// *sql.Tx or *sqlx.Tx on the engine's database): the tasks commit with the
// caller's rows or not at all, nobody sees them before the COMMIT, and the
// COMMIT alone wakes the workers and editors waiting for them.
//
// # Running and stopping
//
// Engine.Migrate brings the database to the schema this package was built
// for, as `taskd migrate` does. Start refuses a database at another schema
// (an error wrapping ErrSchemaBehind, ErrSchemaAhead or
// ErrSchemaEdited), then listens on Config.HTTP.Addr (and
// Config.HTTP.MetricsAddr) when set, starts the metrics of the pool and the
// stores, then the dispatcher's wake-up relay, the sweeper, the scheduler,
// the workers, the webhook deliverer and the activity history (each when
// configured), and serves. It returns at once; what it started runs until
// Stop.
//
// Stop drains in one order, as Engine.Stop details: first, side by side, the
// HTTP side (long polls answered 204 at once, requests in flight given
// Config.HTTP.ShutdownTimeout) and the workers (running handlers given
// Config.Worker.ShutdownTimeout, then cancelled and their tasks given back);
// then the history, the sweeper, the scheduler and the webhook deliverer;
// then the metrics and the wake-up relay; last, the stores the engine opened
// are closed and the telemetry it built is flushed. Run is Start, then Stop
// when its context ends or the listener fails.
//
// # Serving HTTP
//
// With Config.AdminToken set, Engine.HTTPHandler is the editor API (the
// repository's docs/api.md), the editor's workspace at / and the ops
// console at /ops, with GET /healthz, GET /readyz and GET /metrics (see
// Engine.HTTPHandler): one http.Handler to mount in a server of your own. Or set Config.HTTP.Addr,
// and Start serves it on a listener of its own (Engine.Addr). Without an
// admin token it serves only GET /healthz and GET /metrics.
//
// The repository's docs/library.md walks through a program that embeds the
// engine; docs/design.md explains the claims, fences and sweeps.
package taskd
