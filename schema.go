// Package taskd hands work out to exactly one holder at a time, with MySQL as the
// source of truth and fencing authority. The packages below it hold the pieces: tasks
// (domain types and the MySQL store), tasks/migrate (the schema's migrations), locker
// (Redis locks) and dispatcher (claims, sweeps, workers, the HTTP API and telemetry).
//
// This package puts them together: New builds an Engine from a Config (config.yaml's
// sections and keys as Go values) and Options (handlers, a logger, open handles);
// Start and Stop, or Run, drive all of it in one order; Handler serves the editor API
// in a server of your own. `taskd serve` and `taskd work` are this engine.
package taskd

import _ "embed"

// Schema is the complete current database schema (schema.sql), for readers: the sum of
// the numbered migrations that package tasks/migrate applies (migrate.Up), as a test
// proves. Statements end with ';' at the end of a line and there are no procedures or
// triggers, so it can be applied statement by statement. The header comment in
// schema.sql explains the fencing model the tables implement.
//
//go:embed schema.sql
var Schema string
