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

// allResults reads every result of a task (its group's included), oldest
// first, page by page.
func (b *bundle) allResults(id int64) ([]tasks.Result, error) {
	var out []tasks.Result
	p := tasks.TaskResultsParams{TaskID: id, Limit: tasks.TaskResultsLimitMax}
	for {
		page, err := b.store.TaskResults(b.ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(slices.Clone(page.Results), out...)
		if !page.More {
			return out, nil
		}
		p.Before = page.Before
	}
}

// addResults writes n results of task id directly, fences from fence+1 on, at
// the instants at(i): a task sent back and forth without the claims between.
func (b *bundle) addResults(t *testing.T, id, fence int64, n int, at func(i int) string) {
	t.Helper()
	for i := range n {
		b.exec(t, `INSERT INTO task_results (task_id, fence, holder, result, submitted_at, stage, stage_name, decision, notes)
			VALUES (?, ?, 'editor:1', JSON_OBJECT('n', ?), ?, ?, ?, ?, ?)`,
			id, fence+int64(i)+1, i, at(i), i%2, []string{"edit", "review"}[i%2],
			map[bool]any{true: "send_back", false: nil}[i%2 == 1], fmt.Sprintf("round %d", i/2))
	}
}

// group inserts a task of a group and returns the ids of the group's tasks.
func (b *bundle) group(t *testing.T, nt tasks.NewTask) []int64 {
	t.Helper()
	lead := b.insert(t, nt)[0]
	ts, err := b.store.GroupTasks(b.ctx, lead)
	if err != nil || len(ts) != nt.Overlap {
		t.Fatalf("group of %d: %+v, %v", lead, ts, err)
	}
	ids := make([]int64, len(ts))
	for i := range ts {
		ids[i] = ts[i].ID
	}
	return ids
}

// key names a result in a test's messages.
func key(r tasks.Result) string { return fmt.Sprintf("%d/%d", r.TaskID, r.Fence) }

// TestTaskResultsPages reads a task's results and its group's in pages of
// every size: each result exactly once, the pages in order, the latest first,
// whatever instants they share.
func TestTaskResultsPages(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	one := b.insert(t, tasks.NewTask{Category: "news", Title: "looped", Stages: []string{"edit", "review"}})[0]
	group := b.group(t, tasks.NewTask{Category: "labels", Title: "three", Overlap: 3})
	// 23 results, some sharing an instant; the group's interleaved in time.
	b.addResults(t, one, 0, 23, func(i int) string { return fmt.Sprintf("2026-01-01 10:00:%02d.000", i/3) })
	for j, id := range group {
		b.addResults(t, id, 0, 7, func(i int) string { return fmt.Sprintf("2026-01-01 10:00:%02d.%03d", i, j%2) })
	}

	for _, c := range []struct {
		name string
		id   int64
		own  bool
		want int
	}{
		{"a task", one, false, 23},
		{"a group, from its second task", group[1], false, 21},
		{"a task of a group, its own", group[1], true, 7},
	} {
		// The order every page must keep: oldest first by instant, task, fence.
		all, err := b.allResults(c.id)
		if c.own {
			var own []tasks.Result
			for _, r := range all {
				if r.TaskID == c.id {
					own = append(own, r)
				}
			}
			all = own
		}
		if err != nil || len(all) != c.want {
			t.Fatalf("%s: %d results (%v), want %d", c.name, len(all), err, c.want)
		}
		for i := 1; i < len(all); i++ {
			p, q := all[i-1], all[i]
			if p.SubmittedAt.After(q.SubmittedAt) || p.SubmittedAt.Equal(q.SubmittedAt) && (p.TaskID > q.TaskID || p.TaskID == q.TaskID && p.Fence >= q.Fence) {
				t.Fatalf("%s: %s before %s", c.name, key(p), key(q))
			}
		}
		for _, limit := range []int{1, 2, 3, 5, 10, 22, 23, 100} {
			var got []string
			p := tasks.TaskResultsParams{TaskID: c.id, Own: c.own, Limit: limit}
			for pages := 0; ; pages++ {
				if pages > len(all) {
					t.Fatalf("%s, limit %d: no end", c.name, limit)
				}
				page, err := b.store.TaskResults(b.ctx, p)
				if err != nil {
					t.Fatalf("%s, limit %d: %v", c.name, limit, err)
				}
				if len(page.Results) > limit || page.More != (page.Before != "") || page.More && len(page.Results) != limit {
					t.Fatalf("%s, limit %d: %d results, more %v, before %q", c.name, limit, len(page.Results), page.More, page.Before)
				}
				var keys []string
				for _, r := range page.Results {
					keys = append(keys, key(r))
				}
				got = append(keys, got...)
				if !page.More {
					break
				}
				p.Before = page.Before
			}
			var want []string
			for _, r := range all {
				want = append(want, key(r))
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, limit %d: pages hold\n%v\nwant every result once, in order:\n%v", c.name, limit, got, want)
			}
		}
	}

	// The latest page is the latest results, with their fields.
	page, err := b.store.TaskResults(b.ctx, tasks.TaskResultsParams{TaskID: one})
	if err != nil || len(page.Results) != tasks.TaskResultsLimitDefault || !page.More {
		t.Fatalf("latest page: %d results, more %v (%v)", len(page.Results), page.More, err)
	}
	if last := page.Results[len(page.Results)-1]; last.Fence != 23 || last.StageName != "edit" || last.Notes != "round 11" ||
		string(last.Result) != `{"n": 22}` || last.Category != "news" || last.Title != "looped" {
		t.Errorf("latest result: %+v", last)
	}
	if r := page.Results[len(page.Results)-2]; r.Decision != tasks.DecisionSendBack || r.StageName != "review" {
		t.Errorf("the send back before it: %+v", r)
	}

	// A task without results, and none at all, have an empty page.
	for _, id := range []int64{b.insertOne(t, "news", 0), 1 << 40} {
		page, err := b.store.TaskResults(b.ctx, tasks.TaskResultsParams{TaskID: id})
		if err != nil || len(page.Results) != 0 || page.Results == nil || page.More || page.Before != "" {
			t.Errorf("task %d: %+v, %v; want an empty page", id, page, err)
		}
	}
	// Cursors and limits it did not give are refused.
	for _, p := range []tasks.TaskResultsParams{
		{TaskID: one, Before: "nope"}, {TaskID: one, Before: "e30"}, {TaskID: one, Limit: -1},
		{TaskID: one, Limit: tasks.TaskResultsLimitMax + 1},
	} {
		if _, err := b.store.TaskResults(b.ctx, p); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", p, err)
		}
	}
}

