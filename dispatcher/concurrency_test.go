package dispatcher_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// run describes a bounded concurrent run of editors against one pool.
type run struct {
	editors, tasks, categories int
	duration                   time.Duration
	lease                      time.Duration
	// chaos, when set, runs beside the editors until they stop.
	chaos func(ctx context.Context)
	// replicas, when more than 1, is how many dispatchers (as in as many
	// processes) share the stores; editor i uses replica i mod replicas.
	replicas int
	// stores, when set, puts replica i (i >= 1) on stores[i-1] instead of the
	// bundle's store: the nodes of a Galera cluster.
	stores []*store.Store
	// spread sends each call of an editor to a replica picked at random, as
	// a load balancer in front of the replicas does, instead of editor i
	// always to replica i mod replicas.
	spread bool
	// enough, when set, keeps the run going past duration until it reports
	// true (up to enoughWait): the run has done what the caller's stalling
	// checks count. A loaded machine is slow, not stalled.
	enough func(*tally) bool
}

// enoughWait bounds how long a run goes on past its duration for run.enough:
// not enough by then is a stalled dispatcher, not a slow machine.
const enoughWait = time.Minute

// submitted is a run.enough: the editors submitted n tasks.
func submitted(n int64) func(*tally) bool {
	return func(tl *tally) bool { return tl.submits.Load() >= n }
}

// tally is what the editors saw, checked against the database afterwards.
type tally struct {
	claims, submits, releases, abandons atomic.Int64
	staleRefused                        atomic.Int64 // stale writes refused, as they must be
	staleAccepted                       atomic.Int64 // stale writes accepted: must stay 0
	errs                                chan error
	replicas                            []*dispatcher.Dispatcher
}

// counters sums the counters of the run's dispatchers.
func (tl *tally) counters() (assignments, conflicts, refusedClaims, refusedWrites int64) {
	for _, d := range tl.replicas {
		assignments += d.Stats().Assignments
		conflicts += d.Stats().Conflicts
		refusedClaims += d.Stats().RefusedClaims
		refusedWrites += d.Stats().RefusedWrites
	}
	return
}

func (tl *tally) fail(format string, args ...any) {
	select {
	case tl.errs <- fmt.Errorf(format, args...):
	default:
	}
}

// runEditors runs r.editors editors, each with 1..3 of r.categories
// categories, claiming, submitting, releasing, skipping and abandoning
// tasks until r.duration passes or the pool is empty.
func runEditors(t *testing.T, b *bundle, r run) *tally {
	t.Helper()
	ctx := context.Background()
	cats := make([]string, r.categories)
	for i := range cats {
		cats[i] = fmt.Sprintf("cat%02d", i)
	}
	batch := make([]tasks.NewTask, r.tasks)
	for i := range batch {
		batch[i] = tasks.NewTask{Category: cats[i%len(cats)], Priority: rand.IntN(5), Title: fmt.Sprintf("article %d", i)}
	}
	if _, err := b.D.AddTasks(ctx, batch); err != nil {
		t.Fatalf("add tasks: %v", err)
	}
	editors := make([]dispatcher.Claimant, r.editors)
	for i := range editors {
		own := []string{cats[i%len(cats)]}
		for range rand.IntN(3) {
			own = append(own, cats[rand.IntN(len(cats))])
		}
		editors[i] = b.Editor(t, fmt.Sprintf("editor%03d", i), own...)
	}

	ds := []*dispatcher.Dispatcher{b.D}
	for len(ds) < r.replicas {
		st := b.Store
		if len(r.stores) >= len(ds) {
			st = r.stores[len(ds)-1]
		}
		d, err := dispatcher.New(st, b.Locks, b.D.Config())
		if err != nil {
			t.Fatalf("new dispatcher: %v", err)
		}
		ds = append(ds, d)
	}

	tl := &tally{errs: make(chan error, 100), replicas: ds}
	deadlocksBefore := innodbDeadlocks(t, b)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer stop()
		until := time.NewTimer(r.duration)
		defer until.Stop()
		select {
		case <-runCtx.Done():
			return
		case <-until.C:
		}
		deadline := time.Now().Add(enoughWait)
		for r.enough != nil && !r.enough(tl) && time.Now().Before(deadline) {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var chaosDone chan struct{}
	if r.chaos != nil {
		chaosDone = make(chan struct{})
		go func() { defer close(chaosDone); r.chaos(runCtx) }()
	}
	var wg sync.WaitGroup
	for i, ed := range editors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pick := func() *dispatcher.Dispatcher { return ds[i%len(ds)] }
			if r.spread {
				pick = func() *dispatcher.Dispatcher { return ds[rand.IntN(len(ds))] }
			}
			editorLoop(runCtx, pick, ed, r.lease, tl)
		}()
	}
	wg.Wait()
	stop()
	if chaosDone != nil {
		<-chaosDone
	}
	close(tl.errs)
	for err := range tl.errs {
		t.Error(err)
	}
	ops := tl.claims.Load() + tl.submits.Load() + tl.releases.Load()
	deadlocks := innodbDeadlocks(t, b) - deadlocksBefore
	t.Logf("InnoDB deadlocks during the run: %d in %d operations (%.1f per 10,000; server-wide, so other tests running at the same time count too)",
		deadlocks, ops, float64(deadlocks)*10_000/float64(max(ops, 1)))
	return tl
}

