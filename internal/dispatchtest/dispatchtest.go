// Package dispatchtest gives the tests of the dispatcher and of the parts built
// on it (the activity history, webhook delivery, the sweeper, workers) one
// setup: a fresh MySQL database with the taskd schema (storetest.NewDB), the
// shared Redis server (testenv.Redis) under a key prefix of the test's own
// (testenv.Prefix), and a dispatcher over them, so tests run in parallel.
//
// The services come from the environment as testenv describes; when they are
// missing, tests skip, or fail under TASKD_TEST_REQUIRE_SERVICES=1.
package dispatchtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Bundle is what a test works with: its own database and its own Redis key
// prefix, and a dispatcher over them.
type Bundle struct {
	DB     *sqlx.DB
	Store  *store.Store
	RDB    *redis.Client
	Locks  *locker.Client
	D      *dispatcher.Dispatcher
	Prefix string // the dispatcher's Config.KeyPrefix
}

// Options changes what New builds; the zero value gives the defaults.
type Options struct {
	// Dispatcher configures the dispatcher; its KeyPrefix is replaced by
	// the test's own.
	Dispatcher dispatcher.Config
	// Store configures the store.
	Store store.Config
	// Redis, when set, replaces the shared Redis server (for tests that
	// flush or stop it).
	Redis *redis.Client
	// DB, when set, replaces a fresh test database (for tests with a
	// replica).
	DB *sqlx.DB
}

// New builds a Bundle for t with opts (at most one is read), or fails the
// test.
func New(t testing.TB, opts ...Options) *Bundle {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	db := o.DB
	if db == nil {
		db = storetest.NewDB(t)
	}
	st, err := store.New(db, o.Store)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	// Asked now, so that the tests that count a write's round trips do not
	// count the store's one question to the server.
	if _, err := st.Galera(context.Background()); err != nil {
		t.Fatalf("ask whether the server is a Galera node: %v", err)
	}
	rdb := o.Redis
	if rdb == nil {
		rdb = testenv.Redis(t)
	}
	locks := locker.New(rdb)
	cfg := o.Dispatcher
	cfg.KeyPrefix = testenv.Prefix(t)
	d, err := dispatcher.New(st, locks, cfg)
	if err != nil {
		t.Fatalf("new dispatcher: %v", err)
	}
	return &Bundle{DB: db, Store: st, RDB: rdb, Locks: locks, D: d, Prefix: cfg.KeyPrefix}
}

// Editor creates an editor with categories and returns its claimant.
func (b *Bundle) Editor(t testing.TB, name string, cats ...string) dispatcher.Claimant {
	t.Helper()
	_, hash := tasks.NewToken()
	e, err := b.Store.CreateEditor(context.Background(), tasks.CreateEditorParams{
		Name: name, Categories: cats, TokenHash: hash,
	})
	if err != nil {
		t.Fatalf("create editor %s: %v", name, err)
	}
	return dispatcher.EditorClaimant(e)
}

// Add inserts n tasks of category with the given priority through the
// dispatcher (which wakes waiters) and returns their ids.
func (b *Bundle) Add(t testing.TB, category string, priority, n int) []int64 {
	t.Helper()
	ts := make([]tasks.NewTask, n)
	for i := range ts {
		ts[i] = tasks.NewTask{Category: category, Priority: priority, Title: fmt.Sprintf("%s #%d", category, i)}
	}
	ids, err := IDsOf(b.D.AddTasks(context.Background(), ts))
	if err != nil {
		t.Fatalf("add tasks: %v", err)
	}
	return ids
}

// LockKey is the Redis key of a task's lock, as the dispatcher builds it.
func (b *Bundle) LockKey(id int64) string {
	return fmt.Sprintf("%stask:{%d}", b.Prefix, id)
}

// Task reads a task row.
func (b *Bundle) Task(t testing.TB, id int64) *tasks.Task {
	t.Helper()
	task, err := b.Store.GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("get task %d: %v", id, err)
	}
	return task
}

