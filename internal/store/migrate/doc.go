// Package migrate brings a MySQL database to taskd's schema and tells where a database
// stands. The schema is a list of numbered migrations, migrations/NNNN_name.sql, built
// into the binary: All lists them, Up applies those the database lacks, in order, and
// records each in the version table (taskd_schema_migrations), and ReadStatus reports,
// changing nothing, which are applied and which are pending. schema.sql at the top of
// the repository is their sum, for readers; a test proves they add up to it.
//
//	db, err := store.Open(ctx, dsn)
//	...
//	applied, err := migrate.Up(ctx, db)
//
// `taskd migrate` is Up, and `taskd migrate -status` is ReadStatus. Status.Current
// says whether the binary can run on the database as it is; taskd's Engine.Start
// refuses a database where it is not nil.
//
// # Writing a migration
//
// A migration file follows schema.sql's rules: statements end with ';' at the end of a
// line, whole-line "--" comments are dropped, and there are no procedures, triggers or
// DELIMITER changes. MySQL commits every DDL statement on its own, so a migration is
// applied statement by statement and recorded once all of them succeeded; write each so
// that re-running it after a failure halfway either works or fails with a clear error.
// A released migration is never edited: databases recorded its checksum.
//
// # Errors
//
// Up refuses, changing nothing, a database migrated by a newer binary (ErrSchemaAhead),
// one whose applied migrations differ from the binary's (ErrSchemaEdited), taskd's
// tables from before versioned migrations that are not migration 1's
// (ErrSchemaUnrecognized), and a database another process kept migrating for longer
// than LockTimeout (ErrLocked). A statement that fails is an *Error. ReadStatus returns
// ErrSchemaUnrecognized and reports the others in Status.Err; Status.Current adds
// ErrSchemaBehind for a database with migrations pending. Errors are wrapped with the
// operation and, once known, the database's name; test them with errors.Is and
// errors.As.
package migrate
