package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// bundle is what setup gives each test: its own database and a store on it.
type bundle struct {
	ctx   context.Context
	db    *sqlx.DB
	store *store.Store
}

// setup creates a fresh database for the test. The config's zero fields take defaults.
func setup(t testing.TB, cfg store.Config) *bundle {
	t.Helper()
	db := storetest.NewDB(t)
	store, err := store.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	askGalera(t, store)
	return &bundle{ctx: t.Context(), db: db, store: store}
}

// askGalera has s ask its server whether it is a Galera node now, so that the
// tests that count a write's round trips or statements do not count the
// question (see Store.Galera).
func askGalera(t testing.TB, s *store.Store) {
	t.Helper()
	if _, err := s.Galera(t.Context()); err != nil {
		t.Fatalf("ask whether the server is a Galera node: %v", err)
	}
}

// insert inserts tasks and returns their ids.
func (b *bundle) insert(t testing.TB, nts ...tasks.NewTask) []int64 {
	t.Helper()
	ids, err := b.store.InsertTasks(b.ctx, nts)
	if err != nil {
		t.Fatalf("insert tasks: %v", err)
	}
	return ids
}

// insertOne inserts one task in category cat with priority prio.
func (b *bundle) insertOne(t *testing.T, cat string, prio int) int64 {
	t.Helper()
	return b.insert(t, tasks.NewTask{Category: cat, Priority: prio, Title: fmt.Sprintf("%s/%d", cat, prio)})[0]
}

// task reads a task.
func (b *bundle) task(t *testing.T, id int64) *tasks.Task {
	t.Helper()
	task, err := b.store.GetTask(b.ctx, id)
	if err != nil {
		t.Fatalf("get task %d: %v", id, err)
	}
	return task
}

// claim claims a task at its current fence and status, or fails the test.
func (b *bundle) claim(t *testing.T, id int64, holder string, editorID int64, lease time.Duration) *tasks.Claim {
	t.Helper()
	task := b.task(t, id)
	c, err := b.store.Claim(b.ctx, tasks.ClaimParams{
		TaskID: id, Fence: task.Fence, Status: task.Status, Holder: holder, EditorID: editorID, Lease: lease,
		Workflow: hasWorkflow(task),
	})
	if err != nil {
		t.Fatalf("claim task %d for %s: %v", id, holder, err)
	}
	return c
}

// editor creates an editor with the given categories.
func (b *bundle) editor(t testing.TB, name string, cats ...string) *tasks.Editor {
	t.Helper()
	_, hash := tasks.NewToken()
	e, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: name, Categories: cats, TokenHash: hash})
	if err != nil {
		t.Fatalf("create editor %s: %v", name, err)
	}
	return e
}

// exec runs raw SQL, for arranging states such as a lease in the past.
func (b *bundle) exec(t testing.TB, query string, args ...any) {
	t.Helper()
	if _, err := b.db.ExecContext(b.ctx, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// expireLease moves a claim's lease into the past.
func (b *bundle) expireLease(t *testing.T, id int64) {
	t.Helper()
	b.exec(t, `UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?`, id)
}

// count runs a COUNT query.
func (b *bundle) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.GetContext(b.ctx, &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// now reads the database clock.
func (b *bundle) now(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := b.db.GetContext(b.ctx, &now, `SELECT NOW(3)`); err != nil {
		t.Fatal(err)
	}
	return now
}

// candidates lists candidate ids.
func (b *bundle) candidates(t *testing.T, p tasks.CandidatesParams) []int64 {
	t.Helper()
	cs, err := b.store.Candidates(b.ctx, p)
	if err != nil {
		t.Fatalf("candidates: %v", err)
	}
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

// events returns the kinds of a task's events, oldest first.
func (b *bundle) events(t *testing.T, id int64) []tasks.Event {
	t.Helper()
	page, err := b.store.TaskEvents(b.ctx, tasks.TaskEventsParams{TaskID: id, Limit: tasks.EventsLimitMax})
	if err != nil {
		t.Fatal(err)
	}
	if page.More {
		t.Fatalf("task %d has more than %d events", id, tasks.EventsLimitMax)
	}
	return page.Events
}

func kinds(evs []tasks.Event) []tasks.EventKind {
	out := make([]tasks.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// snapshot is everything the store keeps about one task.
type snapshot struct {
	Task    tasks.Task
	Events  []tasks.Event
	Results int
	Skips   int
}

func (b *bundle) snapshot(t *testing.T, id int64) snapshot {
	t.Helper()
	return snapshot{
		Task:    *b.task(t, id),
		Events:  b.events(t, id),
		Results: b.count(t, `SELECT COUNT(*) FROM task_results WHERE task_id = ?`, id),
		Skips:   b.count(t, `SELECT COUNT(*) FROM task_skips WHERE task_id = ?`, id),
	}
}

// unchanged fails the test if the task's stored state differs from before.
func (b *bundle) unchanged(t *testing.T, id int64, before snapshot) {
	t.Helper()
	if after := b.snapshot(t, id); !reflect.DeepEqual(before, after) {
		t.Errorf("task %d changed:\nbefore %+v\nafter  %+v", id, before, after)
	}
}

// wantErr fails the test unless errors.Is(err, want).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}

func equalIDs(a, b []int64) bool { return reflect.DeepEqual(a, b) }

func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }

// hasWorkflow is what a candidate of the task says in Candidate.Workflow.
func hasWorkflow(t *tasks.Task) bool {
	return t.Stages != nil || t.GroupID != 0 || t.ReservedFor != 0
}
