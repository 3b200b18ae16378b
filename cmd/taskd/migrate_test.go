package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
	"github.com/taskd/taskd/tasks/taskstest"
)

// migrateEnv returns the environment for `taskd migrate` against a new empty database,
// a handle on that database, and how taskd names it in its output.
func migrateEnv(t *testing.T) (env []string, db *sqlx.DB, where string) {
	t.Helper()
	dsn := taskstest.NewEmptyDatabase(t)
	db, err := tasks.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return []string{"TASKD_MYSQL_DSN=" + dsn}, db, taskd.MySQLConfig{DSN: dsn}.Server()
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

func TestE2EMigrate(t *testing.T) {
	t.Parallel()
	env, _, where := migrateEnv(t)
	migs := binaryMigrations(t)
	latest := fmt.Sprintf("%04d", len(migs))

	migrateCmd(t, env, exitOK, table(statusRows(migs, "pending", "-", "-")...)+"\n"+
		where+fmt.Sprintf(" has no migration applied, %d pending: run 'taskd migrate'\n", len(migs)), "-status")

	migrateCmd(t, env, exitOK, table(appliedRows(migs)...)+where+" is at version "+latest+"\n")

	migrateCmd(t, env, exitOK, where+" is up to date at version "+latest+": nothing to apply\n")

	migrateCmd(t, env, exitOK, table(statusRows(migs, "applied", "YYYY-MM-DD hh:mm:ss", "ok")...)+"\n"+
		where+" is up to date at version "+latest+"\n", "-status")
}

func TestE2EMigrateAdopts(t *testing.T) {
	t.Parallel()
	env, db, where := migrateEnv(t)
	migs := binaryMigrations(t)
	// A database made by schema.sql before versioned migrations.
	if _, err := db.ExecContext(t.Context(), migs[0].SQL); err != nil {
		t.Fatal(err)
	}

	rows := statusRows(migs, "pending", "-", "-")
	rows[1][2] = "adopt"
	migrateCmd(t, env, exitOK, table(rows...)+"\n"+where+
		fmt.Sprintf(" has tables made before versioned migrations: 'taskd migrate' adopts them as 0001 and applies %d more\n", len(migs)-1), "-status")

	rows = appliedRows(migs)
	rows[0] = []string{"adopted", "0001", migs[0].Name, "tables made before versioned migrations"}
	migrateCmd(t, env, exitOK, table(rows...)+where+fmt.Sprintf(" is at version %04d\n", len(migs)))
}

func TestE2EMigrateRefuses(t *testing.T) {
	t.Parallel()
	env, db, where := migrateEnv(t)
	migs := binaryMigrations(t)
	latest := fmt.Sprintf("%04d", len(migs))
	if _, _, code := run(t, env, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d", code)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE taskd_schema_migrations SET checksum = REPEAT('e', 64) WHERE version = 2`); err != nil {
		t.Fatal(err)
	}

	rows := statusRows(migs, "applied", "YYYY-MM-DD hh:mm:ss", "ok")
	rows[2][4] = "EDITED"
	stderr := migrateCmd(t, env, exitFailure, table(rows...)+"\n"+
		where+" is at version "+latest+": 'taskd migrate' refuses it (see below)\n", "-status")
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
	future := fmt.Sprintf("%04d", len(migs)+1)
	if _, err := db.ExecContext(t.Context(), `INSERT INTO taskd_schema_migrations (version, name, checksum, applied_at)
		VALUES (?, 'from_the_future', REPEAT('f', 64), UTC_TIMESTAMP(3))`, len(migs)+1); err != nil {
		t.Fatal(err)
	}
	rows = append(statusRows(migs, "applied", "YYYY-MM-DD hh:mm:ss", "ok"),
		[]string{future, "from_the_future", "applied", "YYYY-MM-DD hh:mm:ss", "unknown to this binary"})
	stderr = migrateCmd(t, env, exitFailure, table(rows...)+"\n"+
		where+" is at version "+future+": 'taskd migrate' refuses it (see below)\n", "-status")
	if want := "taskd migrate: database schema is newer than this binary: a newer taskd applied " + future + " from_the_future"; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q, want it to start with %q", stderr, want)
	}
}

// table renders rows as taskd migrate does: columns two spaces apart.
func table(rows ...[]string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	return b.String()
}

// statusRows are the header and the rows of `taskd migrate -status` for migs, each
// in state with applied and checksum.
func statusRows(migs []tasks.Migration, state, applied, checksum string) [][]string {
	rows := [][]string{{"VERSION", "NAME", "STATE", "APPLIED (UTC)", "CHECKSUM"}}
	for _, m := range migs {
		rows = append(rows, []string{fmt.Sprintf("%04d", m.Version), m.Name, state, applied, checksum})
	}
	return rows
}

// appliedRows are the lines `taskd migrate` prints when it applied migs.
func appliedRows(migs []tasks.Migration) [][]string {
	var rows [][]string
	for _, m := range migs {
		rows = append(rows, []string{"applied", fmt.Sprintf("%04d", m.Version), m.Name, "DUR"})
	}
	return rows
}

// binaryMigrations returns the migrations built into taskd.
func binaryMigrations(t *testing.T) []tasks.Migration {
	t.Helper()
	m, err := tasks.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	return m
}
