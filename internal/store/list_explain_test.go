package store_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// describe names the filters of p for messages.
func describe(p tasks.ListParams) string {
	var parts []string
	add := func(ok bool, s string, args ...any) {
		if ok {
			parts = append(parts, fmt.Sprintf(s, args...))
		}
	}
	add(p.Status != "", "status=%s", p.Status)
	add(p.Category != "", "category=%s", p.Category)
	add(p.Holder != "", "holder=%s", p.Holder)
	add(p.EditorID != 0, "editor_id=%d", p.EditorID)
	add(p.Key != "", "key=%s", p.Key)
	add(!p.CreatedAfter.IsZero(), "created_after")
	add(!p.CreatedBefore.IsZero(), "created_before")
	add(!p.DoneAfter.IsZero(), "done_after")
	add(!p.DoneBefore.IsZero(), "done_before")
	add(p.Oldest, "oldest first")
	add(p.Cursor != "", "with a cursor")
	if len(parts) == 0 {
		return "no filter"
	}
	return strings.Join(parts, ", ")
}

// TestListQueryPlans checks with EXPLAIN that each filter of ListTasks, and the
// combinations it promises, reads one index in the list's order (no filesort but
// the merge of a union's branches), on a pool of 20,000 tasks; and, running each
// query for a page from the middle of its list, that the rows it reads are
// bounded by the page size, not by the pool or the depth of the page (the
// session's Handler_read_* counters). internal/store/EXPLAIN.md shows the plans.
func TestListQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	base, rows := listFixture(t, b, 20000)
	b.exec(t, `ANALYZE TABLE tasks`)
	var editorID int64
	for _, r := range rows {
		if r.EditorID != 0 {
			editorID = r.EditorID
		}
	}
	const limit = 20
	conn, err := b.db.Connx(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reads := func() int64 {
		var st []struct {
			Name  string `db:"Variable_name"`
			Value int64  `db:"Value"`
		}
		if err := conn.SelectContext(b.ctx, &st, `SHOW SESSION STATUS LIKE 'Handler_read%'`); err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, s := range st {
			n += s.Value
		}
		return n
	}
	r0 := reads()
	overhead := reads() - r0 // what reading the counters costs by itself

	status := make(map[int64]string, len(rows))
	assigned := 0
	for _, r := range rows {
		status[r.ID] = r.Status
		if r.Status == string(tasks.StatusAssigned) {
			assigned++
		}
	}
	cases := listCases(base, editorID)
	for i, c := range cases[:len(cases)-3] { // the last three are not bounded
		for _, oldest := range []bool{false, true} {
			p := c
			p.Oldest, p.Limit = oldest, limit
			// A page from the middle of the list: the cursor of the page before.
			if want := expected(rows, p); len(want) > 2*limit {
				walk := p
				walk.Limit = min(len(want)/2, tasks.ListLimitMax)
				for seen := 0; seen < len(want)/2; {
					page, err := b.store.ListTasks(b.ctx, walk)
					if err != nil {
						t.Fatal(err)
					}
					seen += len(page.Tasks)
					walk.Cursor = page.NextCursor
				}
				p.Cursor = walk.Cursor
			}
			q, args, index, err := store.ListQuery(p)
			if err != nil {
				t.Fatal(err)
			}
			name := describe(p)
			plan := b.explain(t, q, args...)
			if (i < 6 && !oldest) || testing.Verbose() {
				t.Logf("%s:\n%s\n%s", name, q, formatPlan(plan))
			}
			noFullScans(t, name, plan)
			branches := 0
			for _, r := range plan {
				if r.Table != "t" {
					continue
				}
				branches++
				if r.Key != index {
					t.Errorf("%s: reads %s, want %s:\n%s", name, r.Key, index, formatPlan(plan))
				}
				// The key and the editor's task are at most one row, and the
				// assigned tasks are the claims: sorted, not read in order.
				if strings.Contains(r.Extra, "filesort") && index != "tasks_editor" && index != "tasks_expiry" {
					t.Errorf("%s: sorts instead of reading %s in order:\n%s", name, index, formatPlan(plan))
				}
			}
			if branches == 0 {
				t.Errorf("%s: the plan reads no tasks:\n%s", name, formatPlan(plan))
			}

			before := reads()
			res, err := conn.QueryxContext(b.ctx, q, args...)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for res.Next() {
				cols, err := res.SliceScan()
				if err != nil {
					t.Fatal(err)
				}
				id, err := strconv.ParseInt(fmt.Sprint(asString(cols[0])), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			got := len(ids)
			if err := res.Err(); err != nil {
				t.Fatal(err)
			}
			res.Close()
			n := reads() - before - overhead
			// Each branch reads at most limit+1 rows from where it starts, and a
			// few more to position itself and to find its end; a union then reads
			// its branches' rows back from its temporary table, and the page in
			// sorted order.
			bound := int64(branches * (limit + 1 + 4))
			if branches > 1 {
				bound += int64(branches*(limit+1) + limit + 1)
			}
			switch {
			case index == "tasks_expiry":
				// Every assigned task, then the page in sorted order.
				bound = int64(assigned + 2*(limit+1) + 4)
			case p.Status == tasks.StatusPending && got > 0:
				// The open range from the page's first task to its last, assigned
				// tasks included.
				open := p
				open.Status = ""
				walked, in := 0, false
				for _, id := range expected(rows, open) {
					if st := status[id]; st != string(tasks.StatusPending) && st != string(tasks.StatusAssigned) {
						continue
					}
					in = in || id == ids[0]
					if in {
						walked++
					}
					if id == ids[got-1] {
						break
					}
				}
				bound = int64(walked + 4)
			}
			if n > bound {
				t.Errorf("%s: read %d rows for %d, want at most %d (a page of %d in %d branches):\n%s",
					name, n, got, bound, limit, branches, formatPlan(plan))
			}
			if testing.Verbose() {
				t.Logf("%s: %d rows read for %d listed", name, n, got)
			}
		}
	}
}

// asString renders a column SliceScan returned: MariaDB sends integers as text.
func asString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}
