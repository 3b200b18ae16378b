package store_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// TestTaskEventsPages: a task's history is read a page at a time, newest page
// first and oldest first within a page, each page's cursor leading to the
// next older one until none is left; every event is read exactly once, and
// other tasks' events never show.
func TestTaskEventsPages(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	other := b.insertOne(t, "news", 0)
	// 120 events of the task, interleaved with the other task's.
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT IF(seq % 2 = 0, ?, ?), 'released', seq DIV 2, 'w', CONCAT('e', seq DIV 2) FROM seq_0_to_239`, id, other)

	var got []tasks.Event
	before, pages := int64(0), 0
	for {
		page, err := b.store.TaskEvents(b.ctx, tasks.TaskEventsParams{TaskID: id, Before: before, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for i := 1; i < len(page.Events); i++ {
			if page.Events[i-1].ID >= page.Events[i].ID {
				t.Fatalf("page %d is not oldest first: %d then %d", pages, page.Events[i-1].ID, page.Events[i].ID)
			}
		}
		if page.More != (page.Before != 0) || page.More && page.Before != page.Events[0].ID {
			t.Fatalf("page %d: more %v, before %d, oldest event %d", pages, page.More, page.Before, page.Events[0].ID)
		}
		got = append(page.Events, got...)
		if !page.More {
			break
		}
		before = page.Before
	}
	if pages != 3 || len(got) != 120 {
		t.Fatalf("%d pages, %d events; want 3 pages of 120 events", pages, len(got))
	}
	for i, ev := range got {
		if ev.TaskID != id || ev.Fence != int64(i) || ev.Detail != "e"+strconv.Itoa(i) {
			t.Fatalf("event %d = %+v, want fence %d of task %d", i, ev, i, id)
		}
	}

	// The default page is the latest 50; an unknown task has an empty page.
	page, err := b.store.TaskEvents(b.ctx, tasks.TaskEventsParams{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != tasks.EventsLimitDefault || page.Events[49].Fence != 119 || !page.More {
		t.Errorf("default page: %d events, last fence %d, more %v", len(page.Events), page.Events[len(page.Events)-1].Fence, page.More)
	}
	page, err = b.store.TaskEvents(b.ctx, tasks.TaskEventsParams{TaskID: other + 1000})
	if err != nil || len(page.Events) != 0 || page.More || page.Before != 0 {
		t.Errorf("unknown task: %+v, %v", page, err)
	}
	for _, p := range []tasks.TaskEventsParams{
		{TaskID: id, Limit: -1}, {TaskID: id, Limit: tasks.EventsLimitMax + 1}, {TaskID: id, Before: -1},
	} {
		_, err := b.store.TaskEvents(b.ctx, p)
		wantErr(t, fmt.Sprintf("task events %+v", p), err, tasks.ErrInvalid)
	}
}

// TestTaskEventsPlan: a page of a long history reads a range of
// task_events_task backwards, stopped by its LIMIT, and ranges of the primary
// keys of the results and the task that stand for events: no sort, no scan.
func TestTaskEventsPlan(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := make([]int64, 20)
	for i := range ids {
		ids[i] = b.insertOne(t, "news", 0)
	}
	// 3,000 events of one task among 20,000 of the others.
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT ?, 'released', seq, 'w', 'x' FROM seq_1_to_3000`, ids[0])
	b.exec(t, `INSERT INTO task_events (task_id, kind, fence, holder, detail)
SELECT ? + seq % 19, 'claimed', seq, 'w', 'x' FROM seq_1_to_20000`, ids[1])
	b.exec(t, `ANALYZE TABLE task_events`)
	for _, before := range []int64{1 << 62, 2000} {
		plan := b.explain(t, store.TaskEventsSQL, ids[0], before, int64(math.MaxInt64), 51,
			ids[0], ids[0], before, int64(math.MaxInt64), 51, ids[0], ids[0], before, int64(math.MaxInt64))
		t.Logf("TaskEvents (before %d):\n%s\n%s", before, store.TaskEventsSQL, formatPlan(plan))
		noFullScans(t, "task events", plan)
		// Each table read is a range (or one row) of the key named, in
		// its order: task_events_task for the events, the primary keys of
		// the results and of the task for the records standing for events.
		keys := map[string]string{"task_events": "task_events_task", "e": "task_events_task", "task_results": "PRIMARY", "tasks": "PRIMARY"}
		reads := 0
		for _, r := range plan {
			if r.Table == "" || r.Table == "NULL" || strings.HasPrefix(r.Table, "<") {
				continue
			}
			reads++
			if r.Key != keys[r.Table] || (r.Type != "range" && r.Type != "ref" && r.Type != "const") || strings.Contains(r.Extra, "filesort") {
				t.Errorf("task events: %s read by %s (%s, %s), want a range of %s without a sort:\n%s", r.Table, r.Key, r.Type, r.Extra, keys[r.Table], formatPlan(plan))
			}
		}
		if reads < 3 || plan[0].Table != "task_events" {
			t.Errorf("task events: want the events, the results and the cursor's fence read:\n%s", formatPlan(plan))
		}
	}
}
