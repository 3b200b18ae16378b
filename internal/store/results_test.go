package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// readResults reads one page and returns its results (copied) and the page.
func (b *bundle) readResults(t *testing.T, after int64, limit int) ([]tasks.Result, tasks.ResultsPage) {
	t.Helper()
	var got []tasks.Result
	page, err := b.store.Results(b.ctx, tasks.ResultsParams{After: after, Limit: limit}, func(r *tasks.Result) error {
		got = append(got, *r)
		return nil
	})
	if err != nil {
		t.Fatalf("results after %d: %v", after, err)
	}
	return got, page
}

// submitOne claims task id as holder and submits result.
func (b *bundle) submitOne(t *testing.T, id int64, holder string, editorID int64, result string) {
	t.Helper()
	c := b.claim(t, id, holder, editorID, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: holder, Result: rawJSON(result)}); err != nil {
		t.Fatalf("submit task %d: %v", id, err)
	}
}

func TestResultsReadsTheFeedInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "ada", "news")
	ids := b.insert(t,
		tasks.NewTask{Category: "news", Title: "first", Key: "cms-1"},
		tasks.NewTask{Category: "sport", Title: "second"},
		tasks.NewTask{Category: "news", Title: "third"})
	b.submitOne(t, ids[0], ed.Holder(), ed.ID, `{"n":1}`)
	b.submitOne(t, ids[1], "worker-1", 0, `[2, "two"]`)
	b.submitOne(t, ids[2], ed.Holder(), ed.ID, `"3"`)

	got, page := b.readResults(t, 0, 2)
	if len(got) != 2 || page.Count != 2 || !page.More || page.Next != got[1].Cursor {
		t.Fatalf("first page: %d results, page %+v", len(got), page)
	}
	r := got[0]
	if r.TaskID != ids[0] || r.Fence != 1 || r.Category != "news" || r.Title != "first" || r.Key != "cms-1" || got[1].Key != "" || r.Holder != ed.Holder() ||
		r.EditorID != ed.ID || string(r.Result) != `{"n": 1}` && string(r.Result) != `{"n":1}` || r.SubmittedAt.IsZero() {
		t.Errorf("first result = %+v", r)
	}
	if got[1].TaskID != ids[1] || got[1].Holder != "worker-1" || got[1].EditorID != 0 || got[1].Cursor <= r.Cursor {
		t.Errorf("second result = %+v", got[1])
	}
	rest, page := b.readResults(t, page.Next, 2)
	if len(rest) != 1 || rest[0].TaskID != ids[2] || page.More || page.Next != rest[0].Cursor {
		t.Fatalf("second page: %+v, page %+v", rest, page)
	}
	none, page2 := b.readResults(t, page.Next, 0)
	if len(none) != 0 || page2.Next != page.Next || page2.More {
		t.Errorf("past the end: %+v, page %+v", none, page2)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE seq IS NULL`); n != 0 {
		t.Errorf("%d results left unnumbered", n)
	}
}

func TestResultsRefusesBadParams(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	id := b.insertOne(t, "news", 0)
	b.submitOne(t, id, "w", 0, `{}`)
	for _, p := range []tasks.ResultsParams{
		{After: -1}, {Limit: -1}, {Limit: tasks.ResultsLimitMax + 1},
		{After: 2}, // beyond the end: only 1 result exists, and it is not numbered yet
	} {
		called := false
		_, err := b.store.Results(b.ctx, p, func(*tasks.Result) error { called = true; return nil })
		if !errors.Is(err, tasks.ErrInvalid) || called {
			t.Errorf("results %+v: err %v, called %v; want ErrInvalid, not called", p, err, called)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results WHERE seq IS NOT NULL`); n != 0 {
		t.Errorf("a refused read numbered %d results", n)
	}
	got, _ := b.readResults(t, 0, tasks.ResultsLimitMax)
	if len(got) != 1 {
		t.Errorf("%d results at the largest limit, want 1", len(got))
	}
}

