package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// limitStores opens n stores on one new database, each on its own pool (as
// n processes would), with the workflows wf.
func limitStores(t *testing.T, n int, wf map[string]tasks.Workflow) ([]*store.Store, *sqlx.DB) {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	var stores []*store.Store
	var first *sqlx.DB
	for range n {
		db, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s, err := store.New(db, store.Config{Workflows: wf})
		if err != nil {
			t.Fatal(err)
		}
		askGalera(t, s)
		stores = append(stores, s)
		if first == nil {
			first = db
		}
	}
	return stores, first
}

// limitWorker claims and completes tasks of cat on s until none is left:
// each batch of up to batch claims is held for hold, then completed. It
// counts its claims in flight in inFlight (up after the claim committed, down
// before the completion did), keeping the highest seen in peak, and the
// claims of each key in keys.
type limitWorker struct {
	s        *store.Store
	cat      string
	holder   string
	batch    int
	hold     time.Duration
	inFlight *atomic.Int64
	peak     *atomic.Int64
	keys     *keyCounts
	editorID int64 // an editor claims one task at a time with Claim
}

var editorRefusals atomic.Int64

// keyCounts counts the claims in flight of each key, and the highest each
// reached.
type keyCounts struct {
	mu   sync.Mutex
	now  map[string]int
	peak map[string]int
}

func newKeyCounts() *keyCounts { return &keyCounts{now: map[string]int{}, peak: map[string]int{}} }

func (k *keyCounts) add(key string, d int) {
	if k == nil || key == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.now[key] += d
	k.peak[key] = max(k.peak[key], k.now[key])
}

