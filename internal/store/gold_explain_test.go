package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestGoldQueryPlans checks with EXPLAIN that the gold reads read ranges of
// their indexes, never a whole table or index, on 6,000 tasks of six
// categories, 20 gold tasks in each of three, 3,000 answered copies and 60
// copies left pending. Run with -v to see the plans (internal/store/EXPLAIN.md
// shows them).
func TestGoldQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 6000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%6), Title: "t"}
	}
	ids := b.insert(t, nts...)
	ed := b.editor(t, "alice", "c0", "c1", "c2")
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE id % 10 < 6`)
	// Gold tasks: 20 in each of c0..c2, held out of the pool.
	b.exec(t, `INSERT INTO gold_tasks (task_id, category, answer)
SELECT id, category, '{"decision":"approve"}' FROM tasks WHERE id BETWEEN ? AND ? AND category IN ('c0', 'c1', 'c2')`, ids[0], ids[119])
	b.exec(t, `UPDATE tasks SET run_after = ? WHERE id IN (SELECT task_id FROM gold_tasks) AND status = 'pending'`, tasks.GoldRunAfter)
	// 3,000 answered copies by 150 editors, and 60 left pending.
	b.exec(t, `INSERT INTO gold_copies (copy_id, gold_id, editor_id, category, answered_at, correct)
SELECT t.id, g.task_id, 1000 + (t.id DIV 60) % 150, g.category, NOW(3) - INTERVAL t.id % 60 DAY, t.id % 2
FROM tasks t JOIN gold_tasks g ON g.task_id = ? + (t.id % 60)
WHERE t.status = 'done' AND t.id > ? LIMIT 3000`, ids[0], ids[119])
	b.exec(t, `UPDATE tasks t JOIN gold_tasks g ON g.task_id = ? + (t.id % 60)
SET t.run_after = ?, t.category = g.category
WHERE t.status = 'pending' AND t.id > ? AND t.id % 50 = 1`, ids[0], tasks.GoldRunAfter, ids[119])
	b.exec(t, `INSERT IGNORE INTO gold_copies (copy_id, gold_id, editor_id, category)
SELECT t.id, ? + (t.id % 60), 2000 + t.id, t.category FROM tasks t WHERE t.run_after = ? AND t.id > ?`, ids[0], tasks.GoldRunAfter, ids[119])
	// The done tasks' results, editors' pauses, two paused categories.
	b.exec(t, `INSERT INTO task_results (task_id, fence, holder, editor_id, result)
SELECT id, 1, 'w', 1000 + id % 150, '{}' FROM tasks WHERE status = 'done'`)
	b.exec(t, `INSERT INTO gold_pauses (editor_id, category, reason)
SELECT DISTINCT editor_id, category, 'r' FROM gold_copies WHERE editor_id % 3 = 0`)
	b.exec(t, `INSERT INTO paused_categories (category) VALUES ('c4'), ('c5')`)
	b.exec(t, `ANALYZE TABLE tasks, task_results, gold_tasks, gold_copies, gold_pauses, paused_categories, editor_categories`)
	var copyID int64
	if err := b.db.GetContext(b.ctx, &copyID, `SELECT MIN(copy_id) FROM gold_copies`); err != nil {
		t.Fatal(err)
	}
	cats := []string{"c0", "c1", "c2"}

	in := func(q string, args ...any) (string, []any) {
		t.Helper()
		q, args, err := sqlx.In(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		return q, args
	}
	type plan struct {
		name string
		q    string
		args []any
		// keys are the keys the plan must read gold_copies (c) and tasks
		// (t) with, by table alias.
		keys map[string]string
	}
	q1, a1 := in(store.GoldPickSQL, ed.ID, cats)
	q2, a2 := in(store.GoldAccuracySQL, cats, time.Now().Add(-7*24*time.Hour).UTC())
	q3, a3 := in(store.GoldHeldSQL, cats, tasks.GoldRunAfter)
	q4, a4 := in(store.GoldLeftCopiesSQL, cats, tasks.GoldRunAfter, 500)
	for _, p := range []plan{
		{"pick", q1, a1, map[string]string{"g": "gold_tasks_category"}},
		{"copy of", store.GoldCopyOfSQL, []any{copyID}, map[string]string{"c": "PRIMARY", "g": "PRIMARY"}},
		{"last answers", store.GoldLastAnswersSQL, []any{1001, "c1", 20}, map[string]string{"c": "gold_copies_editor"}},
		{"accuracy", q2, a2, map[string]string{"c": "gold_copies_answered"}},
		{"categories", store.GoldCategoriesSQL, nil, map[string]string{"gold_tasks": "gold_tasks_category"}},
		{"held", q3, a3, map[string]string{"tasks": "tasks_claimable"}},
		{"left copies", q4, a4, map[string]string{"t": "tasks_claimable", "c": "PRIMARY"}},
	} {
		rows := b.explain(t, p.q, p.args...)
		t.Logf("%s:\n%s\n%s", p.name, p.q, formatPlan(rows))
		noFullScans(t, p.name, rows)
		for _, r := range rows {
			if r.Type == "index" && !strings.Contains(r.Extra, "group-by") {
				t.Errorf("%s: %s read whole through %s:\n%s", p.name, r.Table, r.Key, formatPlan(rows))
			}
			if want, ok := p.keys[r.Table]; ok && r.Key != want {
				t.Errorf("%s: %s read with key %q, want %s:\n%s", p.name, r.Table, r.Key, want, formatPlan(rows))
			}
		}
	}
}
