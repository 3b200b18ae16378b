package migrate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var (
	// ErrSchemaAhead means the database has migrations applied that this binary does
	// not know: it was migrated by a newer taskd. Nothing was changed.
	ErrSchemaAhead = errors.New("database schema is newer than this binary")

	// ErrSchemaBehind means the database lacks migrations this binary has: it was never
	// migrated, or only by an older taskd. Up brings it up to date.
	ErrSchemaBehind = errors.New("database schema is older than this binary")

	// ErrSchemaEdited means a migration's file differs from the one that was applied
	// (their SHA-256 checksums differ), or the database skipped a migration. Nothing was
	// changed.
	ErrSchemaEdited = errors.New("applied migrations differ from this binary's")

	// ErrSchemaUnrecognized means the database has some of taskd's tables but no version
	// table, and they are not the initial schema that taskd made before versioned
	// migrations, so they cannot be adopted. Nothing was changed.
	ErrSchemaUnrecognized = errors.New("taskd's tables cannot be adopted")

	// ErrLocked means another process kept the migration lock of the database for
	// longer than LockTimeout. Nothing was changed.
	ErrLocked = errors.New("another process is migrating the database")
)

// LockTimeout is how long Up waits for another process's migration of the same
// database to end.
const LockTimeout = time.Minute

// versionTable records the applied migrations. It is bookkeeping, not part of the
// schema: schema.sql does not have it.
const versionTable = "taskd_schema_migrations"

const createVersionTableSQL = `CREATE TABLE IF NOT EXISTS ` + versionTable + ` (
  version    INT UNSIGNED NOT NULL,
  name       VARCHAR(255) NOT NULL,
  checksum   CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  applied_at DATETIME(3) NOT NULL,
  PRIMARY KEY (version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci`

// recordMigrationSQL records a migration as applied, at the database clock's time.
// The primary key refuses a second record of the same version.
const recordMigrationSQL = `INSERT INTO ` + versionTable + ` (version, name, checksum, applied_at)
VALUES (?, ?, ?, UTC_TIMESTAMP(3))`

const appliedMigrationsSQL = `SELECT version, name, checksum, applied_at FROM ` + versionTable + ` ORDER BY version`

// Migration is one numbered migration built into the binary.
type Migration struct {
	Version int
	// Name is the file name without the number and the extension:
	// "tasks_editor_not_unique" for 0002_tasks_editor_not_unique.sql.
	Name string
	// Checksum is the hex SHA-256 of the file.
	Checksum string
	// SQL is the file's text.
	SQL string
}

// ID is the migration as people name it: "0002 tasks_editor_not_unique".
func (m Migration) ID() string { return fmt.Sprintf("%04d %s", m.Version, m.Name) }

// statements returns the migration's statements, in order.
func (m Migration) statements() []string { return splitStatements(m.SQL) }

var migrationFileName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// All returns the migrations built into the binary, in version order. The error
// reports a malformed set of files (a bad name, a gap in the numbers, a file
// without statements): a binary built from a broken tree.
func All() ([]Migration, error) {
	migs, err := loadMigrations()
	return append([]Migration(nil), migs...), err
}

var loadMigrations = sync.OnceValues(func() ([]Migration, error) {
	return parseMigrations(migrationFiles, "migrations")
})

// parseMigrations reads the .sql files of dir in fsys: named NNNN_name.sql and
// numbered 1, 2, 3, ... without gaps.
func parseMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var migs []Migration
	for _, e := range entries { // sorted by name, so by version
		m := migrationFileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("read migrations: file %s is not named NNNN_name.sql", e.Name())
		}
		version, _ := strconv.Atoi(m[1])
		if want := len(migs) + 1; version != want {
			return nil, fmt.Errorf("read migrations: file %s should be number %04d", e.Name(), want)
		}
		text, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migrations: %w", err)
		}
		sum := sha256.Sum256(text)
		mig := Migration{Version: version, Name: m[2], Checksum: hex.EncodeToString(sum[:]), SQL: string(text)}
		if len(mig.statements()) == 0 {
			return nil, fmt.Errorf("read migrations: file %s has no statement", e.Name())
		}
		migs = append(migs, mig)
	}
	if len(migs) == 0 {
		return nil, fmt.Errorf("read migrations: none in %s", dir)
	}
	return migs, nil
}

