package taskd

import _ "embed"

// Schema is the complete current database schema (schema.sql), for readers: the sum of
// the numbered migrations that Migrate applies, as a test
// proves. Statements end with ';' at the end of a line and there are no procedures or
// triggers, so it can be applied statement by statement. The header comment in
// schema.sql explains the fencing model the tables implement.
//
//go:embed schema.sql
var Schema string
