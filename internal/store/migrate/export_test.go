package migrate

import (
	"context"
	"io/fs"

	"github.com/jmoiron/sqlx"
)

// Hooks for the tests in package migrate_test.

// VersionTable is the table that records applied migrations.
const VersionTable = versionTable

// UpWith is Up with migs in place of the binary's migrations.
func UpWith(ctx context.Context, db *sqlx.DB, migs []Migration) ([]Applied, error) {
	return up(ctx, db, migs)
}

// Parse reads migration files the way the binary reads its own.
func Parse(fsys fs.FS, dir string) ([]Migration, error) {
	return parseMigrations(fsys, dir)
}

// SplitStatements splits SQL text the way Up does.
func SplitStatements(text string) []string { return splitStatements(text) }

// LockName is the advisory lock Up holds on the database dbName.
func LockName(dbName string) string { return migrateLockName(dbName) }