// innodbDeadlocks reads the server's deadlock counter.
func innodbDeadlocks(t *testing.T, b *bundle) int64 {
	t.Helper()
	var row struct {
		Name  string `db:"Variable_name"`
		Value int64  `db:"Value"`
	}
	if err := b.DB.GetContext(context.Background(), &row, "SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'"); err != nil {
		t.Fatalf("read Innodb_deadlocks: %v", err)
	}
	return row.Value
}

// check judges a failed write about a claim: refused as stale is right only
// once the claim's lease has passed (a loaded machine can take that long).
func (tl *tally) check(ctx context.Context, ed dispatcher.Claimant, op string, claim *tasks.Claim, err error) {
	switch {
	case ctx.Err() != nil, errors.Is(err, dispatcher.ErrUnavailable):
	case errors.Is(err, tasks.ErrStale) && time.Now().After(claim.LeaseExpiresAt):
		tl.staleRefused.Add(1)
	default:
		tl.fail("%s %s task %d fence %d (lease until %s): %v", ed.Holder, op, claim.Task.ID, claim.Fence,
			claim.LeaseExpiresAt.Format(time.StampMilli), err)
	}
}

func editorLoop(ctx context.Context, pick func() *dispatcher.Dispatcher, ed dispatcher.Claimant, lease time.Duration, tl *tally) {
	allowed := make(map[string]bool)
	for _, c := range ed.Categories {
		allowed[c] = true
	}
	done := make(map[int64]bool) // tasks this editor submitted
	for ctx.Err() == nil {
		claim, err := pick().Next(ctx, ed, 0)
		if errors.Is(err, dispatcher.ErrNoTask) {
			return // the pool has nothing left for this editor
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, dispatcher.ErrUnavailable) {
				tl.fail("%s next: %v", ed.Holder, err)
			}
			continue
		}
		tl.claims.Add(1)
		if done[claim.Task.ID] {
			tl.fail("%s was handed task %d again after submitting it", ed.Holder, claim.Task.ID)
		}
		if !allowed[claim.Task.Category] {
			tl.fail("%s got a task of category %q", ed.Holder, claim.Task.Category)
		}
		ref := dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}
		switch p := rand.IntN(100); {
		case p < 70:
			_, err = pick().Submit(ctx, ed, ref, json.RawMessage(fmt.Sprintf(`{"fence":%d}`, claim.Fence)))
			if err == nil {
				tl.submits.Add(1)
				done[claim.Task.ID] = true
			} else {
				tl.check(ctx, ed, "submit", claim, err)
			}
		case p < 85:
			d := pick()
			release := d.Release
			if p < 78 {
				release = d.Skip
			}
			err = release(ctx, ed, ref, "not now")
			if err == nil {
				tl.releases.Add(1)
			} else {
				tl.check(ctx, ed, "release", claim, err)
			}
		default:
			// Walk away past the lease, then come back with the old fence:
			// everything the editor sends for that claim must be refused.
			tl.abandons.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(lease + lease/2):
			}
			_, err := pick().Submit(context.Background(), ed, ref, json.RawMessage(`"late"`))
			switch {
			case errors.Is(err, tasks.ErrStale):
				tl.staleRefused.Add(1)
			case err == nil:
				tl.staleAccepted.Add(1)
				tl.fail("%s: late submit of task %d fence %d was accepted", ed.Holder, ref.TaskID, ref.Fence)
			}
		}
	}
}

