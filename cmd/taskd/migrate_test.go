package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/migrate"
	"github.com/taskd/taskd/internal/store/storetest"
)

// migrateEnv returns the environment for `taskd migrate` against a new empty database,
// a handle on that database, and how taskd names it in its output.
func migrateEnv(t *testing.T) (env []string, db *sqlx.DB, where string) {
	t.Helper()
	dsn := storetest.NewEmptyDatabase(t)
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// Redis too: the command builds an engine.
	return append([]string{"TASKD_MYSQL_DSN=" + dsn}, redisEnv(t)...), db, taskd.MySQLConfig{DSN: dsn}.Server()
}

var (
	durationRE = regexp.MustCompile(`(<1ms|[0-9.]+(ms|s))$`)
	dateTimeRE = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}`)
)

// normalize replaces what changes from run to run, durations and times, keeping the
// columns aligned.
func normalize(out string) string {
	if out == "" {
		return ""
	}
	var lines []string
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		line = durationRE.ReplaceAllString(line, "DUR")
		line = dateTimeRE.ReplaceAllString(line, "YYYY-MM-DD hh:mm:ss")
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n") + "\n"
}

// migrateCmd runs taskd migrate with args and checks its exit status and stdout.
func migrateCmd(t *testing.T, env []string, wantCode int, wantOut string, args ...string) (stderr string) {
	t.Helper()
	stdout, stderr, code := run(t, env, append([]string{"migrate"}, args...)...)
	if code != wantCode {
		t.Errorf("taskd migrate %v: exit %d, want %d\nstderr: %s", args, code, wantCode, stderr)
	}
	if got := normalize(stdout); got != wantOut {
		t.Errorf("taskd migrate %v: stdout\n%s\nwant\n%s", args, got, wantOut)
	}
	return stderr
}

// table lays out tab-separated rows as taskd migrate does, for the output it
// prints once normalized.
func table(rows ...string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	_ = w.Flush()
	return b.String()
}

const statusHeader = "VERSION\tNAME\tSTATE\tAPPLIED (UTC)\tCHECKSUM"

// statusRows are rows of the status table, one per migration, with the state,
// time and checksum columns given.
func statusRows(migs []migrate.Migration, cols func(m migrate.Migration) string) []string {
	rows := make([]string, len(migs))
	for i, m := range migs {
		rows[i] = fmt.Sprintf("%04d\t%s\t%s", m.Version, m.Name, cols(m))
	}
	return rows
}

func TestE2EMigrate(t *testing.T) {
	t.Parallel()
	env, _, where := migrateEnv(t)
	migs := binaryMigrations(t)
	last := migs[len(migs)-1].Version

	migrateCmd(t, env, exitOK, table(append([]string{statusHeader}, statusRows(migs, func(migrate.Migration) string {
		return "pending\t-\t-"
	})...)...)+fmt.Sprintf("\n%s has no migration applied, %d pending: run 'taskd migrate'\n", where, len(migs)), "-status")

	var applied []string
	for _, m := range migs {
		applied = append(applied, fmt.Sprintf("applied\t%04d\t%s\tDUR", m.Version, m.Name))
	}
	migrateCmd(t, env, exitOK, table(applied...)+fmt.Sprintf("%s is at version %04d\n", where, last))

	migrateCmd(t, env, exitOK, fmt.Sprintf("%s is up to date at version %04d: nothing to apply\n", where, last))

	migrateCmd(t, env, exitOK, table(append([]string{statusHeader}, statusRows(migs, func(migrate.Migration) string {
		return "applied\tYYYY-MM-DD hh:mm:ss\tok"
	})...)...)+fmt.Sprintf("\n%s is up to date at version %04d\n", where, last), "-status")
}

func TestE2EMigrateAdopts(t *testing.T) {
	t.Parallel()
	env, db, where := migrateEnv(t)
	// A database made by schema.sql before versioned migrations.
	migs := binaryMigrations(t)
	if _, err := db.ExecContext(t.Context(), migs[0].SQL); err != nil {
		t.Fatal(err)
	}

	migrateCmd(t, env, exitOK, table(append([]string{statusHeader}, statusRows(migs, func(m migrate.Migration) string {
		if m.Version == 1 {
			return "adopt\t-\t-"
		}
		return "pending\t-\t-"
	})...)...)+fmt.Sprintf("\n%s has tables made before versioned migrations: 'taskd migrate' adopts them as 0001 and applies %d more\n",
		where, len(migs)-1), "-status")

	applied := []string{"adopted\t0001\tinitial\ttables made before versioned migrations"}
	for _, m := range migs[1:] {
		applied = append(applied, fmt.Sprintf("applied\t%04d\t%s\tDUR", m.Version, m.Name))
	}
	migrateCmd(t, env, exitOK, table(applied...)+fmt.Sprintf("%s is at version %04d\n", where, migs[len(migs)-1].Version))
}

func TestE2EMigrateRefuses(t *testing.T) {
	t.Parallel()
	env, db, where := migrateEnv(t)
	migs := binaryMigrations(t)
	last := migs[len(migs)-1].Version
	if _, _, code := run(t, env, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d", code)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE taskd_schema_migrations SET checksum = REPEAT('e', 64) WHERE version = 2`); err != nil {
		t.Fatal(err)
	}

	stderr := migrateCmd(t, env, exitFailure, table(append([]string{statusHeader}, statusRows(migs, func(m migrate.Migration) string {
		if m.Version == 2 {
			return "applied\tYYYY-MM-DD hh:mm:ss\tEDITED"
		}
		return "applied\tYYYY-MM-DD hh:mm:ss\tok"
	})...)...)+fmt.Sprintf("\n%s is at version %04d: 'taskd migrate' refuses it (see below)\n", where, last), "-status")
	if want := "taskd migrate: applied migrations differ from this binary's: migration 0002 was edited after it was applied"; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q, want it to start with %q", stderr, want)
	}
	stderr = migrateCmd(t, env, exitFailure, "")
	if !strings.Contains(stderr, "migration 0002 was edited after it was applied") {
		t.Errorf("migrate: stderr %q", stderr)
	}

	if _, err := db.ExecContext(t.Context(), `UPDATE taskd_schema_migrations SET checksum = ? WHERE version = 2`, migs[1].Checksum); err != nil {
		t.Fatal(err)
	}
	future := last + 1
	if _, err := db.ExecContext(t.Context(), `INSERT INTO taskd_schema_migrations (version, name, checksum, applied_at)
		VALUES (?, 'from_the_future', REPEAT('f', 64), UTC_TIMESTAMP(3))`, future); err != nil {
		t.Fatal(err)
	}
	rows := append([]string{statusHeader}, statusRows(migs, func(migrate.Migration) string {
		return "applied\tYYYY-MM-DD hh:mm:ss\tok"
	})...)
	rows = append(rows, fmt.Sprintf("%04d\tfrom_the_future\tapplied\tYYYY-MM-DD hh:mm:ss\tunknown to this binary", future))
	stderr = migrateCmd(t, env, exitFailure, table(rows...)+
		fmt.Sprintf("\n%s is at version %04d: 'taskd migrate' refuses it (see below)\n", where, future), "-status")
	if want := fmt.Sprintf("taskd migrate: database schema is newer than this binary: a newer taskd applied %04d from_the_future", future); !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q, want it to start with %q", stderr, want)
	}
}

// binaryMigrations returns the migrations built into taskd.
func binaryMigrations(t *testing.T) []migrate.Migration {
	t.Helper()
	m, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
