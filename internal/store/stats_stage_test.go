package store_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// PoolStats counts the tasks with stages by category, stage and status, read
// from the non-NULL part of tasks_stage_candidate alone: the tasks without
// stages cost it nothing. GroupTasks and EditorLoads read their keys.
func TestStatsByStage(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	ed := b.editor(t, "alice", "c1")
	nts := make([]tasks.NewTask, 5000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%5), Title: "t"}
		if i%50 == 0 {
			nts[i].Stages = []string{"edit", "review"}
		}
	}
	b.insert(t, nts...)
	// Half the tasks with stages are at review, a fifth of those done.
	b.exec(t, `UPDATE tasks SET stage = 1 WHERE stages IS NOT NULL AND id % 100 = 51`)
	b.exec(t, `UPDATE tasks SET status = 'done', done_at = NOW(3) WHERE stages IS NOT NULL AND id % 500 = 451`)
	b.exec(t, `ANALYZE TABLE tasks`)

	st, err := b.store.PoolStats(b.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, c := range st.ByStage {
		got[c.Category+"/"+c.Stage+"/"+string(c.Status)] = c.Count
		total += c.Count
	}
	// Tasks with stages: ids 1, 51, 101, ... (i%50 == 0), all in c0.
	want := map[string]int64{"c0/edit/pending": 50, "c0/review/pending": 40, "c0/review/done": 10}
	if len(got) != len(want) || total != 100 {
		t.Fatalf("by stage = %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("by stage %s = %d, want %d (all: %v)", k, got[k], n, got)
		}
	}

	plan := b.explain(t, store.StatsByStageSQL)
	t.Logf("PoolStats (by stage):\n%s\n%s", store.StatsByStageSQL, formatPlan(plan))
	noFullScans(t, "stats by stage", plan)
	if len(plan) != 1 || plan[0].Key != "tasks_stage_candidate" || plan[0].Type != "range" || !strings.Contains(plan[0].Extra, "Using index") {
		t.Errorf("stats by stage: want one range of tasks_stage_candidate, from the index alone:\n%s", formatPlan(plan))
	} else if rows, _ := strconv.Atoi(plan[0].Rows); rows > 1000 {
		t.Errorf("stats by stage reads %d rows for 100 tasks with stages of 5000:\n%s", rows, formatPlan(plan))
	}

	for _, c := range []struct {
		name, query string
		args        []any
		keys        []string
	}{
		{"GroupTasks", store.GroupTasksSQL, []any{1}, []string{"tasks_group"}},
		{"EditorLoads", strings.Replace(store.EditorLoadsSQL, "IN (?)", "IN (?, ?)", 1), []any{ed.ID, ed.ID + 1}, []string{"PRIMARY", "tasks_editor"}},
	} {
		plan := b.explain(t, c.query, c.args...)
		t.Logf("%s:\n%s\n%s", c.name, c.query, formatPlan(plan))
		noFullScans(t, c.name, plan)
		if len(plan) != len(c.keys) {
			t.Errorf("%s: want reads of %v:\n%s", c.name, c.keys, formatPlan(plan))
			continue
		}
		for i, r := range plan {
			if r.Key != c.keys[i] {
				t.Errorf("%s: read %d by %q, want %s:\n%s", c.name, i, r.Key, c.keys[i], formatPlan(plan))
			}
		}
	}
}
