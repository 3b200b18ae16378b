package store_test

import (
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// A batch that fails part way must leave nothing written and no transaction open on
// the connection it goes back to the pool with, whether the failing statement comes
// before or after the batch's SELECT.
func TestBatchFailurePartWayRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	// One connection, so the statements after the batch run on the batch's own
	// connection (or on a new one, if the batch discarded it).
	b.db.SetMaxOpenConns(1)

	const insert = `INSERT INTO task_events (id, task_id, kind, fence) VALUES (424242, ?, 'heartbeat', 0)`
	for name, query := range map[string]string{
		"before the select": "START TRANSACTION;\n" + insert + ";\n" + insert + ";\nSELECT 1 AS one;\nCOMMIT",
		"after the select":  "START TRANSACTION;\n" + insert + ";\nSELECT 1 AS one;\n" + insert + ";\nCOMMIT",
	} {
		scanned := false
		err := store.Batch(b.store, b.ctx, query, []any{id, id}, func(rows *sqlx.Rows) error {
			scanned = true
			for rows.Next() {
			}
			return rows.Err()
		})
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1062 {
			t.Errorf("%s: batch error = %v, want the duplicate key error", name, err)
		}
		if want := name == "after the select"; scanned != want {
			t.Errorf("%s: scan called = %v, want %v", name, scanned, want)
		}
		var inTx int
		if err := b.db.GetContext(b.ctx, &inTx, `SELECT @@in_transaction`); err != nil {
			t.Fatal(err)
		}
		if inTx != 0 {
			t.Errorf("%s: the connection went back to the pool inside a transaction", name)
		}
		if evs := b.events(t, id); len(evs) != 0 {
			t.Errorf("%s: events = %+v, want none (rolled back)", name, evs)
		}
	}

	// A batch that succeeds commits.
	err := store.Batch(b.store, b.ctx, "START TRANSACTION;\n"+insert+";\nSELECT ROW_COUNT() AS n;\nCOMMIT", []any{id}, func(rows *sqlx.Rows) error {
		var n int
		if !rows.Next() {
			return errors.New("no row")
		}
		if err := rows.Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("ROW_COUNT() after the INSERT = %d, want 1", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if evs := b.events(t, id); len(evs) != 1 {
		t.Errorf("events = %+v, want the one committed", evs)
	}
}

// An editor's skip keeps it from claiming the task on either path, changes nothing,
// and leaves the task to others.
func TestClaimRefusesTaskTheEditorSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	alice := b.editor(t, "alice", "news")
	bob := b.editor(t, "bob", "news")
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, alice.Holder(), alice.ID, time.Minute)
	if _, err := b.store.Release(b.ctx, tasks.ReleaseParams{TaskID: id, Fence: c.Fence, Holder: alice.Holder(), Skip: true}); err != nil {
		t.Fatal(err)
	}
	before := b.snapshot(t, id)
	for name, status := range claimPaths {
		_, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: c.Fence, Status: status, Holder: alice.Holder(), EditorID: alice.ID, Lease: time.Minute})
		wantErr(t, name+": claim of a skipped task", err, tasks.ErrSkipped)
	}
	b.unchanged(t, id, before)
	if got := b.claim(t, id, bob.Holder(), bob.ID, time.Minute); got.Fence != c.Fence+1 {
		t.Errorf("bob's claim fence = %d, want %d", got.Fence, c.Fence+1)
	}
}

// A batch whose answer ends before the results its caller reads is never taken
// for a success, nor for an internal error: on Galera, where its COMMIT goes
// apart, it is rolled back and run again as a deadlock victim (ErrBusy when it
// keeps coming back short), and nothing of it is committed; elsewhere, where
// the COMMIT was in the batch, its outcome is unknown and the connection is
// dropped (driver.ErrBadConn, an unavailable store).
func TestBatchShortAnswer(t *testing.T) {
	t.Parallel()
	const query = "START TRANSACTION;\nINSERT INTO tasks (category, title, payload) VALUES ('short', 't', '{}');\nSELECT 1 AS one;\nCOMMIT"
	b := setup(t, store.Config{})
	if err := store.RunBatch(b.ctx, b.store, query, nil, 2); !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("short answer: %v, want driver.ErrBadConn", err)
	}
	if got := b.count(t, `SELECT COUNT(*) FROM tasks WHERE category = 'short'`); got != 1 {
		t.Errorf("tasks written by the batch whose COMMIT ran = %d, want 1", got)
	}

	g := setup(t, store.Config{})
	store.ActAsGalera(g.store)
	err := store.RunBatch(g.ctx, g.store, query, nil, 3)
	if !errors.Is(err, tasks.ErrBusy) {
		t.Errorf("short answer on Galera: %v, want ErrBusy after retries", err)
	}
	if got := g.count(t, `SELECT COUNT(*) FROM tasks WHERE category = 'short'`); got != 0 {
		t.Errorf("tasks committed by a batch whose answer was short = %d, want 0", got)
	}
	// One result for the one SELECT; the transaction check follows it.
	if err := store.RunBatch(g.ctx, g.store, query, nil, 1); err != nil {
		t.Errorf("a whole answer on Galera: %v", err)
	}
	if got := g.count(t, `SELECT COUNT(*) FROM tasks WHERE category = 'short'`); got != 1 {
		t.Errorf("tasks committed by a whole batch on Galera = %d, want 1", got)
	}
}
