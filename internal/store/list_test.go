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

// listRow is what the list filters look at, read back for the expected lists.
type listRow struct {
	ID        int64      `db:"id"`
	Category  string     `db:"category"`
	Status    string     `db:"status"`
	Holder    string     `db:"holder"`
	EditorID  int64      `db:"editor_id"`
	Key       string     `db:"task_key"`
	CreatedAt time.Time  `db:"created_at"`
	DoneAt    *time.Time `db:"done_at"`
}

// listFixture makes n tasks in three categories and every status, with created_at
// and done_at times in groups that tie, so that pages break inside ties.
func listFixture(t *testing.T, b *bundle, n int) (time.Time, []listRow) {
	t.Helper()
	ed := b.editor(t, "ada", "c0", "c1", "c2")
	nts := make([]tasks.NewTask, n)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%3), Title: "t"}
		if i%4 == 0 {
			nts[i].Key = fmt.Sprintf("key-%d", i)
		}
	}
	b.insert(t, nts...)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b.exec(t, `UPDATE tasks SET created_at = ? + INTERVAL (id DIV 3) SECOND`, base)
	b.exec(t, `UPDATE tasks SET status = 'done', holder = IF(id % 2 = 0, 'w1', 'w2'),
		done_at = ? + INTERVAL ((id * 7) % 50) SECOND WHERE id % 5 = 3`, base)
	b.exec(t, `UPDATE tasks SET status = 'dead', holder = 'w1', done_at = ? + INTERVAL (id % 40) SECOND WHERE id % 5 = 4`, base)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'w2', assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id % 5 = 2 AND id <> 7`)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, holder = ?, editor_id = ?, assigned_at = NOW(3),
		lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE id = 7`, ed.Holder(), ed.ID)
	var rows []listRow
	if err := b.db.SelectContext(b.ctx, &rows, `SELECT id, category, status, COALESCE(holder, '') AS holder,
		COALESCE(editor_id, 0) AS editor_id, COALESCE(task_key, '') AS task_key, created_at, done_at FROM tasks`); err != nil {
		t.Fatal(err)
	}
	return base, rows
}

// expected filters and orders rows as ListTasks promises.
func expected(rows []listRow, p tasks.ListParams) []int64 {
	byDone := !p.DoneAfter.IsZero() || !p.DoneBefore.IsZero()
	var keep []listRow
	for _, r := range rows {
		switch {
		case p.Status != "" && r.Status != string(p.Status),
			p.Category != "" && r.Category != p.Category,
			p.Holder != "" && r.Holder != p.Holder,
			p.EditorID != 0 && r.EditorID != p.EditorID,
			p.Key != "" && r.Key != p.Key,
			!p.CreatedAfter.IsZero() && r.CreatedAt.Before(p.CreatedAfter),
			!p.CreatedBefore.IsZero() && !r.CreatedAt.Before(p.CreatedBefore),
			byDone && r.DoneAt == nil,
			!p.DoneAfter.IsZero() && r.DoneAt.Before(p.DoneAfter),
			!p.DoneBefore.IsZero() && !r.DoneAt.Before(p.DoneBefore):
			continue
		}
		keep = append(keep, r)
	}
	slices.SortFunc(keep, func(a, b listRow) int {
		at, bt := a.CreatedAt, b.CreatedAt
		if byDone {
			at, bt = *a.DoneAt, *b.DoneAt
		}
		c := at.Compare(bt)
		if c == 0 {
			c = int(a.ID - b.ID)
		}
		if !p.Oldest {
			c = -c
		}
		return c
	})
	ids := make([]int64, len(keep))
	for i, r := range keep {
		ids[i] = r.ID
	}
	return ids
}

