package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// finish makes task id done by editor e with result and decision, directly: the
// state a claim and a submit leave.
func (b *bundle) finish(t *testing.T, id int64, e *tasks.Editor, result, decision string) {
	t.Helper()
	holder := fmt.Sprintf("editor:%d", e.ID)
	b.exec(t, `UPDATE tasks SET status = 'done', fence = fence + 1, holder = ?, done_at = NOW(3) WHERE id = ?`, holder, id)
	b.exec(t, `INSERT INTO task_results (task_id, fence, holder, editor_id, result, decision)
		SELECT id, fence, holder, ?, ?, NULLIF(?, '') FROM tasks WHERE id = ?`, e.ID, result, decision, id)
}

// agreementValues is what a read gave, as "group:editor=value" in order.
func agreementValues(vs []tasks.AgreementValue) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%d:%s=%s", v.GroupID, v.EditorName, v.Value)
	}
	return out
}

// TestAgreementReadsTheWindowsGroups reads the values of a category's overlap
// groups: each done group task's decision (or named field) with its editor's
// name, oldest first; not a task outside the window, of another category, of no
// group, not done, without a value; and a read at its limit says so.
func TestAgreementReadsTheWindowsGroups(t *testing.T) {
	t.Parallel()
	wf := map[string]tasks.Workflow{"scores": {Overlap: 2, AgreementField: "score", AgreementInterval: true}}
	b := setup(t, store.Config{Workflows: wf})
	ann, bob := b.editor(t, "ann", "labels", "scores"), b.editor(t, "bob", "labels", "scores")

	g1 := b.group(t, tasks.NewTask{Category: "labels", Title: "g1", Overlap: 2})
	g2 := b.group(t, tasks.NewTask{Category: "labels", Title: "g2", Overlap: 3})
	old := b.group(t, tasks.NewTask{Category: "labels", Title: "old", Overlap: 2})
	other := b.group(t, tasks.NewTask{Category: "other", Title: "other", Overlap: 2})
	single := b.insert(t, tasks.NewTask{Category: "labels", Title: "single"})[0]
	scores := b.group(t, tasks.NewTask{Category: "scores", Title: "s", Overlap: 2})
	b.exec(t, `UPDATE tasks SET created_at = NOW(3) - INTERVAL 10 DAY WHERE group_id = ?`, old[0])

	b.finish(t, g1[0], ann, `{}`, "cat")
	b.finish(t, g1[1], bob, `{}`, "dog")
	b.finish(t, g2[0], bob, `{}`, "cat")
	b.finish(t, g2[1], ann, `{}`, "") // no decision: a missing value
	// g2[2] not done
	b.finish(t, old[0], ann, `{}`, "cat")
	b.finish(t, other[0], ann, `{}`, "cat")
	b.finish(t, single, ann, `{}`, "cat")
	b.finish(t, scores[0], ann, `{"score": 4}`, "")
	b.finish(t, scores[1], bob, `{"score": "5", "x": 1}`, "")

	now := time.Now()
	since, until := now.Add(-24*time.Hour), now.Add(time.Hour)
	got, err := b.store.Agreement(b.ctx, tasks.AgreementParams{Category: "labels", Since: since, Until: until})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("%d:ann=cat", g1[0]), fmt.Sprintf("%d:bob=dog", g1[0]), fmt.Sprintf("%d:bob=cat", g2[0]),
	}
	if !slices.Equal(agreementValues(got.Values), want) || got.Truncated || got.Field != "" || got.Interval {
		t.Errorf("labels: %v (truncated %v, field %q, interval %v), want %v", agreementValues(got.Values), got.Truncated, got.Field, got.Interval, want)
	}
	if got.Values[0].EditorID != ann.ID || got.Values[0].TaskID != g1[0] {
		t.Errorf("first value %+v, want task %d by editor %d", got.Values[0], g1[0], ann.ID)
	}

	got, err = b.store.Agreement(b.ctx, tasks.AgreementParams{Category: "labels", Since: since, Until: until, Limit: 2})
	if err != nil || len(got.Values) != 2 || !got.Truncated {
		t.Errorf("limit 2: %v, %v, want 2 values, truncated", got, err)
	}
	got, err = b.store.Agreement(b.ctx, tasks.AgreementParams{Category: "labels", Since: now.Add(-11 * 24 * time.Hour), Until: until})
	if err != nil || len(got.Values) != 4 {
		t.Errorf("11 days: %v, %v, want 4 values", got, err)
	}

	got, err = b.store.Agreement(b.ctx, tasks.AgreementParams{Category: "scores", Since: since, Until: until})
	want = []string{fmt.Sprintf("%d:ann=4", scores[0]), fmt.Sprintf("%d:bob=5", scores[0])}
	if err != nil || !slices.Equal(agreementValues(got.Values), want) || got.Field != "score" || !got.Interval {
		t.Errorf("scores: %+v, %v, want %v by field score, interval", got, err, want)
	}

	for _, p := range []tasks.AgreementParams{
		{Category: "labels", Since: until, Until: since},
		{Category: "labels", Until: until},
		{Category: "", Since: since, Until: until},
		{Category: "labels", Since: since, Until: until, Limit: tasks.AgreementLimitMax + 1},
	} {
		if _, err := b.store.Agreement(b.ctx, p); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", p, err)
		}
	}
}

// TestAgreementQueryPlan checks with EXPLAIN that the agreement read is one range
// of tasks_category_created in index order (no filesort, no temporary table),
// each result and editor by primary key, on a category with many tasks of other
// categories and many pending ones.
func TestAgreementQueryPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 3000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: []string{"labels", "news", "sport"}[i%3], Title: "t"}
	}
	b.insert(t, nts...)
	e := b.editor(t, "ann", "labels")
	for range 20 {
		for _, id := range b.group(t, tasks.NewTask{Category: "labels", Title: "g", Overlap: 2}) {
			b.finish(t, id, e, `{"score": 1}`, "cat")
		}
	}
	b.exec(t, `ANALYZE TABLE tasks, task_results, editors`)
	now := time.Now().UTC()
	for _, field := range []string{"", "score"} {
		q, args := store.AgreementQuery(field)
		plan := b.explain(t, q, append(args, "labels", now.Add(-time.Hour), now.Add(time.Hour), 1001)...)
		t.Logf("field %q:\n%s", field, formatPlan(plan))
		noFullScans(t, "agreement", plan)
		keys := map[string]string{"t": "tasks_category_created", "r": "PRIMARY", "e": "PRIMARY"}
		for _, r := range plan {
			if want := keys[r.Table]; r.Key != want {
				t.Errorf("field %q: %s read with key %q, want %q:\n%s", field, r.Table, r.Key, want, formatPlan(plan))
			}
			if strings.Contains(r.Extra, "filesort") || strings.Contains(r.Extra, "temporary") {
				t.Errorf("field %q: %s sorts or makes a temporary table:\n%s", field, r.Table, formatPlan(plan))
			}
		}
	}
}