func (w *limitWorker) run(ctx context.Context) error {
	idle := 0
	for ctx.Err() == nil {
		cands, err := w.s.Candidates(ctx, tasks.CandidatesParams{Categories: []string{w.cat}, Limit: 50, Primary: true})
		if err != nil {
			return err
		}
		var claims []*tasks.Claim
		if w.editorID != 0 {
			for _, c := range cands {
				claim, err := w.s.Claim(ctx, tasks.ClaimParams{TaskID: c.ID, Fence: c.Fence, Status: c.Status, Holder: w.holder, EditorID: w.editorID, Lease: time.Minute, Category: w.cat, LimitKey: c.LimitKey})
				if err == nil {
					claims = append(claims, claim)
					break
				}
				if !errors.Is(err, tasks.ErrStale) && !errors.Is(err, tasks.ErrLimited) {
					return err
				}
				editorRefusals.Add(1)
			}
		} else {
			var ps []tasks.ClaimParams
			for _, c := range cands {
				if c.Status != tasks.StatusPending || len(ps) == w.batch {
					continue
				}
				ps = append(ps, tasks.ClaimParams{TaskID: c.ID, Fence: c.Fence, Status: c.Status, Holder: w.holder, Lease: time.Minute, Category: w.cat, LimitKey: c.LimitKey})
			}
			res, err := w.s.ClaimBatch(ctx, ps)
			if err != nil {
				return err
			}
			for _, r := range res {
				switch {
				case r.Err == nil:
					claims = append(claims, r.Claim)
				case !errors.Is(r.Err, tasks.ErrStale) && !errors.Is(r.Err, tasks.ErrLimited):
					return r.Err
				}
			}
		}
		if len(claims) == 0 {
			if len(cands) == 0 {
				idle++
				if idle > 50 {
					return nil
				}
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		idle = 0
		n := w.inFlight.Add(int64(len(claims)))
		for {
			p := w.peak.Load()
			if n <= p || w.peak.CompareAndSwap(p, n) {
				break
			}
		}
		for _, c := range claims {
			w.keys.add(c.Task.LimitKey, 1)
		}
		time.Sleep(w.hold)
		w.inFlight.Add(-int64(len(claims)))
		for _, c := range claims {
			w.keys.add(c.Task.LimitKey, -1)
		}
		if w.editorID != 0 {
			if _, err := w.s.Submit(ctx, tasks.SubmitParams{TaskID: claims[0].Task.ID, Fence: claims[0].Fence, Holder: w.holder, Result: json.RawMessage(`{}`)}); err != nil {
				return err
			}
			continue
		}
		os := make([]tasks.Outcome, len(claims))
		for i, c := range claims {
			os[i] = tasks.Outcome{TaskID: c.Task.ID, Fence: c.Fence, Holder: w.holder, Result: json.RawMessage(`{}`)}
		}
		done, err := w.s.Complete(ctx, os)
		if err != nil {
			return err
		}
		for _, d := range done {
			if d.Err != nil {
				return d.Err
			}
		}
	}
	return ctx.Err()
}

// peakFromResults is the most claims of cat whose intervals [claimed_at,
// submitted_at) overlap, from the result rows: the audit trail's view.
func peakFromResults(t *testing.T, db *sqlx.DB, cat string) int {
	t.Helper()
	var peak int
	err := db.GetContext(t.Context(), &peak, `SELECT COALESCE(MAX(n), 0) FROM (
		SELECT (SELECT COUNT(*) FROM task_results r2 JOIN tasks t2 ON t2.id = r2.task_id
			WHERE t2.category = t.category AND r2.claimed_at <= r.claimed_at AND r2.submitted_at > r.claimed_at) AS n
		FROM task_results r JOIN tasks t ON t.id = r.task_id WHERE t.category = ?) x`, cat)
	if err != nil {
		t.Fatal(err)
	}
	return peak
}

// sampleAssigned samples the assigned tasks of cat until ctx ends, and
// returns the most it saw.
func sampleAssigned(ctx context.Context, db *sqlx.DB, cat string) func() int {
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var n int64
			if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned' AND category = ?`, cat); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return func() int { <-done; return int(peak.Load()) }
}

func TestLimitInFlightAcrossStores(t *testing.T) {
	t.Parallel()
	const limit = 5
	stores, db := limitStores(t, 3, map[string]tasks.Workflow{"lim": {MaxInFlight: limit}})
	nts := make([]tasks.NewTask, 240)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "lim", Title: fmt.Sprint(i)}
	}
	if _, err := stores[0].InsertTasks(t.Context(), nts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	sampled := sampleAssigned(sctx, db, "lim")
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i, s := range stores {
		for g := range 4 {
			w := &limitWorker{s: s, cat: "lim", holder: fmt.Sprintf("p%d-g%d", i, g), batch: 4, hold: 3 * time.Millisecond, inFlight: &inFlight, peak: &peak}
			wg.Go(func() { errs <- w.run(ctx) })
		}
	}
	wg.Wait()
	stop()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := sampled(); got > limit {
		t.Errorf("sampled %d assigned at once, the limit is %d", got, limit)
	}
	if got := peak.Load(); got > limit {
		t.Errorf("the workers held %d claims at once, the limit is %d", got, limit)
	}
	if got := peak.Load(); got < 2 {
		t.Errorf("the workers never held more than %d claims at once: the test did not race", got)
	}
	if got := peakFromResults(t, db, "lim"); got > limit {
		t.Errorf("the results show %d claims at once, the limit is %d", got, limit)
		var rows []struct {
			ID        int64     `db:"task_id"`
			Holder    string    `db:"holder"`
			Claimed   time.Time `db:"claimed_at"`
			Submitted time.Time `db:"submitted_at"`
		}
		_ = db.SelectContext(t.Context(), &rows, `SELECT task_id, holder, claimed_at, submitted_at FROM task_results ORDER BY claimed_at, task_id`)
		for _, r := range rows {
			t.Logf("%d %s %s %s", r.ID, r.Holder, r.Claimed.Format("05.000"), r.Submitted.Format("05.000"))
		}
	}
	if n := countIn(t, db, `SELECT COUNT(*) FROM tasks WHERE category = 'lim' AND status <> 'done'`); n != 0 {
		t.Errorf("%d tasks not done", n)
	}
}

func countIn(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.GetContext(t.Context(), &n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLimitPerKeyAcrossStores(t *testing.T) {
	t.Parallel()
	const keyLimit = 2
	stores, db := limitStores(t, 3, map[string]tasks.Workflow{"keyed": {KeyLimit: keyLimit}})
	var nts []tasks.NewTask
	for i := range 200 {
		key := fmt.Sprintf("k%d", i%4)
		if i%5 == 0 {
			key = "" // no key: no limit per key
		}
		nts = append(nts, tasks.NewTask{Category: "keyed", Title: fmt.Sprint(i), LimitKey: key})
	}
	if _, err := stores[0].InsertTasks(t.Context(), nts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var inFlight, peak atomic.Int64
	keys := newKeyCounts()
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i, s := range stores {
		for g := range 4 {
			w := &limitWorker{s: s, cat: "keyed", holder: fmt.Sprintf("p%d-g%d", i, g), batch: 6, hold: 3 * time.Millisecond, inFlight: &inFlight, peak: &peak, keys: keys}
			wg.Go(func() { errs <- w.run(ctx) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, p := range keys.peak {
		if p > keyLimit {
			t.Errorf("key %s: %d claims at once, the limit is %d", k, p, keyLimit)
		}
	}
	var fromRows []struct {
		Key  string `db:"limit_key"`
		Peak int    `db:"peak"`
	}
	err := db.SelectContext(t.Context(), &fromRows, `SELECT t.limit_key, MAX((SELECT COUNT(*) FROM task_results r2 JOIN tasks t2 ON t2.id = r2.task_id
			WHERE t2.limit_key = t.limit_key AND r2.claimed_at <= r.claimed_at AND r2.submitted_at > r.claimed_at)) AS peak
		FROM task_results r JOIN tasks t ON t.id = r.task_id WHERE t.limit_key IS NOT NULL GROUP BY t.limit_key`)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromRows) != 4 {
		t.Errorf("results of %d keys, want 4", len(fromRows))
	}
	for _, r := range fromRows {
		if r.Peak > keyLimit {
			t.Errorf("the results show %d claims of key %s at once, the limit is %d", r.Peak, r.Key, keyLimit)
		}
	}
	if peak.Load() <= keyLimit {
		t.Errorf("never more than %d claims at once: unkeyed tasks and distinct keys should run together", peak.Load())
	}
	if n := countIn(t, db, `SELECT COUNT(*) FROM tasks WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d tasks not done", n)
	}
}

func TestLimitEditorsAndWorkersTogether(t *testing.T) {
	t.Parallel()
	const limit = 3
	stores, db := limitStores(t, 2, map[string]tasks.Workflow{"mixed": {MaxInFlight: limit}})
	nts := make([]tasks.NewTask, 120)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "mixed", Title: fmt.Sprint(i)}
	}
	if _, err := stores[0].InsertTasks(t.Context(), nts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i, s := range stores {
		for g := range 2 {
			// Editors' claims take more round trips than a worker's batch:
			// workers that claim one at a time and hold it longer leave
			// them room.
			if g == 0 {
				w := &limitWorker{s: s, cat: "mixed", holder: fmt.Sprintf("w%d", i), batch: 1, hold: 8 * time.Millisecond, inFlight: &inFlight, peak: &peak}
				wg.Go(func() { errs <- w.run(ctx) })
			}
			_, hash := tasks.NewToken()
			e, err := s.CreateEditor(t.Context(), tasks.CreateEditorParams{Name: fmt.Sprintf("ed%d-%d", i, g), Categories: []string{"mixed"}, TokenHash: hash})
			if err != nil {
				t.Fatal(err)
			}
			ed := &limitWorker{s: s, cat: "mixed", holder: tasks.EditorHolder(e.ID), editorID: e.ID, hold: 2 * time.Millisecond, inFlight: &inFlight, peak: &peak}
			wg.Go(func() { errs <- ed.run(ctx) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := peak.Load(); got > limit {
		t.Errorf("%d claims at once, the limit is %d", got, limit)
	}
	if got := peakFromResults(t, db, "mixed"); got > limit {
		t.Errorf("the results show %d claims at once, the limit is %d", got, limit)
	}
	if n := countIn(t, db, `SELECT COUNT(*) FROM task_results r JOIN tasks t ON t.id = r.task_id WHERE t.category = 'mixed' AND r.editor_id IS NOT NULL`); n == 0 {
		t.Errorf("no editor claimed (%d refusals): the test did not mix them", editorRefusals.Load())
	}
	if n := countIn(t, db, `SELECT COUNT(*) FROM tasks WHERE status <> 'done'`); n != 0 {
		t.Errorf("%d tasks not done", n)
	}
}

func TestLimitTakeoverNeedsNoRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{Workflows: map[string]tasks.Workflow{"one": {MaxInFlight: 1}}})
	ids := b.insert(t, tasks.NewTask{Category: "one", Title: "a"}, tasks.NewTask{Category: "one", Title: "b"})
	first := b.claim(t, ids[0], "w1", 0, time.Minute)
	// The other task has no room while the first is held.
	res, err := b.store.ClaimBatch(b.ctx, []tasks.ClaimParams{{TaskID: ids[1], Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute, Category: "one"}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, tasks.ErrLimited) {
		t.Fatalf("claim at the limit: %v, want ErrLimited", res[0].Err)
	}
	if _, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[1], Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute}); !errors.Is(err, tasks.ErrLimited) {
		t.Fatalf("claim at the limit: %v, want ErrLimited", err)
	}
	// Its lease passed: the expired claim still counts, and a takeover of
	// it needs no room.
	b.expireLease(t, ids[0])
	res, err = b.store.ClaimBatch(b.ctx, []tasks.ClaimParams{{TaskID: ids[1], Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute, Category: "one"}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, tasks.ErrLimited) {
		t.Fatalf("claim beside an expired claim at the limit: %v, want ErrLimited", res[0].Err)
	}
	took, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[0], Fence: first.Fence, Status: tasks.StatusAssigned, Holder: "w3", Lease: time.Minute})
	if err != nil {
		t.Fatalf("take over the expired claim: %v", err)
	}
	if took.Fence != first.Fence+1 {
		t.Errorf("takeover fence %d, want %d", took.Fence, first.Fence+1)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned'`); n != 1 {
		t.Errorf("%d assigned, want 1", n)
	}
}

func TestLimitLowered(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewDatabase(t)
	open := func(limit int) *store.Store {
		db, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		s, err := store.New(db, store.Config{Workflows: map[string]tasks.Workflow{"low": {MaxInFlight: limit}}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := t.Context()
	before := open(4)
	nts := make([]tasks.NewTask, 8)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "low", Title: fmt.Sprint(i)}
	}
	ids, err := before.InsertTasks(ctx, nts)
	if err != nil {
		t.Fatal(err)
	}
	claimAll := func(s *store.Store, holder string) []*tasks.Claim {
		t.Helper()
		var ps []tasks.ClaimParams
		for _, id := range ids {
			task, err := s.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status == tasks.StatusPending {
				ps = append(ps, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: tasks.StatusPending, Holder: holder, Lease: time.Minute, Category: task.Category, LimitKey: task.LimitKey})
			}
		}
		res, err := s.ClaimBatch(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		var got []*tasks.Claim
		for _, r := range res {
			if r.Err == nil {
				got = append(got, r.Claim)
			} else if !errors.Is(r.Err, tasks.ErrLimited) {
				t.Fatalf("claim: %v, want a claim or ErrLimited", r.Err)
			}
		}
		return got
	}
	held := claimAll(before, "old")
	if len(held) != 4 {
		t.Fatalf("claimed %d under a limit of 4, want 4", len(held))
	}
	// The limit is lowered to 2: the live claims finish, no new one is made
	// until fewer than 2 are in flight.
	after := open(2)
	complete := func(c *tasks.Claim) {
		t.Helper()
		done, err := after.Complete(ctx, []tasks.Outcome{{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: json.RawMessage(`{}`)}})
		if err != nil || done[0].Err != nil {
			t.Fatalf("complete a claim made under the old limit: %v %v", err, done[0].Err)
		}
	}
	for i, want := range []int{0, 0, 0, 1} {
		if got := len(claimAll(after, "new")); got != want {
			t.Fatalf("with %d of the old claims in flight: claimed %d, want %d", 4-i, got, want)
		}
		complete(held[i])
	}
}

// On a Galera cluster, where row locks do not cross nodes, claims of one
// limited category made on two nodes at once still stay within the limit:
// each writes the category's row, and certification lets one through.
func TestGaleraLimitAcrossNodes(t *testing.T) {
	g := storetest.NewGalera(t)
	ctx := t.Context()
	const limit = 3
	var stores []*store.Store
	for _, db := range g.Nodes[:2] {
		s, err := store.New(db, store.Config{Workflows: map[string]tasks.Workflow{"lim": {MaxInFlight: limit}}})
		if err != nil {
			t.Fatal(err)
		}
		askGalera(t, s)
		stores = append(stores, s)
	}
	most := 0
	for round := range 15 {
		nts := make([]tasks.NewTask, 2*limit)
		for i := range nts {
			nts[i] = tasks.NewTask{Category: "lim", Title: fmt.Sprint(round, i)}
		}
		ids, err := stores[0].InsertTasks(ctx, nts)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		claimed := make([][]*tasks.Claim, 2)
		for n := range 2 {
			wg.Go(func() {
				var ps []tasks.ClaimParams
				for _, id := range ids[n*limit : (n+1)*limit] {
					ps = append(ps, tasks.ClaimParams{TaskID: id, Status: tasks.StatusPending, Holder: fmt.Sprint("node", n), Lease: time.Minute, Category: "lim"})
				}
				res, err := stores[n].ClaimBatch(ctx, ps)
				if err != nil {
					if !errors.Is(err, tasks.ErrBusy) && !errors.Is(err, tasks.ErrStale) {
						t.Errorf("round %d, node %d: %v", round, n+1, err)
					}
					return
				}
				for _, r := range res {
					if r.Err == nil {
						claimed[n] = append(claimed[n], r.Claim)
					}
				}
			})
		}
		wg.Wait()
		var assigned int
		if err := g.Nodes[0].GetContext(ctx, &assigned, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned'`); err != nil {
			t.Fatal(err)
		}
		if assigned > limit {
			t.Fatalf("round %d: %d assigned, the limit is %d (node 1 claimed %d, node 2 %d)", round, assigned, limit, len(claimed[0]), len(claimed[1]))
		}
		most = max(most, assigned)
		for n, cs := range claimed {
			for _, c := range cs {
				if _, err := stores[n].Complete(ctx, []tasks.Outcome{{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: json.RawMessage(`{}`)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := g.Nodes[0].ExecContext(ctx, `UPDATE tasks SET status = 'cancelled' WHERE status = 'pending'`); err != nil {
			t.Fatal(err)
		}
	}
	if most == 0 {
		t.Error("no claim was made in any round")
	}
}

// A claim that names its task's category or key wrong never passes a limit:
// the batch, the group's cycle and the locking path each refuse it and leave
// the task as it was.
func TestLimitClaimNamingWrongCategory(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{Workflows: map[string]tasks.Workflow{"one": {MaxInFlight: 1}, "keyed": {KeyLimit: 1}}})
	ids := b.insert(t, tasks.NewTask{Category: "one", Title: "a"}, tasks.NewTask{Category: "free", Title: "b"},
		tasks.NewTask{Category: "keyed", Title: "c", LimitKey: "k1"})
	b.claim(t, ids[0], "w0", 0, time.Minute) // "one" is at its limit
	ids = append(ids, b.insert(t, tasks.NewTask{Category: "one", Title: "d"})...)
	unchanged := func(id int64) {
		t.Helper()
		if task := b.task(t, id); task.Status != tasks.StatusPending || task.Fence != 0 {
			t.Fatalf("task %d after a refused claim: %s at fence %d, want pending at 0", id, task.Status, task.Fence)
		}
	}
	claimOne := func(p tasks.ClaimParams) error {
		p.Status, p.Lease = tasks.StatusPending, time.Minute
		res, err := b.store.ClaimBatch(b.ctx, []tasks.ClaimParams{p})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Err
	}
	// In a batch: "one" named "free", and "keyed" named with another key.
	if err := claimOne(tasks.ClaimParams{TaskID: ids[3], Holder: "w1", Category: "free"}); !errors.Is(err, tasks.ErrLimited) {
		t.Fatalf("batch claim naming an unlimited category: %v, want ErrLimited", err)
	}
	unchanged(ids[3])
	if err := claimOne(tasks.ClaimParams{TaskID: ids[2], Holder: "w1", Category: "keyed", LimitKey: "k2"}); !errors.Is(err, tasks.ErrLimited) {
		t.Fatalf("batch claim naming another key: %v, want ErrLimited", err)
	}
	unchanged(ids[2])
	// A batch must name the categories.
	if _, err := b.store.ClaimBatch(b.ctx, []tasks.ClaimParams{{TaskID: ids[1], Status: tasks.StatusPending, Holder: "w1", Lease: time.Minute}}); !errors.Is(err, tasks.ErrInvalid) {
		t.Fatalf("batch claim naming no category: %v, want ErrInvalid", err)
	}
	unchanged(ids[1])
	// An editor's claim naming "free" goes to the group's cycle, which
	// refuses a task of a limited category.
	if _, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[3], Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute, Category: "free"}); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("claim of a limited task naming an unlimited category: %v, want ErrStale", err)
	}
	unchanged(ids[3])
	// One naming "one" for a task of "free" takes the locking path, which
	// refuses it under the task's lock.
	if _, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[1], Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute, Category: "one"}); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("claim of an unlimited task naming a limited category: %v, want ErrStale", err)
	}
	unchanged(ids[1])
	// Named right, the unlimited task is claimed by the group's cycle, and
	// the limited one is refused for want of room.
	if _, err := b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: ids[1], Status: tasks.StatusPending, Holder: "w2", Lease: time.Minute, Category: "free"}); err != nil {
		t.Fatalf("claim of an unlimited task: %v", err)
	}
	if err := claimOne(tasks.ClaimParams{TaskID: ids[3], Holder: "w1", Category: "one"}); !errors.Is(err, tasks.ErrLimited) {
		t.Fatalf("batch claim at the limit: %v, want ErrLimited", err)
	}
	if err := claimOne(tasks.ClaimParams{TaskID: ids[2], Holder: "w1", Category: "keyed", LimitKey: "k1"}); err != nil {
		t.Fatalf("batch claim of a keyed task with room: %v", err)
	}
}

// TestLimitCandidatesEnding: a category at its MaxInFlight has no
// candidates, but for a claim that first ends claims of its own
// (CandidatesParams.Ending) it has, and that claim, joined to the
// completion, takes the room of what it ended and no more.
func TestLimitCandidatesEnding(t *testing.T) {
	t.Parallel()
	const limit = 2
	stores, db := limitStores(t, 1, map[string]tasks.Workflow{"lim": {MaxInFlight: limit}})
	s := stores[0]
	nts := make([]tasks.NewTask, 6)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "lim", Title: fmt.Sprint(i)}
	}
	if _, err := s.InsertTasks(t.Context(), nts); err != nil {
		t.Fatal(err)
	}
	read := func(ending int) []tasks.Candidate {
		t.Helper()
		cands, err := s.Candidates(t.Context(), tasks.CandidatesParams{Categories: []string{"lim"}, Limit: 10, Ending: ending})
		if err != nil {
			t.Fatal(err)
		}
		return cands
	}
	claim := func(cands []tasks.Candidate) []tasks.ClaimParams {
		ps := make([]tasks.ClaimParams, len(cands))
		for i, c := range cands {
			ps[i] = tasks.ClaimParams{TaskID: c.ID, Fence: c.Fence, Status: c.Status, Holder: fmt.Sprintf("w:%d", i), Lease: time.Minute, Category: "lim"}
		}
		return ps
	}
	res, err := s.ClaimBatch(t.Context(), claim(read(0)[:limit]))
	if err != nil {
		t.Fatal(err)
	}
	var held []*tasks.Claim
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		held = append(held, r.Claim)
	}
	if got := read(0); len(got) != 0 {
		t.Fatalf("%d candidates at the limit, want none", len(got))
	}
	cands := read(limit)
	if len(cands) != len(nts)-limit {
		t.Fatalf("%d candidates for a claim ending %d, want %d", len(cands), limit, len(nts)-limit)
	}
	os := make([]tasks.Outcome, len(held))
	for i, c := range held {
		os[i] = tasks.Outcome{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: json.RawMessage(`{}`)}
	}
	// One more claim than the ended ones' room: the limit refuses it.
	done, made, err := s.CompleteAndClaim(t.Context(), os, claim(cands[:limit+1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range done {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
	}
	claimed, limited := 0, 0
	for _, r := range made {
		switch {
		case r.Err == nil:
			claimed++
		case errors.Is(r.Err, tasks.ErrLimited):
			limited++
		default:
			t.Fatal(r.Err)
		}
	}
	if claimed != limit || limited != 1 {
		t.Errorf("the joint claim made %d claims and was limited on %d, want %d and 1", claimed, limited, limit)
	}
	if n := countIn(t, db, `SELECT COUNT(*) FROM tasks WHERE category = 'lim' AND status = 'assigned'`); n != limit {
		t.Errorf("%d assigned, want %d", n, limit)
	}
}
