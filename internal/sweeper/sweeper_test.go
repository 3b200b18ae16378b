package sweeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// newSweeper returns a Sweeper of the bundle's dispatcher, over its store
// and locks unless cfg gives others.
func (b *bundle) newSweeper(t testing.TB, cfg sweeper.Config) *sweeper.Sweeper {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = b.Store
	}
	if cfg.Locks == nil {
		cfg.Locks = b.Locks
	}
	s, err := sweeper.New(b.D, cfg)
	if err != nil {
		t.Fatalf("new sweeper: %v", err)
	}
	return s
}

// sweepOnce runs one sweep and fails the test on error.
func sweepOnce(t testing.TB, s *sweeper.Sweeper) sweeper.Result {
	t.Helper()
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return res
}

// mustNext claims a task for c, or fails the test.
func (b *bundle) mustNext(t testing.TB, c dispatcher.Claimant) *tasks.Claim {
	t.Helper()
	claim, err := b.D.Next(context.Background(), c, 0)
	if err != nil {
		t.Fatalf("next for %s: %v", c.Holder, err)
	}
	return claim
}

// expireLeaseOnly moves a claim's lease into the past in the database only: its
// Redis lock stays, as when a holder's lease passed moments ago.
func (b *bundle) expireLeaseOnly(t testing.TB, id int64) {
	t.Helper()
	if _, err := b.DB.ExecContext(context.Background(),
		"UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?", id); err != nil {
		t.Fatalf("expire task %d: %v", id, err)
	}
}

// awaitSweepValue waits for a value from ch, or fails the test after within.
func awaitSweepValue[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
		panic("unreachable")
	}
}

// recycleGate holds every RecycleExpired call until the test opens the
// gate, so that a sweep can be caught in the middle.
type recycleGate struct {
	*store.Store
	entered   chan struct{} // a call arrived at the gate
	open      chan struct{} // closed to let calls through
	cancelled chan error    // a waiting call's context ended, with this cause
}

func newRecycleGate(s *store.Store) *recycleGate {
	return &recycleGate{Store: s, entered: make(chan struct{}, 1), open: make(chan struct{}), cancelled: make(chan error, 1)}
}

func (g *recycleGate) RecycleExpired(ctx context.Context, p tasks.RecycleParams) ([]tasks.Recycled, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-g.open:
		return g.Store.RecycleExpired(ctx, p)
	case <-ctx.Done():
		select {
		case g.cancelled <- context.Cause(ctx):
		default:
		}
		return nil, context.Cause(ctx)
	}
}

func TestSweepRecyclesExpiredClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	var eds []dispatcher.Claimant
	var claims []*tasks.Claim
	for i, cat := range []string{"news", "news", "sport", "sport"} {
		b.Add(t, cat, 0, 1)
		ed := b.Editor(t, fmt.Sprintf("ed%d", i), cat)
		eds = append(eds, ed)
		claims = append(claims, b.mustNext(t, ed))
	}
	// Editors 0 and 2 walked away long ago; 1 and 3 are still at work.
	b.Expire(t, claims[0].Task.ID)
	b.Expire(t, claims[2].Task.ID)
	s := b.newSweeper(t, sweeper.Config{})

	if res := sweepOnce(t, s); res != (sweeper.Result{Recycled: 2}) {
		t.Errorf("sweep = %+v, want 2 recycled and nothing else", res)
	}
	for i, c := range claims {
		task := b.Task(t, c.Task.ID)
		if i%2 == 1 {
			if task.Status != tasks.StatusAssigned || task.Fence != c.Fence || task.Holder != eds[i].Holder {
				t.Errorf("live claim of ed%d changed: %+v", i, task)
			}
			continue
		}
		if task.Status != tasks.StatusPending || task.Holder != "" || task.Fence != c.Fence {
			t.Errorf("expired claim of ed%d not back in the pool: %+v", i, task)
		}
		evs := b.History(t, c.Task.ID)
		if last := evs[len(evs)-1]; last.Kind != tasks.EventRecycled || last.Fence != c.Fence || last.Holder != eds[i].Holder {
			t.Errorf("last event of task %d = %+v, want recycled with fence %d and holder %s", c.Task.ID, last, c.Fence, eds[i].Holder)
		}
	}

	// The stale holders are refused.
	ref0 := dispatcher.ClaimRef{TaskID: claims[0].Task.ID, Fence: claims[0].Fence}
	if _, err := b.D.Heartbeat(ctx, eds[0], ref0); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("heartbeat of a recycled claim: err = %v, want ErrStale", err)
	}
	ref2 := dispatcher.ClaimRef{TaskID: claims[2].Task.ID, Fence: claims[2].Fence}
	if _, err := b.D.Submit(ctx, eds[2], ref2, json.RawMessage(`{}`)); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("submit of a recycled claim: err = %v, want ErrStale", err)
	}

	if res := sweepOnce(t, s); res != (sweeper.Result{}) {
		t.Errorf("second sweep = %+v, want nothing done", res)
	}
}

