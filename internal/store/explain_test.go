package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// explainRow is the part of an EXPLAIN row the plan checks read.
type explainRow struct {
	ID, SelectType, Table, Type, Key, Rows, Extra string
}

func (b *bundle) explain(t *testing.T, query string, args ...any) []explainRow {
	t.Helper()
	rows, err := b.db.QueryxContext(b.ctx, "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, query)
	}
	defer rows.Close()
	var out []explainRow
	for rows.Next() {
		m := map[string]any{}
		if err := rows.MapScan(m); err != nil {
			t.Fatal(err)
		}
		s := func(k string) string {
			if v, ok := m[k].([]byte); ok {
				return string(v)
			}
			if m[k] == nil {
				return "NULL"
			}
			return fmt.Sprint(m[k])
		}
		out = append(out, explainRow{s("id"), s("select_type"), s("table"), s("type"), s("key"), s("rows"), s("Extra")})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func formatPlan(plan []explainRow) string {
	var sb strings.Builder
	sb.WriteString("| id | select_type | table | type | key | rows | Extra |\n|---|---|---|---|---|---|---|\n")
	for _, r := range plan {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s |\n", r.ID, r.SelectType, r.Table, r.Type, r.Key, r.Rows, r.Extra)
	}
	return sb.String()
}

// noFullScans fails the test if the plan reads a table (not a derived or union result)
// with a full table scan.
func noFullScans(t *testing.T, name string, plan []explainRow) {
	t.Helper()
	for _, r := range plan {
		if strings.HasPrefix(r.Table, "<") || r.Table == "NULL" {
			continue
		}
		if r.Table == "m" && strings.Contains(r.Extra, "Table function") {
			continue // a worker batch's members, read whole (see membersTableSQL)
		}
		if r.Type == "ALL" {
			t.Errorf("%s: full table scan of %s:\n%s", name, r.Table, formatPlan(plan))
		}
	}
}

// TestQueryPlans checks with EXPLAIN that the hot and sweep queries read indexes, not
// whole tables, on a table with a realistic spread of states. Run with -v to see the
// plans (internal/store/EXPLAIN.md shows them).
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	ed := b.editor(t, "alice", "c1", "c2", "c3")
	nts := make([]tasks.NewTask, 20000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%20), Priority: i % 5, Title: "t"}
	}
	ids := b.insert(t, nts...)
	// Most tasks are done; some are live or expired claims; a few are skipped.
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE id % 10 < 7`)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'w', assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL IF(id % 2 = 0, 1, -1) MINUTE WHERE id % 10 = 7`)
	b.exec(t, "INSERT INTO task_skips (task_id, editor_id, `until`) SELECT id, ?, NOW(3) + INTERVAL 1 HOUR FROM tasks WHERE id % 100 = 8", ed.ID)
	// A tenth have stages, half of them at their second.
	b.exec(t, `UPDATE tasks SET stages = 'edit,review', stage_count = 2, stage = id % 2 WHERE id % 10 = 3`)
	b.exec(t, `ANALYZE TABLE tasks, task_skips`)
	b.claim(t, ids[8], ed.Holder(), ed.ID, time.Minute) // id 9: pending

	cats := []string{"c1", "c2", "c3"}
	q, args := store.CandidatesQuery(cats, ed.ID, 16)
	plan := b.explain(t, q, args...)
	t.Logf("Candidates (3 categories, with skip memory):\n%s\n%s", q, formatPlan(plan))
	noFullScans(t, "candidates", plan)
	pendingBranches, expiredBranches := 0, 0
	for _, r := range plan {
		switch r.Key {
		case "tasks_candidate", "tasks_expiry":
			if r.Key == "tasks_candidate" {
				pendingBranches++
			} else {
				expiredBranches++
			}
			if strings.Contains(r.Extra, "filesort") {
				t.Errorf("candidate branch sorts instead of reading in index order:\n%s", formatPlan(plan))
			}
		case "PRIMARY":
			if r.Table != "s" || r.Type != "eq_ref" {
				t.Errorf("want task_skips read by eq_ref on its primary key:\n%s", formatPlan(plan))
			}
		default:
			if r.Table == "t" || r.Table == "s" {
				t.Errorf("%s read with key %q:\n%s", r.Table, r.Key, formatPlan(plan))
			}
		}
	}
	if pendingBranches != len(cats) || expiredBranches != len(cats) {
		t.Errorf("%d branches read tasks_candidate and %d tasks_expiry, want %d each (pending and expired per category):\n%s",
			pendingBranches, expiredBranches, len(cats), formatPlan(plan))
	}

	// The candidates of an editor limited to one stage read tasks_stage_candidate
	// in its order, as the others read tasks_candidate.
	q, args = store.StageCandidatesQuery(cats, ed.ID, 16, "review")
	plan = b.explain(t, q, args...)
	t.Logf("Candidates (3 categories, stage review):\n%s\n%s", q, formatPlan(plan))
	noFullScans(t, "stage candidates", plan)
	stageBranches := 0
	for _, r := range plan {
		if r.Table == "t" {
			if r.Key != "tasks_stage_candidate" || strings.Contains(r.Extra, "filesort") {
				t.Errorf("stage candidates: t read with key %q (%s), want tasks_stage_candidate in its order:\n%s", r.Key, r.Extra, formatPlan(plan))
			}
			stageBranches++
		}
	}
	if stageBranches != 2*len(cats) {
		t.Errorf("%d branches read tasks, want %d:\n%s", stageBranches, 2*len(cats), formatPlan(plan))
	}

	for _, c := range []struct {
		name, query, key string
		args             []any
	}{
		{"RecycleExpired (fenced update)", fmt.Sprintf(store.RecycleSQL, "(?, ?), (?, ?), (?, ?)"), "PRIMARY", []any{8, 1, 18, 1, 28, 1}},
		{"LiveLeases", store.LiveLeasesSQL, "tasks_expiry", []any{0, 1000}},
		{"LiveHolders", strings.Replace(store.LiveHoldersSQL, "IN (?)", "IN (?, ?, ?)", 1), "PRIMARY", []any{8, 18, 28}},
		{"PoolStats (claims)", store.StatsClaimsSQL, "tasks_expiry", []any{int64(time.Minute / time.Microsecond)}},
		{"HeldByEditor", store.HeldByEditorSQL, "tasks_editor", []any{ed.ID}},
	} {
		plan := b.explain(t, c.query, c.args...)
		t.Logf("%s:\n%s\n%s", c.name, c.query, formatPlan(plan))
		noFullScans(t, c.name, plan)
		if len(plan) != 1 || plan[0].Key != c.key {
			t.Errorf("%s: want one read of %s:\n%s", c.name, c.key, formatPlan(plan))
		}
	}

	// The recycle's lock of a batch: the expiry index read in its order (no sort)
	// in a derived table, which locks nothing, and the batch's rows locked by
	// primary key.
	plan = b.explain(t, store.RecycleLockSQL, 2000, 1000)
	t.Logf("RecycleExpired (lock batch):\n%s\n%s", store.RecycleLockSQL, formatPlan(plan))
	noFullScans(t, "lock batch", plan)
	var byExpiry, byPrimary int
	for _, r := range plan {
		switch {
		case r.Table != "tasks":
		case r.Key == "tasks_expiry" && r.SelectType == "DERIVED" && !strings.Contains(r.Extra, "filesort"):
			byExpiry++
		case r.Key == "PRIMARY" && r.Type == "eq_ref":
			byPrimary++
		default:
			t.Errorf("lock batch: tasks read by %s %s (%s):\n%s", r.Type, r.Key, r.Extra, formatPlan(plan))
		}
	}
	if byExpiry != 1 || byPrimary != 1 {
		t.Errorf("lock batch: want the expiry index read in its order, unlocked, and the batch by primary key:\n%s", formatPlan(plan))
	}

	// The counts by category: the ended and live tasks per category from
	// tasks_category_created in its order, the assigned ones from the claims'
	// range of tasks_expiry. Not the candidate key: its NULL range holds the
	// assigned and ended tasks alike.
	plan = b.explain(t, store.StatsByCategorySQL)
	t.Logf("PoolStats (by category):\n%s\n%s", store.StatsByCategorySQL, formatPlan(plan))
	noFullScans(t, "stats by category", plan)
	var keys []string
	for _, r := range plan {
		if r.Table == "tasks" {
			keys = append(keys, r.Key)
			if strings.Contains(r.Extra, "temporary") || strings.Contains(r.Extra, "filesort") {
				t.Errorf("stats by category: groups through a temporary table or a sort:\n%s", formatPlan(plan))
			}
		}
	}
	if !slices.Equal(keys, []string{"tasks_expiry", "tasks_category_created"}) {
		t.Errorf("stats by category: reads %v, want tasks_expiry then tasks_category_created:\n%s", keys, formatPlan(plan))
	}

	// A claim's lock of the editor: the editor's row by primary key, the tasks
	// that name it (all, and one whose lease passed) by tasks_editor.
	plan = b.explain(t, store.LockEditorTaskSQL, ed.ID)
	t.Logf("Claim (lock the editor):\n%s", formatPlan(plan))
	noFullScans(t, "lock the editor", plan)
	for _, r := range plan {
		want := "tasks_editor"
		if r.Table == "e" {
			want = "PRIMARY"
		}
		if r.Key != want {
			t.Errorf("lock the editor: %s read by %q, want %s:\n%s", r.Table, r.Key, want, formatPlan(plan))
		}
	}
	if len(plan) != 3 {
		t.Errorf("lock the editor: want the editor and two reads of its tasks:\n%s", formatPlan(plan))
	}
}