// Expire moves a claim's lease into the past in the database and drops its
// Redis lock, as if the holder had walked away long ago.
func (b *Bundle) Expire(t testing.TB, id int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.DB.ExecContext(ctx,
		"UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND, assigned_at = LEAST(assigned_at, NOW(3) - INTERVAL 2 SECOND) WHERE id = ?", id); err != nil {
		t.Fatalf("expire task %d: %v", id, err)
	}
	b.RDB.Del(ctx, b.LockKey(id))
}

// History returns a task's events, oldest first.
func (b *Bundle) History(t testing.TB, id int64) []tasks.Event {
	t.Helper()
	page, err := b.Store.TaskEvents(context.Background(), tasks.TaskEventsParams{TaskID: id, Limit: tasks.EventsLimitMax})
	if err != nil {
		t.Fatalf("task history %d: %v", id, err)
	}
	if page.More {
		t.Fatalf("task %d has more than %d events", id, tasks.EventsLimitMax)
	}
	return page.Events
}

// RowCount runs a COUNT(*) query.
func (b *Bundle) RowCount(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.DB.GetContext(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// IDsOf returns the ids of the tasks an AddTasks call added, with its error,
// so that it wraps the call: IDsOf(d.AddTasks(ctx, ts)).
func IDsOf(ins []tasks.Inserted, err error) ([]int64, error) {
	ids := make([]int64, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	return ids, err
}

// ClaimsSQL is a derived table of every claim the database records, one row
// (task_id, fence, holder, editor_id) each: its 'claimed' event, or the result
// row or the task's row that stands for it when its claim wrote none (a
// worker's claim that succeeded, or is live). Use it as
// "FROM (" + ClaimsSQL + ") c".
const ClaimsSQL = `SELECT task_id, fence, holder, editor_id FROM task_events WHERE kind = 'claimed'
UNION ALL SELECT task_id, fence, holder, editor_id FROM task_results WHERE claimed_at IS NOT NULL
UNION ALL SELECT id, fence, holder, editor_id FROM tasks WHERE claim_unlogged = 1`

// FenceAccounting checks the audit trail of every task against its fence:
// each fence from 1 to the task's last is accounted for by exactly one
// record, a 'claimed' event or a record standing for one (see ClaimsSQL),
// never by both and never by none. A forced release bumps the fence without
// a claim: its 'released' event (detail "forced") accounts for the fence it
// skips. It returns the number of fences checked and a description of each
// one that breaks the rule.
func (b *Bundle) FenceAccounting(t testing.TB) (checked int, bad []string) {
	t.Helper()
	type key struct{ task, fence int64 }
	records := make(map[key]int)
	var rows []struct {
		TaskID int64 `db:"task_id"`
		Fence  int64 `db:"fence"`
	}
	ctx := context.Background()
	if err := b.DB.SelectContext(ctx, &rows, `SELECT task_id, fence FROM (`+ClaimsSQL+`) c
UNION ALL SELECT task_id, fence + 1 FROM task_events WHERE kind = 'released' AND detail = 'forced'`); err != nil {
		t.Fatalf("fence accounting: %v", err)
	}
	for _, r := range rows {
		records[key{r.TaskID, r.Fence}]++
	}
	var ts []struct {
		ID    int64 `db:"id"`
		Fence int64 `db:"fence"`
	}
	if err := b.DB.SelectContext(ctx, &ts, "SELECT id, fence FROM tasks ORDER BY id"); err != nil {
		t.Fatalf("fence accounting: %v", err)
	}
	for _, task := range ts {
		for f := int64(1); f <= task.Fence; f++ {
			checked++
			if n := records[key{task.ID, f}]; n != 1 {
				bad = append(bad, fmt.Sprintf("task %d fence %d has %d records", task.ID, f, n))
			}
			delete(records, key{task.ID, f})
		}
	}
	for k, n := range records {
		bad = append(bad, fmt.Sprintf("task %d fence %d, past the task's fence, has %d records", k.task, k.fence, n))
	}
	return checked, bad
}
