package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

func TestNextPriorityThenAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ed := b.Editor(t, "ann", "news")
	low := b.Add(t, "news", 1, 2)
	high := b.Add(t, "news", 9, 2)
	mid := b.Add(t, "news", 5, 1)
	b.Add(t, "sports", 100, 3) // not ann's category
	want := []int64{high[0], high[1], mid[0], low[0], low[1]}

	claim, err := b.D.Next(ctx, ed, 0)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	var got []int64
	for claim != nil {
		if claim.Task.Category != "news" {
			t.Fatalf("ann got a %q task", claim.Task.Category)
		}
		got = append(got, claim.Task.ID)
		claim, err = b.D.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, json.RawMessage(`{"ok":true}`))
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got tasks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v (priority, then age)", got, want)
		}
	}
	if _, err := b.D.Next(ctx, ed, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("next on an empty pool: err = %v, want ErrNoTask", err)
	}
}

func TestNextIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ed := b.Editor(t, "ann", "news")
	b.Add(t, "news", 0, 3)

	first, err := b.D.Next(ctx, ed, 0)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	again, err := b.D.Next(ctx, ed, 0)
	if err != nil {
		t.Fatalf("next again: %v", err)
	}
	if again.Task.ID != first.Task.ID || again.Fence != first.Fence {
		t.Fatalf("second next gave task %d fence %d, want the held task %d fence %d",
			again.Task.ID, again.Fence, first.Task.ID, first.Fence)
	}
	if got := b.RDB.Get(ctx, b.LockKey(first.Task.ID)).Val(); got != ed.Holder {
		t.Fatalf("redis lock holds %q, want the editor's holder %q", got, ed.Holder)
	}
	var assigned int
	if err := b.DB.GetContext(ctx, &assigned, "SELECT COUNT(*) FROM tasks WHERE status = 'assigned'"); err != nil {
		t.Fatal(err)
	}
	if assigned != 1 {
		t.Fatalf("%d tasks assigned, want 1", assigned)
	}
}

// TestStaleHolder: a claim expires and another editor takes the task; every
// write of the first holder is refused and changes nothing.
func TestStaleHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	bob := b.Editor(t, "bob", "news")
	id := b.Add(t, "news", 0, 1)[0]

	old, err := b.D.Next(ctx, ann, 0)
	if err != nil {
		t.Fatalf("ann next: %v", err)
	}
	b.Expire(t, id)
	taken, err := b.D.Next(ctx, bob, 0)
	if err != nil {
		t.Fatalf("bob next: %v", err)
	}
	if taken.Task.ID != id || taken.Fence != old.Fence+1 {
		t.Fatalf("bob got task %d fence %d, want task %d fence %d", taken.Task.ID, taken.Fence, id, old.Fence+1)
	}
	before := b.Task(t, id)
	events := countRows(t, b, "task_events")
	refused := b.D.Stats().RefusedWrites

	ref := dispatcher.ClaimRef{TaskID: id, Fence: old.Fence}
	if _, err := b.D.Heartbeat(ctx, ann, ref); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("stale heartbeat: err = %v, want ErrStale", err)
	}
	if _, err := b.D.Submit(ctx, ann, ref, json.RawMessage(`"late"`)); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("stale submit: err = %v, want ErrStale", err)
	}
	if err := b.D.Release(ctx, ann, ref, ""); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("stale release: err = %v, want ErrStale", err)
	}
	// Even with the current fence, ann is not the holder.
	if err := b.D.Release(ctx, ann, dispatcher.ClaimRef{TaskID: id, Fence: taken.Fence}, ""); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("release by a non-holder: err = %v, want ErrStale", err)
	}

	after := b.Task(t, id)
	if after.Status != tasks.StatusAssigned || after.Fence != before.Fence || after.Holder != bob.Holder ||
		!after.LeaseExpiresAt.Equal(*before.LeaseExpiresAt) {
		t.Fatalf("stale writes changed the task: before %+v, after %+v", before, after)
	}
	if n := countRows(t, b, "task_results"); n != 0 {
		t.Fatalf("%d results stored, want 0", n)
	}
	if n := countRows(t, b, "task_events"); n != events {
		t.Fatalf("stale writes added %d events", n-events)
	}
	if got := b.RDB.Get(ctx, b.LockKey(id)).Val(); got != bob.Holder {
		t.Fatalf("redis lock holds %q, want bob's", got)
	}
	if n := b.D.Stats().RefusedWrites - refused; n != 4 {
		t.Fatalf("%d refused writes counted, want 4", n)
	}
	if _, err := b.D.Submit(ctx, bob, dispatcher.ClaimRef{TaskID: id, Fence: taken.Fence}, json.RawMessage(`"done"`)); err != nil {
		t.Fatalf("bob submit: %v", err)
	}
}

func TestHeartbeatExtendsLeaseAndLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{Lease: 10 * time.Second}})
	ed := b.Editor(t, "ann", "news")
	id := b.Add(t, "news", 0, 1)[0]
	claim, err := b.D.Next(ctx, ed, 0)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	// Redis lost the lock (restart, eviction): the heartbeat restores it.
	b.RDB.Del(ctx, b.LockKey(id))
	expires, err := b.D.Heartbeat(ctx, ed, dispatcher.ClaimRef{TaskID: id, Fence: claim.Fence})
	if err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if expires.Before(claim.LeaseExpiresAt) {
		t.Fatalf("heartbeat moved the lease back: %v < %v", expires, claim.LeaseExpiresAt)
	}
	if got := b.RDB.Get(ctx, b.LockKey(id)).Val(); got != ed.Holder {
		t.Fatalf("lock after heartbeat holds %q, want %q", got, ed.Holder)
	}
	if ttl := b.RDB.PTTL(ctx, b.LockKey(id)).Val(); ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("lock ttl %v, want within the lease", ttl)
	}
}

func TestReleaseAndSkip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	bob := b.Editor(t, "bob", "news")
	ids := b.Add(t, "news", 0, 2)

	first, err := b.D.Next(ctx, ann, 0)
	if err != nil || first.Task.ID != ids[0] {
		t.Fatalf("next: %v, %+v", err, first)
	}
	if err := b.D.Skip(ctx, ann, dispatcher.ClaimRef{TaskID: ids[0], Fence: first.Fence}, "not mine"); err != nil {
		t.Fatalf("skip: %v", err)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(ids[0])).Val(); n != 0 {
		t.Fatalf("lock of a released claim still in redis")
	}
	// ann skipped the first task: she gets the second, bob the first.
	second, err := b.D.Next(ctx, ann, 0)
	if err != nil || second.Task.ID != ids[1] {
		t.Fatalf("ann after skip: %v, %+v; want task %d", err, second, ids[1])
	}
	got, err := b.D.Next(ctx, bob, 0)
	if err != nil || got.Task.ID != ids[0] {
		t.Fatalf("bob: %v, %+v; want the skipped task %d", err, got, ids[0])
	}
	if got.Fence != first.Fence+1 {
		t.Fatalf("fence after release and reclaim = %d, want %d", got.Fence, first.Fence+1)
	}
	// A plain release keeps the task from the same editor for the release
	// cooldown, and from nobody else.
	if err := b.D.Release(ctx, bob, dispatcher.ClaimRef{TaskID: ids[0], Fence: got.Fence}, ""); err != nil {
		t.Fatalf("release: %v", err)
	}
	if c, err := b.D.Next(ctx, bob, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("bob after release: %+v, %v; want no task", c, err)
	}
	cy := b.Editor(t, "cy", "news")
	again, err := b.D.Next(ctx, cy, 0)
	if err != nil || again.Task.ID != ids[0] {
		t.Fatalf("cy after bob's release: %v, %+v; want task %d", err, again, ids[0])
	}
}

func TestLongPollWakesOnNewTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A poll interval far beyond the test: only a wake-up can end the wait.
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: time.Hour, MaxWait: time.Hour}})
	ed := b.Editor(t, "ann", "news")

	start := time.Now()
	if _, err := b.D.Next(ctx, ed, 150*time.Millisecond); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("next on an empty pool: err = %v, want ErrNoTask", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("next returned after %v, before its wait ended", waited)
	}

	type result struct {
		claim *tasks.Claim
		err   error
	}
	done := make(chan result, 1)
	go func() {
		c, err := b.D.Next(ctx, ed, 10*time.Minute)
		done <- result{c, err}
	}()
	testenv.Eventually(t, 5*time.Second, "waiter registered", func() bool { return b.D.Stats().Waiting > 0 })
	// Another category's task wakes its own waiter, not ann: once bob has
	// it, its wake-up went through this process, and whatever ann's Next
	// returns first is checked below to be the news task.
	bob := b.Editor(t, "bob", "sports")
	bobDone := make(chan result, 1)
	go func() {
		c, err := b.D.Next(ctx, bob, 10*time.Minute)
		bobDone <- result{c, err}
	}()
	testenv.Eventually(t, 5*time.Second, "bob waiting too", func() bool { return b.D.Stats().Waiting > 1 })
	sports := b.Add(t, "sports", 0, 1)[0]
	select {
	case r := <-bobDone:
		if r.err != nil || r.claim.Task.ID != sports {
			t.Fatalf("bob's next: %+v, %v; want task %d", r.claim, r.err, sports)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("bob's long-polling next did not wake when a sports task arrived")
	}
	id := b.Add(t, "news", 0, 1)[0]
	select {
	case r := <-done:
		if r.err != nil || r.claim.Task.ID != id {
			t.Fatalf("woken next: %+v, %v; want task %d", r.claim, r.err, id)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("long-polling next did not wake when a task arrived")
	}
}

func TestLongPollHonoursContext(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{PollInterval: time.Hour}})
	ed := b.Editor(t, "ann", "news")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := b.D.Next(ctx, ed, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if b.D.Stats().Waiting > 0 {
		t.Fatalf("cancelled waiter still registered")
	}
}

