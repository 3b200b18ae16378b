// Package taskd hands work out to exactly one holder at a time: a pool of tasks
// in MySQL or MariaDB, claimed by editors over HTTP and by worker processes
// running Go handlers. A per-task Redis lock keeps competing claims apart
// cheaply; a fence in MySQL, a number every claim increases and every later
// write about the claim must match, keeps a holder that lost its claim from
// changing the task.
//
// This package is the engine that `taskd serve`, `taskd work` and `taskd dev`
// run; a program of your own can embed it.
//
// # The engine
//
// New builds an Engine from a Config and Options. Config is config.yaml as Go
// values, with the same sections and keys; a zero field means the key's
// default, and Validate names a bad key as the file does
// ("http.max_wait: must be at most 15m0s"), returning a *ConfigError. Options
// carry what a file cannot: WithHandler registers a Go handler for a
// category, WithLogger, WithTelemetry, and WithDB, WithRedis and WithLocker
// pass in handles the caller keeps owning.
//
// Start checks that the database is at the schema this binary was built for
// (package tasks/migrate applies the migrations; `taskd migrate` is the
// same), then starts the dispatcher and its wake-up relay, the sweeper, the
// scheduler of periodic tasks (Config.Schedules), the workers when handlers
// are registered, the webhook deliverer when webhooks are configured, and,
// with an admin token, the editor API, the pages and the activity history.
// Stop drains all of it in one order (see Engine.Stop); Run is Start, then
// Stop when its context ends.
//
// # Serving HTTP
//
// With Config.AdminToken set, Engine.HTTPHandler is the editor API (docs/api.md in
// the repository), the editor's workspace at / and the ops console at /ops,
// as one http.Handler to mount in a server of your own (see the example). Or
// set Config.HTTP.Addr, and Start serves it on a listener of its own
// (Engine.Addr).
//
// # Adding tasks and handling them
//
// A task's payload is a Go type that names its category (Args). Engine.Insert
// and InsertMany add tasks from such values; a task whose key exists is not
// added twice. WithJobHandler registers a function that receives each claimed
// task as a *Job[T], its payload decoded into T, and returns its result, which
// is committed as JSON; an error retries the task after a backoff until its
// attempts run out, and wrapping SkipRetry makes it dead at once, as
// does a payload that does not decode into T. WithHandler registers a
// Handler, which reads the raw JSON instead (WithMiddleware wraps them all). A handler's context
// ends when the engine stops or the claim's lease is lost. Handlers run at
// least once per task, not exactly once: make them idempotent; only one
// claim's outcome is ever committed.
//
// The repository's docs/library.md walks through a program that embeds the
// engine; docs/design.md explains the claims, fences and sweeps.
package taskd