// A started sweeper's scheduled sweeps return abandoned claims to the pool:
// the claims are recycled by the sweeps (counted at the store), each once.
// How soon (within the lease plus the schedule's period) follows from
// TestSweepRecyclesExpiredClaims and TestSweeperFiresOnCronSpec; no bound on
// the elapsed time is asserted here.
func TestStartedSweeperReturnsAbandonedClaims(t *testing.T) {
	t.Parallel()
	const (
		lease    = 300 * time.Millisecond
		interval = time.Second // cron's resolution
	)
	ctx := context.Background()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: lease}})
	ids := b.Add(t, "news", 0, 5)
	eds := make([]dispatcher.Claimant, len(ids))
	for i := range eds {
		eds[i] = b.Editor(t, fmt.Sprintf("ed%d", i), "news")
	}
	claimed := make(chan int64, len(eds))
	for _, ed := range eds {
		go func() {
			c, err := b.D.Next(ctx, ed, 0)
			if err != nil {
				t.Errorf("next for %s: %v", ed.Holder, err)
				claimed <- 0
				return
			}
			claimed <- c.Task.ID
		}()
	}
	for range eds {
		awaitSweepValue(t, claimed, 10*time.Second, "claim")
	}
	// The holders vanish: no heartbeats, no submits. Redis loses two locks.
	b.RDB.Del(ctx, b.LockKey(ids[0]), b.LockKey(ids[1]))
	start := time.Now()
	// On a slow machine a claim may have expired and been taken over by
	// another editor before all were made: the claims to watch are the
	// tasks assigned now.
	var assigned []int64
	if err := b.DB.SelectContext(ctx, &assigned, "SELECT id FROM tasks WHERE status = 'assigned' ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if len(assigned) == 0 {
		t.Fatal("no claims left to abandon")
	}

	rec := &recycleCounter{Store: b.Store}
	s := b.newSweeper(t, sweeper.Config{Store: rec, Schedule: interval.String()})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		var n int
		if err := b.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM tasks WHERE status = 'pending'"); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, time.Minute, "abandoned claims back in the pool", func() bool { return pending() == len(ids) })
	if got := rec.sorted(); !slices.Equal(got, assigned) {
		t.Errorf("the sweeps recycled tasks %v, want the abandoned claims %v, each once", got, assigned)
	}
	t.Logf("%d abandoned claims back in the pool %v after the claims (lease %v, interval %v)",
		len(assigned), time.Since(start), lease, interval)

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// Nothing but the sweeper could have returned them.
	for _, id := range assigned {
		evs := b.History(t, id)
		if last := evs[len(evs)-1]; last.Kind != tasks.EventRecycled {
			t.Errorf("task %d: last event %s, want recycled", id, last.Kind)
		}
	}
	if err := s.Stop(stopCtx); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

func TestSweepRunsOnOneReplicaAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ed := b.Editor(t, "ann", "news")
	b.Add(t, "news", 0, 1)
	id := b.mustNext(t, ed).Task.ID
	b.Expire(t, id)

	// Two replicas: two dispatchers sharing the store, Redis and key prefix.
	const interval = time.Minute
	gate := newRecycleGate(b.Store)
	d1, err := dispatcher.New(gate, b.Locks, dispatcher.Config{KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := sweeper.New(d1, sweeper.Config{Store: gate, Locks: b.Locks, Schedule: interval.String()})
	if err != nil {
		t.Fatal(err)
	}
	s2 := b.newSweeper(t, sweeper.Config{Schedule: interval.String()})
	sweepKey := b.Prefix + "sweep"

	// Someone else holds the sweep lock: both replicas skip.
	held, err := b.Locks.Obtain(ctx, sweepKey, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []*sweeper.Sweeper{s1, s2} {
		if res := sweepOnce(t, s); res != (sweeper.Result{Skipped: true}) {
			t.Errorf("replica %d swept while the lock was held elsewhere: %+v", i+1, res)
		}
	}
	if st := b.Task(t, id).Status; st != tasks.StatusAssigned {
		t.Fatalf("skipped sweeps changed the task: status %s", st)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Replica 1 sweeps and is caught in the middle: replica 2 skips.
	done := make(chan sweeper.Result, 1)
	go func() {
		res, err := s1.Sweep(ctx)
		if err != nil {
			t.Errorf("replica 1 sweep: %v", err)
		}
		done <- res
	}()
	awaitSweepValue(t, gate.entered, 10*time.Second, "replica 1 sweeping")
	if ttl := b.RDB.PTTL(ctx, sweepKey).Val(); ttl <= 0 || ttl > interval*9/10 {
		t.Errorf("sweep lock ttl = %v, want at most 9/10 of the interval %v", ttl, interval)
	}
	if res := sweepOnce(t, s2); res != (sweeper.Result{Skipped: true}) {
		t.Errorf("replica 2 swept while replica 1 was sweeping: %+v", res)
	}
	close(gate.open)
	if res := awaitSweepValue(t, done, 10*time.Second, "replica 1 sweep"); res != (sweeper.Result{Recycled: 1}) {
		t.Errorf("replica 1 sweep = %+v, want 1 recycled", res)
	}
	if n := b.RDB.Exists(ctx, sweepKey).Val(); n != 0 {
		t.Errorf("sweep lock still held after the sweep")
	}
	// Now replica 2 gets its turn.
	if res := sweepOnce(t, s2); res.Skipped {
		t.Errorf("replica 2 skipped with no sweep running")
	}
}

func TestSweepRestoresLostLocksOfLiveClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	lease := b.D.Config().Lease
	ann, bob, cat := b.Editor(t, "ann", "news"), b.Editor(t, "bob", "news"), b.Editor(t, "cat", "news")
	b.Add(t, "news", 0, 3)
	lost, kept, taken := b.mustNext(t, ann), b.mustNext(t, bob), b.mustNext(t, cat)
	// Redis lost ann's lock; cat's key was taken by another token.
	b.RDB.Del(ctx, b.LockKey(lost.Task.ID))
	b.RDB.Set(ctx, b.LockKey(taken.Task.ID), "intruder", time.Minute)
	s := b.newSweeper(t, sweeper.Config{}) // no Redis: no scan for orphans

	if res := sweepOnce(t, s); res != (sweeper.Result{LocksRestored: 1, LocksConflicting: 1}) {
		t.Errorf("sweep = %+v, want 1 lock restored, 1 conflicting", res)
	}
	key := b.LockKey(lost.Task.ID)
	if got := b.RDB.Get(ctx, key).Val(); got != ann.Holder {
		t.Errorf("restored lock holds %q, want ann's holder %q", got, ann.Holder)
	}
	ttl := b.RDB.PTTL(ctx, key).Val()
	var remainingMS int64
	if err := b.DB.GetContext(ctx, &remainingMS,
		"SELECT TIMESTAMPDIFF(MICROSECOND, NOW(3), lease_expires_at) DIV 1000 FROM tasks WHERE id = ?", lost.Task.ID); err != nil {
		t.Fatal(err)
	}
	remaining := time.Duration(remainingMS) * time.Millisecond
	// Read after the ttl, the lease's remaining time can only be shorter than
	// at the sweep; the lock must not outlive the lease.
	if ttl > lease || ttl > remaining+50*time.Millisecond || ttl < lease/2 {
		t.Errorf("restored lock ttl = %v, want about the lease's remaining %v (lease %v)", ttl, remaining, lease)
	}
	if got := b.RDB.Get(ctx, b.LockKey(kept.Task.ID)).Val(); got != bob.Holder {
		t.Errorf("bob's lock holds %q, want %q", got, bob.Holder)
	}
	if got := b.RDB.Get(ctx, b.LockKey(taken.Task.ID)).Val(); got != "intruder" {
		t.Errorf("a conflicting lock was changed to %q; without Redis configured it must be left alone", got)
	}

	if res := sweepOnce(t, s); res != (sweeper.Result{LocksConflicting: 1}) {
		t.Errorf("second sweep = %+v, want only the conflict again", res)
	}
	// The heartbeat of the restored claim extends the lock with ann's token.
	ref := dispatcher.ClaimRef{TaskID: lost.Task.ID, Fence: lost.Fence}
	if _, err := b.D.Heartbeat(ctx, ann, ref); err != nil {
		t.Fatalf("heartbeat after restore: %v", err)
	}
}

// endingStore ends a claim in the store right after LiveLeases read it, as
// when its holder releases it while a sweep is going through the page.
type endingStore struct {
	*store.Store
	end func(ctx context.Context) // called once, after the first page
}

func (e *endingStore) LiveLeases(ctx context.Context, p tasks.LiveLeasesParams) ([]tasks.LiveLease, error) {
	page, err := e.Store.LiveLeases(ctx, p)
	if end := e.end; end != nil && err == nil {
		e.end = nil
		end(ctx)
	}
	return page, err
}

func TestSweepDoesNotRestoreLocksOfClaimsThatEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann, bob := b.Editor(t, "ann", "news"), b.Editor(t, "bob", "news")
	b.Add(t, "news", 0, 1)
	claim := b.mustNext(t, ann)
	// Ann releases the task while the sweep reads the live claims: her
	// release commits after the read and takes her lock away.
	store := &endingStore{Store: b.Store, end: func(ctx context.Context) {
		_, err := b.Store.Release(ctx, tasks.ReleaseParams{TaskID: claim.Task.ID, Fence: claim.Fence, Holder: ann.Holder})
		if err != nil {
			t.Errorf("release: %v", err)
		}
		b.RDB.Del(ctx, b.LockKey(claim.Task.ID))
	}}
	s, err := sweeper.New(b.D, sweeper.Config{Store: store, Locks: b.Locks})
	if err != nil {
		t.Fatal(err)
	}

	if res := sweepOnce(t, s); res != (sweeper.Result{}) {
		t.Errorf("sweep = %+v, want nothing restored", res)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(claim.Task.ID)).Val(); n != 0 {
		t.Errorf("the sweep left a lock for a released claim")
	}
	if got := b.mustNext(t, bob); got.Task.ID != claim.Task.ID {
		t.Errorf("bob got task %d, want the released %d", got.Task.ID, claim.Task.ID)
	}
}

func TestSweepRemovesLocksWithoutLiveClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann, bob := b.Editor(t, "ann", "news"), b.Editor(t, "bob", "news")
	ids := b.Add(t, "news", 0, 4)
	annClaim, bobClaim := b.mustNext(t, ann), b.mustNext(t, bob)
	var free []int64 // pending tasks
	for _, id := range ids {
		if id != annClaim.Task.ID && id != bobClaim.Task.ID {
			free = append(free, id)
		}
	}
	other := testenv.Prefix(t) // another deployment on the same Redis
	var (
		pendingKey  = b.LockKey(free[0])
		missingKey  = b.LockKey(1 << 40)
		inFlightKey = b.LockKey(free[1])
		bobKey      = b.LockKey(bobClaim.Task.ID)
		otherKey    = fmt.Sprintf("%stask:{%d}", other, free[0])
		notTaskKey  = b.Prefix + "task:{abc}"
	)
	t.Cleanup(func() { b.RDB.Del(context.Background(), otherKey, notTaskKey, inFlightKey) })
	b.RDB.Set(ctx, pendingKey, "editor:999", 0)
	b.RDB.Set(ctx, missingKey, "w-gone", time.Hour)
	b.RDB.Set(ctx, bobKey, "intruder", 0) // a live claim's key with another token
	b.RDB.Set(ctx, otherKey, "editor:999", 0)
	b.RDB.Set(ctx, notTaskKey, "x", 0)

	// Without Redis configured, nothing is scanned.
	if res := sweepOnce(t, b.newSweeper(t, sweeper.Config{})); res.LocksRemoved != 0 || b.RDB.Exists(ctx, pendingKey).Val() != 1 {
		t.Fatalf("sweep without Redis = %+v, removed locks", res)
	}

	s := b.newSweeper(t, sweeper.Config{Redis: b.RDB})
	// A claim in flight: its lock was just obtained, the store has not
	// committed yet.
	if _, err := b.Locks.Obtain(ctx, inFlightKey, b.D.Config().Lease, &locker.Options{Token: "w-claiming"}); err != nil {
		t.Fatal(err)
	}
	if res := sweepOnce(t, s); res != (sweeper.Result{LocksRemoved: 3, LocksRestored: 1}) {
		t.Errorf("sweep = %+v, want 3 locks removed and bob's restored", res)
	}
	for _, key := range []string{pendingKey, missingKey} {
		if b.RDB.Exists(ctx, key).Val() != 0 {
			t.Errorf("orphan lock %s not removed", key)
		}
	}
	for key, want := range map[string]string{
		b.LockKey(annClaim.Task.ID): ann.Holder,
		bobKey:                      bob.Holder,
		inFlightKey:                 "w-claiming",
		otherKey:                    "editor:999",
		notTaskKey:                  "x",
	} {
		if got := b.RDB.Get(ctx, key).Val(); got != want {
			t.Errorf("%s holds %q, want %q", key, got, want)
		}
	}
}

