package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/store"
)

func TestE2ECancel(t *testing.T) {
	t.Parallel()
	env := servicesEnv(t)
	ctx := context.Background()
	db, err := store.Open(ctx, strings.TrimPrefix(env[0], "TASKD_MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	add := func(title string) string {
		t.Helper()
		res, err := db.ExecContext(ctx, `INSERT INTO tasks (category, title, payload) VALUES ('news', ?, '{}')`, title)
		if err != nil {
			t.Fatal(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(id, 10)
	}
	status := func(id string) string {
		t.Helper()
		var s string
		if err := db.GetContext(ctx, &s, `SELECT status FROM tasks WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		return s
	}
	pending, running := add("pending"), add("running")
	// A worker's claim, as its batch claim writes it.
	if _, err := db.ExecContext(ctx, `UPDATE tasks SET status = 'assigned', fence = 1, attempts = 1, holder = 'worker:w1:0',
		assigned_at = NOW(3), lease_expires_at = NOW(3) + INTERVAL 1 MINUTE, claim_unlogged = 1 WHERE id = ?`, running); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"cancel"}, "want one TASK, got 0 arguments"},
		{[]string{"cancel", pending, running}, "want one TASK, got 2 arguments"},
		{[]string{"cancel", "x"}, `TASK must be a task id, a positive integer, got "x"`},
		{[]string{"cancel", "0"}, "TASK must be a task id"},
	} {
		_, stderr, code := run(t, env, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.says) {
			t.Errorf("taskd %q: exit %d, stderr %q; want 2 saying %q", c.args, code, stderr, c.says)
		}
	}
	if status(pending) != "pending" || status(running) != "assigned" {
		t.Fatal("refused commands changed tasks")
	}

	for _, s := range []struct {
		args []string
		code int
		out  string // stdout, or stderr for a failure
		id   string
	}{
		{[]string{"cancel", pending}, exitOK, "cancelled task " + pending + "\n", pending},
		{[]string{"cancel", "-reason", "withdrawn", running}, exitOK, "cancelled task " + running + "; the claim of worker:w1:0 it was under (fence 1) ended\n", running},
		{[]string{"cancel", running}, exitFailure, "task " + running + " is cancelled: it has ended", running},
		{[]string{"cancel", "999999"}, exitFailure, "task 999999 does not exist", ""},
	} {
		stdout, stderr, code := run(t, env, s.args...)
		got := stdout
		if s.code != exitOK {
			got = stderr
		}
		if code != s.code || !strings.Contains(got, s.out) {
			t.Errorf("taskd %q: exit %d, stdout %q, stderr %q; want %d saying %q", s.args, code, stdout, stderr, s.code, s.out)
		}
		if s.id != "" && status(s.id) != "cancelled" {
			t.Errorf("after taskd %q: task %s is %s, want cancelled", s.args, s.id, status(s.id))
		}
	}
	var detail string
	if err := db.GetContext(ctx, &detail, `SELECT detail FROM task_events WHERE task_id = ? AND kind = 'cancelled' AND fence = 1 AND holder = 'worker:w1:0'`, running); err != nil {
		t.Fatalf("the running task's cancelled event: %v", err)
	}
	if detail != "by engine: withdrawn" {
		t.Errorf("detail %q, want %q", detail, "by engine: withdrawn")
	}
}

// TestE2ECancelByFilter: taskd cancel -category cancels a category's tasks,
// pending and running, and says how many of each; -dry-run counts them.
func TestE2ECancelByFilter(t *testing.T) {
	t.Parallel()
	env := servicesEnv(t)
	ctx := context.Background()
	db, err := store.Open(ctx, strings.TrimPrefix(env[0], "TASKD_MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO tasks (category, title, payload) VALUES ('wire', 'a', '{}'), ('wire', 'b', '{}'), ('wire', 'c', '{}'), ('other', 'd', '{}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE tasks SET status = 'assigned', fence = 1, attempts = 1, holder = 'worker:w1:0',
		assigned_at = NOW(3), lease_expires_at = NOW(3) + INTERVAL 1 MINUTE, claim_unlogged = 1 WHERE title = 'c'`); err != nil {
		t.Fatal(err)
	}
	count := func(category, status string) int {
		t.Helper()
		var n int
		if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM tasks WHERE category = ? AND status = ?`, category, status); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"cancel", "-category", "wire", "7"}, "want no TASK with -category"},
		{[]string{"cancel", "-dry-run", "7"}, "go with -category"},
		{[]string{"cancel", "-category", "wire", "-status", "dead"}, "status must be pending or assigned"},
		{[]string{"cancel", "-category", "wire", "-created-before", "yesterday"}, "-created-before must be an RFC 3339 time"},
	} {
		_, stderr, code := run(t, env, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.says) {
			t.Errorf("taskd %q: exit %d, stderr %q; want 2 saying %q", c.args, code, stderr, c.says)
		}
	}
	stdout, stderr, code := run(t, env, "cancel", "-category", "wire", "-dry-run")
	if code != exitOK || stdout != "would cancel 3 tasks of wire: 2 pending, 1 running\n" || count("wire", "cancelled") != 0 {
		t.Errorf("dry run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, env, "cancel", "-category", "wire", "-reason", "feed withdrawn")
	if code != exitOK || stdout != "cancelled 3 tasks of wire: 2 pending, 1 running\n" {
		t.Errorf("cancel: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if count("wire", "cancelled") != 3 || count("other", "pending") != 1 {
		t.Errorf("after the cancel: %d of wire cancelled, %d of other pending; want 3 and 1", count("wire", "cancelled"), count("other", "pending"))
	}
}
