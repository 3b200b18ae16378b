package migrate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// MigrationStatus is one migration as a database and the binary know it.
type MigrationStatus struct {
	// Migration is the binary's migration. For a migration the binary does not know
	// (Known false) it holds what the database recorded: version, name and checksum.
	Migration
	// Known means the binary has this migration.
	Known bool
	// Applied means the database recorded it as applied, at AppliedAt (UTC, the
	// database clock), with AppliedChecksum as its file's checksum then.
	Applied         bool
	AppliedAt       time.Time
	AppliedChecksum string
}

// Edited reports whether the migration was applied from a file other than the
// binary's.
func (m MigrationStatus) Edited() bool {
	return m.Known && m.Applied && m.AppliedChecksum != m.Checksum
}

// Status is where a database stands against the binary's migrations.
type Status struct {
	// Database is the database's name.
	Database string
	// Migrations lists the binary's migrations and any others the database recorded,
	// in version order.
	Migrations []MigrationStatus
	// Adopt means the database has migration 1's tables but no version table: it was
	// made before versioned migrations. Up records migration 1 as applied without
	// running it, then applies the rest.
	Adopt bool

	versioned bool // the version table exists
}

// Version is the highest applied version, 0 when none is.
func (s *Status) Version() int {
	v := 0
	for _, m := range s.Migrations {
		if m.Applied {
			v = max(v, m.Version)
		}
	}
	return v
}

// Pending returns the binary's migrations that are not applied, in order.
func (s *Status) Pending() []Migration {
	var out []Migration
	for _, m := range s.Migrations {
		if m.Known && !m.Applied {
			out = append(out, m.Migration)
		}
	}
	return out
}

// Err says why Up would refuse the database, nil when it would not: migrations the
// binary does not know were applied (ErrSchemaAhead), an applied migration's file
// was edited or a migration was skipped (ErrSchemaEdited). Each problem is named.
func (s *Status) Err() error {
	var errs []error
	var unknown []string
	for _, m := range s.Migrations {
		switch {
		case m.Applied && !m.Known:
			unknown = append(unknown, m.ID())
		case m.Edited():
			errs = append(errs, fmt.Errorf("%w: migration %04d was edited after it was applied "+
				"(applied checksum %.12s…, this binary's %.12s…): restore its file and put the change in a new migration",
				ErrSchemaEdited, m.Version, m.AppliedChecksum, m.Checksum))
		case m.Known && !m.Applied && m.Version < s.Version():
			errs = append(errs, fmt.Errorf("%w: migration %s is not applied but %04d is: it was skipped or removed from the version table",
				ErrSchemaEdited, m.ID(), s.Version()))
		}
	}
	if len(unknown) > 0 {
		errs = append([]error{fmt.Errorf("%w: a newer taskd applied %s (this binary knows up to %04d): run a newer taskd",
			ErrSchemaAhead, strings.Join(unknown, ", "), s.known())}, errs...)
	}
	return errors.Join(errs...)
}

// Current says whether the binary can run on the database as it is: nil when every
// migration the binary has is applied as it is in the binary and no other one is.
// Otherwise it returns Err's error (ErrSchemaAhead, ErrSchemaEdited), or one wrapping
// ErrSchemaBehind that names the database's version and the binary's.
func (s *Status) Current() error {
	if err := s.Err(); err != nil {
		return err
	}
	pending := s.Pending()
	switch {
	case len(pending) == 0:
		return nil
	case s.Adopt:
		return fmt.Errorf("%w: database %s has taskd's tables from before versioned migrations, and this binary needs version %04d",
			ErrSchemaBehind, s.Database, s.known())
	case s.Version() == 0:
		return fmt.Errorf("%w: database %s has no migration applied (no taskd tables), and this binary needs version %04d",
			ErrSchemaBehind, s.Database, s.known())
	default:
		return fmt.Errorf("%w: database %s is at version %04d, and this binary needs %04d (%s pending)",
			ErrSchemaBehind, s.Database, s.Version(), s.known(), pendingNames(pending))
	}
}

// pendingNames names pending migrations for a message, the first three of them.
func pendingNames(pending []Migration) string {
	var ids []string
	for i, m := range pending {
		if i == 3 {
			ids = append(ids, fmt.Sprintf("and %d more", len(pending)-i))
			break
		}
		ids = append(ids, m.ID())
	}
	return strings.Join(ids, ", ")
}

// known is the highest version the binary knows.
func (s *Status) known() int {
	v := 0
	for _, m := range s.Migrations {
		if m.Known {
			v = max(v, m.Version)
		}
	}
	return v
}