// checkInvariants checks the safety promises from the database alone.
func checkInvariants(t *testing.T, b *bundle) {
	t.Helper()
	checkInvariantsInOrder(t, b, "id", 0)
}

// checkInvariantsInOrder is checkInvariants walking the audit trail in the
// order given (an ORDER BY list of task_events' columns). With a lease, a claim
// that ended by expiring (no heartbeats) counts as ended when its lease passed,
// whenever its end was recorded.
func checkInvariantsInOrder(t *testing.T, b *bundle, order string, lease time.Duration) {
	t.Helper()
	ctx := context.Background()
	q := func(what, query string) {
		t.Helper()
		var rows []struct {
			A int64 `db:"a"`
			B int64 `db:"b"`
		}
		if err := b.DB.SelectContext(ctx, &rows, query); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, r := range rows {
			if i == 5 {
				t.Errorf("%s: %d more", what, len(rows)-5)
				break
			}
			t.Errorf("%s: %d / %d", what, r.A, r.B)
			var evs []struct {
				ID     int64  `db:"id"`
				Kind   string `db:"kind"`
				Fence  int64  `db:"fence"`
				Holder string `db:"holder"`
				At     string `db:"at"`
			}
			_ = b.DB.SelectContext(ctx, &evs, "SELECT id, kind, fence, COALESCE(holder,'') holder, CAST(`at` AS CHAR) `at` FROM task_events WHERE task_id = ? ORDER BY id", r.A)
			t.Logf("events of task %d: %+v", r.A, evs)
		}
	}
	q("task with two accepted submissions (task, submissions)",
		`SELECT task_id AS a, COUNT(*) AS b FROM task_results GROUP BY task_id HAVING COUNT(*) > 1`)
	q("submission not carrying the task's current fence (task, fence)",
		`SELECT r.task_id AS a, r.fence AS b FROM task_results r JOIN tasks t ON t.id = r.task_id
		 WHERE r.fence <> t.fence OR t.status <> 'done'`)
	q("done task without exactly one submission (task, fence)",
		`SELECT t.id AS a, t.fence AS b FROM tasks t LEFT JOIN task_results r ON r.task_id = t.id
		 WHERE t.status = 'done' AND r.task_id IS NULL`)
	q("task claimed by an editor outside its categories (task, editor)",
		`SELECT e.task_id AS a, e.editor_id AS b FROM task_events e JOIN tasks t ON t.id = e.task_id
		 LEFT JOIN editor_categories c ON c.editor_id = e.editor_id AND c.category = t.category
		 WHERE e.kind = 'claimed' AND e.editor_id IS NOT NULL AND c.category IS NULL`)
	q("submission by a holder other than the claim's (task, fence)",
		`SELECT r.task_id AS a, r.fence AS b FROM task_results r JOIN task_events e
		 ON e.task_id = r.task_id AND e.fence = r.fence AND e.kind = 'claimed'
		 WHERE e.holder <> r.holder`)

	// No editor ever held two live tasks: walk each editor's audit trail in
	// order; a claim must start only after the editor's previous claim ended.
	var events []struct {
		ID       int64     `db:"id"`
		TaskID   int64     `db:"task_id"`
		Kind     string    `db:"kind"`
		Fence    int64     `db:"fence"`
		EditorID int64     `db:"editor_id"`
		At       time.Time `db:"at"`
	}
	if err := b.DB.SelectContext(ctx, &events, "SELECT id, task_id, kind, fence, COALESCE(editor_id, 0) AS editor_id, `at` "+
		"FROM task_events ORDER BY "+order); err != nil {
		t.Fatalf("read events: %v", err)
	}
	type claimKey struct{ task, fence int64 }
	expired := make(map[claimKey]bool)      // claims that ended by expiring
	endedAt := make(map[claimKey]time.Time) // when each ended claim ended
	for _, e := range events {
		k := claimKey{e.TaskID, e.Fence}
		switch e.Kind {
		case "expired", "recycled":
			expired[k] = true
			fallthrough
		case "submitted", "released", "skipped", "failed", "dead":
			if at, ok := endedAt[k]; !ok || e.At.Before(at) {
				endedAt[k] = e.At
			}
		}
	}
	open := make(map[int64]claimKey)          // editor -> its open claim
	holderOf := make(map[claimKey]int64)      // claim -> editor
	claimedAt := make(map[claimKey]time.Time) // claim -> when
	for _, e := range events {
		k := claimKey{e.TaskID, e.Fence}
		switch e.Kind {
		case "claimed":
			if e.EditorID == 0 {
				continue
			}
			claimedAt[k] = e.At
			prev, ok := open[e.EditorID]
			if ok && lease > 0 && expired[prev] && !e.At.Before(claimedAt[prev].Add(lease)) {
				ok = false // its lease had passed: the editor no longer held it
			}
			if end, ended := endedAt[prev]; ok && lease > 0 && ended && !end.After(e.At) {
				// Ended in the same millisecond, listed after: times, not ids,
				// order events of several nodes, and they tie.
				ok = false
			}
			if ok {
				t.Errorf("editor %d claimed task %d (fence %d) while holding task %d (fence %d)",
					e.EditorID, e.TaskID, e.Fence, prev.task, prev.fence)
				var trail []struct {
					ID     int64  `db:"id"`
					TaskID int64  `db:"task_id"`
					Kind   string `db:"kind"`
					Fence  int64  `db:"fence"`
					At     string `db:"at"`
				}
				_ = b.DB.SelectContext(ctx, &trail, "SELECT id, task_id, kind, fence, CAST(`at` AS CHAR) `at` FROM task_events WHERE editor_id = ? OR task_id IN (?, ?) ORDER BY "+order, e.EditorID, e.TaskID, prev.task)
				t.Logf("the editor's events and the two tasks': %+v", trail)
			}
			open[e.EditorID] = k
			holderOf[k] = e.EditorID
		case "submitted", "released", "skipped", "expired", "recycled", "failed", "dead":
			if ed, ok := holderOf[k]; ok && open[ed] == k {
				delete(open, ed)
			}
		}
	}
}