// TestTaskResultsCursorIsTheFeeds: a result's cursor is 0 until a read of the
// feed numbers it, and then the feed's.
func TestTaskResultsCursorIsTheFeeds(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ada", "news")
	id := b.insertOne(t, "news", 0)
	b.submitOne(t, id, ed.Holder(), ed.ID, `{"ok":true}`)
	page, err := b.store.TaskResults(b.ctx, tasks.TaskResultsParams{TaskID: id})
	if err != nil || len(page.Results) != 1 || page.Results[0].Cursor != 0 {
		t.Fatalf("before the feed was read: %+v, %v; want one result without a cursor", page, err)
	}
	feed, _ := b.readResults(t, 0, 10)
	if len(feed) != 1 || feed[0].Cursor < 1 {
		t.Fatalf("feed: %+v", feed)
	}
	page, err = b.store.TaskResults(b.ctx, tasks.TaskResultsParams{TaskID: id})
	if err != nil || len(page.Results) != 1 || page.Results[0].Cursor != feed[0].Cursor {
		t.Errorf("after the feed was read: %+v, %v; want the feed's cursor %d", page, err, feed[0].Cursor)
	}
}

func TestSendBacksCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insert(t, tasks.NewTask{Category: "desk", Title: "looped", Stages: []string{"edit", "review"}})[0]
	for n, want := range []int{0, 0, 1, 1, 2} {
		if n > 0 {
			b.addResults(t, id, int64(n-1), 1, func(int) string { return "2026-01-01 10:00:00" })
			if n%2 == 0 { // every second result written is at review: a send back
				b.exec(t, `UPDATE task_results SET decision = 'send_back' WHERE task_id = ? AND fence = ?`, id, n)
			}
		}
		cat, got, err := b.store.SendBacks(b.ctx, id)
		if err != nil || cat != "desk" || got != want {
			t.Errorf("after %d results: %q, %d, %v; want desk, %d", n, cat, got, err, want)
		}
	}
	if _, _, err := b.store.SendBacks(b.ctx, 1<<40); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("no such task: %v, want ErrNotFound", err)
	}
}

// TestTaskResultsPlans checks with EXPLAIN that a page of a task's results
// reads the primary key's ranges of its tasks and its page's rows by key,
// with no temporary table and no full scan, whatever the task's history.
func TestTaskResultsPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 2000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "c", Title: "t", Stages: []string{"edit", "review"}}
	}
	ids := b.insert(t, nts...)
	group := b.group(t, tasks.NewTask{Category: "c", Title: "g", Overlap: 3})
	for _, id := range append(ids[:200:200], group...) {
		b.addResults(t, id, 0, 12, func(i int) string { return fmt.Sprintf("2026-01-01 10:00:%02d", i) })
	}
	b.exec(t, `ANALYZE TABLE tasks, task_results`)
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

	q, args := store.TaskResultKeysQuery(group, far, 1<<62, 1<<62, 11)
	for _, c := range []struct {
		name  string
		query string
		args  []any
		keys  map[string]string // table: key
	}{
		{"group ids", store.TaskResultIDsSQL, []any{group[1]}, map[string]string{"g": "tasks_group", "t": "PRIMARY"}},
		{"keys of one task", strings.Replace(store.TaskResultKeysSQL, "%s", "?", 1), []any{ids[7], far, far, 1 << 62, 1 << 62, 1 << 62, 11},
			map[string]string{"task_results": "PRIMARY"}},
		{"keys of a group", q, args, map[string]string{"task_results": "PRIMARY"}},
		{"rows of a page", strings.Replace(store.TaskResultRowsSQL, "%s", "(?, ?), (?, ?), (?, ?)", 1), []any{ids[7], 12, ids[7], 11, ids[8], 12},
			map[string]string{"r": "PRIMARY", "t": "PRIMARY"}},
		{"send backs", store.SendBacksSQL, []any{ids[7]}, map[string]string{"t": "PRIMARY", "r": "PRIMARY"}},
		{"group decisions", store.GroupDecisionsSQL, []any{group[0]}, map[string]string{"t": "tasks_group", "r": "PRIMARY"}},
	} {
		plan := b.explain(t, c.query, c.args...)
		t.Logf("%s:\n%s\n%s", c.name, c.query, formatPlan(plan))
		noFullScans(t, c.name, plan)
		for _, r := range plan {
			if strings.Contains(r.Extra, "temporary") {
				t.Errorf("%s makes a temporary table:\n%s", c.name, formatPlan(plan))
			}
			if want, ok := c.keys[r.Table]; ok && r.Key != want {
				t.Errorf("%s: %s read with key %q, want %q:\n%s", c.name, r.Table, r.Key, want, formatPlan(plan))
			}
			if r.Table == "task_results" && r.Type != "range" && r.Type != "ref" {
				t.Errorf("%s: task_results read by %s, want its tasks' ranges:\n%s", c.name, r.Type, formatPlan(plan))
			}
		}
	}
}

