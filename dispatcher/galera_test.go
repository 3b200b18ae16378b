package dispatcher_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestConcurrentEditorsOnGalera is the safety run on a Galera cluster: three
// dispatchers, each on its own node, sharing Redis, and every call of an
// editor sent to one of them at random, as a load balancer in front of three
// replicas does. Every promise holds as on one server, and no editor is told
// that its own claim was never its own.
func TestConcurrentEditorsOnGalera(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long concurrent run")
	}
	g := storetest.NewGalera(t)
	const lease = time.Second
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: lease}, DB: g.Nodes[0]})
	var stores []*store.Store
	for _, db := range g.Nodes[1:] {
		st, err := store.New(db, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	tl := runEditors(t, b, run{editors: 40, tasks: 2000, categories: 3, duration: 4 * time.Second, lease: lease,
		replicas: 3, stores: stores, spread: true, enough: submitted(100)})
	// Event ids are allocated per node (auto_increment_offset), so they do
	// not follow the order of commits; their times do, to the millisecond
	// (a submit and the claim of the next task share one, and two cycles of
	// one editor may too). An abandoned claim's end is recorded by whoever
	// claims its task next, possibly after its editor's next claim, on
	// another node.
	checkInvariantsInOrder(t, b, "`at`, kind = 'claimed', id", lease)
	assignments, conflicts, refusedClaims, refusedWrites := tl.counters()
	t.Logf("claims %d (assignments %d), submits %d, releases %d, abandons %d; lock conflicts %d, refused claims %d, refused stale writes %d",
		tl.claims.Load(), assignments, tl.submits.Load(), tl.releases.Load(), tl.abandons.Load(),
		conflicts, refusedClaims, refusedWrites)
	if tl.submits.Load() < 100 {
		t.Errorf("only %d submissions in the run: the dispatchers are stalling", tl.submits.Load())
	}
	if n := tl.staleAccepted.Load(); n != 0 {
		t.Errorf("%d late submits accepted", n)
	}
}

// TestOneClaimPerEditorAcrossGaleraNodes: one editor asks three dispatchers,
// each on its own node, for its next task at the same moment, again and again
// (a client retrying through a load balancer). Row locks do not reach across
// nodes, yet the editor must never hold two tasks, and every answer must be
// the one claim it holds.
func TestOneClaimPerEditorAcrossGaleraNodes(t *testing.T) {
	g := storetest.NewGalera(t)
	b := setup(t, setupOpts{DB: g.Nodes[0]})
	ds := []*dispatcher.Dispatcher{b.D}
	for _, db := range g.Nodes[1:] {
		st, err := store.New(db, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := dispatcher.New(st, b.Locks, b.D.Config())
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	b.Add(t, "news", 0, 200)
	ctx := context.Background()
	for round := range 30 {
		ed := b.Editor(t, fmt.Sprintf("editor%02d", round), "news")
		var wg sync.WaitGroup
		got := make([]int64, len(ds))
		errs := make([]error, len(ds))
		for i, d := range ds {
			wg.Go(func() {
				c, err := d.Next(ctx, ed, 0)
				if err == nil {
					got[i] = c.Task.ID
				}
				errs[i] = err
			})
		}
		wg.Wait()
		var held int
		if err := g.Nodes[0].GetContext(ctx, &held, "SELECT COUNT(*) FROM tasks WHERE editor_id = ? AND status = 'assigned'", ed.EditorID); err != nil {
			t.Fatal(err)
		}
		if held != 1 {
			t.Errorf("round %d: the editor holds %d tasks after three concurrent nexts (answers %v, errors %v)", round, held, got, errs)
			var claims int
			_ = g.Nodes[0].GetContext(ctx, &claims, "SELECT claims FROM editors WHERE id = ?", ed.EditorID)
			var evs []struct {
				ID     int64  `db:"id"`
				TaskID int64  `db:"task_id"`
				Kind   string `db:"kind"`
				At     string `db:"at"`
			}
			_ = g.Nodes[0].SelectContext(ctx, &evs, "SELECT id, task_id, kind, CAST(`at` AS CHAR) `at` FROM task_events WHERE editor_id = ? ORDER BY `at`, id", ed.EditorID)
			t.Logf("the editor's claims column: %d; its events: %+v", claims, evs)
		}
		for i := range ds {
			if errs[i] != nil {
				t.Errorf("round %d: next on node %d: %v", round, i+1, errs[i])
				var open []struct {
					State   string         `db:"trx_state"`
					Locks   int64          `db:"trx_rows_locked"`
					Command string         `db:"command"`
					Time    int64          `db:"time"`
					Query   sql.NullString `db:"trx_query"`
				}
				_ = g.Nodes[i].SelectContext(ctx, &open, `SELECT t.trx_state, t.trx_rows_locked, p.COMMAND AS command, p.TIME AS time, t.trx_query
					FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id`)
				t.Logf("transactions on node %d: %+v", i+1, open)
			}
		}
		for i := range ds {
			if errs[i] == nil && got[i] != got[0] && got[0] != 0 {
				t.Errorf("round %d: the nexts answered different tasks %v", round, got)
				for _, id := range got {
					var evs []struct {
						ID     int64  `db:"id"`
						Kind   string `db:"kind"`
						Fence  int64  `db:"fence"`
						Holder string `db:"holder"`
						At     string `db:"at"`
					}
					_ = g.Nodes[0].SelectContext(ctx, &evs, "SELECT id, kind, fence, COALESCE(holder, '') holder, CAST(`at` AS CHAR) `at` FROM task_events WHERE task_id = ? ORDER BY `at`, id", id)
					var row struct {
						Status string `db:"status"`
						Fence  int64  `db:"fence"`
						Holder string `db:"holder"`
					}
					_ = g.Nodes[0].GetContext(ctx, &row, "SELECT status, fence, COALESCE(holder, '') holder FROM tasks WHERE id = ?", id)
					t.Logf("task %d: %+v; events %+v", id, row, evs)
				}
				break
			}
		}
	}
}

// TestNodeOutsidePrimaryIsUnavailable: a dispatcher whose Galera node left the
// primary component answers ErrUnavailable (503 at the API), not an internal
// error, and serves again once the node is back.
func TestNodeOutsidePrimaryIsUnavailable(t *testing.T) {
	g := storetest.NewGalera(t)
	b := setup(t, setupOpts{DB: g.Nodes[0]})
	st, err := store.New(g.Nodes[2], store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(st, b.Locks, b.D.Config())
	if err != nil {
		t.Fatal(err)
	}
	b.Add(t, "news", 0, 10)
	ctx := context.Background()
	first := b.Editor(t, "first", "news")
	if _, err := d.Next(ctx, first, 0); err != nil {
		t.Fatalf("next on node 3 before the partition: %v", err)
	}
	g.Isolate(t, 2)
	ed := b.Editor(t, "second", "news")
	_, err = d.Next(ctx, ed, 0)
	if !errors.Is(err, dispatcher.ErrUnavailable) {
		t.Fatalf("next on a node outside the primary component: %v, want ErrUnavailable", err)
	}
	if _, err := b.D.Next(ctx, ed, 0); err != nil {
		t.Fatalf("next on node 1 meanwhile: %v", err)
	}
}