func TestNextRefusesBadClaimant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.D.Next(context.Background(), dispatcher.Claimant{Categories: []string{"news"}}, 0); !errors.Is(err, tasks.ErrInvalid) {
		t.Fatalf("empty holder: err = %v, want ErrInvalid", err)
	}
	if _, err := b.D.Next(context.Background(), dispatcher.Claimant{Holder: "worker:x"}, 0); !errors.Is(err, dispatcher.ErrNoTask) {
		t.Fatalf("no categories: err = %v, want ErrNoTask", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]dispatcher.Config{
		"tiny lease":    {Lease: time.Millisecond},
		"huge batch":    {Batch: 1 << 20},
		"negative wait": {MaxWait: -time.Second},
		"tiny poll":     {PollInterval: time.Microsecond},
	} {
		if _, err := dispatcher.New(nil, nil, cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func countRows(t testing.TB, b *bundle, table string) int {
	t.Helper()
	var n int
	if err := b.DB.GetContext(context.Background(), &n, "SELECT COUNT(*) FROM "+table); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	id := b.Add(t, "news", 0, 1)[0]
	claim, err := b.D.Next(ctx, ann, 0)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	if err := b.D.ForceRelease(ctx, id); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if n := b.RDB.Exists(ctx, b.LockKey(id)).Val(); n != 0 {
		t.Fatalf("the revoked claim's lock is still in redis")
	}
	if got := b.Task(t, id); got.Status != tasks.StatusPending || got.Fence != claim.Fence+1 || got.Holder != "" {
		t.Fatalf("after force release: status %s fence %d holder %q; want pending, fence %d, no holder",
			got.Status, got.Fence, got.Holder, claim.Fence+1)
	}
	ref := dispatcher.ClaimRef{TaskID: id, Fence: claim.Fence}
	if _, err := b.D.Submit(ctx, ann, ref, json.RawMessage(`1`)); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("the old holder's submit: err = %v, want ErrStale", err)
	}
	if err := b.D.ForceRelease(ctx, id); !errors.Is(err, tasks.ErrStale) {
		t.Fatalf("force release of a pending task: err = %v, want ErrStale", err)
	}
	if err := b.D.ForceRelease(ctx, id+1000); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("force release of an unknown task: err = %v, want ErrNotFound", err)
	}
	again, err := b.D.Next(ctx, ann, 0)
	if err != nil || again.Task.ID != id || again.Fence != claim.Fence+2 {
		t.Fatalf("next after force release = %+v, %v; want task %d at fence %d", again, err, id, claim.Fence+2)
	}
}

// skipCountingStore counts the claims the store refuses because the editor
// skipped the task.
type skipCountingStore struct {
	*store.Store
	skipped atomic.Int64
}

func (s *skipCountingStore) Claim(ctx context.Context, p tasks.ClaimParams) (*tasks.Claim, error) {
	c, err := s.Store.Claim(ctx, p)
	if errors.Is(err, tasks.ErrSkipped) {
		s.skipped.Add(1)
	}
	return c, err
}

// A dispatcher remembers what its editors skipped and leaves it out of their
// claims; one that did not see the skip learns it from the store's first
// refusal.
func TestSkippedTasksAreNotTriedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ann := b.Editor(t, "ann", "news")
	ids := b.Add(t, "news", 0, 3)
	newDispatcher := func() (*dispatcher.Dispatcher, *skipCountingStore) {
		s := &skipCountingStore{Store: b.Store}
		d, err := dispatcher.New(s, b.Locks, b.D.Config())
		if err != nil {
			t.Fatal(err)
		}
		return d, s
	}
	d1, s1 := newDispatcher()
	d2, s2 := newDispatcher()

	first, err := d1.Next(ctx, ann, 0)
	if err != nil || first.Task.ID != ids[0] {
		t.Fatalf("next: %+v, %v; want task %d", first, err, ids[0])
	}
	if err := d1.Skip(ctx, ann, dispatcher.ClaimRef{TaskID: ids[0], Fence: first.Fence}, ""); err != nil {
		t.Fatal(err)
	}
	// ann takes the second task and an operator takes it back (which, unlike
	// ann's own release, keeps nothing from her), each time.
	takeSecond := func(d *dispatcher.Dispatcher) {
		t.Helper()
		c, err := d.Next(ctx, ann, 0)
		if err != nil || c.Task.ID != ids[1] {
			t.Fatalf("next: %+v, %v; want task %d", c, err, ids[1])
		}
		if err := d.ForceRelease(ctx, c.Task.ID); err != nil {
			t.Fatal(err)
		}
	}
	takeSecond(d1)
	if n := s1.skipped.Load(); n != 0 {
		t.Errorf("the dispatcher that made the skip had %d claims refused as skipped, want 0", n)
	}
	takeSecond(d2)
	takeSecond(d2)
	if n := s2.skipped.Load(); n != 1 {
		t.Errorf("a dispatcher that did not see the skip had %d claims refused as skipped, want 1", n)
	}
}