// Applied is a migration Up applied or adopted.
type Applied struct {
	Migration
	// Adopted means the migration was recorded without running it: the database had
	// its tables from before versioned migrations.
	Adopted bool
	// Took is how long its statements ran.
	Took time.Duration
}

// Up brings the database of db up to date: it applies the pending migrations in order,
// statement by statement, and records each in the version table
// (taskd_schema_migrations) once all its statements succeeded. It returns the
// migrations it applied, in order; none when the database was up to date. On an error
// it returns those it applied before it.
//
// A database with taskd's tables but no version table was made before versioned
// migrations; Up checks that its tables are migration 1's and records 1 as applied
// ("adopted") without running it, then applies the rest. Tables that are not migration
// 1's are refused with ErrSchemaUnrecognized.
//
// Only one process migrates a database at a time: Up holds the server's advisory lock
// (GET_LOCK) named after the database on one connection while it works, waiting up to
// LockTimeout for another process's migration to end (ErrLocked). On a Galera
// cluster, where GET_LOCK holds on one node only, the lock is a row of the table
// taskd_schema_lock instead, taken for LockLease (see lockMigrationsRow). Under the lock it
// refuses, before changing anything, a database that has migrations this binary does
// not know (ErrSchemaAhead) or whose applied migrations differ from this binary's files
// (ErrSchemaEdited).
//
// When a statement fails, the statements of that migration before it stay applied
// (MySQL does not roll DDL back) and the migration is not recorded; the error is an
// *Error naming the migration and the statement.
func Up(ctx context.Context, db *sqlx.DB) ([]Applied, error) {
	migs, err := loadMigrations()
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return up(ctx, db, migs)
}

func up(ctx context.Context, db *sqlx.DB, migs []Migration) (applied []Applied, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	dbName, err := currentDatabase(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	unlock, err := lockMigrations(ctx, conn, dbName)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", dbName, err)
	}
	defer func() {
		if uerr := unlock(); uerr != nil && err == nil {
			err = fmt.Errorf("migrate %s: %w", dbName, uerr)
		}
	}()

	st, err := readStatus(ctx, conn, dbName, migs)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", dbName, err)
	}
	if err := st.Err(); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", dbName, err)
	}
	if !st.versioned {
		if _, err := conn.ExecContext(ctx, createVersionTableSQL); err != nil {
			return nil, fmt.Errorf("migrate %s: create %s: %w", dbName, versionTable, err)
		}
	}
	for _, m := range st.Pending() {
		if st.Adopt && m.Version == 1 {
			if err := record(ctx, conn, m); err != nil {
				return applied, fmt.Errorf("migrate %s: %w", dbName, err)
			}
			applied = append(applied, Applied{Migration: m, Adopted: true})
			continue
		}
		took, err := apply(ctx, conn, m)
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", dbName, err)
		}
		applied = append(applied, Applied{Migration: m, Took: took})
	}
	return applied, nil
}

// apply runs m's statements in order and records m once all of them succeeded.
func apply(ctx context.Context, conn *sql.Conn, m Migration) (time.Duration, error) {
	start := time.Now()
	for i, stmt := range m.statements() {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return 0, &Error{Migration: m, Statement: i + 1, SQL: stmt, Err: err}
		}
	}
	took := time.Since(start)
	return took, record(ctx, conn, m)
}

// record records m as applied.
func record(ctx context.Context, conn *sql.Conn, m Migration) error {
	if _, err := conn.ExecContext(ctx, recordMigrationSQL, m.Version, m.Name, m.Checksum); err != nil {
		return fmt.Errorf("record migration %s as applied: %w", m.ID(), err)
	}
	return nil
}