// ReadStatus reads where the database of db stands against the binary's
// migrations: which are applied and when, which are pending, and whether the database
// is ahead of the binary or an applied migration was edited (Status.Err). It
// changes nothing. A database whose tables predate versioned migrations and are not
// migration 1's is an error wrapping ErrSchemaUnrecognized.
func ReadStatus(ctx context.Context, db *sqlx.DB) (*Status, error) {
	migs, err := loadMigrations()
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	dbName, err := currentDatabase(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	st, err := readStatus(ctx, db, dbName, migs)
	if err != nil {
		return nil, fmt.Errorf("migration status of %s: %w", dbName, err)
	}
	return st, nil
}

// readStatus reads the version table, or, when there is none, whether the
// database is empty or has taskd's tables from before versioned migrations.
func readStatus(ctx context.Context, q querier, dbName string, migs []Migration) (*Status, error) {
	st := &Status{Database: dbName}
	tables, err := queryStrings(ctx, q, `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	st.versioned = slices.Contains(tables, versionTable)

	applied := map[int]MigrationStatus{}
	if st.versioned {
		if applied, err = readApplied(ctx, q); err != nil {
			return nil, fmt.Errorf("read %s: %w", versionTable, err)
		}
	} else if slices.ContainsFunc(tables, func(t string) bool { _, ok := initialTables[t]; return ok }) {
		if err := checkInitialSchema(ctx, q); err != nil {
			return nil, err
		}
		st.Adopt = true
	}

	for _, m := range migs {
		s := MigrationStatus{Migration: m, Known: true}
		if a, ok := applied[m.Version]; ok {
			s.Applied, s.AppliedAt, s.AppliedChecksum = true, a.AppliedAt, a.AppliedChecksum
			delete(applied, m.Version)
		}
		st.Migrations = append(st.Migrations, s)
	}
	for _, a := range applied {
		st.Migrations = append(st.Migrations, a)
	}
	slices.SortFunc(st.Migrations, func(a, b MigrationStatus) int { return a.Version - b.Version })
	return st, nil
}

// readApplied reads the version table, by version.
func readApplied(ctx context.Context, q querier) (map[int]MigrationStatus, error) {
	rows, err := q.QueryContext(ctx, appliedMigrationsSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := map[int]MigrationStatus{}
	for rows.Next() {
		m := MigrationStatus{Applied: true}
		if err := rows.Scan(&m.Version, &m.Name, &m.AppliedChecksum, &m.AppliedAt); err != nil {
			return nil, err
		}
		m.Checksum, m.AppliedAt = m.AppliedChecksum, m.AppliedAt.UTC()
		applied[m.Version] = m
	}
	return applied, rows.Err()
}

// initialTables are the tables and columns, in order, of migration 1: the schema taskd
// made before versioned migrations. A test checks them against the migration.
var initialTables = map[string][]string{
	"tasks": {"id", "category", "priority", "title", "payload", "status", "fence", "holder", "editor_id",
		"assigned_at", "lease_expires_at", "attempts", "max_attempts", "run_after", "last_error",
		"trace_context", "created_at", "updated_at", "done_at"},
	"editors":           {"id", "name", "token_hash", "created_at"},
	"editor_categories": {"editor_id", "category"},
	"task_events":       {"id", "task_id", "kind", "fence", "holder", "editor_id", "detail", "at"},
	"task_results":      {"task_id", "fence", "holder", "editor_id", "result", "submitted_at"},
	"task_skips":        {"task_id", "editor_id", "until"},
}

// initialTasksKeys are the keys of migration 1's tasks table and their columns.
// tasks_editor is unique there, and a plain key in databases made by schema.sql
// between migration 2's change and versioned migrations; both are adopted, and
// migration 2 makes it plain either way.
var initialTasksKeys = map[string]string{
	"PRIMARY":         "id",
	"tasks_candidate": "status,category,priority,id",
	"tasks_expiry":    "status,lease_expires_at",
	"tasks_editor":    "editor_id",
}

// checkInitialSchema checks that the database has migration 1's tables, columns and
// tasks keys, so that it can be adopted. Other tables do not matter.
func checkInitialSchema(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position`)
	if err != nil {
		return fmt.Errorf("read columns: %w", err)
	}
	defer rows.Close()
	have := map[string][]string{}
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			return fmt.Errorf("read columns: %w", err)
		}
		have[table] = append(have[table], column)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read columns: %w", err)
	}

	var problems []string
	for _, table := range slices.Sorted(maps.Keys(initialTables)) {
		want, got := initialTables[table], have[table]
		if got == nil {
			problems = append(problems, "table "+table+" is missing")
			continue
		}
		var missing, extra []string
		for _, c := range want {
			if !slices.Contains(got, c) {
				missing = append(missing, c)
			}
		}
		for _, c := range got {
			if !slices.Contains(want, c) {
				extra = append(extra, c)
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("table %s has no column %s", table, strings.Join(missing, ", ")))
		}
		if len(extra) > 0 {
			problems = append(problems, fmt.Sprintf("table %s has column %s, which 0001 does not", table, strings.Join(extra, ", ")))
		}
		if len(missing) == 0 && len(extra) == 0 && !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("table %s has its columns in another order than 0001", table))
		}
	}
	if len(problems) == 0 {
		keys, err := queryPairs(ctx, q, `SELECT index_name, GROUP_CONCAT(column_name ORDER BY seq_in_index)
			FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'tasks'
			GROUP BY index_name`)
		if err != nil {
			return fmt.Errorf("read keys of tasks: %w", err)
		}
		for _, key := range slices.Sorted(maps.Keys(initialTasksKeys)) {
			if got, want := keys[key], initialTasksKeys[key]; got != want {
				problems = append(problems, fmt.Sprintf("tasks has no key %s (%s)", key, want))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: there is no %s, and the tables are not migration 0001's: %s. "+
			"Bring them to migration 0001 by hand, or use a new database",
			ErrSchemaUnrecognized, versionTable, strings.Join(problems, "; "))
	}
	return nil
}

func queryStrings(ctx context.Context, q querier, query string) ([]string, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func queryPairs(ctx context.Context, q querier, query string) (map[string]string, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}