// TestConcurrentEditors is the safety acceptance run: 200 editors on 5,000
// tasks in 10 categories, submitting, releasing, skipping and abandoning.
func TestConcurrentEditors(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long concurrent run")
	}
	const lease = time.Second
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: lease}})
	tl := runEditors(t, b, run{editors: 200, tasks: 5000, categories: 10, duration: 8 * time.Second, lease: lease, enough: submitted(100)})

	// One sweep: no task whose lease had passed when it started may stay
	// assigned. (Leases that pass during the sweep are the next one's.)
	ctx := context.Background()
	awaitQuiet(t, b)
	var sweepStart time.Time
	if err := b.DB.GetContext(ctx, &sweepStart, "SELECT NOW(3)"); err != nil {
		t.Fatal(err)
	}
	res := b.sweepOnce(t)
	t.Logf("sweep: %+v", res)
	var stuck int
	if err := b.DB.GetContext(ctx, &stuck,
		"SELECT COUNT(*) FROM tasks WHERE status = 'assigned' AND lease_expires_at < ?", sweepStart); err != nil {
		t.Fatal(err)
	}
	if stuck != 0 {
		var rows []struct {
			ID    int64     `db:"id"`
			Fence int64     `db:"fence"`
			Lease time.Time `db:"lease_expires_at"`
		}
		_ = b.DB.SelectContext(ctx, &rows, "SELECT id, fence, lease_expires_at FROM tasks WHERE status = 'assigned' AND lease_expires_at < ?", sweepStart)
		t.Errorf("%d tasks assigned with a lease passed before the sweep (%v), after it: %+v", stuck, sweepStart, rows)
	}
	checkInvariants(t, b)

	c := b.D.Stats()
	t.Logf("claims %d (assignments %d), submits %d, releases %d, abandons %d; lock conflicts %d (%.3f per assignment), refused claims %d, refused stale writes %d",
		tl.claims.Load(), c.Assignments, tl.submits.Load(), tl.releases.Load(), tl.abandons.Load(),
		c.Conflicts, float64(c.Conflicts)/float64(max(c.Assignments, 1)),
		c.RefusedClaims, c.RefusedWrites)
	if tl.submits.Load() < 100 {
		t.Errorf("only %d submissions in the run: the dispatcher is stalling", tl.submits.Load())
	}
	if tl.abandons.Load() > 0 && tl.staleRefused.Load() == 0 {
		t.Errorf("%d abandoned claims but no late submit was refused", tl.abandons.Load())
	}
	if n := tl.staleAccepted.Load(); n != 0 {
		t.Errorf("%d late submits accepted", n)
	}
}