// Error is a statement of a migration that failed, as Up returns it (wrapped; find it
// with errors.As). The statements of the migration before it were applied and stay so
// (MySQL commits each DDL statement on its own); the migration is not recorded as
// applied.
type Error struct {
	Migration Migration
	Statement int    // the failed statement's number, from 1
	SQL       string // the failed statement
	Err       error  // the server's error
}

func (e *Error) Error() string {
	applied := "no statement of it was applied by this run"
	switch {
	case e.Statement == 2:
		applied = "statement 1 was applied and stays so"
	case e.Statement > 2:
		applied = fmt.Sprintf("statements 1 to %d were applied and stay so", e.Statement-1)
	}
	return fmt.Sprintf("migration %s, statement %d of %d failed: %v\n"+
		"statement: %s\n"+
		"%s; %04d is not recorded as applied.\n"+
		"Fix the cause and run migrate again. Undo by hand first any applied statement of %04d that cannot run twice.",
		e.Migration.ID(), e.Statement, len(e.Migration.statements()), e.Err, firstLine(e.SQL),
		applied, e.Migration.Version, e.Migration.Version)
}

func (e *Error) Unwrap() error { return e.Err }

// firstLine is the start of a statement, for messages.
func firstLine(stmt string) string {
	line, rest, _ := strings.Cut(stmt, "\n")
	line = strings.TrimSpace(line)
	if rest != "" {
		line += " ..."
	}
	return line
}

// currentDatabase returns the name of the connection's default database.
func currentDatabase(ctx context.Context, q querier) (string, error) {
	var name sql.NullString
	if err := q.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil {
		return "", err
	}
	if !name.Valid || name.String == "" {
		return "", errors.New("the DSN names no database")
	}
	return name.String, nil
}

// migrateLockName is the GET_LOCK name for migrations of dbName. Lock names are
// server-wide and at most 64 characters on MySQL, so long database names are hashed.
func migrateLockName(dbName string) string {
	name := "taskd_migrate:" + dbName
	if len(name) > 64 {
		sum := sha256.Sum256([]byte(dbName))
		name = "taskd_migrate:" + hex.EncodeToString(sum[:16])
	}
	return name
}

// lockMigrations takes the migration lock of dbName on conn and returns its release.
// A lock the server could not be told to release is left to the connection: it is
// closed instead of going back to the pool, and the server releases the lock then.
func lockMigrations(ctx context.Context, conn *sql.Conn, dbName string) (unlock func() error, err error) {
	galera, err := onGalera(ctx, conn)
	if err != nil {
		return nil, err
	}
	if galera {
		return lockMigrationsRow(ctx, conn, dbName)
	}
	name := migrateLockName(dbName)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, int(LockTimeout/time.Second)).Scan(&got); err != nil {
		return nil, fmt.Errorf("take lock %s: %w", name, err)
	}
	switch {
	case !got.Valid:
		return nil, fmt.Errorf("take lock %s: the server returned NULL", name)
	case got.Int64 != 1:
		return nil, fmt.Errorf("%w: lock %s still held after %v", ErrLocked, name, LockTimeout)
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			return fmt.Errorf("release lock %s: %w", name, err)
		}
		return nil
	}, nil
}

// querier is what reading the schema's state needs: *sql.Conn, *sql.DB and *sqlx.DB.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// splitStatements splits SQL text into statements at lines ending with ';'. Whole-line
// "--" comments are dropped, and so are chunks left with no statement. It relies on
// the rules the migrations and schema.sql keep: no procedures, triggers or DELIMITER
// changes, and no ';' at the end of a line inside a string literal.
func splitStatements(text string) []string {
	var stmts []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			stmts = append(stmts, strings.TrimSuffix(s, ";"))
		}
		cur.Reset()
	}
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			flush()
		}
	}
	flush()
	return stmts
}
