package tasks

import (
	"context"
	"io/fs"

	"github.com/jmoiron/sqlx"
)

// Hooks for the migration tests in package tasks_test.

// VersionTable is the table that records applied migrations.
const VersionTable = versionTable

// MigrateWith is Migrate with migs in place of the binary's migrations.
func MigrateWith(ctx context.Context, db *sqlx.DB, migs []Migration) ([]AppliedMigration, error) {
	return migrate(ctx, db, migs)
}

// ParseMigrations reads migration files the way the binary reads its own.
func ParseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	return parseMigrations(fsys, dir)
}

// SplitStatements splits SQL text the way Migrate does.
func SplitStatements(text string) []string { return splitStatements(text) }

// MigrateLockName is the advisory lock Migrate holds on the database dbName.
func MigrateLockName(dbName string) string { return migrateLockName(dbName) }
