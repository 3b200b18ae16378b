package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
	"github.com/taskd/taskd/tasks/migrate"
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

	migrateCmd(t, env, exitOK, `
VERSION  NAME                     STATE    APPLIED (UTC)  CHECKSUM
0001     initial                  pending  -              -
0002     tasks_editor_not_unique  pending  -              -
0003     task_keys_due_and_lists  pending  -              -
0004     requeue_cancel_pause     pending  -              -

`[1:]+where+" has no migration applied, 4 pending: run 'taskd migrate'\n", "-status")

	migrateCmd(t, env, exitOK, `
applied  0001  initial                  DUR
applied  0002  tasks_editor_not_unique  DUR
applied  0003  task_keys_due_and_lists  DUR
applied  0004  requeue_cancel_pause     DUR
`[1:]+where+" is at version 0004\n")

	migrateCmd(t, env, exitOK, where+" is up to date at version 0004: nothing to apply\n")

	migrateCmd(t, env, exitOK, `
VERSION  NAME                     STATE    APPLIED (UTC)        CHECKSUM
0001     initial                  applied  YYYY-MM-DD hh:mm:ss  ok
0002     tasks_editor_not_unique  applied  YYYY-MM-DD hh:mm:ss  ok
0003     task_keys_due_and_lists  applied  YYYY-MM-DD hh:mm:ss  ok
0004     requeue_cancel_pause     applied  YYYY-MM-DD hh:mm:ss  ok

`[1:]+where+" is up to date at version 0004\n", "-status")
}

func TestE2EMigrateAdopts(t *testing.T) {
	t.Parallel()
	env, db, where := migrateEnv(t)
	// A database made by schema.sql before versioned migrations.
	if _, err := db.ExecContext(t.Context(), binaryMigrations(t)[0].SQL); err != nil {
		t.Fatal(err)
	}

	migrateCmd(t, env, exitOK, `
VERSION  NAME                     STATE    APPLIED (UTC)  CHECKSUM
0001     initial                  adopt    -              -
0002     tasks_editor_not_unique  pending  -              -
0003     task_keys_due_and_lists  pending  -              -
0004     requeue_cancel_pause     pending  -              -

`[1:]+where+" has tables made before versioned migrations: 'taskd migrate' adopts them as 0001 and applies 3 more\n", "-status")

	migrateCmd(t, env, exitOK, `
adopted  0001  initial                  tables made before versioned migrations
applied  0002  tasks_editor_not_unique  DUR
applied  0003  task_keys_due_and_lists  DUR
applied  0004  requeue_cancel_pause     DUR
`[1:]+where+" is at version 0004\n")
}

func TestE2EMigrateRefuses(t *testing.T) {
	t.Parallel()
	env, db, where := migrateEnv(t)
	if _, _, code := run(t, env, "migrate"); code != exitOK {
		t.Fatalf("migrate: exit %d", code)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE taskd_schema_migrations SET checksum = REPEAT('e', 64) WHERE version = 2`); err != nil {
		t.Fatal(err)
	}

	stderr := migrateCmd(t, env, exitFailure, `
VERSION  NAME                     STATE    APPLIED (UTC)        CHECKSUM
0001     initial                  applied  YYYY-MM-DD hh:mm:ss  ok
0002     tasks_editor_not_unique  applied  YYYY-MM-DD hh:mm:ss  EDITED
0003     task_keys_due_and_lists  applied  YYYY-MM-DD hh:mm:ss  ok
0004     requeue_cancel_pause     applied  YYYY-MM-DD hh:mm:ss  ok

`[1:]+where+" is at version 0004: 'taskd migrate' refuses it (see below)\n", "-status")
	if want := "taskd migrate: applied migrations differ from this binary's: migration 0002 was edited after it was applied"; !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr %q, want it to start with %q", stderr, want)
	}
	stderr = migrateCmd(t, env, exitFailure, "")
	if !strings.Contains(stderr, "migration 0002 was edited after it was applied") {
		t.Errorf("migrate: stderr %q", stderr)
	}

	if _, err := db.ExecContext(t.Context(), `UPDATE taskd_schema_migrations SET checksum = ? WHERE version = 2`, binaryMigrations(t)[1].Checksum); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `INSERT INTO taskd_schema_migrations (version, name, checksum, applied_at)
		VALUES (5, 'from_the_future', REPEAT('f', 64), UTC_TIMESTAMP(3))`); err != nil {
		t.Fatal(err)
	}
	stderr = migrateCmd(t, env, exitFailure, `
VERSION  NAME                     STATE    APPLIED (UTC)        CHECKSUM
0001     initial                  applied  YYYY-MM-DD hh:mm:ss  ok
0002     tasks_editor_not_unique  applied  YYYY-MM-DD hh:mm:ss  ok
0003     task_keys_due_and_lists  applied  YYYY-MM-DD hh:mm:ss  ok
0004     requeue_cancel_pause     applied  YYYY-MM-DD hh:mm:ss  ok
0005     from_the_future          applied  YYYY-MM-DD hh:mm:ss  unknown to this binary

`[1:]+where+" is at version 0005: 'taskd migrate' refuses it (see below)\n", "-status")
	if want := "taskd migrate: database schema is newer than this binary: a newer taskd applied 0005 from_the_future"; !strings.HasPrefix(stderr, want) {
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