// TestConcurrentEditorsOnTwoReplicas: two dispatchers, each with its own
// candidate pool, hand out the same pool, as two taskd processes would. The
// locks keep them apart and the fences keep every commit single.
func TestConcurrentEditorsOnTwoReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long concurrent run")
	}
	const lease = time.Second
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: lease}})
	tl := runEditors(t, b, run{editors: 60, tasks: 3000, categories: 3, duration: 4 * time.Second, lease: lease, replicas: 2, enough: submitted(100)})
	awaitQuiet(t, b)
	checkInvariants(t, b)
	assignments, conflicts, refusedClaims, refusedWrites := tl.counters()
	t.Logf("claims %d (assignments %d), submits %d, releases %d, abandons %d; lock conflicts %d (%.3f per assignment), refused claims %d, refused stale writes %d",
		tl.claims.Load(), assignments, tl.submits.Load(), tl.releases.Load(), tl.abandons.Load(),
		conflicts, float64(conflicts)/float64(max(assignments, 1)), refusedClaims, refusedWrites)
	if tl.submits.Load() < 100 {
		t.Errorf("only %d submissions in the run: the dispatchers are stalling", tl.submits.Load())
	}
	if n := tl.staleAccepted.Load(); n != 0 {
		t.Errorf("%d late submits accepted", n)
	}
}

// TestRedisFlushedDuringRun: Redis loses every key again and again while
// editors work. The fence in MySQL must still refuse every double commit,
// and assignments must go on.
func TestRedisFlushedDuringRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long concurrent run")
	}
	srv := testenv.StartRedis(t)
	rdb := srv.Client()
	const lease = time.Second
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: lease}, Redis: rdb})
	var flushes, afterFirstFlush atomic.Int64
	tl := runEditors(t, b, run{
		editors: 60, tasks: 2000, categories: 3, duration: 5 * time.Second, lease: lease,
		enough: func(*tally) bool {
			return flushes.Load() >= 10 && b.D.Stats().Assignments-afterFirstFlush.Load() >= 100
		},
		chaos: func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
				if err := rdb.FlushAll(context.Background()).Err(); err == nil {
					if flushes.Add(1) == 1 {
						afterFirstFlush.Store(b.D.Stats().Assignments)
					}
				}
			}
		},
	})
	b.sweepOnce(t)
	checkInvariants(t, b)
	after := b.D.Stats().Assignments - afterFirstFlush.Load()
	t.Logf("%d flushes; assignments %d (%d after the first flush), submits %d, refused claims %d, refused stale writes %d",
		flushes.Load(), b.D.Stats().Assignments, after, tl.submits.Load(),
		b.D.Stats().RefusedClaims, b.D.Stats().RefusedWrites)
	if flushes.Load() < 10 {
		t.Fatalf("only %d flushes happened", flushes.Load())
	}
	if after < 100 {
		t.Fatalf("only %d assignments after Redis was first flushed: the run stalled", after)
	}
	if n := tl.staleAccepted.Load(); n != 0 {
		t.Errorf("%d late submits accepted", n)
	}
}

