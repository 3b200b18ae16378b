// Package taskd hands work out to exactly one holder at a time, with MySQL as the
// source of truth and fencing authority. The packages below it hold the pieces: tasks
// (domain types and the MySQL store), locker (Redis locks) and dispatcher.
package taskd

import _ "embed"

// Schema is the database schema: idempotent DDL for MariaDB 10.6+ and MySQL 8.0+
// (CREATE TABLE IF NOT EXISTS only), so applying it twice is harmless. Statements end
// with ';' at the end of a line and there are no procedures or triggers, so it can be
// applied statement by statement; tasks.Migrate does exactly that. The header comment
// in schema.sql explains the fencing model the tables implement.
//
//go:embed schema.sql
var Schema string