func TestResultsCallbackErrorStops(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	for i := range 3 {
		b.submitOne(t, b.insertOne(t, "news", i), "w", 0, `{}`)
	}
	stop := errors.New("stop")
	n := 0
	page, err := b.store.Results(b.ctx, tasks.ResultsParams{}, func(*tasks.Result) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || page.Count != 1 || n != 2 {
		t.Errorf("err %v, page %+v after %d calls; want stop, count 1", err, page, n)
	}
	got, _ := b.readResults(t, page.Next, 0)
	if len(got) != 2 {
		t.Errorf("%d results after the stop, want 2", len(got))
	}
}

// TestResultsWaitForALateCommit is the race a position given at insert time loses: a
// submit that inserted its result first but commits last. The reader must not read
// past it while it is open, and must read it once it commits.
func TestResultsWaitForALateCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ids := b.insert(t,
		tasks.NewTask{Category: "news", Title: "slow"},
		tasks.NewTask{Category: "news", Title: "fast"})
	b.submitOne(t, ids[1], "w", 0, `{"first":true}`)
	first, page := b.readResults(t, 0, 0)
	if len(first) != 1 {
		t.Fatalf("%d results, want 1", len(first))
	}

	// The slow submit: its row is inserted (with an earlier submitted_at than the fast
	// one below) and the transaction stays open.
	c := b.claim(t, ids[0], "w", 0, time.Minute)
	slow, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Rollback() }()
	if _, err := slow.ExecContext(b.ctx, `INSERT INTO task_results (task_id, fence, holder, result, submitted_at)
		VALUES (?, ?, 'w', '{"slow":true}', NOW(3) - INTERVAL 1 MINUTE)`, ids[0], c.Fence); err != nil {
		t.Fatal(err)
	}
	id3 := b.insertOne(t, "news", 0)
	b.submitOne(t, id3, "w", 0, `{"fast":true}`)

	mid, page := b.readResults(t, page.Next, 0)
	if len(mid) != 1 || mid[0].TaskID != id3 {
		t.Fatalf("while the slow submit is open: %+v, want only task %d", mid, id3)
	}
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	last, page := b.readResults(t, page.Next, 0)
	if len(last) != 1 || last[0].TaskID != ids[0] || last[0].Cursor <= mid[0].Cursor {
		t.Fatalf("after the slow commit: %+v, want task %d after cursor %d", last, ids[0], mid[0].Cursor)
	}
	if again, _ := b.readResults(t, page.Next, 0); len(again) != 0 {
		t.Errorf("read again: %+v", again)
	}
}

// TestResultsFollowersReadEachResultOnce tries to break the feed: workers claim and
// submit as fast as they can, laggards insert results that claim an earlier
// submitted_at and commit a moment later (the out-of-order commits a cursor at insert
// time loses), while readers follow the cursor with small pages, each numbering as it
// goes. At the end every reader must have read every accepted result exactly once, in
// increasing cursor order.
func TestResultsFollowersReadEachResultOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const submitters, laggards, perSubmitter, readers = 6, 2, 150, 3
	nts := make([]tasks.NewTask, submitters*perSubmitter)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: fmt.Sprint(i)}
	}
	ids := b.insert(t, nts...)
	nts = nts[:laggards*perSubmitter]
	lagging := b.insert(t, nts...)

	var done atomic.Bool
	// Submits count their commits, so that a laggard commits only after others
	// committed behind its insert (or the submitters are through).
	var (
		commitMu   sync.Mutex
		commitCond = sync.NewCond(&commitMu)
		commits    int
		through    bool
	)
	committed := func() int {
		commitMu.Lock()
		defer commitMu.Unlock()
		return commits
	}
	var subs, submitting sync.WaitGroup
	for w := range laggards {
		subs.Go(func() {
			holder := fmt.Sprintf("laggard%d", w)
			for i, id := range lagging[w*perSubmitter : (w+1)*perSubmitter] {
				c, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Holder: holder, Lease: time.Minute})
				if err != nil {
					t.Errorf("%s task %d: %v", holder, id, err)
					return
				}
				before := committed()
				tx, err := b.db.BeginTxx(b.ctx, nil)
				if err == nil {
					_, err = tx.ExecContext(b.ctx, `INSERT INTO task_results (task_id, fence, holder, result, submitted_at)
						VALUES (?, ?, ?, '{}', NOW(3) - INTERVAL 1 SECOND)`, id, c.Fence, holder)
				}
				if err == nil {
					// Let others commit meanwhile: one to three submits.
					commitMu.Lock()
					for commits < before+1+i%3 && !through {
						commitCond.Wait()
					}
					commitMu.Unlock()
					err = tx.Commit()
				}
				if err != nil {
					t.Errorf("%s task %d: %v", holder, id, err)
					return
				}
			}
		})
	}
	for w := range submitters {
		submitting.Go(func() {
			holder := fmt.Sprintf("w%d", w)
			for _, id := range ids[w*perSubmitter : (w+1)*perSubmitter] {
				c, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Holder: holder, Lease: time.Minute})
				if err == nil {
					_, err = b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: holder,
						Result: json.RawMessage(fmt.Sprintf(`{"task":%d}`, id))})
				}
				if err != nil {
					t.Errorf("%s task %d: %v", holder, id, err)
					return
				}
				commitMu.Lock()
				commits++
				commitCond.Broadcast()
				commitMu.Unlock()
			}
		})
	}
	subs.Go(func() {
		submitting.Wait()
		commitMu.Lock()
		through = true
		commitCond.Broadcast()
		commitMu.Unlock()
	})

	type read struct {
		seen  map[int64]int
		order []int64
	}
	reads := make([]read, readers)
	var rds sync.WaitGroup
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	for i := range reads {
		rds.Go(func() {
			r := &reads[i]
			r.seen = make(map[int64]int)
			var after int64
			for {
				finished := done.Load() // before the read: a read after it sees every result
				page, err := b.store.Results(ctx, tasks.ResultsParams{After: after, Limit: 3 + i*4}, func(res *tasks.Result) error {
					r.seen[res.TaskID]++
					r.order = append(r.order, res.Cursor)
					return nil
				})
				if err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				after = page.Next
				if finished && !page.More {
					return
				}
			}
		})
	}
	subs.Wait()
	done.Store(true)
	rds.Wait()

	accepted := b.count(t, `SELECT COUNT(*) FROM task_results`)
	if accepted != len(ids)+len(lagging) {
		t.Fatalf("%d results accepted, want %d", accepted, len(ids)+len(lagging))
	}
	for i, r := range reads {
		if len(r.seen) != accepted {
			t.Errorf("reader %d read %d distinct results, want %d", i, len(r.seen), accepted)
		}
		for id, n := range r.seen {
			if n != 1 {
				t.Errorf("reader %d read task %d's result %d times", i, id, n)
			}
		}
		for j := 1; j < len(r.order); j++ {
			if r.order[j] <= r.order[j-1] {
				t.Errorf("reader %d: cursor %d after %d", i, r.order[j], r.order[j-1])
				break
			}
		}
	}
	if n := b.count(t, `SELECT COUNT(DISTINCT seq) FROM task_results`); n != accepted {
		t.Errorf("%d distinct seq for %d results", n, accepted)
	}
}