// awaitQuiet waits until no transaction holds a row of tasks or editors any
// more. Editors stop when the run's context ends; the writes they had in flight
// end a moment later (a group commits, a dropped connection is rolled back),
// and until then a sweep (SKIP LOCKED) passes over the rows they hold.
//
// It asks the rows themselves, with a locking read that skips locked rows, not
// information_schema.INNODB_TRX: InnoDB serves that table from a cache it
// refreshes only after 0.1s without a read of it, so a poll every few
// milliseconds would go on seeing, for good, the transactions its first read
// saw (TestInnoDBTrxIsACache).
func awaitQuiet(t *testing.T, b *bundle) {
	t.Helper()
	var locked []int64
	defer func() {
		if !t.Failed() {
			return
		}
		var rows []struct {
			ID     int64  `db:"id"`
			Status string `db:"status"`
			Fence  int64  `db:"fence"`
			Holder string `db:"holder"`
		}
		if q, args, err := sqlx.In("SELECT id, status, fence, COALESCE(holder, '') AS holder FROM tasks WHERE id IN (?)", locked); err == nil {
			_ = b.DB.SelectContext(context.Background(), &rows, q, args...)
		}
		t.Logf("locked tasks: %+v", rows)
		// Each session of the database, and the pool's view: a session that is
		// idle in the pool shows as an idle connection there.
		var procs []struct {
			ID      int64          `db:"id"`
			Host    string         `db:"host"`
			Command string         `db:"command"`
			Time    int64          `db:"time"`
			Info    sql.NullString `db:"info"`
		}
		_ = b.DB.SelectContext(context.Background(), &procs, `SELECT ID AS id, HOST AS host, COMMAND AS command, TIME AS time, INFO AS info
			FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()`)
		for _, p := range procs {
			t.Logf("session: %+v", p)
		}
		t.Logf("test pool: %+v", b.DB.Stats())
		// InnoDB's own list, which, unlike INNODB_TRX, is read afresh.
		var status struct {
			Type, Name, Status string
		}
		if err := b.DB.QueryRowxContext(context.Background(), "SHOW ENGINE INNODB STATUS").Scan(&status.Type, &status.Name, &status.Status); err == nil {
			if i := strings.Index(status.Status, "TRANSACTIONS\n"); i >= 0 {
				t.Logf("innodb transactions:\n%s", status.Status[i:])
			}
		}
	}()
	testenv.Eventually(t, 30*time.Second, "rows of the run unlocked", func() bool {
		var err error
		locked, err = lockedRows(context.Background(), b.DB)
		if err != nil {
			t.Fatalf("read locked rows: %v", err)
		}
		return len(locked) == 0
	})
}

// lockedRows returns the ids of the rows of tasks and editors that another
// transaction holds: those a locking read that skips locked rows (as a
// sweep's) does not return. Editors' ids are negated.
func lockedRows(ctx context.Context, db *sqlx.DB) ([]int64, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var locked []int64
	for _, table := range []string{"tasks", "editors"} {
		var all, free []int64
		if err := tx.SelectContext(ctx, &all, "SELECT id FROM "+table); err != nil {
			return nil, err
		}
		if err := tx.SelectContext(ctx, &free, "SELECT id FROM "+table+" FOR UPDATE SKIP LOCKED"); err != nil {
			return nil, err
		}
		lockable := make(map[int64]bool, len(free))
		for _, id := range free {
			lockable[id] = true
		}
		for _, id := range all {
			if !lockable[id] {
				if table == "editors" {
					id = -id
				}
				locked = append(locked, id)
			}
		}
	}
	return locked, nil
}

// TestInnoDBTrxIsACache: information_schema.INNODB_TRX goes on listing a
// transaction that has committed for as long as it is read more often than
// every 0.1s, which is why awaitQuiet does not poll it.
func TestInnoDBTrxIsACache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.Add(t, "c", 0, 1)[0]
	conn, err := b.DB.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var session int64
	if err := conn.GetContext(ctx, &session, "SELECT CONNECTION_ID()"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION; UPDATE tasks SET priority = priority + 1 WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	listed := func() bool {
		var n int
		if err := b.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?", session); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if !listed() {
		t.Fatal("the open transaction is not listed")
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// Polled as Eventually polls, for a second: listed every time.
	polls := 0
	for start := time.Now(); time.Since(start) < time.Second; polls++ {
		if !listed() {
			// A pause of more than 0.1s between two polls (a loaded
			// machine), or a server that reads the table afresh.
			t.Skipf("the committed transaction left INNODB_TRX after %d polls", polls)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The rows themselves say it is over.
	locked, err := lockedRows(ctx, b.DB)
	if err != nil {
		t.Fatal(err)
	}
	if len(locked) != 0 {
		t.Fatalf("rows still locked after the commit: %v", locked)
	}
	t.Logf("the committed transaction was still listed in INNODB_TRX after %d polls in 1s; its rows were not locked", polls)
}