// TestTaskResultsMakeNoTemporaryTable reads pages of a task's results and of
// its group's on one connection and checks the session's temporary table
// counters: none is made. The results' former query, one UNION ALL sorted,
// made one on disk for every read; it is run first to show the counters see it.
func TestTaskResultsMakeNoTemporaryTable(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	// The session counters are one connection's: keep to one.
	b.db.SetMaxOpenConns(1)
	b.db.SetMaxIdleConns(1)
	b.db.SetConnMaxLifetime(0)
	b.db.SetConnMaxIdleTime(0)
	one := b.insert(t, tasks.NewTask{Category: "news", Title: "looped", Stages: []string{"edit", "review"}})[0]
	group := b.group(t, tasks.NewTask{Category: "labels", Title: "three", Overlap: 3})
	b.addResults(t, one, 0, 23, func(i int) string { return fmt.Sprintf("2026-01-01 10:00:%02d", i) })
	for _, id := range group {
		b.addResults(t, id, 0, 5, func(i int) string { return fmt.Sprintf("2026-01-01 10:00:%02d", i) })
	}
	tmp := func() (n, disk int) {
		t.Helper()
		rows, err := b.db.QueryxContext(b.ctx, `SHOW SESSION STATUS WHERE Variable_name IN ('Created_tmp_tables', 'Created_tmp_disk_tables')`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v int
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			if name == "Created_tmp_disk_tables" {
				disk = v
			} else {
				n = v
			}
		}
		return n, disk
	}
	const formerSQL = `(SELECT COALESCE(r.seq, 0) AS seq, r.task_id, r.fence, r.result, r.notes, r.submitted_at
FROM tasks t JOIN task_results r ON r.task_id = t.id WHERE t.id = ? AND t.group_id IS NULL)
UNION ALL
(SELECT COALESCE(r.seq, 0) AS seq, r.task_id, r.fence, r.result, r.notes, r.submitted_at
FROM tasks x JOIN tasks t ON t.group_id = x.group_id JOIN task_results r ON r.task_id = t.id WHERE x.id = ?)
ORDER BY submitted_at, task_id, fence`
	n0, d0 := tmp()
	var former []struct {
		Seq         int64     `db:"seq"`
		TaskID      int64     `db:"task_id"`
		Fence       int64     `db:"fence"`
		Result      []byte    `db:"result"`
		Notes       *string   `db:"notes"`
		SubmittedAt time.Time `db:"submitted_at"`
	}
	if err := b.db.SelectContext(b.ctx, &former, formerSQL, one, one); err != nil || len(former) != 23 {
		t.Fatalf("the former query: %d results, %v", len(former), err)
	}
	n1, d1 := tmp()
	if n1-n0 < 1 {
		t.Fatalf("the former query made %d temporary tables, want one seen", n1-n0)
	}
	t.Logf("the former query made %d temporary tables, %d on disk", n1-n0, d1-d0)
	for _, p := range []tasks.TaskResultsParams{
		{TaskID: one}, {TaskID: one, Own: true, Limit: 3}, {TaskID: group[1]}, {TaskID: group[2], Limit: 100},
	} {
		before, beforeDisk := tmp()
		page, err := b.store.TaskResults(b.ctx, p)
		if err != nil || len(page.Results) == 0 {
			t.Fatalf("%+v: %+v, %v", p, page, err)
		}
		if p.Before = page.Before; page.More {
			if _, err := b.store.TaskResults(b.ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		after, afterDisk := tmp()
		if after != before || afterDisk != beforeDisk {
			t.Errorf("%+v: %d temporary tables made, %d on disk; want none", p, after-before, afterDisk-beforeDisk)
		}
	}
}
