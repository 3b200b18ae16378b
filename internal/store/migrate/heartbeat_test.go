package migrate_test

import (
	"fmt"
	"testing"

	"github.com/taskd/taskd/internal/store/migrate"
)

// TestMigrate0014BackfillsLastSeen: a database at 0013 whose heartbeats were
// task_events rows migrates to editors' last-seen times, each its editor's
// latest heartbeat, and keeps the old rows.
func TestMigrate0014BackfillsLastSeen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openEmpty(t)
	migs := migrations(t)
	if migs[13].Version != 14 {
		t.Fatalf("migration 14 is %s", migs[13].ID())
	}
	if _, err := migrate.UpWith(ctx, db, migs[:13]); err != nil {
		t.Fatal(err)
	}
	execAll(t, db,
		`INSERT INTO editors (id, name, token_hash) VALUES (7, 'ada', REPEAT('a', 32)), (8, 'bob', REPEAT('b', 32)), (9, 'cy', REPEAT('c', 32))`,
		"INSERT INTO task_events (task_id, kind, fence, holder, editor_id, `at`) VALUES "+
			"(1, 'claimed', 1, 'editor:7', 7, '2026-01-01 09:00:00.000'), "+
			"(1, 'heartbeat', 1, 'editor:7', 7, '2026-01-01 09:00:10.000'), "+
			"(1, 'heartbeat', 1, 'editor:7', 7, '2026-01-01 09:00:20.123'), "+
			"(1, 'submitted', 1, 'editor:7', 7, '2026-01-01 09:00:25.000'), "+
			"(2, 'heartbeat', 1, 'editor:8', 8, '2026-01-02 10:00:00.500'), "+
			"(3, 'claimed', 1, 'editor:9', 9, '2026-01-03 11:00:00.000'), "+
			"(4, 'heartbeat', 1, 'worker:w:1', NULL, '2026-01-04 12:00:00.000')")

	applied, err := migrate.Up(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(migs)-13 || applied[0].Version != 14 {
		t.Fatalf("applied %v, want 0014 on", applied)
	}
	var seen []string
	if err := db.SelectContext(ctx, &seen, `SELECT CONCAT(editor_id, ' ', DATE_FORMAT(last_seen_at, '%Y-%m-%d %T.%f'))
		FROM editor_seen ORDER BY editor_id`); err != nil {
		t.Fatal(err)
	}
	// ada's latest heartbeat (not its submit, which the events still tell),
	// bob's only one; cy never sent one, and a worker has no editor.
	if want := "[7 2026-01-01 09:00:20.123000 8 2026-01-02 10:00:00.500000]"; fmt.Sprint(seen) != want {
		t.Errorf("last seen after 0014 = %v, want %s", seen, want)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM task_events WHERE kind = 'heartbeat'`); n != 4 {
		t.Errorf("%d heartbeat rows after 0014, want the 4 kept", n)
	}
}
