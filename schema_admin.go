package taskd

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
)

// OpenMySQL connects to MySQL or MariaDB at dsn and pings it, with the
// connection settings taskd's fencing rests on forced whatever the DSN says
// (see MySQLConnector). Pass the handle to WithDB, Migrate or
// MigrationStatus; it is the caller's to close.
func OpenMySQL(ctx context.Context, dsn string) (*sqlx.DB, error) {
	db, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("taskd: %w", err)
	}
	return db, nil
}

// MySQLConnector returns a connector for dsn that forces the settings
// taskd's fencing rests on: found rows for UPDATE, UTC times, READ
// COMMITTED transactions, multiple statements per query and a
// group_concat_max_len of 1 MiB. Wrap it (for example with an OpenTelemetry
// database/sql wrapper), open it with sql.OpenDB and pass
// sqlx.NewDb(db, "mysql") to WithDB; OpenMySQL is the same without a wrapper.
func MySQLConnector(dsn string) (driver.Connector, error) {
	return store.Connector(dsn)
}

// The errors of a database that is not at the binary's schema, from Start,
// Migrate and SchemaStatus.Err.
var (
	// ErrSchemaBehind: the database lacks migrations the binary carries;
	// run Migrate (or `taskd migrate`) first.
	ErrSchemaBehind = migrate.ErrSchemaBehind
	// ErrSchemaAhead: a newer taskd migrated the database; run a newer taskd.
	ErrSchemaAhead = migrate.ErrSchemaAhead
	// ErrSchemaEdited: the migrations applied differ from the binary's.
	ErrSchemaEdited = migrate.ErrSchemaEdited
)

// SchemaStatus is where a database stands against the schema migrations
// the binary carries: each migration, applied (when) or pending, and
// whether its file matches the one applied. Its Err method says whether
// Migrate refuses the database.
type SchemaStatus = migrate.Status

// AppliedMigration is one migration Migrate applied, or adopted (a
// database made before versioned migrations).
type AppliedMigration = migrate.Applied

// Migrate applies the schema migrations this binary carries that db lacks,
// in order, as `taskd migrate` does, and returns them (none for a database
// at the current schema). It needs MySQL only, not Redis: run it before
// New, or call Engine.Migrate. Several processes may run it at once; they
// take turns. On an error, the migrations applied before it stay applied
// and are returned too; a database migrated by a newer taskd, or one whose
// applied migrations differ from the binary's, is an error and is left
// unchanged. Then it gives each editor made before names had skeletons its
// name's skeleton (the key that refuses names that look alike); of two
// existing editors whose names look alike, the newer gets none and a
// warning is logged (slog.Default()) until one is renamed.
//
// Its errors are migrate's own, unwrapped, as `taskd migrate` prints them.
func Migrate(ctx context.Context, db *sqlx.DB) ([]AppliedMigration, error) {
	applied, err := migrate.Up(ctx, db)
	if err != nil {
		return applied, err
	}
	// Editors made before names had skeletons get theirs (see
	// store.FillNameSkeletons): a warning names two that look alike.
	if _, err := store.FillNameSkeletons(ctx, db, nil); err != nil {
		return applied, err
	}
	return applied, nil
}

// MigrationStatus reads where db stands against the binary's migrations,
// and changes nothing (three reads). It needs MySQL only.
func MigrationStatus(ctx context.Context, db *sqlx.DB) (*SchemaStatus, error) {
	return migrate.ReadStatus(ctx, db)
}