// listCases are the filters the list tests check, each in both orders.
func listCases(base time.Time, editorID int64) []tasks.ListParams {
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	return []tasks.ListParams{
		{},
		{Status: tasks.StatusPending},
		{Status: tasks.StatusDone},
		{Category: "c1"},
		{Category: "c1", Status: tasks.StatusPending},
		{Holder: "w1"},
		{EditorID: editorID},
		{Key: "key-8"},
		{CreatedAfter: at(10), CreatedBefore: at(40)},
		{Status: tasks.StatusPending, CreatedAfter: at(5)},
		{Category: "c2", CreatedBefore: at(30)},
		{Category: "c2", Status: tasks.StatusDead, CreatedAfter: at(3), CreatedBefore: at(60)},
		{Holder: "w2", CreatedAfter: at(20)},
		{DoneAfter: at(10), DoneBefore: at(30)},
		{DoneBefore: at(25)},
		{DoneAfter: at(5), Status: tasks.StatusDone},
		{Status: tasks.StatusAssigned},
		{Category: "c0", Status: tasks.StatusAssigned, CreatedBefore: at(50)},
		// Combinations that filter rows of an index read: correct, not bounded.
		{Holder: "w1", Status: tasks.StatusDead},
		{DoneAfter: at(1), Category: "c0"},
		{Key: "key-20", Status: tasks.StatusPending},
	}
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	base, rows := listFixture(t, b, 300)
	var editorID int64
	for _, r := range rows {
		if r.EditorID != 0 {
			editorID = r.EditorID
		}
	}
	for _, c := range listCases(base, editorID) {
		for _, oldest := range []bool{false, true} {
			p := c
			p.Oldest, p.Limit = oldest, 7
			want := expected(rows, p)
			var got []int64
			pages := 0
			for {
				page, err := b.store.ListTasks(b.ctx, p)
				if err != nil {
					t.Fatalf("%+v: %v", p, err)
				}
				pages++
				for _, task := range page.Tasks {
					got = append(got, task.ID)
					if task.Payload != nil {
						t.Fatalf("listed task %d has a payload", task.ID)
					}
				}
				if len(page.Tasks) > p.Limit {
					t.Fatalf("%d tasks on a page of %d", len(page.Tasks), p.Limit)
				}
				if page.NextCursor == "" {
					break
				}
				if len(page.Tasks) != p.Limit {
					t.Fatalf("%+v: a short page (%d) with a next cursor", p, len(page.Tasks))
				}
				p.Cursor = page.NextCursor
				if pages > 200 {
					t.Fatalf("%+v: no end", c)
				}
			}
			if !equalIDs(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("%+v oldest %v:\ngot  %v\nwant %v", c, oldest, got, want)
			}
			if len(want) == 0 {
				t.Errorf("%+v: the fixture has no task for it; the case proves nothing", c)
			}
		}
	}
}

func TestListTasksRefusesBadParams(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	b.insert(t, tasks.NewTask{Category: "c", Title: "a"}, tasks.NewTask{Category: "c", Title: "b"})
	page, err := b.store.ListTasks(b.ctx, tasks.ListParams{Limit: 1})
	if err != nil || page.NextCursor == "" {
		t.Fatalf("first page: %v, %v", page, err)
	}
	now := time.Now()
	for _, c := range []struct {
		p    tasks.ListParams
		want string
	}{
		{tasks.ListParams{Limit: -1}, "limit must be 1..500"},
		{tasks.ListParams{Limit: tasks.ListLimitMax + 1}, "limit must be 1..500"},
		{tasks.ListParams{Status: "lost"}, "status must be one of pending, assigned, done, dead"},
		{tasks.ListParams{Category: " c"}, "category must not start or end with spaces"},
		{tasks.ListParams{Key: strings.Repeat("k", 256)}, "key must be 1..255"},
		{tasks.ListParams{Holder: strings.Repeat("h", 129)}, "holder"},
		{tasks.ListParams{EditorID: -1}, "editor id"},
		{tasks.ListParams{CreatedAfter: now, CreatedBefore: now}, "created_after must be before created_before"},
		{tasks.ListParams{DoneAfter: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "done_after must be from"},
		{tasks.ListParams{Cursor: "not a cursor"}, "cursor is not one this list returned"},
		{tasks.ListParams{Cursor: "e30"}, "cursor is not one this list returned"}, // {}
		{tasks.ListParams{Cursor: page.NextCursor, Oldest: true}, "cursor belongs to a list in another order"},
		{tasks.ListParams{Cursor: page.NextCursor, DoneAfter: now}, "cursor belongs to a list in another order"},
	} {
		_, err := b.store.ListTasks(b.ctx, c.p)
		wantErr(t, c.want, err, tasks.ErrInvalid)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want it to say %q", c.p, err, c.want)
		}
	}
}
