package store_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// hotColumns are the columns of tasks a claim, a heartbeat, a recycle or a release
// writes (tasks.claimUpdateSQL, recycleSQL, ...). A secondary key holding one of them
// moves an entry on each of those writes.
// pool_status and pending_due_at are generated from status, and move with it from
// and to pending.
var hotColumns = []string{"status", "pool_status", "pending_due_at", "fence", "holder", "editor_id", "assigned_at", "lease_expires_at",
	"attempts", "trace_context", "updated_at", "run_after", "claim_unlogged"}

// TestKeysAClaimMoves pins the secondary keys of tasks that hold a column the claim
// path writes: those the claim path reads (tasks_candidate, tasks_expiry,
// tasks_editor), the holder's list key, and the two that keep the queue gauges off
// the pool (tasks_claimable, tasks_overdue: migration 0015). The list keys by status hold
// ended_status, which claims and recycles leave NULL (migration 0008): a new key on a
// hot column costs every claim and recycle an index write, and must be added here on
// purpose.
func TestKeysAClaimMoves(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	var rows []struct {
		Key    string `db:"index_name"`
		Column string `db:"column_name"`
	}
	if err := b.db.SelectContext(b.ctx, &rows, `SELECT index_name, column_name FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'tasks' AND index_name <> 'PRIMARY'`); err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, r := range rows {
		if slices.Contains(hotColumns, strings.ToLower(r.Column)) && !slices.Contains(moved, r.Key) {
			moved = append(moved, r.Key)
		}
	}
	slices.Sort(moved)
	want := []string{"tasks_candidate", "tasks_claimable", "tasks_editor", "tasks_expiry", "tasks_holder_created", "tasks_overdue"}
	if !slices.Equal(moved, want) {
		t.Errorf("keys of tasks holding a column a claim writes: %v, want %v", moved, want)
	}
}

// TestEndedStatus checks the generated column the list keys hold: NULL while a task
// is pending or assigned, its status once it is done, dead or cancelled, and NULL
// again when a dead task is requeued.
func TestEndedStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ended := func(id int64) string {
		t.Helper()
		var s *string
		if err := b.db.GetContext(b.ctx, &s, `SELECT ended_status FROM tasks WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return "NULL"
		}
		return *s
	}
	check := func(id int64, when, want string) {
		t.Helper()
		if got := ended(id); got != want {
			t.Errorf("%s: ended_status %s, want %s", when, got, want)
		}
	}
	ids := b.insert(t, tasks.NewTask{Category: "c", Title: "a"}, tasks.NewTask{Category: "c", Title: "b"},
		tasks.NewTask{Category: "c", Title: "c"})
	check(ids[0], "pending", "NULL")
	b.claim(t, ids[0], "w", 0, time.Minute)
	check(ids[0], "assigned", "NULL")
	b.expireLease(t, ids[0])
	if rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{}); err != nil || len(rs) != 1 {
		t.Fatalf("recycle: %v, %v", rs, err)
	}
	check(ids[0], "recycled", "NULL")
	c := b.claim(t, ids[0], "w", 0, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: ids[0], Fence: c.Fence, Holder: "w", Result: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	check(ids[0], "done", "done")
	b.dead(t, ids[1], "w")
	check(ids[1], "dead", "dead")
	b.exec(t, `UPDATE tasks SET status = 'cancelled' WHERE id = ?`, ids[2])
	check(ids[2], "cancelled", "cancelled")
	b.exec(t, `UPDATE tasks SET status = 'pending' WHERE id = ?`, ids[1])
	check(ids[1], "requeued", "NULL")
}

// keyEntries returns, per secondary key of tasks, the entry task id has in it: the
// values of the key's columns, generated ones included. InnoDB moves a row's entry in a
// secondary key (delete-marks it and inserts another) exactly when an UPDATE changes
// one of them.
func (b *bundle) keyEntries(t *testing.T, id int64) map[string]string {
	t.Helper()
	var cols []struct {
		Key    string `db:"index_name"`
		Column string `db:"column_name"`
	}
	if err := b.db.SelectContext(b.ctx, &cols, `SELECT index_name, column_name FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'tasks' AND index_name <> 'PRIMARY'
		ORDER BY index_name, seq_in_index`); err != nil {
		t.Fatal(err)
	}
	entries := make(map[string]string)
	for _, c := range cols {
		var v *string
		if err := b.db.GetContext(b.ctx, &v, `SELECT CAST(`+c.Column+` AS CHAR) FROM tasks WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		s := "NULL"
		if v != nil {
			s = "'" + *v + "'"
		}
		entries[c.Key] += s + ","
	}
	return entries
}

// movedKeys returns the keys whose entry differs between before and after, sorted.
func movedKeys(before, after map[string]string) []string {
	var moved []string
	for k, v := range before {
		if after[k] != v {
			moved = append(moved, k)
		}
	}
	slices.Sort(moved)
	return moved
}

// TestKeysAWorkerJobMoves pins the secondary key entries a worker's job moves in
// tasks: its claim (ClaimBatch) and its completion (Complete, done). An entry moved
// costs mysqld 4-9 µs, about a twentieth of the job; a key that starts to move on
// either write must be added here on purpose. (The job's task has no due_at: a claim
// of one with a due_at also moves its tasks_overdue entry.)
func TestKeysAWorkerJobMoves(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insert(t, tasks.NewTask{Category: "jobs", Title: "a"})[0]
	pending := b.keyEntries(t, id)
	rs, err := b.store.ClaimBatch(b.ctx, b.claimParams(t, id))
	if err != nil || rs[0].Err != nil {
		t.Fatalf("claim batch: %v, %+v", err, rs)
	}
	assigned := b.keyEntries(t, id)
	done, err := b.store.Complete(b.ctx, []tasks.Outcome{{TaskID: id, Fence: rs[0].Claim.Fence, Holder: "worker:w:0", Result: []byte(`{}`)}})
	if err != nil || done[0].Err != nil {
		t.Fatalf("complete: %v, %+v", err, done)
	}
	ended := b.keyEntries(t, id)

	if got, want := movedKeys(pending, assigned), []string{"tasks_candidate", "tasks_claimable", "tasks_expiry", "tasks_holder_created"}; !slices.Equal(got, want) {
		t.Errorf("a claim moves the entries of %v, want %v", got, want)
	}
	if got, want := movedKeys(assigned, ended), []string{"tasks_category_created", "tasks_done", "tasks_ended_created", "tasks_expiry"}; !slices.Equal(got, want) {
		t.Errorf("a completion moves the entries of %v, want %v", got, want)
	}
}
