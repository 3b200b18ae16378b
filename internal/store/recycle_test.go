package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestRecycleExpiredRecyclesOnlyExpiredClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	var expired, live []int64
	fences := map[int64]int64{}
	for i := range 20 {
		id := b.insertOne(t, "news", i)
		c := b.claim(t, id, fmt.Sprintf("w%d", i), 0, time.Minute)
		fences[id] = c.Fence
		if i%5 < 3 { // 12 expired, 8 live
			b.expireLease(t, id)
			expired = append(expired, id)
		} else {
			live = append(live, id)
		}
	}
	pending := b.insertOne(t, "news", 0)
	before := map[int64]snapshot{pending: b.snapshot(t, pending)}
	for _, id := range live {
		before[id] = b.snapshot(t, id)
	}

	var got []int
	for {
		rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		n := len(rs)
		got = append(got, n)
		if n < 5 {
			break
		}
	}
	if fmt.Sprint(got) != "[5 5 2]" {
		t.Errorf("batches = %v, want [5 5 2]", got)
	}
	for _, id := range expired {
		task := b.task(t, id)
		if task.Status != tasks.StatusPending || task.Holder != "" || task.LeaseExpiresAt != nil || task.Fence != fences[id] {
			t.Errorf("expired task %d after recycle = %+v", id, task)
		}
		evs := b.events(t, id)
		if len(evs) != 2 || evs[1].Kind != tasks.EventRecycled || evs[1].Fence != fences[id] || evs[1].Holder == "" {
			t.Errorf("task %d events = %+v, want claimed then recycled with the old fence and holder", id, evs)
		}
	}
	for id, snap := range before {
		b.unchanged(t, id, snap)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'recycled'`); n != len(expired) {
		t.Errorf("%d recycled events, want %d", n, len(expired))
	}
	// The old holders are stale now.
	_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: expired[0], Fence: fences[expired[0]], Holder: "w0", Result: rawJSON(`1`)})
	wantErr(t, "submit after recycle", err, tasks.ErrStale)
	_, err = b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: tasks.RecycleLimitMax + 1})
	wantErr(t, "limit too large", err, tasks.ErrInvalid)
}

// TestRecycleExpiredReportsHowLongLeasesHavePassed: each recycled claim says how
// long its lease had passed, by the database clock.
func TestRecycleExpiredReportsHowLongLeasesHavePassed(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	recent := b.insertOne(t, "news", 0)
	old := b.insertOne(t, "news", 0)
	b.claim(t, recent, "w1", 0, time.Minute)
	b.claim(t, old, "w2", 0, time.Minute)
	b.expireLease(t, recent) // a second ago
	b.exec(t, `UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 10 MINUTE WHERE id = ?`, old)

	rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]time.Duration{}
	for _, r := range rs {
		got[r.ID] = r.ExpiredFor
	}
	if len(rs) != 2 {
		t.Fatalf("recycled %+v, want tasks %d and %d", rs, recent, old)
	}
	// Generous upper bounds: the batch is read right after, but the machine
	// may be loaded.
	if d := got[recent]; d < time.Second || d >= time.Minute {
		t.Errorf("task %d expired for %v, want about 1s", recent, d)
	}
	if d := got[old]; d < 10*time.Minute || d >= 11*time.Minute {
		t.Errorf("task %d expired for %v, want about 10m", old, d)
	}
}

// TestRecycleExpiredRacesStaleWritesAndTakeovers runs concurrent recycles of a
// backlog of expired claims while their stale holders keep submitting and
// heartbeating and new holders take some of the tasks over. Every stale write
// is refused, every old claim ends exactly once (recycled or taken over), and
// each task is recycled at most once.
func TestRecycleExpiredRacesStaleWritesAndTakeovers(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 1000})
	const n, batch, sweepers = 1200, 50, 3
	nts := make([]tasks.NewTask, n)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "news", Title: "t"}
	}
	ids := b.insert(t, nts...)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, attempts = 1, holder = CONCAT('w', id),
		assigned_at = NOW(3) - INTERVAL 2 MINUTE, lease_expires_at = NOW(3) - INTERVAL 1 MINUTE`)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		recycled []int64
	)
	for range sweepers {
		wg.Go(func() {
			for {
				rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: batch})
				if err != nil {
					t.Errorf("recycle: %v", err)
					return
				}
				mu.Lock()
				for _, r := range rs {
					recycled = append(recycled, r.ID)
				}
				mu.Unlock()
				if len(rs) < batch {
					return
				}
			}
		})
	}
	wg.Go(func() { // the stale holders
		for _, id := range ids {
			holder := fmt.Sprintf("w%d", id)
			_, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: id, Fence: 1, Holder: holder, Result: rawJSON(`1`)})
			if !errors.Is(err, tasks.ErrStale) {
				t.Errorf("submit of task %d by its stale holder: err = %v, want ErrStale", id, err)
			}
			_, err = b.store.Heartbeat(b.ctx, tasks.HeartbeatParams{TaskID: id, Fence: 1, Holder: holder, Lease: time.Minute})
			if !errors.Is(err, tasks.ErrStale) {
				t.Errorf("heartbeat of task %d by its stale holder: err = %v, want ErrStale", id, err)
			}
		}
	})
	var taken []int64
	for i, id := range ids {
		if i%4 == 0 {
			taken = append(taken, id)
		}
	}
	wg.Go(func() { // new holders, racing the sweep for the same rows
		for _, id := range taken {
			for attempt := 1; ; attempt++ {
				task, err := b.store.GetTask(b.ctx, id)
				if err != nil {
					t.Errorf("get task %d: %v", id, err)
					return
				}
				_, err = b.store.Claim(b.ctx, tasks.ClaimParams{TaskID: id, Fence: task.Fence, Status: task.Status,
					Holder: fmt.Sprintf("new%d", id), Lease: time.Minute})
				if err == nil {
					break
				}
				// A row in a recycle's batch, or one recycled since it was read,
				// is refused as stale; the next attempt reads it again.
				if !errors.Is(err, tasks.ErrStale) || attempt == 100 {
					t.Errorf("take over task %d (attempt %d): %v", id, attempt, err)
					return
				}
			}
		}
	})
	wg.Wait()

	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != 0 {
		t.Errorf("%d results accepted from stale holders", n)
	}
	slices.Sort(recycled)
	if len(slices.Compact(slices.Clone(recycled))) != len(recycled) {
		t.Error("a task was reported recycled twice")
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'recycled'`); n != len(recycled) {
		t.Errorf("%d recycled events, %d recycled reported", n, len(recycled))
	}
	// Each old claim ended once: recycled by a sweep, or expired by a takeover.
	if n := b.count(t, `SELECT COUNT(*) FROM (SELECT task_id FROM task_events WHERE fence = 1 AND kind IN ('recycled', 'expired')
		GROUP BY task_id HAVING COUNT(*) = 1) x`); n != len(ids) {
		t.Errorf("%d of %d old claims ended exactly once", n, len(ids))
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned' AND fence = 2 AND holder = CONCAT('new', id)`); n != len(taken) {
		t.Errorf("%d tasks held by their new holders with fence 2, want %d", n, len(taken))
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'pending' AND fence = 1 AND holder IS NULL`); n != len(ids)-len(taken) {
		t.Errorf("%d tasks back in the pool, want %d", n, len(ids)-len(taken))
	}
}

// TestRecycleExpiredBacklog drains 100,000 expired claims in batches of 1000.
func TestRecycleExpiredBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 100,000 tasks")
	}
	t.Parallel()
	b := setup(t, store.Config{InsertBatchSize: 2000})
	const total = 100_000
	nts := make([]tasks.NewTask, total)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: fmt.Sprintf("c%d", i%10), Priority: i % 7, Title: "t"}
	}
	b.insert(t, nts...)
	b.exec(t, `UPDATE tasks SET status = 'assigned', fence = 1, attempts = 1, holder = CONCAT('w', id % 50),
		assigned_at = NOW(3) - INTERVAL 2 MINUTE, lease_expires_at = NOW(3) - INTERVAL 1 MINUTE`)
	b.exec(t, `ANALYZE TABLE tasks`)

	start := time.Now()
	recycled := 0
	for {
		rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		n := len(rs)
		recycled += n
		if n < 1000 {
			break
		}
	}
	t.Logf("recycled %d expired claims in %v", recycled, time.Since(start))
	if recycled != total {
		t.Errorf("recycled %d, want %d", recycled, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'pending' AND holder IS NULL AND fence = 1`); n != total {
		t.Errorf("%d tasks back in the pool, want %d", n, total)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'recycled' AND fence = 1`); n != total {
		t.Errorf("%d recycled events, want %d", n, total)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	n1 := b.insertOne(t, "news", 0)
	n2 := b.insertOne(t, "news", 0)
	b.insertOne(t, "news", 0)
	s1 := b.insertOne(t, "sport", 0)
	s2 := b.insertOne(t, "sport", 0)

	b.claim(t, n1, ed.Holder(), ed.ID, time.Minute) // live, expiring within the window
	b.claim(t, s1, "w1", 0, time.Hour)              // live
	c := b.claim(t, n2, "w1", 0, time.Hour)         // done
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: n2, Fence: c.Fence, Holder: "w1", Result: rawJSON(`1`)}); err != nil {
		t.Fatal(err)
	}
	b.claim(t, s2, "w2", 0, time.Hour) // expired
	b.expireLease(t, s2)

	st, err := b.store.PoolStats(b.ctx, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus := map[tasks.Status]int64{tasks.StatusPending: 1, tasks.StatusAssigned: 3, tasks.StatusDone: 1, tasks.StatusDead: 0, tasks.StatusCancelled: 0}
	if fmt.Sprint(st.ByStatus) != fmt.Sprint(wantStatus) {
		t.Errorf("by status = %v, want %v", st.ByStatus, wantStatus)
	}
	wantCat := []tasks.CategoryCount{
		{Category: "news", Status: tasks.StatusPending, Count: 1},
		{Category: "news", Status: tasks.StatusAssigned, Count: 1},
		{Category: "news", Status: tasks.StatusDone, Count: 1},
		{Category: "sport", Status: tasks.StatusAssigned, Count: 2},
	}
	if fmt.Sprint(st.ByCategory) != fmt.Sprint(wantCat) {
		t.Errorf("by category = %v, want %v", st.ByCategory, wantCat)
	}
	if st.Holders != 2 || st.Live != 2 || st.Expired != 1 || st.ExpiringSoon != 1 {
		t.Errorf("holders %d live %d expired %d expiring %d, want 2 2 1 1", st.Holders, st.Live, st.Expired, st.ExpiringSoon)
	}
}

// TestRecycleLocksOnlyItsBatch: while a recycle holds its batch locked, a live
// claim's heartbeat and completion do not wait for it, though the expiry index
// keeps the live claims of a category beside its expired ones and the batch's
// read passes over them.
func TestRecycleLocksOnlyItsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	var ids []int64
	for range 6 {
		ids = append(ids, b.insertOne(t, "c", 0))
	}
	var claims []*tasks.Claim
	for _, id := range ids {
		claims = append(claims, b.claim(t, id, "worker:w", 0, time.Minute))
	}
	for _, id := range ids[:3] {
		b.expireLease(t, id)
	}

	// The batch's read, as RecycleExpired runs it, in a transaction left open.
	tx, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var batch []struct {
		ID        int64  `db:"id"`
		Fence     int64  `db:"fence"`
		Holder    string `db:"holder"`
		EditorID  int64  `db:"editor_id"`
		Category  string `db:"category"`
		Unlogged  bool   `db:"claim_unlogged"`
		ExpiredUS int64  `db:"expired_us"`
		GoldCopy  bool   `db:"gold_copy"`
	}
	if err := tx.SelectContext(b.ctx, &batch, store.RecycleLockSQL, 2000, 1000); err != nil {
		t.Fatal(err)
	}
	var locked []int64
	for _, r := range batch {
		locked = append(locked, r.ID)
	}
	slices.Sort(locked)
	if !slices.Equal(locked, ids[:3]) {
		t.Fatalf("batch %v, want the expired claims %v", locked, ids[:3])
	}

	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	beats, err := b.store.HeartbeatBatch(ctx, []tasks.HeartbeatParams{{TaskID: ids[3], Fence: claims[3].Fence, Holder: "worker:w", Lease: time.Minute}})
	if err != nil || beats[0].Err != nil {
		t.Errorf("heartbeat of a live claim beside the batch: %v, %+v", err, beats)
	}
	done, err := b.store.Complete(ctx, []tasks.Outcome{{TaskID: ids[4], Fence: claims[4].Fence, Holder: "worker:w", Result: []byte(`{}`)}})
	if err != nil || done[0].Err != nil {
		t.Errorf("completion of a live claim beside the batch: %v, %+v", err, done)
	}
}
