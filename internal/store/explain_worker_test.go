package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// batchStatements splits a statement batch into its statements, each with its
// own arguments, leaving out the transaction's own (START TRANSACTION, SET,
// COMMIT) and the final SELECT of the batch's instant. The batch's instant,
// @taskd_now, becomes NOW(3), and its members, @taskd_members, the JSON the
// batch sets it to, so that EXPLAIN plans each as it runs.
func batchStatements(t *testing.T, query string, args []any) (stmts []string, stmtArgs [][]any) {
	t.Helper()
	members := "NULL"
	for _, s := range strings.Split(query, ";\n") {
		n := strings.Count(s, "?")
		a := args[:n]
		args = args[n:]
		if s == "SET @taskd_members = ?" {
			// The test's own JSON: ids, fences, and holders without quotes.
			members = "'" + a[0].(string) + "'"
			continue
		}
		if strings.HasPrefix(s, "START TRANSACTION") || strings.HasPrefix(s, "SET ") ||
			strings.HasPrefix(s, "COMMIT") || strings.HasPrefix(s, "SELECT CAST(@taskd_now") {
			continue
		}
		s = strings.ReplaceAll(s, "@taskd_members", members)
		stmts = append(stmts, strings.ReplaceAll(s, "@taskd_now", "NOW(3)"))
		stmtArgs = append(stmtArgs, a)
	}
	if len(args) != 0 {
		t.Fatalf("%d arguments left over after splitting the batch", len(args))
	}
	return stmts, stmtArgs
}

// firstWords is a statement's first few words, to name it.
func firstWords(s string) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(len(f), 4)], " ")
}

// TestWorkerBatchQueryPlans checks with EXPLAIN that every statement of the
// worker batches (ClaimBatch, HeartbeatBatch, Complete with results, failures,
// snoozes and dead members) reads tasks by its primary key, a range over the members' ids, on
// a table where the status indexes would look cheaper to the optimizer: no full
// scan, no other index. Run with -v to see the plans (internal/store/EXPLAIN.md).
func TestWorkerBatchQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 20000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%4), Title: "t"}
	}
	ids := b.insert(t, nts...)
	// Most tasks are done, some assigned, the rest pending: the status
	// indexes hold few rows of each status the batches look for.
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE id % 10 < 7`)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'w', assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id % 10 = 7`)
	b.exec(t, `ANALYZE TABLE tasks, task_events, task_results`)

	// 100 members: pending tasks for the claim, assigned ones for the others.
	var pending, assigned []int64
	for _, id := range ids {
		switch id % 10 {
		case 8, 9:
			if len(pending) < 100 {
				pending = append(pending, id)
			}
		case 7:
			if len(assigned) < 100 {
				assigned = append(assigned, id)
			}
		}
	}
	var claims []tasks.ClaimParams
	for i, id := range pending {
		claims = append(claims, tasks.ClaimParams{TaskID: id, Status: tasks.StatusPending, Holder: fmt.Sprintf("worker:w:%d", i), Lease: time.Minute})
	}
	var beats []tasks.HeartbeatParams
	var outcomes []tasks.Outcome
	for i, id := range assigned {
		beats = append(beats, tasks.HeartbeatParams{TaskID: id, Fence: 1, Holder: "w", Lease: time.Minute})
		o := tasks.Outcome{TaskID: id, Fence: 1, Holder: "w"}
		switch i % 4 {
		case 0:
			o.Result = json.RawMessage(`{"ok":true}`)
		case 1:
			o.Err, o.Backoff = "boom", time.Second
		case 2:
			o.Snooze = &tasks.Snooze{For: time.Duration(i) * time.Millisecond, Max: 5}
		default:
			o.Err, o.Dead = "fatal", true
		}
		outcomes = append(outcomes, o)
	}

	type batch struct {
		name  string
		query string
		args  []any
		err   error
	}
	var batches []batch
	q, args, err := store.ClaimBatchSQL(b.store, claims)
	batches = append(batches, batch{"ClaimBatch", q, args, err})
	q, args, err = store.HeartbeatBatchSQL(b.store, beats)
	batches = append(batches, batch{"HeartbeatBatch", q, args, err})
	q, args, err = store.CompleteSQL(b.store, outcomes)
	batches = append(batches, batch{"Complete", q, args, err})

	for _, bt := range batches {
		if bt.err != nil {
			t.Fatalf("%s: %v", bt.name, bt.err)
		}
		stmts, stmtArgs := batchStatements(t, bt.query, bt.args)
		// (HeartbeatBatch's are two: its locking report and the UPDATE.)
		if len(stmts) < 2 {
			t.Fatalf("%s: %d statements, want the whole batch:\n%s", bt.name, len(stmts), bt.query)
		}
		for i, s := range stmts {
			name := bt.name + ": " + firstWords(s)
			plan := b.explain(t, s, stmtArgs[i]...)
			t.Logf("%s:\n%s", name, formatPlan(plan))
			noFullScans(t, name, plan)
			read := 0
			for _, r := range plan {
				switch r.Table {
				case "tasks":
					read++
					if r.Key != "PRIMARY" || (r.Type != "range" && r.Type != "eq_ref" && r.Type != "const") {
						t.Errorf("%s: tasks read by %s (%s), want a range of the primary key:\n%s", name, r.Key, r.Type, formatPlan(plan))
					}
				case "p":
					if r.Key != "PRIMARY" && !strings.Contains(r.Extra, "const table") {
						t.Errorf("%s: paused_categories read by %q, want its primary key:\n%s", name, r.Key, formatPlan(plan))
					}
				}
			}
			if read != 1 {
				t.Errorf("%s: tasks read %d times, want once:\n%s", name, read, formatPlan(plan))
			}
		}
	}
}