func TestCountResults(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	for i := range 4 {
		b.submitOne(t, b.insertOne(t, "news", i), "w", 0, `{}`)
	}
	got, _ := b.readResults(t, 0, 1)
	for _, c := range []struct {
		after int64
		want  int64
	}{{0, 4}, {got[0].Cursor, 3}} {
		n, err := b.store.CountResults(b.ctx, c.after)
		if err != nil || n != c.want {
			t.Errorf("count after %d = %d, %v; want %d", c.after, n, err, c.want)
		}
	}
}

// TestResultsQueryPlans checks with EXPLAIN that the feed's reads use the
// task_results_seq key in its order (no sort), whatever the size of the table.
func TestResultsQueryPlans(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	nts := make([]tasks.NewTask, 5000)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: "t"}
	}
	b.insert(t, nts...)
	b.exec(t, `UPDATE tasks SET status = 'done', fence = 1, holder = 'w', done_at = NOW(3)`)
	b.exec(t, `INSERT INTO task_results (task_id, fence, holder, result, seq)
		SELECT id, 1, 'w', '{}', IF(id <= 4900, id, NULL) FROM tasks`)
	b.exec(t, `ANALYZE TABLE tasks, task_results`)

	for _, c := range []struct {
		name, query string
		args        []any
	}{
		{"Results (read)", store.ResultsSQL, []any{4000, 1000}},
		{"Results (unnumbered)", store.UnnumberedResultsSQL, []any{1000}},
		{"CountResults", store.CountResultsSQL, []any{4000}},
	} {
		plan := b.explain(t, c.query, c.args...)
		t.Logf("%s:\n%s\n%s", c.name, c.query, formatPlan(plan))
		noFullScans(t, c.name, plan)
		for _, r := range plan {
			switch {
			case r.Table == "f" || r.Table == "NULL" || r.Table == "":
				// The highest purged seq: task_results_feed's row by primary
				// key, a constant ("no matching row in const table" when none).
			case (r.Table == "t" || r.Table == "ct") && (r.Key != "PRIMARY" || r.Type != "eq_ref"):
				t.Errorf("%s: %s read by %s %s, want eq_ref on PRIMARY:\n%s", c.name, r.Table, r.Type, r.Key, formatPlan(plan))
			case r.Table == "ct":
			case r.Table != "t" && r.Key != "task_results_seq":
				t.Errorf("%s: task_results read by key %q, want task_results_seq:\n%s", c.name, r.Key, formatPlan(plan))
			case strings.Contains(r.Extra, "filesort"):
				t.Errorf("%s: sorts instead of reading in key order:\n%s", c.name, formatPlan(plan))
			}
		}
	}
}