func TestSweepScansAKeyPrefixWithGlobCharacters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	prefix := testenv.Prefix(t) + `[a-z]*?\:` // MATCH must take it literally
	d, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	id := b.Add(t, "news", 0, 1)[0]
	orphan := fmt.Sprintf("%stask:{%d}", prefix, id)
	b.RDB.Set(ctx, orphan, "w-gone", 0)
	t.Cleanup(func() { b.RDB.Del(context.Background(), orphan) })

	s, err := sweeper.New(d, sweeper.Config{Store: b.Store, Locks: b.Locks, Redis: b.RDB})
	if err != nil {
		t.Fatal(err)
	}
	if res := sweepOnce(t, s); res != (sweeper.Result{LocksRemoved: 1}) || b.RDB.Exists(ctx, orphan).Val() != 0 {
		t.Errorf("sweep = %+v; orphan lock under prefix %q not removed", res, prefix)
	}
}

func TestSweepRemovesOrphanLocksOnEveryClusterMaster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := testenv.Cluster(t)
	store, err := store.New(storetest.NewDB(t), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := testenv.Prefix(t)
	locks := locker.New(cluster)
	d, err := dispatcher.New(store, locks, dispatcher.Config{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]tasks.NewTask, 30)
	for i := range ts {
		ts[i] = tasks.NewTask{Category: "news", Title: "t"}
	}
	ids, err := dispatchtest.IDsOf(d.AddTasks(ctx, ts))
	if err != nil {
		t.Fatal(err)
	}
	_, hash := tasks.NewToken()
	e, err := store.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ann", Categories: []string{"news"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	ann := dispatcher.EditorClaimant(e)
	claim, err := d.Next(ctx, ann, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := func(id int64) string { return fmt.Sprintf("%stask:{%d}", prefix, id) }
	masters := map[string]bool{}
	var orphans []string
	for _, id := range ids {
		if id == claim.Task.ID {
			continue
		}
		k := key(id)
		if err := cluster.Set(ctx, k, "w-gone", 0).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := cluster.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		orphans = append(orphans, k)
	}
	t.Cleanup(func() {
		for _, k := range orphans {
			cluster.Del(context.Background(), k)
		}
	})
	if len(masters) < 2 {
		t.Fatalf("orphan locks landed on %d master(s); the test needs them spread", len(masters))
	}

	s, err := sweeper.New(d, sweeper.Config{Store: store, Locks: locks, Redis: cluster})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res != (sweeper.Result{LocksRemoved: len(orphans)}) {
		t.Errorf("sweep = %+v, want %d locks removed on %d masters", res, len(orphans), len(masters))
	}
	for _, k := range orphans {
		if cluster.Exists(ctx, k).Val() != 0 {
			t.Errorf("orphan lock %s not removed", k)
		}
	}
	if got := cluster.Get(ctx, key(claim.Task.ID)).Val(); got != ann.Holder {
		t.Errorf("live claim's lock holds %q, want %q", got, ann.Holder)
	}
}

func TestSweepWakesWaitersOfRecycledCategories(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A waiter polls the store only every minute or so: only a wake-up can
	// get it the task within its 5s wait.
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: time.Minute}})
	ann, bob := b.Editor(t, "ann", "news"), b.Editor(t, "bob", "news")
	id := b.Add(t, "news", 0, 1)[0]
	b.mustNext(t, ann)

	type result struct {
		claim *tasks.Claim
		err   error
	}
	got := make(chan result, 1)
	go func() {
		c, err := b.D.Next(ctx, bob, 5*time.Second)
		got <- result{c, err}
	}()
	testenv.Eventually(t, 5*time.Second, "bob waiting", func() bool { return b.D.Stats().Waiting > 0 })
	// Ann's lease passes. Her Redis lock is still there (its ttl is the full
	// lease), so bob cannot take the task over even if he looks right now.
	b.expireLeaseOnly(t, id)

	start := time.Now()
	if res := sweepOnce(t, b.newSweeper(t, sweeper.Config{})); res != (sweeper.Result{Recycled: 1, LocksRemoved: 1}) {
		t.Errorf("sweep = %+v, want 1 recycled and its lock removed", res)
	}
	r := awaitSweepValue(t, got, 10*time.Second, "bob's next")
	if r.err != nil || r.claim.Task.ID != id {
		t.Fatalf("bob's next = %+v, %v; want task %d", r.claim, r.err, id)
	}
	t.Logf("bob got the task %v after the sweep started", time.Since(start))
	evs := b.History(t, id)
	var gotKinds []tasks.EventKind
	for _, e := range evs {
		gotKinds = append(gotKinds, e.Kind)
	}
	want := []tasks.EventKind{tasks.EventClaimed, tasks.EventRecycled, tasks.EventClaimed}
	if !slices.Equal(gotKinds, want) || evs[2].Holder != bob.Holder {
		t.Errorf("events %v (last by %s), want %v, the last by bob", gotKinds, evs[len(evs)-1].Holder, want)
	}
}

