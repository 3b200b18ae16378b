package migrate_test

import (
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store/migrate"
)

// TestMigrate0017And0018KeepLiveTasks: a database at 0016 with a pending, an
// assigned (with its result-less claim), a done (with its result) and a dead
// task migrates through 0017 and 0018 with every row as it was, no claim
// left marked unlogged, no result without its task, and the new keys' columns
// set from each task's status: the pending task (and only it) in the
// candidate range, the assigned one in the expiry range.
func TestMigrate0017And0018KeepLiveTasks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	migs := migrations(t)
	if migs[16].Version != 17 || migs[17].Version != 18 {
		t.Fatalf("migrations 17 and 18 are %s and %s", migs[16].ID(), migs[17].ID())
	}
	if _, err := migrate.UpWith(ctx, db, migs[:16]); err != nil {
		t.Fatal(err)
	}
	execAll(t, db,
		`INSERT INTO tasks (id, category, title, payload, status, fence, holder, assigned_at, lease_expires_at, done_at, due_at) VALUES
			(1, 'c', 'pending', '{}', 'pending', 0, NULL, NULL, NULL, NULL, '2030-01-01 00:00:00'),
			(2, 'c', 'assigned', '{}', 'assigned', 1, 'worker:w:1', NOW(3), NOW(3) + INTERVAL 1 MINUTE, NULL, '2030-01-01 00:00:00'),
			(3, 'c', 'done', '{}', 'done', 1, 'worker:w:2', NOW(3), NULL, NOW(3), NULL),
			(4, 'c', 'dead', '{}', 'dead', 5, 'worker:w:3', NOW(3), NULL, NOW(3), NULL)`,
		`INSERT INTO task_results (task_id, fence, holder, result) VALUES (3, 1, 'worker:w:2', '{}')`)
	before := rowsOf(t, db)

	if _, err := migrate.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	if after := rowsOf(t, db); after != before {
		t.Errorf("tasks after 0017 and 0018:\n%s\nwant as before:\n%s", after, before)
	}
	var keys []string
	if err := db.SelectContext(ctx, &keys, `SELECT CONCAT(id, ' ', COALESCE(pool_status, '-'), ' ', COALESCE(DATE_FORMAT(pending_due_at, '%Y'), '-'), ' ', claim_unlogged)
		FROM tasks ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if want := "[1 pending 2030 0 2 - - 0 3 - - 0 4 dead - 0]"; fmt.Sprint(keys) != want {
		t.Errorf("pool_status, pending_due_at, claim_unlogged = %v, want %s", keys, want)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM tasks FORCE INDEX (tasks_candidate) WHERE pool_status = 'pending' AND category = 'c'`); n != 1 {
		t.Errorf("%d tasks in the candidate range after 0018, want the pending one", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM tasks FORCE INDEX (tasks_expiry) WHERE status = 'assigned' AND category = 'c'`); n != 1 {
		t.Errorf("%d tasks in the expiry range after 0018, want the assigned one", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM task_results r LEFT JOIN tasks t ON t.id = r.task_id WHERE t.id IS NULL`); n != 0 {
		t.Errorf("%d results without their task after 0017 and 0018", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM task_results WHERE claimed_at IS NULL`); n != 1 {
		t.Errorf("%d results without claimed_at, want the one written before 0017", n)
	}
}

// rowsOf is the tasks' columns that every migration must keep, one line a
// task.
func rowsOf(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var rows []string
	if err := db.SelectContext(t.Context(), &rows, `SELECT CONCAT_WS(' ', id, category, status, fence, COALESCE(holder, '-'),
		COALESCE(assigned_at, '-'), COALESCE(lease_expires_at, '-'), COALESCE(done_at, '-'), COALESCE(due_at, '-'), run_after)
		FROM tasks ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(rows)
}
