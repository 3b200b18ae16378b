package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// resultRow is what a task's result row says, but for the times.
type resultRow struct {
	Fence      int64  `db:"fence"`
	Holder     string `db:"holder"`
	Result     string `db:"result"`
	Stage      int    `db:"stage"`
	ClaimTimed bool   `db:"claim_timed"`
}

func (b *bundle) resultRow(t *testing.T, id int64) resultRow {
	t.Helper()
	var r resultRow
	if err := b.db.GetContext(b.ctx, &r, `SELECT fence, holder, result, stage, claimed_at IS NOT NULL AS claim_timed
		FROM task_results WHERE task_id = ?`, id); err != nil {
		t.Fatalf("result of task %d: %v", id, err)
	}
	r.Result = strings.ReplaceAll(r.Result, " ", "")
	return r
}

// TestCompleteTx: CompleteTx writes in the caller's transaction what Complete
// writes for a success (the result row with the claim's time, the outbox's
// record, the task done, no event), locks the claim's row until the
// transaction ends, and commits only with it; a claim that is not live is
// refused with ErrStale and nothing is written.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}})
	b.exec(t, "CREATE TABLE effects (task_id BIGINT UNSIGNED NOT NULL, fence BIGINT UNSIGNED NOT NULL)")
	ids := b.insert(t,
		tasks.NewTask{Category: "jobs", Title: "by Complete"}, tasks.NewTask{Category: "jobs", Title: "by CompleteTx"},
		tasks.NewTask{Category: "jobs", Title: "stale"}, tasks.NewTask{Category: "jobs", Title: "rolled back"})
	ps := b.claimParams(t, ids...)
	res, err := b.store.ClaimBatch(b.ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	outcome := func(i int) tasks.Outcome {
		c := res[i].Claim
		return tasks.Outcome{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: json.RawMessage(`{"n":1}`)}
	}
	if done, err := b.store.Complete(b.ctx, []tasks.Outcome{outcome(0)}); err != nil || done[0].Err != nil {
		t.Fatalf("complete: %v %+v", err, done)
	}

	tx, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(b.ctx, "INSERT INTO effects VALUES (?, ?)", ids[1], res[1].Claim.Fence); err != nil {
		t.Fatal(err)
	}
	ended, err := b.store.CompleteTx(b.ctx, tx, outcome(1))
	if err != nil || ended.Status != tasks.StatusDone || ended.TaskID != ids[1] || ended.Category != "jobs" {
		t.Fatalf("CompleteTx: %+v, %v; want the task done", ended, err)
	}
	// Until the COMMIT, the row is locked and nothing shows outside.
	if _, err := b.db.ExecContext(b.ctx, "SELECT id FROM tasks WHERE id = ? FOR UPDATE NOWAIT", ids[1]); err == nil {
		t.Fatal("the claim's row is not locked by the transaction of CompleteTx")
	}
	if got := b.task(t, ids[1]); got.Status != tasks.StatusAssigned {
		t.Fatalf("task %s before the commit, want assigned", got.Status)
	}
	if ok, err := b.store.Submitted(b.ctx, ids[1], res[1].Claim.Fence); err != nil || ok {
		t.Fatalf("submitted before the commit: %v, %v", ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.store.Submitted(b.ctx, ids[1], res[1].Claim.Fence); err != nil || !ok {
		t.Fatalf("submitted after the commit: %v, %v; want true", ok, err)
	}
	// What Complete writes for a success.
	for _, i := range []int{0, 1} {
		id := ids[i]
		got, want := b.resultRow(t, id), resultRow{Fence: res[i].Claim.Fence, Holder: ps[i].Holder, Result: `{"n":1}`, ClaimTimed: true}
		if got != want {
			t.Errorf("task %d's result %+v, want %+v", id, got, want)
		}
		if task := b.task(t, id); task.Status != tasks.StatusDone || task.DoneAt == nil {
			t.Errorf("task %d %s, want done", id, task.Status)
		}
		if n := b.count(t, "SELECT COUNT(*) FROM task_events WHERE task_id = ?", id); n != 0 {
			t.Errorf("task %d has %d events, want none (its result stands for them)", id, n)
		}
		if n := b.count(t, "SELECT COUNT(*) FROM webhook_outbox WHERE task_id = ? AND kind = 'submitted' AND fence = ?", id, res[i].Claim.Fence); n != 1 {
			t.Errorf("task %d has %d outbox records of its submit, want 1", id, n)
		}
	}
	if n := b.count(t, "SELECT COUNT(*) FROM effects WHERE task_id = ?", ids[1]); n != 1 {
		t.Fatalf("%d effects committed with the outcome, want 1", n)
	}

	// A claim that is no longer live: its row moved on (force released).
	if _, err := b.store.ForceRelease(b.ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	tx, err = b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CompleteTx(b.ctx, tx, outcome(2)); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("CompleteTx of a revoked claim: %v, want ErrStale", err)
	}
	if err := tx.Commit(); err != nil { // even committed, it wrote nothing
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", ids[2]); n != 0 {
		t.Fatalf("a refused CompleteTx wrote %d results", n)
	}
	// A claim whose lease passed, even if nobody took it over.
	b.expireLease(t, ids[3])
	tx, err = b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CompleteTx(b.ctx, tx, outcome(3)); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("CompleteTx of an expired claim: %v, want ErrStale", err)
	}
	_ = tx.Rollback()

	// Rolled back, nothing stays; the claim is live and completes as usual.
	b.exec(t, "UPDATE tasks SET lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id = ?", ids[3])
	tx, err = b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.CompleteTx(b.ctx, tx, outcome(3)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := b.task(t, ids[3]); got.Status != tasks.StatusAssigned || b.count(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", ids[3]) != 0 {
		t.Fatalf("after a rollback: task %s with %d results, want assigned without", got.Status, b.count(t, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", ids[3]))
	}
	if done, err := b.store.Complete(b.ctx, []tasks.Outcome{outcome(3)}); err != nil || done[0].Err != nil {
		t.Fatalf("complete after a rolled back CompleteTx: %v %+v", err, done)
	}
}

// TestCompleteTxRefusesForeignSessions: a transaction whose session is not in
// UTC, or on another database, or an outcome without a result, is refused
// with ErrInvalid, writing nothing.
func TestCompleteTxRefusesForeignSessions(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t, tasks.NewTask{Category: "jobs", Title: "a"})
	claim := b.claim(t, ids[0], "worker:w:0", 0, time.Minute)
	o := tasks.Outcome{TaskID: ids[0], Fence: claim.Fence, Holder: claim.Task.Holder, Result: json.RawMessage(`1`)}
	conn, err := b.db.Connx(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range []struct {
		what, set, reset string
	}{
		{"a session in another time zone", "SET time_zone = '+01:00'", "SET time_zone = '+00:00'"},
		{"a session on another database", "USE information_schema", "USE " + b.database(t)},
	} {
		if _, err := conn.ExecContext(b.ctx, c.set); err != nil {
			t.Fatal(err)
		}
		tx, err := conn.BeginTxx(b.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.CompleteTx(b.ctx, tx, o); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("CompleteTx in %s: %v, want ErrInvalid", c.what, err)
		}
		_ = tx.Rollback()
		if _, err := conn.ExecContext(b.ctx, c.reset); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	noResult := o
	noResult.Result = nil
	if _, err := b.store.CompleteTx(b.ctx, tx, noResult); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("CompleteTx without a result: %v, want ErrInvalid", err)
	}
	if got := b.task(t, ids[0]); got.Status != tasks.StatusAssigned {
		t.Fatalf("task %s after refusals, want assigned", got.Status)
	}
}

// database returns the name of b's database.
func (b *bundle) database(t *testing.T) string {
	t.Helper()
	var name string
	if err := b.db.GetContext(b.ctx, &name, "SELECT DATABASE()"); err != nil {
		t.Fatal(err)
	}
	return name
}