// TestSweepReleasesLocksOnlyOfRecentlyExpiredClaims: a claim whose lease
// passed moments ago may still have its lock, which the sweep removes; one
// whose lease passed more than a lease ago cannot (a lock never outlives its
// lease by that much), and the sweep does not ask Redis about it.
func TestSweepReleasesLocksOnlyOfRecentlyExpiredClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t) // the default lease, 30s: ann's lock lasts through the test
	ann, bob := b.Editor(t, "ann", "news"), b.Editor(t, "bob", "news")
	b.Add(t, "news", 0, 2)
	recent, old := b.mustNext(t, ann), b.mustNext(t, bob)
	b.expireLeaseOnly(t, recent.Task.ID)
	// Left in Redis on purpose, as if it had outlived its lease: the sweep
	// must not look for it.
	if _, err := b.DB.ExecContext(ctx, "UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 MINUTE WHERE id = ?", old.Task.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.RDB.Set(ctx, b.LockKey(old.Task.ID), bob.Holder, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	if res := sweepOnce(t, b.newSweeper(t, sweeper.Config{})); res != (sweeper.Result{Recycled: 2, LocksRemoved: 1}) {
		t.Errorf("sweep = %+v, want 2 recycled and 1 lock removed", res)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(recent.Task.ID)).Val(); n != 0 {
		t.Error("the lock of the claim that expired moments ago is still there")
	}
	if tok := b.RDB.Get(ctx, b.LockKey(old.Task.ID)).Val(); tok != bob.Holder {
		t.Errorf("the lock of the claim that expired a minute ago = %q, want it untouched", tok)
	}
	for _, c := range []*tasks.Claim{recent, old} {
		if task := b.Task(t, c.Task.ID); task.Status != tasks.StatusPending || task.Holder != "" {
			t.Errorf("task %d after the sweep: status %s holder %q, want back in the pool", c.Task.ID, task.Status, task.Holder)
		}
	}
}

func TestSweeperStopCancelsARunningSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gate := newRecycleGate(b.Store)
	s, err := sweeper.New(b.D, sweeper.Config{Store: gate, Locks: b.Locks, Schedule: "@every 1s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if err := s.Start(t.Context()); !errors.Is(err, dispatcher.ErrStopped) {
		t.Fatalf("start after stop: %v, want ErrStopped", err)
	}
	s, err = sweeper.New(b.D, sweeper.Config{Store: gate, Locks: b.Locks, Schedule: "@every 1s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); !errors.Is(err, dispatcher.ErrStarted) { // no second schedule
		t.Fatalf("second start: %v, want ErrStarted", err)
	}
	awaitSweepValue(t, gate.entered, 10*time.Second, "scheduled sweep")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("stop with an ended context: err = %v, want context.Canceled", err)
	}
	if cause := awaitSweepValue(t, gate.cancelled, 10*time.Second, "running sweep cancelled"); !errors.Is(cause, context.Canceled) {
		t.Errorf("running sweep ended with %v, want context.Canceled", cause)
	}
	testenv.Eventually(t, 10*time.Second, "sweep lock released", func() bool {
		return b.RDB.Exists(context.Background(), b.Prefix+"sweep").Val() == 0
	})
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("stop of a stopped sweeper: %v", err)
	}
}

func TestNewSweeperConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSweeper(t, sweeper.Config{})
	if cfg := s.Config(); cfg.Schedule != sweeper.ScheduleDefault || cfg.Batch != sweeper.BatchDefault ||
		cfg.Logger == nil || cfg.Redis != nil {
		t.Errorf("defaults = %+v", cfg)
	}
	if p := s.Schedule().Period(); p != 10*time.Second {
		t.Errorf("default period = %v, want 10s", p)
	}
	if p := b.newSweeper(t, sweeper.Config{Schedule: "1m"}).Schedule().Period(); p != time.Minute {
		t.Errorf("schedule 1m: period = %v, want 1m", p)
	}
	for _, cfg := range []sweeper.Config{
		{Schedule: "50ms"},
		{Schedule: "1500ms"},
		{Schedule: "-1s"},
		{Schedule: "@every 100ms"},
		{Schedule: "sometimes"},
		{Batch: -1},
		{Batch: tasks.RecycleLimitMax + 1},
	} {
		cfg.Store, cfg.Locks = b.Store, b.Locks
		if _, err := sweeper.New(b.D, cfg); err == nil {
			t.Errorf("New(%+v) accepted an invalid config", cfg)
		}
	}
}

// recycleCounter records the tasks each RecycleExpired call recycled.
type recycleCounter struct {
	*store.Store
	mu       sync.Mutex
	recycled []int64
}

func (r *recycleCounter) RecycleExpired(ctx context.Context, p tasks.RecycleParams) ([]tasks.Recycled, error) {
	rs, err := r.Store.RecycleExpired(ctx, p)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range rs {
		r.recycled = append(r.recycled, x.ID)
	}
	return rs, err
}

// sorted returns the recycled tasks' IDs in order.
func (r *recycleCounter) sorted() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.recycled))
}

// sweepSignal reports each RecycleExpired call, the first step of a sweep.
type sweepSignal struct {
	*store.Store
	swept chan struct{} // signalled when someone is waiting
	calls atomic.Int64  // every call, signalled or not
}

func (s *sweepSignal) RecycleExpired(ctx context.Context, p tasks.RecycleParams) ([]tasks.Recycled, error) {
	s.calls.Add(1)
	select {
	case s.swept <- struct{}{}:
	default:
	}
	return s.Store.RecycleExpired(ctx, p)
}

// A started sweeper sweeps on a cron expression, again and again, with the
// sweep lock's time to live under the gap between sweeps.
func TestSweeperFiresOnCronSpec(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sig := &sweepSignal{Store: b.Store, swept: make(chan struct{})}
	s, err := sweeper.New(b.D, sweeper.Config{Store: sig, Locks: b.Locks, Schedule: "* * * * * *"}) // every second
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Schedule().Period(); p != time.Second {
		t.Errorf("period = %v, want 1s", p)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	for i := range 3 {
		awaitSweepValue(t, sig.swept, 10*time.Second, fmt.Sprintf("scheduled sweep %d", i+1))
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stoppedAt := sig.calls.Load()
	// Stopped: no sweep starts at the next activations. A second sweeper on
	// the same schedule, under its own key prefix, marks them: once it has
	// swept twice, at least one activation has passed since Stop.
	ref := setup(t)
	refSig := &sweepSignal{Store: ref.Store, swept: make(chan struct{})}
	rs, err := sweeper.New(ref.D, sweeper.Config{Store: refSig, Locks: ref.Locks, Schedule: "* * * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Stop(context.Background()) })
	for i := range 2 {
		awaitSweepValue(t, refSig.swept, 10*time.Second, fmt.Sprintf("reference sweep %d", i+1))
	}
	if n := sig.calls.Load() - stoppedAt; n != 0 {
		t.Errorf("%d sweeps started after Stop returned", n)
	}
}

// Several recycle loops drain a backlog of many batches together: every
// expired claim is recycled exactly once, and live claims are left alone.
func TestSweepWorkersRecycleEachClaimOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const expired, live = 97, 3
	b.Add(t, "news", 0, expired+live)
	if _, err := b.DB.ExecContext(ctx, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'gone',
		assigned_at = NOW(3) - INTERVAL 2 MINUTE, lease_expires_at = NOW(3) - INTERVAL 1 MINUTE
		WHERE id <= (SELECT MIN(id) FROM tasks) + ?`, expired-1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.ExecContext(ctx, `UPDATE tasks SET status = 'assigned', fence = 1, holder = 'alive',
		assigned_at = NOW(3), lease_expires_at = NOW(3) + INTERVAL 1 MINUTE WHERE status = 'pending'`); err != nil {
		t.Fatal(err)
	}

	s := b.newSweeper(t, sweeper.Config{Batch: 7, Workers: 4})
	if res := sweepOnce(t, s); res.Recycled != expired {
		t.Errorf("sweep = %+v, want %d recycled", res, expired)
	}
	var dup, recycled, stillAssigned int
	if err := b.DB.GetContext(ctx, &dup, `SELECT COUNT(*) FROM (SELECT task_id FROM task_events
		WHERE kind = 'recycled' GROUP BY task_id HAVING COUNT(*) > 1) x`); err != nil {
		t.Fatal(err)
	}
	if err := b.DB.GetContext(ctx, &recycled, `SELECT COUNT(*) FROM task_events WHERE kind = 'recycled'`); err != nil {
		t.Fatal(err)
	}
	if err := b.DB.GetContext(ctx, &stillAssigned, `SELECT COUNT(*) FROM tasks WHERE status = 'assigned' AND holder = 'alive'`); err != nil {
		t.Fatal(err)
	}
	if dup != 0 || recycled != expired || stillAssigned != live {
		t.Errorf("%d tasks recycled twice, %d recycled events (want %d), %d live claims left (want %d)",
			dup, recycled, expired, stillAssigned, live)
	}
	if _, err := sweeper.New(b.D, sweeper.Config{Store: b.Store, Locks: b.Locks, Workers: 17}); err == nil {
		t.Error("17 workers accepted")
	}
}

func TestSweepPurgesPassedSkips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ids := b.Add(t, "news", 0, 2)
	ed := b.Editor(t, "ed", "news")
	for _, id := range ids {
		c := b.mustNext(t, ed)
		if err := b.D.Skip(ctx, ed, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, "not mine"); err != nil {
			t.Fatalf("skip task %d: %v", id, err)
		}
	}
	// One skip has passed; the other still hides its task from the editor.
	if _, err := b.DB.ExecContext(ctx, "UPDATE task_skips SET `until` = NOW(3) - INTERVAL 1 SECOND WHERE task_id = ?", ids[0]); err != nil {
		t.Fatal(err)
	}
	if res := sweepOnce(t, b.newSweeper(t, sweeper.Config{})); res != (sweeper.Result{SkipsPurged: 1}) {
		t.Errorf("sweep = %+v, want one skip purged and nothing else", res)
	}
	var left []int64
	if err := b.DB.SelectContext(ctx, &left, "SELECT task_id FROM task_skips"); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != ids[1] {
		t.Errorf("skips left for tasks %v, want only %d's", left, ids[1])
	}
}

// TestSweepFreesKeysWhosePeriodPassed: a sweep frees the key of a task that
// ended longer ago than its key_hold, and leaves one still within its period.
func TestSweepFreesKeysWhosePeriodPassed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ins, err := b.Store.Insert(ctx, []tasks.NewTask{
		{Category: "news", Title: "passed", Key: "passed", KeyHold: tasks.KeyHoldFor(time.Minute)},
		{Category: "news", Title: "within", Key: "within", KeyHold: tasks.KeyHoldFor(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if _, err := b.Store.Cancel(ctx, tasks.ChangeParams{TaskID: in.ID}); err != nil {
			t.Fatal(err)
		}
	}
	// The first ended two minutes ago.
	if _, err := b.DB.ExecContext(ctx, "UPDATE tasks SET done_at = NOW(3) - INTERVAL 2 MINUTE WHERE id = ?", ins[0].ID); err != nil {
		t.Fatal(err)
	}
	if res := sweepOnce(t, b.newSweeper(t, sweeper.Config{})); res != (sweeper.Result{KeysFreed: 1}) {
		t.Errorf("sweep = %+v, want one key freed and nothing else", res)
	}
	again, err := b.Store.Insert(ctx, []tasks.NewTask{
		{Category: "news", Title: "passed", Key: "passed"},
		{Category: "news", Title: "within", Key: "within"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !again[0].Created || again[1].Created || again[1].ID != ins[1].ID {
		t.Errorf("inserts after the sweep = %+v, want a new task for the freed key, task %d for the other", again, ins[1].ID)
	}
}
